//! Tools (spec 21.1, notes 6.3): one tool per callable capability, described conservatively from
//! its contract at the negotiated version, and `tools/call` as a native action.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use aip_core::{
    Action, ActionId, ActionMode, ActionResult, ActionResultStatus, Capability, CapabilityId,
    IdempotencyRequirement, SideEffect,
};
use aip_runtime::{ActionRequest, Caller, Runtime, RuntimeError, Submitted};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{IDEMPOTENCY_META, META_KEY, PROFILE, Version};

/// Longest tool name MCP clients accept.
const MAX_TOOL_NAME: usize = 128;
/// Names starting with this are the facade's (native semantics as tools).
const RESERVED_PREFIX: &str = "aip_";
/// Longest `message` of a progress notification (a chunk's data as JSON, cut at this many bytes).
const MAX_PROGRESS_MESSAGE: usize = 1024;
/// Longest idempotency key a tool call may carry in `_meta`.
const MAX_KEY_LEN: usize = 256;

/// Why the capability set cannot be offered as MCP tools; `aip serve` does not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolNameError {
    /// A name outside `[A-Za-z0-9._-]{1,128}`.
    #[error("capability {capability}: MCP tool name {name:?} must be 1-128 of [A-Za-z0-9._-]")]
    Invalid {
        /// The capability.
        capability: String,
        /// The name.
        name: String,
    },
    /// A name in the facade's reserved `aip_` namespace.
    #[error("capability {capability}: MCP tool name {name:?} starts with the reserved aip_")]
    Reserved {
        /// The capability.
        capability: String,
        /// The name.
        name: String,
    },
    /// Two capabilities map to one name.
    #[error("capabilities {first} and {second} both map to MCP tool {name:?}")]
    Collision {
        /// The first capability.
        first: String,
        /// The second capability.
        second: String,
        /// The name.
        name: String,
    },
}

/// Tool names of the admitted capabilities, fixed at startup.
#[derive(Debug, Default)]
pub struct ToolIndex {
    /// The capability behind each tool (its manifest entry, fixed at startup).
    by_name: BTreeMap<String, Capability>,
    by_capability: BTreeMap<CapabilityId, String>,
}

impl ToolIndex {
    /// Names every capability whose input is an object schema (MCP tools take an object of
    /// arguments; others stay reachable natively).
    pub fn build<'a>(
        capabilities: impl IntoIterator<Item = &'a Capability>,
    ) -> Result<Self, ToolNameError> {
        let mut index = Self::default();
        for capability in capabilities {
            if !is_object_schema(&capability.input_schema) {
                tracing::info!(capability = %capability.id.as_str(), "not an MCP tool: its input schema is not an object schema");
                continue;
            }
            let name = tool_name(capability)?;
            if let Some(first) = index.by_name.get(&name) {
                return Err(ToolNameError::Collision {
                    first: first.id.as_str().to_owned(),
                    second: capability.id.as_str().to_owned(),
                    name,
                });
            }
            index.by_name.insert(name.clone(), capability.clone());
            index.by_capability.insert(capability.id.clone(), name);
        }
        Ok(index)
    }

    /// The tool name of a capability, if it is a tool.
    pub fn name_of(&self, capability: &CapabilityId) -> Option<&str> {
        self.by_capability.get(capability).map(String::as_str)
    }

    /// The capability a tool name stands for.
    pub fn capability_of(&self, name: &str) -> Option<&Capability> {
        self.by_name.get(name)
    }
}

/// The binding's `tool` when the capability has an MCP binding, else the id without `cap:` and
/// with every character outside `[A-Za-z0-9._-]` replaced by `_` (`cap:demo:echo` → `demo_echo`).
fn tool_name(capability: &Capability) -> Result<String, ToolNameError> {
    let id = capability.id.as_str();
    let bound = capability
        .bindings
        .iter()
        .find(|b| b.profile.as_str() == PROFILE)
        .and_then(|b| b.extra.get("tool"))
        .and_then(Value::as_str);
    let name = match bound {
        Some(name) => name.to_owned(),
        None => id
            .strip_prefix("cap:")
            .unwrap_or(id)
            .chars()
            .map(|c| if valid_char(c) { c } else { '_' })
            .collect(),
    };
    if name.is_empty() || name.len() > MAX_TOOL_NAME || !name.chars().all(valid_char) {
        return Err(ToolNameError::Invalid {
            capability: id.to_owned(),
            name,
        });
    }
    if name.to_ascii_lowercase().starts_with(RESERVED_PREFIX) {
        return Err(ToolNameError::Reserved {
            capability: id.to_owned(),
            name,
        });
    }
    Ok(name)
}

fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// The MCP `Tool` for `capability` at `version`: only what the version defines, and only hints the
/// contract backs (spec 21.1: never claim a guarantee that cannot be projected faithfully).
pub fn describe(capability: &Capability, name: &str, version: Version) -> Value {
    let mut tool = Map::new();
    tool.insert("name".into(), json!(name));
    if let Some(description) = &capability.description {
        tool.insert("description".into(), json!(description));
    }
    tool.insert("inputSchema".into(), capability.input_schema.clone());
    if version >= Version::V2025_06_18 {
        tool.insert("title".into(), json!(capability.name));
        if let Some(output) = capability
            .output_schema
            .as_ref()
            .filter(|s| is_object_schema(s))
        {
            tool.insert("outputSchema".into(), output.clone());
        }
        tool.insert(
            "_meta".into(),
            json!({ META_KEY: {
                "capability_id": capability.id,
                "risk": capability.risk,
                "requires_approval": requires_approval(capability),
            } }),
        );
    }
    if version >= Version::V2025_03_26
        && let Some(annotations) = annotations(capability)
    {
        tool.insert("annotations".into(), annotations);
    }
    if version >= Version::V2025_11_25 {
        let support = if supports_tasks(capability) {
            "optional"
        } else {
            "forbidden"
        };
        tool.insert("execution".into(), json!({ "taskSupport": support }));
    }
    Value::Object(tool)
}

fn requires_approval(capability: &Capability) -> bool {
    capability.requires_human_approval == Some(true)
        || capability
            .contract
            .as_ref()
            .is_some_and(|c| c.approval.is_some())
}

/// Hints derived from the contract; none without one (MCP's defaults are the cautious reading).
fn annotations(capability: &Capability) -> Option<Value> {
    let contract = capability.contract.as_ref()?;
    let effects = &contract.side_effects;
    let read_only = !effects.is_empty() && effects.iter().all(|e| *e == SideEffect::Read);
    let destructive = effects.iter().any(|e| {
        matches!(
            e,
            SideEffect::Delete
                | SideEffect::Financial
                | SideEffect::Identity
                | SideEffect::CodeExecution
        )
    });
    Some(json!({
        "readOnlyHint": read_only,
        "destructiveHint": !read_only && destructive,
        "idempotentHint": contract.idempotency.requirement == IdempotencyRequirement::Required,
        "openWorldHint": effects.contains(&SideEffect::ExternalNetwork),
    }))
}

/// Tool calls in flight on this node, by (session, request id), so `notifications/cancelled` finds
/// the action a request started.
#[derive(Debug, Default)]
pub struct InFlight(Mutex<HashMap<(String, String), String>>);

impl InFlight {
    /// The map; a panic elsewhere while it was held cannot leave it half-changed (every change is
    /// one insert or remove), so a poisoned lock is still the truth.
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a request's action; `false` when the session already has a call in flight under
    /// that request id (MCP forbids reusing one: the second call is refused, not run).
    fn insert(&self, key: (String, String), action: String) -> bool {
        match self.map().entry(key) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(action);
                true
            }
        }
    }

    fn remove(&self, key: &(String, String)) {
        self.map().remove(key);
    }

    /// The action a request of `session` started, if it is still running here.
    pub fn get(&self, session: &str, request_id: &Value) -> Option<String> {
        let key = (session.to_owned(), request_id.to_string());
        self.map().get(&key).cloned()
    }
}

/// A `tools/call` to run: what the transport resolved and checked.
pub struct Call<'a> {
    /// The authenticated caller (never anything from the arguments).
    pub caller: &'a Caller,
    /// The MCP session.
    pub session_id: &'a str,
    /// The session's negotiated version.
    pub version: Version,
    /// The JSON-RPC request id.
    pub request_id: &'a Value,
    /// Where `notifications/progress` go, when the call asked for them.
    pub progress: Option<Progress>,
    /// The minimum severity of log messages the session asked for (`logging/setLevel`).
    pub log_level: Option<u8>,
    /// The server-to-client requests the session's client answers.
    pub answers: super::relay::Answers,
    /// The runtime's check of the session, made when the transport read it.
    pub checked: &'a aip_runtime::SessionCheck,
}

/// The outgoing channel of a call's progress notifications (a response stream, or a legacy
/// session's stream).
pub type Progress = tokio::sync::mpsc::Sender<Outgoing>;

/// A message for a stream, with the SSE event id a client may resume after (`Last-Event-ID`).
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// Event id, when the event can be resumed after.
    pub id: Option<String>,
    /// The JSON-RPC message.
    pub message: Value,
}

/// The SSE event id of a call's progress at `position`: the action, the request id and progress
/// token (to answer a resumed stream), and the native stream cursor, bound to this reader and
/// action, so it resumes on any node and cannot be replayed by another principal.
pub fn event_id(
    runtime: &Runtime,
    caller: &Caller,
    action_id: &str,
    (request_id, token): (&Value, &Value),
    position: aip_runtime::StreamPosition,
) -> String {
    use base64::Engine;
    let call = json!({ "r": request_id, "t": token }).to_string();
    let call = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(call);
    let cursor = runtime.stream_cursor(caller, action_id, position);
    format!("{action_id}~{call}~{cursor}")
}

/// The parts of an [`event_id`]: action id, request id, progress token, cursor.
pub fn parse_event_id(id: &str) -> Option<(String, Value, Value, String)> {
    use base64::Engine;
    let mut parts = id.splitn(3, '~');
    let (action, call, cursor) = (parts.next()?, parts.next()?, parts.next()?);
    let call = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(call)
        .ok()?;
    let call: Value = serde_json::from_slice(&call).ok()?;
    Some((
        action.to_owned(),
        call.get("r")?.clone(),
        call.get("t")?.clone(),
        cursor.to_owned(),
    ))
}

/// Answer of a `tools/call`: a `CallToolResult`, or a JSON-RPC error (code, message).
pub type CallOutcome = Result<Value, (i64, String)>;

/// `tools/call`: the named tool's capability as a native action through the one admission path.
pub async fn call(
    runtime: &Arc<Runtime>,
    state: &super::McpState,
    call: Call<'_>,
    params: &Map<String, Value>,
) -> CallOutcome {
    let invalid = |m: &str| Err((super::rpc::INVALID_PARAMS, m.to_owned()));
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return invalid("tools/call needs a tool name");
    };
    // A tool the caller may not invoke is as unknown as one that does not exist.
    let Some(capability) = state
        .tools
        .capability_of(name)
        .filter(|c| call.caller.may_invoke(c.id.as_str()))
    else {
        return invalid(&format!("unknown tool: {name}"));
    };
    let capability_id = &capability.id;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(args @ Value::Object(_)) => args.clone(),
        Some(_) => return invalid("arguments must be an object"),
    };
    let as_task = match params.get("task") {
        None => false,
        Some(Value::Object(_)) if call.version >= Version::V2025_11_25 => true,
        Some(_) => return invalid("task-augmented calls need MCP 2025-11-25 and a task object"),
    };
    let key = match idempotency_key(params) {
        Ok(key) => key,
        Err(message) => return invalid(message),
    };
    if as_task && !supports_tasks(capability) {
        return invalid(&format!(
            "tool {name} does not support task-augmented calls"
        ));
    }
    // A keyed call retried is the same action (answered by its first outcome). An unkeyed call is
    // a new action with a time-ordered id: each store index then grows at its end, where a hashed
    // id would land every insert on a different page (measured: a quarter more store work).
    let action_id = match &key {
        Some(key) => derive_id(&[
            &call.caller.tenant,
            &call.caller.id,
            capability_id.as_str(),
            key,
        ]),
        None => aip_core::ids::generate_with_prefix("act_mcp"),
    };
    let keyed = key.is_some();
    let token = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned();
    // Followed on the response stream when the client asked for progress, set a log level or
    // answers requests.
    let progress = call
        .progress
        .clone()
        .filter(|_| token.is_some() || call.log_level.is_some() || call.answers.any())
        .map(|sink| (sink, token.unwrap_or(Value::Null), call.log_level));
    let action = Action {
        mode: Some(match (as_task, &progress) {
            (true, _) => ActionMode::Async,
            (false, Some(_)) if supports_streaming(capability) => ActionMode::Streaming,
            _ => mode_for(capability),
        }),
        idempotency_key: key,
        ..Action::plain(
            ActionId::new(action_id.clone()),
            capability_id.clone(),
            arguments,
        )
    };
    let request = ActionRequest {
        action,
        message_id: aip_core::MessageId::generate().as_str().to_owned(),
        // A keyed call belongs to no session: retried from a new session after a reconnect it is
        // still the same action, answered by its first outcome.
        session_id: (!keyed).then(|| call.session_id.to_owned()),
        correlation_id: None,
        trace: None,
        idempotency_key: None,
        delegation: None,
        checked: (!keyed).then(|| call.checked.clone()),
    };
    if as_task {
        return create_task(runtime, call.caller, request).await;
    }
    let flight = (call.session_id.to_owned(), call.request_id.to_string());
    if !state.calls.insert(flight.clone(), action_id.clone()) {
        return Err((
            super::rpc::INVALID_REQUEST,
            format!(
                "request id {} is already in use by a call of this session",
                call.request_id
            ),
        ));
    }
    // Open to the tool's requests before it can run; only a call followed here can carry them.
    let relayed = progress.is_some() && call.answers.any();
    let asks = relayed.then(|| state.relay.open(&action_id, call.answers));
    let outcome = run(
        runtime,
        state,
        call.caller,
        request,
        (&action_id, call.request_id),
        progress.as_ref().map(|p| (p, call.session_id, asks)),
    )
    .await;
    if relayed {
        state.relay.close(&action_id);
    }
    state.calls.remove(&flight);
    match outcome {
        Ok(finished) => Ok(finished.project(&action_id, call.version)),
        // A refusal the client should send again later (the node drains, a rate limit, a quota) is a
        // JSON-RPC error naming the native code, not a tool result.
        Err(
            err @ (aip_runtime::RuntimeError::RateLimited { .. }
            | aip_runtime::RuntimeError::QuotaExceeded { .. }
            | aip_runtime::RuntimeError::QueueFull { .. }
            | aip_runtime::RuntimeError::Draining),
        ) => Err((
            super::rpc::INTERNAL_ERROR,
            format!("{}: {err}", err.code().as_str()),
        )),
        Err(err) if err.code().category() == aip_core::ErrorCategory::Temporary => {
            Err((super::rpc::INTERNAL_ERROR, err.to_string()))
        }
        Err(err) => {
            let error = err.to_protocol_error();
            Ok(tool_error(
                &format!("{}: {}", error.code.as_str(), error.message),
                json!({ "action_id": action_id, "status": "rejected", "error": error }),
            ))
        }
    }
}

/// Whether a capability streams chunks (a call asking for progress then runs as a stream).
fn supports_streaming(capability: &Capability) -> bool {
    capability
        .contract
        .as_ref()
        .is_some_and(|c| c.execution.supports_streaming)
}

/// Whether a capability may run as an MCP task (it can be queued).
pub fn supports_tasks(capability: &Capability) -> bool {
    crate::profile::supports_async(capability)
}

/// Admits a task-augmented call as a queued action and answers its `CreateTaskResult`; a refusal
/// is a JSON-RPC error carrying the native error (a task result has no error form).
async fn create_task(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    request: ActionRequest,
) -> CallOutcome {
    let action_id = request.action.id.as_str().to_owned();
    if let Err(err) = runtime.submit_action(caller, request).await {
        let error = err.to_protocol_error();
        return Err((
            super::rpc::INVALID_PARAMS,
            format!("{}: {}", error.code, error.message),
        ));
    }
    let record = runtime
        .visible_action(caller, &action_id)
        .await
        .map_err(|e| (super::rpc::INTERNAL_ERROR, e.to_string()))?;
    Ok(json!({ "task": super::tasks::task(&record), "_meta": super::tasks::related(&action_id) }))
}

/// The `CallToolResult` of an admitted action once it is terminal (bounded wait), for `tasks/result`.
pub async fn outcome(
    runtime: &Arc<Runtime>,
    state: &super::McpState,
    caller: &Caller,
    action_id: &str,
    version: Version,
) -> CallOutcome {
    match wait(runtime, state, caller, action_id).await {
        Ok(finished) => Ok(finished.project(action_id, version)),
        Err(err) => Err((super::rpc::INTERNAL_ERROR, err.to_string())),
    }
}

/// The `_meta` idempotency key, if any: a non-empty string of at most 256 characters.
fn idempotency_key(params: &Map<String, Value>) -> Result<Option<String>, &'static str> {
    let meta = params.get("_meta").and_then(Value::as_object);
    match meta.and_then(|m| m.get(IDEMPOTENCY_META)) {
        None => Ok(None),
        Some(Value::String(k)) if !k.is_empty() && k.len() <= MAX_KEY_LEN => Ok(Some(k.clone())),
        Some(_) => Err("the idempotency key must be a string of 1-256 characters"),
    }
}

/// The deterministic action id of a keyed call: retried, from any session or node, it is the same
/// action (answered by its first outcome). `parts` are (tenant, principal, capability, key); the
/// facade's keyed `aip_call` and `aip_delegate` derive theirs the same way.
pub(super) fn derive_id(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    hash.update(b"aip.mcp.tool_call.v1");
    for part in parts {
        hash.update([0u8]);
        hash.update(part.as_bytes());
    }
    let digest = hash.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("act_mcp{hex}")
}

/// Sync when the capability supports it; otherwise queued, and the call waits for the outcome.
fn mode_for(capability: &Capability) -> ActionMode {
    match capability.contract.as_ref().map(|c| &c.execution) {
        Some(e) if !e.supports_sync && e.supports_async => ActionMode::Async,
        Some(e) if !e.supports_sync && e.supports_streaming => ActionMode::Streaming,
        _ => ActionMode::Sync,
    }
}

enum Finished {
    Result(Box<ActionResult>),
    Approval(String),
    StillRunning,
}

impl Finished {
    /// The `CallToolResult` of `action_id` as it ended: success only for a completed action.
    fn project(self, action_id: &str, version: Version) -> Value {
        match self {
            Finished::Result(result) => project(&result, version),
            Finished::Approval(approval_id) => tool_error(
                &format!("action {action_id} awaits approval {approval_id}; it has not run"),
                json!({ "action_id": action_id, "status": "pending_approval", "approval_id": approval_id }),
            ),
            Finished::StillRunning => tool_error(
                &format!("action {action_id} is still running; its outcome is not known yet"),
                json!({ "action_id": action_id, "status": "running" }),
            ),
        }
    }
}

async fn run(
    runtime: &Arc<Runtime>,
    state: &super::McpState,
    caller: &Caller,
    request: ActionRequest,
    (action_id, request_id): (&str, &Value),
    progress: Option<(&Follow, &str, Option<Asks>)>,
) -> Result<Finished, RuntimeError> {
    match runtime.submit_action(caller, request).await? {
        Submitted::Result { result, .. } => Ok(Finished::Result(result)),
        Submitted::AwaitingApproval { approval_id, .. } => Ok(Finished::Approval(approval_id)),
        Submitted::Ack(_) => match progress {
            Some(((sink, token, log_level), session_id, asks)) => {
                let stream = Followed {
                    action_id,
                    request_id,
                    token,
                    after: 0,
                    log_level: *log_level,
                    asks: asks.map(|rx| (rx, session_id.to_owned())),
                };
                follow(runtime, state, caller, stream, sink).await
            }
            None => wait(runtime, state, caller, action_id).await,
        },
        _ => Ok(Finished::StillRunning),
    }
}

/// The stream a call's progress follows.
pub struct Followed<'a> {
    /// The action.
    pub action_id: &'a str,
    /// The JSON-RPC request id of the call.
    pub request_id: &'a Value,
    /// Its progress token (`null`: the call asked for none).
    pub token: &'a Value,
    /// The chunk sequence to resume after (0: from the start).
    pub after: u64,
    /// The minimum severity of the log messages to send (`None`: none).
    pub log_level: Option<u8>,
    /// The tool's requests for the client, and the session that owes the answers.
    pub asks: Option<(Asks, String)>,
}

/// How a call is followed: its stream, progress token (`null`: none) and log level.
type Follow = (Progress, Value, Option<u8>);

/// A followed call's requests for its client (see `relay`).
pub type Asks = tokio::sync::mpsc::Receiver<super::relay::ClientRequest>;

/// The `CallToolResult` a resumed stream ends with, once the action is terminal.
pub async fn follow_to_result(
    runtime: &Arc<Runtime>,
    state: &super::McpState,
    caller: &Caller,
    stream: Followed<'_>,
    sink: &Progress,
    version: Version,
) -> CallOutcome {
    let action_id = stream.action_id.to_owned();
    match follow(runtime, state, caller, stream, sink).await {
        Ok(finished) => Ok(finished.project(&action_id, version)),
        Err(err) => Err((super::rpc::INTERNAL_ERROR, err.to_string())),
    }
}

/// Waits for a queued action's outcome, sending one `notifications/progress` per stream chunk,
/// each with the event id a client may resume after. A reader gone away stops the notifications,
/// never the action.
async fn follow(
    runtime: &Arc<Runtime>,
    state: &super::McpState,
    caller: &Caller,
    stream: Followed<'_>,
    sink: &Progress,
) -> Result<Finished, RuntimeError> {
    let Followed {
        action_id,
        request_id,
        token,
        after,
        log_level,
        mut asks,
    } = stream;
    let started = std::time::Instant::now();
    let idle = std::time::Duration::from_millis(runtime.max_wait_ms().max(1));
    let mut follower = runtime
        .follow_action(caller, action_id, after, idle)
        .await?;
    loop {
        if started.elapsed().as_millis() as u64 >= state.max_call_wait_ms {
            return Ok(Finished::StillRunning);
        }
        let item = tokio::select! {
            item = follower.next() => item?,
            Some(request) = next_ask(&mut asks) => {
                ask(state, &asks, request, sink).await;
                continue;
            }
        };
        match item {
            Some(aip_runtime::StreamItem::Chunk(chunk)) => {
                let Some(note) = notification(&chunk, token, log_level) else {
                    continue;
                };
                if sink.is_closed() {
                    return wait(runtime, state, caller, action_id).await;
                }
                let position = aip_runtime::StreamPosition::After(chunk.sequence);
                let id = event_id(runtime, caller, action_id, (request_id, token), position);
                let _ = sink
                    .send(Outgoing {
                        id: Some(id),
                        message: note,
                    })
                    .await;
            }
            Some(aip_runtime::StreamItem::Result(result)) => {
                return Ok(Finished::Result(result));
            }
            Some(aip_runtime::StreamItem::Idle) => {}
            Some(_) => {}
            None => return wait(runtime, state, caller, action_id).await,
        }
    }
}

async fn next_ask(asks: &mut Option<(Asks, String)>) -> Option<super::relay::ClientRequest> {
    match asks {
        Some((rx, _)) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Sends a tool's request to the client on the call's stream; its answer comes back through the
/// relay when the client posts its response in the same session.
async fn ask(
    state: &super::McpState,
    asks: &Option<(Asks, String)>,
    request: super::relay::ClientRequest,
    sink: &Progress,
) {
    let Some((_, session)) = asks else { return };
    let super::relay::ClientRequest {
        method,
        params,
        reply,
    } = request;
    let id = match state.relay.owe(session, reply) {
        Ok(id) => id,
        Err(reply) => {
            let _ = reply.send(Err((-32603, "too many requests await clients".into())));
            return;
        }
    };
    let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    // A reader gone away leaves the request unanswered: its asker's wait is bounded.
    let _ = sink.send(Outgoing { id: None, message }).await;
}

/// The notification a stream chunk becomes for a client with progress `token` (`null`: none) and
/// minimum log severity `log_level`, if any: a log chunk (`{log: {level, logger?, data}}`) is a
/// `notifications/message`; a progress chunk with a numeric `progress` keeps its values; any other
/// chunk is progress numbered by its sequence, its data as the message.
fn notification(
    chunk: &aip_core::StreamChunk,
    token: &Value,
    log_level: Option<u8>,
) -> Option<Value> {
    let data = chunk.data.as_ref();
    if let Some(log) = data.and_then(|d| d.get("log")) {
        let level = log.get("level").and_then(Value::as_str).unwrap_or("info");
        let severity = super::LOG_LEVELS.iter().position(|l| *l == level)?;
        if (severity as u8) < log_level? {
            return None;
        }
        let mut params =
            json!({ "level": level, "data": log.get("data").cloned().unwrap_or(Value::Null) });
        if let Some(logger) = log.get("logger").and_then(Value::as_str) {
            params["logger"] = json!(logger);
        }
        return Some(
            json!({ "jsonrpc": "2.0", "method": "notifications/message", "params": params }),
        );
    }
    if token.is_null() {
        return None;
    }
    if chunk.kind == aip_core::StreamChunkKind::Progress
        && let Some(progress) = data
            .and_then(|d| d.get("progress"))
            .filter(|p| p.is_number())
    {
        let mut params = json!({ "progressToken": token, "progress": progress });
        for key in ["total", "message"] {
            if let Some(v) = data.and_then(|d| d.get(key)) {
                params[key] = v.clone();
            }
        }
        return Some(
            json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": params }),
        );
    }
    let mut message = data.map(Value::to_string).unwrap_or_default();
    if message.len() > MAX_PROGRESS_MESSAGE {
        let mut end = MAX_PROGRESS_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    Some(
        json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": {
        "progressToken": token, "progress": chunk.sequence, "message": message } }),
    )
}

/// Waits (bounded by the deployment's longest action timeout) for a queued action's outcome.
async fn wait(
    runtime: &Arc<Runtime>,
    state: &super::McpState,
    caller: &Caller,
    action_id: &str,
) -> Result<Finished, RuntimeError> {
    let started = std::time::Instant::now();
    let step = runtime.max_wait_ms().max(1);
    loop {
        match runtime.action_result(caller, action_id, Some(step)).await {
            Ok(result) if result.status == ActionResultStatus::PendingApproval => {
                return Ok(Finished::StillRunning);
            }
            Ok(result) => return Ok(Finished::Result(Box::new(result))),
            Err(RuntimeError::NotFound(_))
                if (started.elapsed().as_millis() as u64) < state.max_call_wait_ms => {}
            Err(RuntimeError::NotFound(_)) => return Ok(Finished::StillRunning),
            Err(err) => return Err(err),
        }
    }
}

/// A native result as a `CallToolResult`: success only for `completed`.
fn project(result: &ActionResult, version: Version) -> Value {
    let action_id = result.action_id.as_str();
    match result.status {
        ActionResultStatus::Completed => {
            // The result's message is what it shows (text, images, audio, resources); without
            // one, the structured output as JSON text.
            let mut content = super::content::to_blocks(&result.message, version);
            if content.is_empty()
                && let Some(output) = &result.output
            {
                content.push(json!({ "type": "text", "text": output.to_string() }));
            }
            let mut value = json!({ "content": content, "isError": false, "_meta": { META_KEY: { "action_id": action_id } } });
            if version >= Version::V2025_06_18
                && let Some(output @ Value::Object(_)) = &result.output
            {
                value["structuredContent"] = output.clone();
            }
            value
        }
        status => {
            let error = result.error.as_ref();
            let text = match error {
                Some(e) => format!("{}: {}: {}", status.as_str(), e.code.as_str(), e.message),
                None => format!("action {action_id} {}", status.as_str()),
            };
            tool_error(
                &text,
                json!({ "action_id": action_id, "status": status.as_str(), "error": error }),
            )
        }
    }
}

/// `isError: true` with the native facts in `_meta` and as JSON text, never as
/// `structuredContent`: clients check that against the tool's output schema, which describes
/// success (the TypeScript SDK 1.x refuses the whole result otherwise).
fn tool_error(text: &str, facts: Value) -> Value {
    json!({
        "content": [{ "type": "text", "text": text }, { "type": "text", "text": facts.to_string() }],
        "isError": true,
        "_meta": { META_KEY: facts },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capability(value: Value) -> Capability {
        serde_json::from_value(value).unwrap()
    }

    fn echo() -> Capability {
        capability(json!({
            "id": "cap:demo:echo", "name": "Echo", "kind": "tool",
            "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
        }))
    }

    fn chunk(kind: aip_core::StreamChunkKind, data: Value) -> aip_core::StreamChunk {
        aip_core::StreamChunk {
            action_id: aip_core::ActionId::new("act_1"),
            sequence: 4,
            kind,
            data: Some(data),
            part: None,
        }
    }

    #[test]
    fn chunks_become_progress_or_log_notifications_as_the_client_asked() {
        use aip_core::StreamChunkKind::{Data, Progress, Thought};
        let token = json!("t1");
        let progress = chunk(Progress, json!({"progress": 50, "total": 100}));
        let note = notification(&progress, &token, None).unwrap();
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(
            note["params"],
            json!({"progressToken": "t1", "progress": 50, "total": 100})
        );
        // No token: no progress at all.
        assert!(notification(&progress, &Value::Null, Some(0)).is_none());
        let data = notification(&chunk(Data, json!({"n": 1})), &token, None).unwrap();
        assert_eq!(data["params"]["progress"], 4);
        let log = chunk(
            Thought,
            json!({"log": {"level": "info", "logger": "t", "data": "hi"}}),
        );
        // A log message only to a session that set a level, and only at or above it.
        assert!(notification(&log, &token, None).is_none());
        assert!(notification(&log, &token, Some(3)).is_none());
        let note = notification(&log, &Value::Null, Some(0)).unwrap();
        assert_eq!(note["method"], "notifications/message");
        assert_eq!(
            note["params"],
            json!({"level": "info", "logger": "t", "data": "hi"})
        );
    }

    #[test]
    fn derived_names_drop_cap_and_replace_foreign_characters() {
        assert_eq!(tool_name(&echo()).unwrap(), "demo_echo");
        let odd = capability(
            json!({"id": "cap:a b/c", "name": "x", "kind": "tool", "input_schema": {"type": "object"}}),
        );
        assert_eq!(tool_name(&odd).unwrap(), "a_b_c");
    }

    #[test]
    fn reserved_invalid_and_colliding_names_stop_the_index() {
        let bound = |tool: &str| {
            capability(
                json!({"id": "cap:x", "name": "x", "kind": "tool", "input_schema": {"type": "object"},
                "bindings": [{"profile": PROFILE, "tool": tool}]}),
            )
        };
        assert!(matches!(
            tool_name(&bound("aip_call")),
            Err(ToolNameError::Reserved { .. })
        ));
        assert!(matches!(
            tool_name(&bound("AIP_x")),
            Err(ToolNameError::Reserved { .. })
        ));
        assert!(matches!(
            tool_name(&bound("a b")),
            Err(ToolNameError::Invalid { .. })
        ));
        assert!(matches!(
            tool_name(&bound(&"a".repeat(129))),
            Err(ToolNameError::Invalid { .. })
        ));
        let twin = capability(
            json!({"id": "cap:demo_echo", "name": "x", "kind": "tool", "input_schema": {"type": "object"}}),
        );
        let both = [echo(), twin];
        assert!(matches!(
            ToolIndex::build(&both),
            Err(ToolNameError::Collision { .. })
        ));
    }

    #[test]
    fn version_gates_what_a_tool_description_carries() {
        let cap = echo();
        let old = describe(&cap, "demo_echo", Version::V2024_11_05);
        assert!(old.get("title").is_none() && old.get("outputSchema").is_none());
        assert!(old.get("annotations").is_none() && old.get("execution").is_none());
        let new = describe(&cap, "demo_echo", Version::V2025_11_25);
        assert_eq!(new["title"], "Echo");
        assert_eq!(new["outputSchema"], json!({"type": "object"}));
        assert_eq!(new["execution"]["taskSupport"], "forbidden");
        // No contract: no hints at all (the cautious MCP defaults apply).
        assert!(new.get("annotations").is_none());
    }

    #[test]
    fn keyed_calls_share_an_id_and_unkeyed_calls_follow_the_request() {
        assert_eq!(
            derive_id(&["t", "p", "cap", "k"]),
            derive_id(&["t", "p", "cap", "k"])
        );
        assert_ne!(
            derive_id(&["t", "p", "cap", "k"]),
            derive_id(&["t", "p", "cap", "k2"])
        );
        assert_ne!(derive_id(&["ab", "c"]), derive_id(&["a", "bc"]));
    }
}
