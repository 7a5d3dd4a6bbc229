//! The approval expiry timer: a durable job per approval, due at its expiry, run by the generic
//! leased worker. When it fires on a still-pending approval, the approval expires and its action
//! ends without ever being dispatched (spec 12.4 `expired`); otherwise it only completes.

use std::sync::Arc;

use aip_core::{ErrorCode, ReceiptType};
use aip_store::{
    ActionState, ApprovalState, ApprovalWrite, Lease, NewApproval, NewDecision, NewJob, StoreError,
};
use async_trait::async_trait;
use serde_json::json;

use crate::approval::APPROVAL_QUEUE;
use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::runtime::Runtime;
use crate::worker::JobKind;

/// Decision id of the runtime's expiry decision (one per approval).
pub(crate) const EXPIRY_DECISION: &str = "expiry";

/// The timer job of a new approval, due at its expiry.
pub(crate) fn timer(
    runtime: &Runtime,
    caller: &Caller,
    action_id: &str,
    approval: &NewApproval,
) -> NewJob {
    NewJob {
        job_id: aip_core::generate_with_prefix("job_"),
        queue: APPROVAL_QUEUE.into(),
        action_id: Some(action_id.to_owned()),
        tenant: caller.tenant.clone(),
        available_at_ms: approval.expires_at_ms,
        max_attempts: runtime.config().max_attempts.max(1),
        payload: json!({ "approval_id": approval.approval_id }),
    }
}

/// Jobs of the `approvals` queue.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ApprovalTimers;

#[async_trait]
impl JobKind for ApprovalTimers {
    fn queue(&self) -> &'static str {
        APPROVAL_QUEUE
    }

    async fn run(&self, runtime: &Arc<Runtime>, lease: &Lease) -> Result<(), RuntimeError> {
        runtime.expire_approval(lease).await
    }

    async fn failed(&self, runtime: &Arc<Runtime>, lease: &Lease, error: RuntimeError) {
        // Retried while attempts remain; an approval whose timer cannot run stays pending and is
        // still refused at decision time and before dispatch once expired.
        crate::worker::retry_timer(runtime, lease, &error, "approval").await;
    }

    async fn sweep(&self, _runtime: &Arc<Runtime>) -> Result<(), RuntimeError> {
        Ok(())
    }
}

impl Runtime {
    /// Runs one claimed expiry timer.
    async fn expire_approval(&self, lease: &Lease) -> Result<(), RuntimeError> {
        let fence = &lease.fence;
        let Some(approval_id) = lease.payload.get("approval_id").and_then(|v| v.as_str()) else {
            self.store()
                .fail_job(fence, now_ms(), None, "timer without approval")
                .await?;
            return Ok(());
        };
        let Some(record) = self
            .store()
            .get_approval(&lease.tenant, approval_id)
            .await?
        else {
            self.store()
                .fail_job(fence, now_ms(), None, "approval missing")
                .await?;
            return Ok(());
        };
        let now = now_ms();
        if !record.state.is_open() {
            return Ok(self.store().complete_job(fence, now).await?);
        }
        if now < record.expires_at_ms {
            // Due early (the clocks of two nodes differ): come back at the expiry.
            self.store()
                .fail_job(fence, now, Some(record.expires_at_ms), "not yet due")
                .await?;
            return Ok(());
        }
        let action = self
            .store()
            .get_action(&record.tenant, &record.action_id)
            .await?
            .ok_or_else(|| {
                RuntimeError::Storage(StoreError::Corrupt(format!(
                    "approval {approval_id} without its action"
                )))
            })?;
        let agent = &self.config().agent;
        let transition = self
            .end_transition(
                &action,
                crate::approval::decide::Ending {
                    receipt: ReceiptType::ApprovalExpired,
                    receipt_data: json!({ "approval_id": approval_id, "expires_at_ms": record.expires_at_ms }),
                    code: ErrorCode::ApprovalExpired,
                    message: "the approval expired before it was granted; the action did not run",
                    from: vec![ActionState::PendingApproval],
                    to: ActionState::Expired,
                },
                now,
            )
            .await?;
        let write = ApprovalWrite {
            tenant: record.tenant.clone(),
            approval_id: record.approval_id.clone(),
            expected_version: record.version,
            decision: Some(NewDecision {
                decision_id: EXPIRY_DECISION.into(),
                approver: agent.id.as_str().to_owned(),
                kind: "expired".into(),
                decided_at_ms: now,
                body: json!({ "approval_id": approval_id, "decision": "expired", "approver": agent, "decided_at": aip_core::Timestamp::from_unix_millis(now) }),
            }),
            to: Some(ApprovalState::Expired),
            action: Some(transition),
            job: None,
            receipts: Vec::new(),
            events: Vec::new(),
            finish_job: Some(fence.clone()),
            audit: Vec::new(),
            now_ms: now,
        };
        match self.write_approval(write).await {
            Ok(_) => {
                metrics::counter!("aip_approvals_expired_total").increment(1);
                Ok(())
            }
            // Decided (or cancelled) meanwhile: the timer has nothing left to do.
            Err(StoreError::StateConflict { .. } | StoreError::Terminal { .. }) => {
                Ok(self.store().complete_job(fence, now_ms()).await?)
            }
            Err(err) => Err(err.into()),
        }
    }
}
