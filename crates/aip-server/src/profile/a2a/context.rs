//! A2A contexts as native sessions (notes 6.5: "task `contextId` ↔ AIP session"). A message that
//! names a `contextId` runs in a session of the caller: the caller's own native session when the
//! id is one, otherwise a session of this profile opened on first use, its id derived from
//! (tenant, principal, contextId) and the client's name kept in its data, so the same name joins
//! the same session and another principal's name never reaches it. A task outside any session is a
//! context of its own (contextId = task id); naming that id continues it. Contexts group tasks
//! only: they never create parent/child links (native delegation stays authoritative).

use std::collections::HashMap;

use aip_core::ActionStatus;
use aip_runtime::RuntimeError;
use serde_json::{Value, json};

use super::rpc::{self, A2aError};
use super::{Call, PROFILE};

/// Longest accepted `contextId`.
const MAX_CONTEXT_ID: usize = 200;
/// Where a profile session keeps the client's context name.
const NAME_KEY: &str = "context_id";

/// Checks a `contextId` from a request.
pub fn parse(value: &Value) -> Result<&str, A2aError> {
    match value.as_str() {
        Some(id)
            if !id.is_empty()
                && id.len() <= MAX_CONTEXT_ID
                && id.bytes().all(|b| (0x20..0x7f).contains(&b)) =>
        {
            Ok(id)
        }
        _ => Err(A2aError::invalid_params(format!(
            "contextId is printable ASCII of 1 to {MAX_CONTEXT_ID} characters"
        ))),
    }
}

/// The session id a context name maps to for the caller (nothing is opened).
async fn session_of(call: &Call<'_>, context_id: &str) -> Result<String, A2aError> {
    match call
        .app
        .runtime
        .owned_session(call.caller, context_id)
        .await
    {
        Ok(session) => Ok(session.session_id),
        Err(RuntimeError::NotFound(_)) => Ok(crate::profile::derived_id(
            "sess_a2a",
            b"aip.a2a.context.v1",
            &[
                call.caller.tenant.as_str(),
                call.caller.id.as_str(),
                context_id,
            ],
        )),
        Err(other) => Err(rpc::native(&other)),
    }
}

/// The session a message naming `context_id` runs in, opened on first use.
pub async fn join(call: &Call<'_>, context_id: &str) -> Result<String, A2aError> {
    let session_id = session_of(call, context_id).await?;
    if session_id == context_id {
        return Ok(session_id);
    }
    call.app
        .runtime
        .named_profile_session(
            call.caller,
            PROFILE,
            &session_id,
            json!({ NAME_KEY: context_id }),
        )
        .await
        .map(|s| s.session_id)
        .map_err(|e| match e {
            RuntimeError::NotFound(_) => A2aError::invalid_params(format!(
                "context {context_id} has expired: start a new context"
            )),
            other => rpc::native(&other),
        })
}

/// `ListTasks` of one context: the session to list, and the task that opened the context when it
/// is a task of its own (contextId = its id, outside any session).
pub async fn listed(
    call: &Call<'_>,
    context_id: &str,
) -> Result<(String, Option<ActionStatus>), A2aError> {
    let session_id = session_of(call, context_id).await?;
    let origin = match call
        .app
        .runtime
        .action_status(call.caller, context_id, true, false, None)
        .await
    {
        Ok(view) if view.session_id.is_none() => Some(view),
        Ok(_) | Err(RuntimeError::NotFound(_)) => None,
        Err(other) => return Err(rpc::native(&other)),
    };
    Ok((session_id, origin))
}

/// The `contextId` of tasks, each session read once.
#[derive(Default)]
pub struct Contexts {
    known: HashMap<String, String>,
}

impl Contexts {
    /// The context of `view`: its action id outside a session; the client's name of a session
    /// this profile opened; the session id of a native session.
    pub async fn of(&mut self, call: &Call<'_>, view: &ActionStatus) -> Result<String, A2aError> {
        let Some(session) = &view.session_id else {
            return Ok(view.action_id.as_str().to_owned());
        };
        if let Some(known) = self.known.get(session.as_str()) {
            return Ok(known.clone());
        }
        let record = call
            .app
            .runtime
            .store()
            .get_session(&call.caller.tenant, session.as_str())
            .await
            .map_err(|e| rpc::native(&RuntimeError::from(e)))?;
        let name = record
            .as_ref()
            .and_then(|s| s.data.pointer(&format!("/profile_data/{NAME_KEY}")))
            .and_then(Value::as_str)
            .unwrap_or(session.as_str())
            .to_owned();
        self.known.insert(session.as_str().to_owned(), name.clone());
        Ok(name)
    }
}

/// The context of one task.
pub async fn of(call: &Call<'_>, view: &ActionStatus) -> Result<String, A2aError> {
    Contexts::default().of(call, view).await
}
