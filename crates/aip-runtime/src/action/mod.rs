//! Actions (spec 11): submission after admission (step 10: dispatch or queue), execution under a
//! fenced lease, cancellation, the action queue's job kind and boot recovery.

pub(crate) mod cancel;
pub(crate) mod execute;
pub(crate) mod job;
pub(crate) mod result;

use std::sync::Arc;
use std::time::Instant;

use aip_core::{Ack, AckStatus, Action, ActionId, ActionResult, Envelope, MessageBody};
use aip_store::ActionRecord;
use serde_json::json;

use crate::admission::{ActionRequest, Admission, Existing};
use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::handler::Mode;
use crate::reply::Reply;
use crate::runtime::Runtime;

/// Queue name of queued (async and streaming) actions.
pub const ACTION_QUEUE: &str = "actions";

/// What submitting an action produced (spec 11.4, 11.7).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Submitted {
    /// The final result, with the acknowledgement: `accepted` for a sync action run now, `cached`
    /// when an earlier outcome answers (a re-delivery, or an idempotent replay).
    Result {
        /// The acknowledgement.
        ack: Ack,
        /// The final result.
        result: Box<ActionResult>,
    },
    /// Only an acknowledgement: `queued` for new async or streaming work, `cached` when an
    /// earlier action that is not finished yet answers.
    Ack(Ack),
    /// Admitted to wait for an approval (spec 12.2): nothing runs until it is granted.
    AwaitingApproval {
        /// The acknowledgement (`accepted`, naming the approval in `queue`).
        ack: Ack,
        /// The approval the action waits for.
        approval_id: String,
    },
}

impl Runtime {
    /// Admits `request` from `caller` (spec 11.3 steps 3-9) and dispatches or queues it (step 10).
    /// A sync action runs in a task of its own: the caller going away (a dropped connection, a
    /// dropped future) does not cancel it, and its result stays readable (spec 20.1).
    pub async fn submit_action(
        self: &Arc<Self>,
        caller: &Caller,
        request: ActionRequest,
    ) -> Result<Submitted, RuntimeError> {
        let runtime = Arc::clone(self);
        let caller = caller.clone();
        tokio::spawn(async move { runtime.submit_detached(&caller, &request).await })
            .await
            .unwrap_or_else(|join| {
                tracing::error!(error = %join, "action submission task failed");
                Err(RuntimeError::Internal("the action submission task failed"))
            })
    }

    async fn submit_detached(
        self: &Arc<Self>,
        caller: &Caller,
        request: &ActionRequest,
    ) -> Result<Submitted, RuntimeError> {
        let started = Instant::now();
        if self.is_draining() {
            return Err(RuntimeError::Draining);
        }
        let action = &request.action;
        if let Err(limited) = self.rate_limits().check(caller) {
            let err = limited.refusal(limited.bucket);
            return Err(self
                .audit_limit_refusal(caller, err, Some(action.capability_id.as_str()))
                .await);
        }
        let admission = match self.admit_action(caller, request).await {
            Ok(admission) => admission,
            Err(err @ RuntimeError::QuotaExceeded { .. }) => {
                return Err(self
                    .audit_limit_refusal(caller, err, Some(action.capability_id.as_str()))
                    .await);
            }
            // A security refusal of an action is audited, whatever transport or profile sent it.
            Err(err) => {
                let data = serde_json::json!({ "capability_id": action.capability_id });
                let ids = (Some(action.id.as_str()), request.session_id.as_deref());
                return Err(self
                    .audit_refusal(caller, "action.denied", err, data, ids)
                    .await);
            }
        };
        let admitted = match admission {
            Admission::Admitted(admitted) => admitted,
            Admission::Existing { original, why } => {
                metrics::counter!("aip_actions_cached_total").increment(1);
                return self.existing(caller, action, original, why).await;
            }
        };
        let mode = admitted.mode;
        metrics::counter!("aip_actions_admitted_total", "mode" => mode.as_str()).increment(1);
        if let Some(approval_id) = admitted.approval_id {
            // Waits durably for its approval; a worker runs it once it is granted (spec 12.5).
            metrics::counter!("aip_approvals_requested_total").increment(1);
            return Ok(Submitted::AwaitingApproval {
                ack: Ack {
                    action_id: action.id.clone(),
                    status: AckStatus::Accepted,
                    reason: Some(format!("awaiting approval {approval_id}")),
                    retry_after_ms: None,
                    queue: Some(
                        json!({ "name": crate::approval::APPROVAL_QUEUE, "approval_id": approval_id }),
                    ),
                },
                approval_id,
            });
        }
        if mode != Mode::Sync {
            self.notify_work();
            return Ok(Submitted::Ack(Ack {
                action_id: action.id.clone(),
                status: AckStatus::Queued,
                reason: None,
                retry_after_ms: None,
                queue: Some(json!({ "name": ACTION_QUEUE })),
            }));
        }
        let lease = admitted
            .lease
            .ok_or(RuntimeError::Internal("sync admission returned no lease"))?;
        let result = self
            .execute(
                &admitted.capability,
                &admitted.record,
                Some(&lease.fence),
                admitted.chain,
            )
            .await?;
        metrics::histogram!("aip_action_duration_seconds", "mode" => "sync")
            .record(started.elapsed().as_secs_f64());
        Ok(Submitted::Result {
            ack: Ack {
                action_id: action.id.clone(),
                status: AckStatus::Accepted,
                reason: None,
                retry_after_ms: None,
                queue: None,
            },
            result: Box::new(result),
        })
    }

    /// An earlier action answers: never dispatch again (spec 11.4 `cached`). A sync request waits
    /// (bounded) for the final result, as its original would have.
    async fn existing(
        &self,
        caller: &Caller,
        action: &Action,
        original: ActionRecord,
        why: Existing,
    ) -> Result<Submitted, RuntimeError> {
        let sync = action.mode.is_none_or(|m| m == aip_core::ActionMode::Sync);
        let mut record = original;
        if sync && !record.state.is_terminal() {
            record = self
                .wait_terminal(caller, record, self.config().max_wait_ms)
                .await?;
        }
        let reason = match why {
            Existing::Redelivery => {
                "re-delivery of an admitted action: its current outcome is returned and nothing was dispatched again"
            }
            Existing::Replay => {
                "idempotent replay: the original outcome is returned and nothing was dispatched"
            }
        };
        let ack = Ack {
            action_id: ActionId::new(record.action_id.clone()),
            status: AckStatus::Cached,
            reason: Some(reason.into()),
            retry_after_ms: None,
            queue: None,
        };
        match result::stored(&record)? {
            Some(result) if sync => Ok(Submitted::Result {
                ack,
                result: Box::new(result),
            }),
            _ => Ok(Submitted::Ack(ack)),
        }
    }

    /// Boot recovery: settles actions no job can finish any more. Everything else, sync work
    /// included, holds a job: while its lease lives its node is running it (so it is left alone,
    /// even when another node on the same database is that node), and once the lease lapses a worker
    /// takes it over under a new fence, settling an interrupted mutation as uncertain rather than
    /// running it twice.
    pub(crate) async fn recover(&self) -> Result<(), RuntimeError> {
        self.settle_all_unfinishable().await
    }
}

/// The native reply to an action envelope: the final result (200, the ack in `extensions.ack`),
/// a `queued` ack (202) or a `cached` ack (200).
pub(crate) fn reply(request: &Envelope, submitted: Submitted) -> Reply {
    match submitted {
        Submitted::Result { ack, result } => {
            let mut reply = Reply::done(request, MessageBody::ActionResult(*result));
            reply.envelope.extensions = Some(json!({ "ack": ack }));
            reply
        }
        Submitted::Ack(ack) if ack.status == AckStatus::Queued => {
            Reply::accepted(request, MessageBody::Ack(ack))
        }
        Submitted::Ack(ack) => Reply::done(request, MessageBody::Ack(ack)),
        Submitted::AwaitingApproval { ack, approval_id } => {
            let mut reply = Reply::accepted(request, MessageBody::Ack(ack));
            reply.envelope.extensions =
                Some(json!({ "approval": { "approval_id": approval_id, "status": "pending" } }));
            reply
        }
    }
}
