//! MCP tasks (2025-11-25 only): a task-augmented `tools/call` is a queued native action whose id is
//! the task id; `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` project the native
//! lifecycle and read model, scoped by the same visibility as every native read.

use std::sync::Arc;

use aip_core::{ActionListRequest, PrincipalId};
use aip_runtime::{Caller, Runtime, RuntimeError};
use aip_store::{ActionRecord, ActionState};
use serde_json::{Map, Value, json};

use super::rpc::{INTERNAL_ERROR, INVALID_PARAMS};
use super::tools::CallOutcome;

/// Polling interval suggested to clients, ms.
const POLL_INTERVAL_MS: u64 = 1000;
/// The `_meta` key tying a message to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The MCP status of a native state.
fn status(state: ActionState) -> &'static str {
    match state {
        ActionState::PendingApproval => "input_required",
        ActionState::Completed => "completed",
        ActionState::Cancelled => "cancelled",
        ActionState::Failed | ActionState::Expired | ActionState::DeadLettered => "failed",
        // Unknown is an uncertain outcome still being settled: not a terminal answer.
        _ => "working",
    }
}

fn rfc3339(ms: i64) -> Value {
    aip_core::Timestamp::from_unix_millis(ms).map_or(Value::Null, |t| json!(t))
}

/// A native action as an MCP `Task`.
pub fn task(record: &ActionRecord) -> Value {
    let mut task = json!({
        "taskId": record.action_id,
        "status": status(record.state),
        "createdAt": rfc3339(record.created_at_ms),
        "lastUpdatedAt": rfc3339(record.updated_at_ms),
        // Native actions and their results are retained; nothing expires them.
        "ttl": null,
        "pollInterval": POLL_INTERVAL_MS,
    });
    if record.state == ActionState::PendingApproval {
        task["statusMessage"] = json!(
            "awaiting approval; decide it with aip_approval_decide or the native approval API"
        );
    } else if record.state == ActionState::Unknown {
        task["statusMessage"] = json!("the outcome is uncertain and is being reconciled");
    }
    task
}

fn task_id(params: &Map<String, Value>) -> Result<&str, (i64, String)> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or((INVALID_PARAMS, "taskId is required".to_owned()))
}

fn read_error(err: RuntimeError) -> (i64, String) {
    match err {
        RuntimeError::NotFound(_) => (INVALID_PARAMS, "unknown task".to_owned()),
        other => (INTERNAL_ERROR, other.to_string()),
    }
}

/// `tasks/get`.
pub async fn get(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Map<String, Value>,
) -> CallOutcome {
    let record = runtime
        .visible_action(caller, task_id(params)?)
        .await
        .map_err(read_error)?;
    Ok(task(&record))
}

/// `tasks/cancel`: a terminal task cannot be cancelled (-32602, as MCP requires).
pub async fn cancel(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Map<String, Value>,
) -> CallOutcome {
    let id = task_id(params)?;
    let record = runtime
        .visible_action(caller, id)
        .await
        .map_err(read_error)?;
    if record.state.is_terminal() {
        return Err((
            INVALID_PARAMS,
            format!("task {id} is already {}", status(record.state)),
        ));
    }
    match runtime
        .cancel(
            caller,
            id,
            Some("cancelled by the MCP client (tasks/cancel)"),
        )
        .await
    {
        Ok(_) => {}
        Err(RuntimeError::NotCancellable) => {
            return Err((
                INVALID_PARAMS,
                format!("task {id} cannot be cancelled: its capability does not support it"),
            ));
        }
        Err(RuntimeError::Terminal(_)) => {}
        Err(err) => return Err((INTERNAL_ERROR, err.to_string())),
    }
    let record = runtime
        .visible_action(caller, id)
        .await
        .map_err(read_error)?;
    Ok(task(&record))
}

/// `tasks/list`: the caller's own actions, newest pages by the native cursor.
pub async fn list(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Map<String, Value>,
) -> CallOutcome {
    let request = ActionListRequest {
        state: None,
        capability_id: None,
        session_id: None,
        principal_id: Some(PrincipalId::new(caller.id.clone())),
        approval_id: None,
        transaction_id: None,
        tenant_id: None,
        cursor: params
            .get("cursor")
            .and_then(Value::as_str)
            .map(str::to_owned),
        limit: None,
        include_results: false,
        include_receipts: false,
    };
    let page = runtime
        .read_action_list(caller, &request)
        .await
        .map_err(|e| match e {
            RuntimeError::InvalidQuery(m) => (INVALID_PARAMS, m.to_owned()),
            other => (INTERNAL_ERROR, other.to_string()),
        })?;
    let mut tasks = Vec::with_capacity(page.actions.len());
    for view in &page.actions {
        if let Ok(record) = runtime
            .visible_action(caller, view.action_id.as_str())
            .await
        {
            tasks.push(task(&record));
        }
    }
    let mut result = json!({ "tasks": tasks });
    if let Some(cursor) = page.cursor.filter(|_| !page.actions.is_empty()) {
        result["nextCursor"] = json!(cursor);
    }
    Ok(result)
}

/// The `_meta` of a message about `task_id`.
pub fn related(task_id: &str) -> Value {
    json!({ RELATED_TASK: { "taskId": task_id } })
}

/// `tasks/result`: the task's `CallToolResult` once it is terminal (waiting as a tool call would).
pub async fn result(
    runtime: &Arc<Runtime>,
    state: &super::McpState,
    caller: &Caller,
    version: super::Version,
    params: &Map<String, Value>,
) -> CallOutcome {
    let id = task_id(params)?;
    runtime
        .visible_action(caller, id)
        .await
        .map_err(read_error)?;
    let mut answer = super::tools::outcome(runtime, state, caller, id, version).await?;
    answer["_meta"][RELATED_TASK] = json!({ "taskId": id });
    Ok(answer)
}
