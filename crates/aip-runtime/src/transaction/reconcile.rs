//! Automatic reconciliation (spec 13.6): every commit (or direct execution) is admitted with a
//! durable timer on its own queue. When it fires and the commit's outcome is unknown, the runtime
//! admits a `reconcile` step as the commit's principal, exactly as a client would (same admission,
//! same receipts); a `pending` answer, a commit still running, or a reconciliation already in
//! flight reschedules the timer with backoff. It never retries the commit: only a definitive
//! reconciliation moves the transaction on. When its attempts run out the transaction stays
//! `outcome_unknown` and can still be reconciled on request.

use std::sync::Arc;

use aip_core::{ActionTransaction, TransactionMode, TransactionProtocolStatus as S};
use aip_store::{Lease, NewJob};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::admission::ActionRequest;
use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::runtime::Runtime;
use crate::worker::JobKind;

/// Queue of the reconciliation timers.
pub(crate) const RECONCILE_QUEUE: &str = "transaction-reconcile";
/// Checks of one commit before the timer gives up (with backoff up to [`MAX_BACKOFF_MS`]: about
/// half an hour of trying).
const MAX_CHECKS: u32 = 40;
/// Longest wait between two checks.
const MAX_BACKOFF_MS: i64 = 60_000;

/// The reconciliation timer of a commit admitted now, or `None` when automatic reconciliation is
/// off (`reconcile_after_ms` = 0).
pub(crate) fn timer(
    runtime: &Runtime,
    tenant: &str,
    commit_action_id: &str,
    transaction_id: &str,
    now: i64,
) -> Option<NewJob> {
    let after = runtime.config().reconcile_after_ms;
    (after > 0).then(|| NewJob {
        job_id: aip_core::generate_with_prefix("job_"),
        queue: RECONCILE_QUEUE.into(),
        action_id: Some(commit_action_id.to_owned()),
        tenant: tenant.to_owned(),
        available_at_ms: now.saturating_add(i64::try_from(after).unwrap_or(i64::MAX)),
        max_attempts: MAX_CHECKS,
        payload: json!({ "transaction_id": transaction_id }),
    })
}

/// Jobs of the reconciliation queue.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ReconcileTimers;

#[async_trait]
impl JobKind for ReconcileTimers {
    fn queue(&self) -> &'static str {
        RECONCILE_QUEUE
    }

    async fn run(&self, runtime: &Arc<Runtime>, lease: &Lease) -> Result<(), RuntimeError> {
        runtime.check_commit(lease).await
    }

    async fn failed(&self, runtime: &Arc<Runtime>, lease: &Lease, error: RuntimeError) {
        crate::worker::retry_timer(runtime, lease, &error, "reconciliation").await;
    }

    async fn sweep(&self, _runtime: &Arc<Runtime>) -> Result<(), RuntimeError> {
        Ok(())
    }
}

/// What a timer does next.
enum Next {
    /// Nothing is left to reconcile (or the commit was superseded).
    Done,
    /// Look again later (not before `not_before`, epoch ms, when the provider said so).
    Later(Option<i64>),
    /// The outcome is unknown and nobody is reconciling it: reconcile now.
    Reconcile,
}

impl Runtime {
    /// Runs one claimed reconciliation timer.
    async fn check_commit(self: &Arc<Self>, lease: &Lease) -> Result<(), RuntimeError> {
        let fence = &lease.fence;
        let mut next = self.next_step(lease).await?;
        if matches!(next, Next::Reconcile) {
            self.reconcile_as_owner(lease).await?;
            // What the reconciliation found decides whether to look again.
            next = self.next_step(lease).await?;
        }
        let not_before = match next {
            Next::Done => return Ok(self.store().complete_job(fence, now_ms()).await?),
            Next::Later(not_before) => not_before,
            // The reconciliation just run left the outcome unknown with nobody on it (its own
            // run failed): look again later.
            Next::Reconcile => None,
        };
        let now = now_ms();
        let backoff = (1_000_i64 << lease.attempt.min(6)).min(MAX_BACKOFF_MS);
        let at = not_before.unwrap_or(0).max(now.saturating_add(backoff));
        self.store()
            .fail_job(fence, now, Some(at), "the outcome is not known yet")
            .await?;
        Ok(())
    }

    /// Where the timer's commit stands.
    async fn next_step(&self, lease: &Lease) -> Result<Next, RuntimeError> {
        let (Some(commit), Some(transaction_id)) = (
            lease.action_id.as_deref(),
            lease.payload.get("transaction_id").and_then(Value::as_str),
        ) else {
            return Ok(Next::Done);
        };
        let Some(record) = self
            .store()
            .get_transaction(&lease.tenant, transaction_id)
            .await?
        else {
            return Ok(Next::Done);
        };
        // A later commit of the plan has its own timer.
        if record.commit_action_id.as_deref() != Some(commit) {
            return Ok(Next::Done);
        }
        let derived = self.derive(&record).await?;
        Ok(match derived.status {
            Some(S::OutcomeUnknown) => match derived.reconcile_after_ms {
                // A pending answer asked for time: respect it.
                Some(after) if after > now_ms() => Next::Later(Some(after)),
                _ => Next::Reconcile,
            },
            Some(S::Committing | S::Reconciling | S::RequiresHuman) | None => Next::Later(None),
            Some(_) => Next::Done,
        })
    }

    /// Admits a `reconcile` step as the commit's principal, with the scopes it was admitted under.
    async fn reconcile_as_owner(self: &Arc<Self>, lease: &Lease) -> Result<(), RuntimeError> {
        let (Some(commit_id), Some(transaction_id)) = (
            lease.action_id.as_deref(),
            lease.payload.get("transaction_id").and_then(Value::as_str),
        ) else {
            return Ok(());
        };
        let Some(commit) = self.store().get_action(&lease.tenant, commit_id).await? else {
            return Ok(());
        };
        let caller = owner_of(&commit)?;
        let context = ActionTransaction {
            mode: TransactionMode::Reconcile,
            transaction_id: Some(aip_core::TransactionId::new(transaction_id)),
            plan_id: None,
            compensation_for: None,
        };
        let action: aip_core::Action = serde_json::from_value(json!({
            "id": aip_core::generate_with_prefix("act_"),
            "capability_id": commit.capability,
            "input": {},
            "transaction": context,
        }))
        .map_err(|e| {
            RuntimeError::Storage(aip_store::StoreError::Corrupt(format!(
                "reconciliation of {commit_id}: {e}"
            )))
        })?;
        let request = ActionRequest {
            action,
            message_id: aip_core::generate_with_prefix("msg_"),
            session_id: None,
            correlation_id: commit.correlation_id.clone(),
            trace: None,
            idempotency_key: None,
            delegation: None,
            checked: None,
        };
        match self.submit_action(&caller, request).await {
            Ok(_) => Ok(()),
            // Another reconciliation got there first, or the state moved: the next look decides.
            Err(RuntimeError::Transaction(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }
}

/// The caller a stored action was admitted as: principal, kind, tenant, scopes, issuer and external
/// account, all from the trusted admission record.
fn owner_of(action: &aip_store::ActionRecord) -> Result<Caller, RuntimeError> {
    let mut caller = crate::admission::admitted::AdmittedRequest::of(action)?.owner(action);
    caller.issuer = crate::caller::RUNTIME_ISSUER.into();
    Ok(caller)
}
