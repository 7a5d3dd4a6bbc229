//! Native actions as A2A tasks (notes 6.5): the task id is the action id, the state is projected
//! from the native lifecycle, artifacts come from the result; reads are the native read model's,
//! scoped to the caller, so another principal's task is "not found".

use aip_core::{
    ActionLifecycleState, ActionListRequest, ActionResult, ActionResultStatus, ActionStatus,
    MessagePart,
};
use aip_runtime::RuntimeError;
use serde_json::{Map, Value, json};

use super::Call;
use super::rpc::{self, A2aError};

/// Longest page of `ListTasks`.
const MAX_PAGE: u32 = 100;

/// The A2A state of a task: its native state, with a policy refusal (a denied, expired or revoked
/// approval, a scope or delegation refusal) as `TASK_STATE_REJECTED` rather than a failure.
pub fn state(view: &ActionStatus) -> &'static str {
    let refused = view
        .result
        .as_ref()
        .and_then(|r| r.error.as_ref())
        .is_some_and(|e| e.category == aip_core::ErrorCategory::Policy);
    if refused && view.state == ActionLifecycleState::Failed {
        return REJECTED;
    }
    match view.state {
        ActionLifecycleState::Accepted | ActionLifecycleState::Queued => "TASK_STATE_SUBMITTED",
        ActionLifecycleState::PendingApproval => "TASK_STATE_INPUT_REQUIRED",
        ActionLifecycleState::Completed => "TASK_STATE_COMPLETED",
        ActionLifecycleState::Cancelled => "TASK_STATE_CANCELED",
        ActionLifecycleState::Failed
        | ActionLifecycleState::Expired
        | ActionLifecycleState::DeadLettered => "TASK_STATE_FAILED",
        // Running, streaming, cancelling, and an uncertain outcome still being reconciled.
        _ => "TASK_STATE_WORKING",
    }
}

/// The state of a task the agent refused to perform.
pub const REJECTED: &str = "TASK_STATE_REJECTED";

/// Whether a stream of this task ends here: a terminal state, or one that waits for a person.
pub fn ends_stream(native: ActionLifecycleState) -> bool {
    native == ActionLifecycleState::PendingApproval
        || matches!(
            native,
            ActionLifecycleState::Completed
                | ActionLifecycleState::Cancelled
                | ActionLifecycleState::Failed
                | ActionLifecycleState::Expired
                | ActionLifecycleState::DeadLettered
        )
}

/// The task's `status`: its state, when it last changed, and an agent message for the states a
/// client must act on or understand (an approval to decide, a failure).
pub fn status(view: &ActionStatus, context_id: &str) -> Value {
    let mut status = json!({ "state": state(view), "timestamp": view.updated_at });
    let action_id = view.action_id.as_str();
    let note = |text: String, metadata: Value| {
        json!({ "messageId": format!("{action_id}-{}", view.state.as_str()), "role": "ROLE_AGENT",
                "taskId": action_id, "contextId": context_id, "parts": [{ "text": text }], "metadata": metadata })
    };
    if let Some(approval) = &view.approval_id
        && view.state == ActionLifecycleState::PendingApproval
    {
        status["message"] = note(
            format!("awaiting approval {approval}: decide it through the AIP approval API"),
            json!({ "aip.approval_id": approval }),
        );
    } else if let Some(error) = view.result.as_ref().and_then(|r| r.error.as_ref()) {
        status["message"] = note(
            format!("{}: {}", error.code, error.message),
            json!({ "aip.error": error }),
        );
    } else if view.state == ActionLifecycleState::Unknown {
        status["message"] = note(
            "the outcome is uncertain and is being reconciled".into(),
            json!({}),
        );
    }
    status
}

/// The artifacts of a completed result: the output as one `data` part (its own artifact) and the
/// result's text parts.
pub fn artifacts(action_id: &str, result: &ActionResult) -> Vec<Value> {
    if result.status != ActionResultStatus::Completed {
        return Vec::new();
    }
    let mut parts: Vec<Value> = Vec::new();
    if let Some(output) = &result.output {
        parts.push(json!({ "data": output, "mediaType": "application/json" }));
    }
    parts.extend(result.message.iter().filter_map(|part| match part {
        MessagePart::Text { text, .. } => Some(json!({ "text": text })),
        _ => None,
    }));
    if parts.is_empty() {
        return Vec::new();
    }
    vec![json!({ "artifactId": format!("{action_id}-result"), "name": "result", "parts": parts })]
}

/// A native action as an A2A `Task` of context `context_id` (see [`super::context`]).
pub fn task(view: &ActionStatus, context_id: &str) -> Value {
    let action_id = view.action_id.as_str();
    let mut task = json!({
        "id": action_id,
        "contextId": context_id,
        "status": status(view, context_id),
        "metadata": {
            "aip.action_id": action_id,
            "aip.state": view.state.as_str(),
            "aip.capability_id": view.capability_id,
        },
    });
    if let Some(result) = &view.result {
        let artifacts = artifacts(action_id, result);
        if !artifacts.is_empty() {
            task["artifacts"] = Value::Array(artifacts);
        }
    }
    task
}

/// A task whose admission policy refused it: `TASK_STATE_REJECTED` with the native error. Nothing
/// was admitted, so nothing is recorded (`aip.recorded: false`).
pub fn rejected(
    (action_id, context_id): (&str, &str),
    capability_id: &str,
    error: &aip_core::ProtocolError,
) -> Value {
    json!({
        "id": action_id,
        "contextId": context_id,
        "status": {
            "state": REJECTED,
            "timestamp": aip_core::Timestamp::now(),
            "message": { "messageId": format!("{action_id}-rejected"), "role": "ROLE_AGENT",
                "taskId": action_id, "contextId": context_id,
                "parts": [{ "text": format!("{}: {}", error.code, error.message) }],
                "metadata": { "aip.error": error } },
        },
        "metadata": { "aip.action_id": action_id, "aip.capability_id": capability_id, "aip.recorded": false },
    })
}

/// The current view of a task the caller may read.
pub async fn view(call: &Call<'_>, id: &str) -> Result<ActionStatus, A2aError> {
    call.app
        .runtime
        .action_status(call.caller, id, true, false, None)
        .await
        .map_err(|e| match e {
            RuntimeError::NotFound(_) => A2aError::task_not_found(),
            other => rpc::native(&other),
        })
}

/// `GetTask`.
pub async fn get(call: &Call<'_>, params: &Map<String, Value>) -> Result<Value, A2aError> {
    let id = rpc::string(params, "id")?;
    let view = view(call, id).await?;
    Ok(task(&view, &super::context::of(call, &view).await?))
}

/// `ListTasks`: the caller's own tasks (every native action it owns, in the native list order),
/// paged by the native opaque cursor. Filters the native read model cannot apply exactly are refused.
pub async fn list(call: &Call<'_>, params: &Map<String, Value>) -> Result<Value, A2aError> {
    for unsupported in ["status", "statusTimestampAfter"] {
        if params.get(unsupported).is_some_and(|v| !v.is_null()) {
            return Err(A2aError::invalid_params(format!(
                "ListTasks does not filter by {unsupported}"
            )));
        }
    }
    let page_size = match params.get("pageSize") {
        None | Some(Value::Null) => 50,
        Some(v) => v
            .as_f64()
            .filter(|n| n.fract() == 0.0 && (1.0..=f64::from(MAX_PAGE)).contains(n))
            .map(|n| n as u32)
            .ok_or_else(|| A2aError::invalid_params(format!("pageSize must be 1..={MAX_PAGE}")))?,
    };
    let cursor = params
        .get("pageToken")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    // One context: its session's tasks, after the task that opened it (first page only).
    let (session_id, origin) = match params.get("contextId") {
        None | Some(Value::Null) => (None, None),
        Some(Value::String(s)) if s.is_empty() => (None, None),
        Some(id) => {
            let (session, origin) =
                super::context::listed(call, super::context::parse(id)?).await?;
            (Some(session), origin.filter(|_| cursor.is_none()))
        }
    };
    let request = ActionListRequest {
        state: None,
        capability_id: None,
        session_id: session_id.map(aip_core::SessionId::new),
        principal_id: Some(aip_core::PrincipalId::new(call.caller.id.clone())),
        approval_id: None,
        transaction_id: None,
        tenant_id: None,
        cursor,
        limit: Some(page_size),
        include_results: params
            .get("includeArtifacts")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        include_receipts: false,
    };
    let page = call
        .app
        .runtime
        .read_action_list(call.caller, &request)
        .await
        .map_err(|e| rpc::native(&e))?;
    let mut contexts = super::context::Contexts::default();
    let mut tasks = Vec::with_capacity(page.actions.len() + 1);
    for view in origin.iter().chain(&page.actions) {
        tasks.push(task(view, &contexts.of(call, view).await?));
    }
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": page.cursor.unwrap_or_default(),
        "pageSize": page_size,
        "totalSize": page.total_size,
    }))
}

/// `CancelTask`: the native cancel; the task as it stands afterwards.
pub async fn cancel(call: &Call<'_>, params: &Map<String, Value>) -> Result<Value, A2aError> {
    let id = rpc::string(params, "id")?;
    match call
        .app
        .runtime
        .cancel(call.caller, id, Some("A2A CancelTask"))
        .await
    {
        Ok(_) => {}
        Err(RuntimeError::NotFound(_)) => return Err(A2aError::task_not_found()),
        Err(err @ (RuntimeError::Terminal(_) | RuntimeError::NotCancellable)) => {
            return Err(A2aError::not_cancelable(err.to_string()));
        }
        Err(err) => return Err(rpc::native(&err)),
    }
    // A cancellation the handler confirms settles shortly; answer once it has (bounded).
    let waited = call
        .app
        .runtime
        .action_status(
            call.caller,
            id,
            true,
            false,
            Some(call.app.runtime.max_wait_ms().min(5_000)),
        )
        .await
        .map_err(|e| rpc::native(&e))?;
    Ok(task(&waited, &super::context::of(call, &waited).await?))
}
