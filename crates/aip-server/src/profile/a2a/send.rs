//! `SendMessage`, `SendStreamingMessage` and `SubscribeToTask`: a message becomes one native action
//! (the task), and a stream follows the action's native state and chunks until it ends or waits
//! for a person, then closes (the SDK clients wait for that close).

use std::time::{Duration, Instant};

use aip_core::{Action, ActionId, ActionLifecycleState, ActionMode, Capability};
use aip_runtime::ActionRequest;
use axum::response::IntoResponse;
use serde_json::{Map, Value, json};

use super::rpc::{self, A2aError, Reply};
use super::task;
use super::{A2aState, Call};

/// Longest accepted `messageId`.
const MAX_MESSAGE_ID: usize = 200;
/// Most parts one message may carry.
const MAX_PARTS: usize = 32;
/// Frames queued for a slow reader before the follower waits for it.
const STREAM_QUEUE: usize = 32;
/// How often an idle stream re-reads the task (besides the store's change signal).
const IDLE_POLL: Duration = Duration::from_secs(5);

/// A message, parsed: what to run and how.
struct Parsed {
    capability: Capability,
    input: Value,
    message_id: String,
    return_immediately: bool,
    /// A push notification config given with the message: the action's callback.
    push: Option<super::push::Config>,
    /// The context the message names (see [`super::context`]).
    context_id: Option<String>,
}

/// Reads the `SendMessageRequest`. Everything this profile does not implement is refused, never
/// ignored: continuing a task, referenced tasks, extensions, file parts.
fn parse(a2a: &A2aState, params: &Map<String, Value>) -> Result<Parsed, A2aError> {
    let Some(Value::Object(message)) = params.get("message") else {
        return Err(A2aError::invalid_params("message is required"));
    };
    let message_id = rpc::string(message, "messageId")?;
    if message_id.len() > MAX_MESSAGE_ID {
        return Err(A2aError::invalid_params(format!(
            "messageId is longer than {MAX_MESSAGE_ID} bytes"
        )));
    }
    match message.get("role").and_then(Value::as_str) {
        None | Some("ROLE_USER") => {}
        Some(other) => {
            return Err(A2aError::invalid_params(format!(
                "a sent message has role ROLE_USER, not {other}"
            )));
        }
    }
    for (key, what) in [
        ("taskId", "continuing a task"),
        ("referenceTaskIds", "referencing other tasks"),
        ("extensions", "extensions"),
    ] {
        if message.get(key).is_some_and(present) {
            return Err(A2aError::unsupported(format!(
                "{what} ({key}) is not supported: each message starts its own task (a task waiting \
                 for input waits for an AIP approval decision); name its contextId to continue the context"
            )));
        }
    }
    let context_id = match message.get("contextId") {
        Some(id) if present(id) => Some(super::context::parse(id)?.to_owned()),
        _ => None,
    };
    let configuration = params.get("configuration").and_then(Value::as_object);
    let mut push = None;
    if let Some(configuration) = configuration {
        match configuration.get("taskPushNotificationConfig") {
            Some(Value::Object(config)) if present(&Value::Object(config.clone())) => {
                if !a2a.push {
                    return Err(A2aError::push_not_supported());
                }
                // The task id is the action id derived below; the config's own id defaults to it.
                push = Some(config.clone());
            }
            Some(other) if present(other) => {
                return Err(A2aError::invalid_params(
                    "taskPushNotificationConfig must be an object",
                ));
            }
            _ => {}
        }
        if let Some(Value::Array(modes)) = configuration.get("acceptedOutputModes")
            && !modes.is_empty()
            && !modes
                .iter()
                .any(|m| matches!(m.as_str(), Some("application/json" | "text/plain")))
        {
            return Err(A2aError::content_type(
                "results are application/json or text/plain",
            ));
        }
    }
    let return_immediately = configuration
        .and_then(|c| c.get("returnImmediately"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (named, input) = content(message)?;
    let metadata_capability = message
        .get("metadata")
        .and_then(|m| m.get("aip.capability_id"))
        .and_then(Value::as_str);
    let Some(capability_id) = named
        .as_deref()
        .or(metadata_capability)
        .or(a2a.config.default_capability.as_deref())
    else {
        return Err(A2aError::invalid_params(
            "name a capability: message.metadata[\"aip.capability_id\"] or a data part {capability_id, input}",
        ));
    };
    let Some(capability) = a2a.capabilities.get(capability_id) else {
        return Err(A2aError::invalid_params(format!(
            "unknown capability {capability_id}"
        )));
    };
    Ok(Parsed {
        capability: capability.clone(),
        input,
        message_id: message_id.to_owned(),
        return_immediately,
        push: push.map(|c| super::push::parse(&c, "")).transpose()?,
        context_id,
    })
}

fn present(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => true,
    }
}

/// The capability a data part names (if any) and the action input: one `data` part (an object,
/// or `{capability_id, input}`), or text parts as `{"text": …}`.
fn content(message: &Map<String, Value>) -> Result<(Option<String>, Value), A2aError> {
    let Some(Value::Array(parts)) = message.get("parts") else {
        return Err(A2aError::invalid_params("message.parts is required"));
    };
    if parts.is_empty() || parts.len() > MAX_PARTS {
        return Err(A2aError::invalid_params(format!(
            "a message has 1 to {MAX_PARTS} parts"
        )));
    }
    let mut texts = Vec::new();
    let mut data = Vec::new();
    for part in parts {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            texts.push(text);
        } else if let Some(value) = part.get("data") {
            data.push(value);
        } else {
            return Err(A2aError::content_type(
                "only text and data parts are accepted (no raw or url parts)",
            ));
        }
    }
    match (data.as_slice(), texts.is_empty()) {
        ([], false) => Ok((None, json!({ "text": texts.join("\n") }))),
        ([Value::Object(object)], true) => {
            let object = integral(Value::Object(object.clone()));
            match (object.get("capability_id"), object.get("input")) {
                (Some(Value::String(id)), Some(input @ Value::Object(_)))
                    if object.as_object().is_some_and(|o| o.len() == 2) =>
                {
                    Ok((Some(id.clone()), input.clone()))
                }
                _ => Ok((None, object)),
            }
        }
        ([_], true) => Err(A2aError::invalid_params("a data part must hold an object")),
        _ => Err(A2aError::invalid_params(
            "send either one data part or text parts",
        )),
    }
}

/// Numbers arrive as doubles (the SDKs carry data parts as protobuf `Struct`): an integral double
/// becomes an integer again, so `{"n": 3}` sent as `3.0` validates against an integer schema.
fn integral(value: Value) -> Value {
    match value {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 => json!(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integral).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, integral(v))).collect())
        }
        other => other,
    }
}

/// The action a message becomes: the same for a re-sent message of the same principal.
fn action_id(call: &Call<'_>, message_id: &str) -> String {
    let parts = [
        call.caller.tenant.as_str(),
        call.caller.id.as_str(),
        message_id,
    ];
    crate::profile::derived_id("act_a2a", b"aip.a2a.compat.v1", &parts)
}

/// What admitting a message gave.
enum Admitted {
    /// The task (action id) and its context.
    Task(String, String),
    /// Admission refused the action by policy (scopes, approval policy, delegation): a rejected
    /// task, which is not recorded (nothing was admitted), so it cannot be read again.
    Rejected(Value),
}

/// Admits the message's action in `mode`.
async fn admit(call: &Call<'_>, parsed: Parsed, mode: ActionMode) -> Result<Admitted, A2aError> {
    let id = action_id(call, &parsed.message_id);
    let keyed = crate::profile::takes_keys(&parsed.capability);
    let session_id = match &parsed.context_id {
        Some(context) => Some(super::context::join(call, context).await?),
        None => None,
    };
    let context_id = parsed.context_id.clone().unwrap_or_else(|| id.clone());
    let callback = parsed.push.map(|mut config| {
        if config.id.is_empty() {
            config.id = id.clone();
            config.metadata["id"] = Value::String(id.clone());
        }
        config.metadata[super::push::CONTEXT_KEY] = Value::String(context_id.clone());
        super::push::callback(config)
    });
    let capability_id = parsed.capability.id.as_str().to_owned();
    let mut request = ActionRequest::plain(Action {
        mode: Some(mode),
        callback,
        idempotency_key: keyed.then(|| parsed.message_id.clone()),
        ..Action::plain(
            ActionId::new(id.clone()),
            parsed.capability.id.clone(),
            parsed.input,
        )
    });
    request.session_id = session_id;
    // Every acknowledgement (a result, queued, awaiting approval, a re-delivery) is read back
    // from the store as the task.
    match call.app.runtime.submit_action(call.caller, request).await {
        Ok(_) => Ok(Admitted::Task(id, context_id)),
        Err(err) => {
            let protocol = err.to_protocol_error();
            // A push URL the callback policy refuses is a bad parameter, not a refused task.
            if protocol.category == aip_core::ErrorCategory::Policy
                && protocol.code.as_str() != aip_core::ErrorCode::CallbackTargetDenied.as_str()
            {
                return Ok(Admitted::Rejected(task::rejected(
                    (&id, &context_id),
                    &capability_id,
                    &protocol,
                )));
            }
            Err(rpc::native(&err).with("aip.action_id", &id))
        }
    }
}

fn execution(capability: &Capability) -> (bool, bool, bool) {
    capability
        .contract
        .as_ref()
        .map_or((true, false, false), |c| {
            let e = &c.execution;
            (e.supports_sync, e.supports_async, e.supports_streaming)
        })
}

/// `SendMessage`: runs the task (blocking until it ends or waits for a person, bounded) unless
/// `returnImmediately`; answers `{task}`.
pub async fn send(call: &Call<'_>, params: &Map<String, Value>) -> Result<Value, A2aError> {
    let parsed = parse(call.a2a, params)?;
    let (sync, queued, _) = execution(&parsed.capability);
    let immediately = parsed.return_immediately;
    let mode = if queued && (immediately || !sync) {
        ActionMode::Async
    } else {
        ActionMode::Sync
    };
    let (id, context_id) = match admit(call, parsed, mode).await? {
        Admitted::Task(id, context_id) => (id, context_id),
        Admitted::Rejected(task) => return Ok(json!({ "task": task })),
    };
    let mut view = task::view(call, &id).await?;
    let started = Instant::now();
    let step = call.app.runtime.max_wait_ms().max(1);
    while !immediately
        && !task::ends_stream(view.state)
        && (started.elapsed().as_millis() as u64) < call.a2a.max_wait_ms
    {
        view = call
            .app
            .runtime
            .action_status(call.caller, &id, true, false, Some(step))
            .await
            .map_err(|e| rpc::native(&e))?;
    }
    Ok(json!({ "task": task::task(&view, &context_id) }))
}

/// `SendStreamingMessage`: admits the task and streams it.
pub async fn send_streaming(call: &Call<'_>, id: Value, params: &Map<String, Value>) -> Reply {
    let parsed = match parse(call.a2a, params) {
        Ok(parsed) => parsed,
        Err(error) => return Reply::Error(id, error),
    };
    let mode = match execution(&parsed.capability) {
        (_, _, true) => ActionMode::Streaming,
        (_, true, _) => ActionMode::Async,
        _ => ActionMode::Sync,
    };
    match admit(call, parsed, mode).await {
        Ok(Admitted::Task(action_id, context_id)) => stream(call, id, action_id, context_id),
        Ok(Admitted::Rejected(task)) => {
            // One frame, the rejected task; the stream then closes.
            let frame = rpc::result_body(&id, json!({ "task": task }));
            let event = axum::response::sse::Event::default().data(frame.to_string());
            let events = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(event)]);
            Reply::Stream(axum::response::sse::Sse::new(events).into_response())
        }
        Err(error) => Reply::Error(id, error),
    }
}

/// `SubscribeToTask`: streams a task that has not ended (also after a restart: everything is
/// read from the store).
pub async fn subscribe(call: &Call<'_>, id: Value, params: &Map<String, Value>) -> Reply {
    let task_id = match rpc::string(params, "id") {
        Ok(task_id) => task_id.to_owned(),
        Err(error) => return Reply::Error(id, error),
    };
    match task::view(call, &task_id).await {
        Ok(view)
            if task::ends_stream(view.state)
                && view.state != ActionLifecycleState::PendingApproval =>
        {
            Reply::Error(
                id,
                A2aError::unsupported(format!(
                    "task {task_id} is {} (terminal): read it with GetTask",
                    view.state.as_str()
                )),
            )
        }
        Ok(view) => match super::context::of(call, &view).await {
            Ok(context_id) => stream(call, id, task_id, context_id),
            Err(error) => Reply::Error(id, error),
        },
        Err(error) => Reply::Error(id, error),
    }
}

/// The SSE response following `action_id`: first the task, then status and artifact updates as
/// the native action moves, closed once it ends, waits for a person, or the stream bound passes.
fn stream(call: &Call<'_>, id: Value, action_id: String, context_id: String) -> Reply {
    let (tx, rx) = tokio::sync::mpsc::channel::<Value>(STREAM_QUEUE);
    let runtime = std::sync::Arc::clone(&call.app.runtime);
    let caller = call.caller.clone();
    let bound = Duration::from_millis(call.a2a.max_wait_ms);
    let out = Out {
        tx,
        send_timeout: call.app.streaming.send_timeout,
    };
    tokio::spawn(async move {
        let frame = |result: Value| rpc::result_body(&id, result);
        let task = (action_id.as_str(), context_id.as_str());
        let follow = follow(&runtime, &caller, task, &out, bound, frame);
        tokio::select! {
            outcome = follow => {
                if let Err(error) = outcome {
                    out.send(rpc::error_body(&id, &error)).await;
                }
            }
            () = crate::http::shutting_down() => {}
        }
    });
    let heartbeat = Duration::from_secs(15);
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        let frame = rx.recv().await?;
        let event = axum::response::sse::Event::default().data(frame.to_string());
        Some((Ok::<_, std::convert::Infallible>(event), rx))
    });
    Reply::Stream(
        axum::response::sse::Sse::new(events)
            .keep_alive(axum::response::sse::KeepAlive::new().interval(heartbeat))
            .into_response(),
    )
}

/// A stream's frames go out through here: a reader that stops reading for longer than the
/// binding's send timeout loses the stream (bounded memory, no task held forever).
struct Out {
    tx: tokio::sync::mpsc::Sender<Value>,
    send_timeout: Duration,
}

impl Out {
    /// Whether the frame went out (false: the reader is gone or stalled; stop).
    async fn send(&self, frame: Value) -> bool {
        matches!(
            tokio::time::timeout(self.send_timeout, self.tx.send(frame)).await,
            Ok(Ok(()))
        )
    }

    async fn closed(&self) {
        self.tx.closed().await;
    }
}

async fn follow(
    runtime: &std::sync::Arc<aip_runtime::Runtime>,
    caller: &aip_runtime::Caller,
    (action_id, context_id): (&str, &str),
    tx: &Out,
    bound: Duration,
    frame: impl Fn(Value) -> Value,
) -> Result<(), A2aError> {
    let native = |e: aip_runtime::RuntimeError| rpc::native(&e);
    let started = Instant::now();
    let view = runtime
        .action_status(caller, action_id, true, false, None)
        .await
        .map_err(native)?;
    if !tx
        .send(frame(json!({ "task": task::task(&view, context_id) })))
        .await
    {
        return Ok(());
    }
    let mut last = view.state;
    let mut cursor: Option<String> = None;
    let mut streamed = false;
    while !task::ends_stream(last) {
        let mut watch = runtime.store().watch_changes();
        watch.mark_seen();
        let page = runtime
            .action_chunks(caller, action_id, cursor.as_deref(), Some(256))
            .await
            .map_err(native)?;
        for chunk in &page.chunks {
            let Some(data) = &chunk.data else { continue };
            let update = json!({ "artifactUpdate": {
                "taskId": action_id, "contextId": context_id, "append": streamed, "lastChunk": false,
                "artifact": { "artifactId": format!("{action_id}-stream"), "name": "stream",
                              "parts": [{ "data": data, "metadata": { "aip.sequence": chunk.sequence } }] } } });
            streamed = true;
            if !tx.send(frame(update)).await {
                return Ok(());
            }
        }
        cursor = Some(page.cursor);
        let view = runtime
            .action_status(caller, action_id, true, false, None)
            .await
            .map_err(native)?;
        // A terminal state commits after the last chunk: read the chunks once more first.
        if task::ends_stream(view.state)
            && view.state != ActionLifecycleState::PendingApproval
            && !page.terminal
        {
            continue;
        }
        if view.state != last {
            if let Some(result) = &view.result {
                for artifact in task::artifacts(action_id, result) {
                    let update = json!({ "artifactUpdate": { "taskId": action_id, "contextId": context_id,
                        "append": false, "lastChunk": true, "artifact": artifact } });
                    if !tx.send(frame(update)).await {
                        return Ok(());
                    }
                }
            }
            let update = json!({ "statusUpdate": { "taskId": action_id, "contextId": context_id,
                "status": task::status(&view, context_id), "metadata": { "aip.state": view.state.as_str() } } });
            if !tx.send(frame(update)).await {
                return Ok(());
            }
            last = view.state;
        }
        if task::ends_stream(last) || started.elapsed() >= bound {
            break;
        }
        if page.chunks.is_empty() {
            tokio::select! {
                _ = watch.changed_within(IDLE_POLL) => {}
                () = tx.closed() => return Ok(()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn integral_doubles_become_integers_and_other_numbers_stay() {
        assert_eq!(
            integral(
                json!({"n": 3.0, "list": [1.0, 2.5, {"deep": -7.0}], "big": 1e300, "s": "3.0"})
            ),
            json!({"n": 3, "list": [1, 2.5, {"deep": -7}], "big": 1e300, "s": "3.0"})
        );
    }

    #[test]
    fn parts_become_one_input_or_are_refused() {
        let ok = |parts: Value| content(&message(json!({ "parts": parts })));
        assert_eq!(
            ok(json!([{"text": "a"}, {"text": "b"}])).unwrap(),
            (None, json!({"text": "a\nb"}))
        );
        assert_eq!(
            ok(json!([{"data": {"x": 1.0}}])).unwrap(),
            (None, json!({"x": 1}))
        );
        assert_eq!(
            ok(json!([{"data": {"capability_id": "cap:demo:echo", "input": {"y": 2.0}}}])).unwrap(),
            (Some("cap:demo:echo".to_owned()), json!({"y": 2}))
        );
        for refused in [
            json!([]),
            json!([{"url": "http://x"}]),
            json!([{"raw": "AAAA"}]),
            json!([{"data": [1, 2]}]),
            json!([{"data": {"a": 1}}, {"text": "mixed"}]),
            json!([{"data": {"a": 1}}, {"data": {"b": 2}}]),
        ] {
            assert!(ok(refused.clone()).is_err(), "{refused}");
        }
    }
}
