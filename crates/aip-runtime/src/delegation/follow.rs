//! Following up a parent whose child's outcome was unknown (spec 14.5: "a remote child in unknown
//! state follows reconciliation"). Every parent served by a peer is admitted with a durable timer
//! due just after its deadline. When it fires and the parent ended uncertain
//! (`aip.connector.uncertain_outcome`), the runtime asks the peer about the same child (the
//! handler's `follow_child`: the idempotent delegation request again) and records the child's
//! verified outcome on the parent: an `aip.delegation.reconciled` event and a receipt. The parent's
//! terminal state never changes; the record says what the child did. A child still running, or a
//! peer that does not answer, is asked again with backoff; after its checks run out the parent stays
//! as it was.

use std::sync::Arc;

use aip_core::{ErrorCode, ReceiptType};
use aip_store::{ActionRecord, Lease, NewJob, StoreError};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::action::result;
use crate::chain::ChainWriter;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::events::{EventKind, action_event};
use crate::handler::Reconciliation;
use crate::runtime::Runtime;
use crate::worker::JobKind;

/// Queue of the follow-up timers.
pub(crate) const FOLLOW_QUEUE: &str = "delegation-follow-up";
/// Checks of one parent before the timer gives up (about half an hour with the backoff).
const MAX_CHECKS: u32 = 40;
/// Longest wait between two checks.
const MAX_BACKOFF_MS: i64 = 60_000;
/// How long after the parent's deadline the first check runs.
const AFTER_DEADLINE_MS: i64 = 2_000;

/// The follow-up timer of a parent admitted now with deadline `deadline_ms`.
pub(crate) fn timer(tenant: &str, parent_action_id: &str, deadline_ms: i64) -> NewJob {
    NewJob {
        job_id: aip_core::generate_with_prefix("job_"),
        queue: FOLLOW_QUEUE.into(),
        action_id: Some(parent_action_id.to_owned()),
        tenant: tenant.to_owned(),
        available_at_ms: deadline_ms.saturating_add(AFTER_DEADLINE_MS),
        max_attempts: MAX_CHECKS,
        payload: json!({}),
    }
}

/// Jobs of the follow-up queue.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct DelegationFollowUps;

#[async_trait]
impl JobKind for DelegationFollowUps {
    fn queue(&self) -> &'static str {
        FOLLOW_QUEUE
    }

    async fn run(&self, runtime: &Arc<Runtime>, lease: &Lease) -> Result<(), RuntimeError> {
        runtime.follow_delegation(lease).await
    }

    async fn failed(&self, runtime: &Arc<Runtime>, lease: &Lease, error: RuntimeError) {
        crate::worker::retry_timer(runtime, lease, &error, "delegation follow-up").await;
    }

    async fn sweep(&self, _runtime: &Arc<Runtime>) -> Result<(), RuntimeError> {
        Ok(())
    }
}

impl Runtime {
    async fn follow_delegation(&self, lease: &Lease) -> Result<(), RuntimeError> {
        let store = self.store();
        let now = now_ms();
        let parent = match &lease.action_id {
            Some(id) => store.get_action(&lease.tenant, id).await?,
            None => None,
        };
        let Some(parent) = parent else {
            return Ok(store.complete_job(&lease.fence, now).await?);
        };
        if !parent.state.is_terminal() {
            return self.follow_later(lease, now, None).await;
        }
        let uncertain = result::stored(&parent)?
            .and_then(|r| r.error)
            .is_some_and(|e| e.code == ErrorCode::UncertainOutcome.as_str());
        let capability = self.registry().get(&parent.capability);
        let (true, Some(capability)) = (uncertain, capability) else {
            // A verified outcome (or a capability no longer served): nothing to follow.
            return Ok(store.complete_job(&lease.fence, now).await?);
        };
        let admitted = crate::admission::admitted::AdmittedRequest::of(&parent)?;
        let ctx =
            crate::action::execute::trusted_context(&parent, &admitted, CancellationToken::new())?;
        let input = admitted.action.input;
        match capability.handler.follow_child(&ctx, &input).await {
            Ok(Reconciliation::Committed { output }) => {
                self.record_child_outcome(&parent, "completed", Some(output), now)
                    .await?;
            }
            Ok(Reconciliation::NotCommitted) => {
                self.record_child_outcome(&parent, "not_completed", None, now)
                    .await?;
            }
            Ok(Reconciliation::Pending { retry_after_ms, .. }) => {
                let at = now.saturating_add(i64::try_from(retry_after_ms).unwrap_or(i64::MAX));
                return self.follow_later(lease, now, Some(at)).await;
            }
            Err(e) => {
                tracing::info!(parent = %parent.action_id, error = %e, "delegation follow-up: the peer gave no outcome yet");
                return self.follow_later(lease, now, None).await;
            }
        }
        Ok(store.complete_job(&lease.fence, now).await?)
    }

    /// Looks again later: at `at`, or after a backoff growing with the attempts.
    async fn follow_later(
        &self,
        lease: &Lease,
        now: i64,
        at: Option<i64>,
    ) -> Result<(), RuntimeError> {
        let backoff = (1_000_i64 << lease.attempt.min(6)).min(MAX_BACKOFF_MS);
        let at = at
            .unwrap_or(now.saturating_add(backoff))
            .max(now.saturating_add(1_000));
        self.store()
            .fail_job(
                &lease.fence,
                now,
                Some(at),
                "the delegated child's outcome is not known yet",
            )
            .await?;
        Ok(())
    }

    /// Records the child's verified outcome on the parent, once: an event whose id the parent
    /// determines (a second record is refused as a duplicate), and a receipt on its chain.
    async fn record_child_outcome(
        &self,
        parent: &ActionRecord,
        outcome: &str,
        output: Option<Value>,
        now: i64,
    ) -> Result<(), RuntimeError> {
        let delegation = crate::admission::admitted::AdmittedRequest::of(parent)?.delegation;
        let link = delegation.as_ref();
        let mut data = json!({ "delegation_id": link.map(|d| &d.delegation_id),
                               "child_action_id": link.and_then(|d| d.child_action_id.as_ref()),
                               "peer": link.and_then(|d| d.peer.as_ref()), "outcome": outcome });
        let mut event = action_event(EventKind::DelegationReconciled, parent, data.clone(), now);
        event.event_id = format!(
            "evt_dlgrec_{}",
            &aip_core::canonical::sha256_hex(
                format!("{}\n{}", parent.tenant, parent.action_id).as_bytes()
            )[..32]
        );
        if let Some(output) = output {
            event.data["output"] = output;
        }
        match self.store().append_events(vec![event]).await {
            Ok(_) => {}
            Err(StoreError::Duplicate { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let mut chain = ChainWriter::resume(parent, self.store()).await?;
        data["reconciled"] = json!(true);
        chain.push(ReceiptType::ResultReturned, &self.config().agent, data, now);
        for receipt in chain.take() {
            self.store().append_receipt(receipt).await?;
        }
        Ok(())
    }
}
