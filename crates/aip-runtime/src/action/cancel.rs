//! Cancellation (spec 11.8): intent is recorded durably, the handler is signalled (on this node
//! directly, on another through its lease renewal), and `cancelled` is reported only once the handler
//! (or, for work that never started, the runtime as its owner) confirms.

use aip_core::{ActionStatus, Cancel, CancelTarget, Envelope, MessageBody};
use aip_store::{ActionState, StoreError, Transition};
use serde_json::json;

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::events::{EventKind, action_event};
use crate::reply::Reply;
use crate::runtime::Runtime;

impl Runtime {
    /// Requests cancellation of one action `caller` may cancel.
    pub async fn cancel(
        &self,
        caller: &Caller,
        action_id: &str,
        reason: Option<&str>,
    ) -> Result<ActionStatus, RuntimeError> {
        let mut record = self.visible_action(caller, action_id).await?;
        if !caller.may_cancel(&record.tenant, &record.principal) {
            return Err(RuntimeError::CancelDenied("this action"));
        }
        if record.state.is_terminal() {
            return Err(RuntimeError::Terminal(record.state.as_str().to_owned()));
        }
        // Nothing was dispatched: the runtime itself confirms, whatever the handler supports.
        if record.state == ActionState::PendingApproval {
            match self.cancel_pending_approval(&record).await {
                Ok(()) => {
                    self.record_audit(
                        caller,
                        "action.cancel_requested",
                        now_ms(),
                        json!({ "action_id": record.action_id, "approval_pending": true }),
                        (Some(&record.action_id), record.session_id.as_deref()),
                    )
                    .await?;
                    return self
                        .action_status(caller, action_id, false, false, None)
                        .await;
                }
                // A decision or the timer moved it first: cancel it as it now stands.
                Err(RuntimeError::Storage(
                    StoreError::StateConflict { .. } | StoreError::Terminal { .. },
                )) => {
                    record = self.visible_action(caller, action_id).await?;
                    if record.state.is_terminal() {
                        return Err(RuntimeError::Terminal(record.state.as_str().to_owned()));
                    }
                }
                Err(err) => return Err(err),
            }
        }
        let capability = self
            .registry()
            .get(&record.capability)
            .cloned()
            .ok_or(RuntimeError::NotCancellable)?;
        if !capability.supports_cancel() {
            return Err(RuntimeError::NotCancellable);
        }
        if record.state != ActionState::Cancelling {
            let now = now_ms();
            let event = action_event(
                EventKind::ActionCancelRequested,
                &record,
                json!({ "requested_by": caller.id, "reason": reason }),
                now,
            );
            let transition = Transition {
                tenant: record.tenant.clone(),
                action_id: record.action_id.clone(),
                from: vec![
                    ActionState::Accepted,
                    ActionState::Queued,
                    ActionState::Running,
                ],
                to: ActionState::Cancelling,
                result: None,
                events: vec![event],
                receipts: Vec::new(),
                fence: None,
                finish_job: false,
                now_ms: now,
                operation: None,
            };
            match self.transition_action(transition).await {
                Ok(_) => {}
                Err(StoreError::Terminal { state }) => return Err(RuntimeError::Terminal(state)),
                Err(StoreError::StateConflict { actual }) if actual == "cancelling" => {}
                Err(StoreError::StateConflict { actual }) => {
                    return Err(RuntimeError::Terminal(actual));
                }
                Err(err) => return Err(err.into()),
            }
            self.record_audit(
                caller,
                "action.cancel_requested",
                now,
                json!({ "action_id": record.action_id }),
                (Some(&record.action_id), record.session_id.as_deref()),
            )
            .await?;
        }
        if let Some(handler) = self
            .running()
            .get(&(record.tenant.clone(), record.action_id.clone()))
        {
            handler.token.cancel();
        }
        self.notify_work();
        self.action_status(caller, action_id, false, false, None)
            .await
    }
}

/// Serves `aip.core.v1.cancel`: one action, or every cancellable action of a session.
pub(crate) async fn serve(
    runtime: &Runtime,
    caller: &Caller,
    envelope: &Envelope,
    cancel: &Cancel,
) -> Result<Reply, RuntimeError> {
    match &cancel.target {
        CancelTarget::Action(id) => {
            let status = runtime
                .cancel(caller, id.as_str(), cancel.reason.as_deref())
                .await?;
            Ok(Reply::accepted(envelope, MessageBody::ActionStatus(status)))
        }
        CancelTarget::Session(id) => Ok(runtime
            .cancel_session(caller, id.as_str(), cancel.reason.as_deref())
            .await?
            .reply(envelope)),
    }
}
