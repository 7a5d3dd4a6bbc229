//! The action queue's job kind: a worker that claims an action's job runs it once, settles what
//! must not run (cancelled before start, deadline passed, an interrupted mutation), and gives up
//! (`dead_lettered`) when attempts run out, on the live node.

use std::sync::Arc;
use std::time::Duration;

use aip_core::ErrorCode;
use aip_store::{ActionRecord, ActionState, ApprovalState, Lease, StoreError, Transition};
use async_trait::async_trait;
use serde_json::json;

use crate::action::ACTION_QUEUE;
use crate::action::result;
use crate::admission::admitted::AdmittedRequest;
use crate::caller::Caller;
use crate::chain::ChainWriter;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::events::{EventKind, action_event};
use crate::runtime::Runtime;
use crate::worker::JobKind;

/// Longest wait before a failed attempt is retried.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Jobs of the `actions` queue.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ActionJobs;

#[async_trait]
impl JobKind for ActionJobs {
    fn queue(&self) -> &'static str {
        ACTION_QUEUE
    }

    fn wake<'r>(&self, runtime: &'r Runtime) -> Option<&'r tokio::sync::Notify> {
        Some(runtime.work_ready())
    }

    async fn run(&self, runtime: &Arc<Runtime>, lease: &Lease) -> Result<(), RuntimeError> {
        runtime.run_action_job(lease).await
    }

    async fn failed(&self, runtime: &Arc<Runtime>, lease: &Lease, error: RuntimeError) {
        let fence = &lease.fence;
        let now = now_ms();
        if lease.attempt < runtime.config().max_attempts.max(1) {
            let backoff = Duration::from_secs(1 << lease.attempt.min(5)).min(MAX_BACKOFF);
            let retry_at = now.saturating_add(i64::try_from(backoff.as_millis()).unwrap_or(0));
            if let Err(err) = runtime
                .store()
                .fail_job(fence, now, Some(retry_at), &error.to_string())
                .await
            {
                tracing::warn!(job = %fence.job_id, error = %err, "failed attempt not recorded; the lease will lapse");
            }
            return;
        }
        // Out of attempts: settle the action now rather than at some later boot. When this fails
        // too (the store is down, or the lease was lost) the sweep settles it later.
        let settled = match lease.action_id.as_deref() {
            Some(action_id) => match runtime.store().get_action(&lease.tenant, action_id).await {
                Ok(Some(record)) if !record.state.is_terminal() => {
                    runtime.settle_unfinishable(&record, Some(lease)).await
                }
                Ok(_) => runtime
                    .store()
                    .complete_job(fence, now)
                    .await
                    .map_err(Into::into),
                Err(err) => Err(err.into()),
            },
            None => runtime
                .store()
                .fail_job(fence, now, None, "job without action")
                .await
                .map(|_| ())
                .map_err(Into::into),
        };
        if let Err(err) = settled {
            tracing::warn!(job = %fence.job_id, error = %err, "exhausted job not settled; the sweep retries");
        }
    }

    async fn sweep(&self, runtime: &Arc<Runtime>) -> Result<(), RuntimeError> {
        runtime.settle_all_unfinishable().await
    }
}

impl Runtime {
    /// Runs one claimed action job.
    async fn run_action_job(&self, lease: &Lease) -> Result<(), RuntimeError> {
        let fence = &lease.fence;
        let Some(action_id) = lease.action_id.as_deref() else {
            self.store()
                .fail_job(fence, now_ms(), None, "job without action")
                .await?;
            return Ok(());
        };
        let Some(record) = self.store().get_action(&lease.tenant, action_id).await? else {
            self.store()
                .fail_job(fence, now_ms(), None, "action missing")
                .await?;
            return Ok(());
        };
        if record.state.is_terminal() {
            return Ok(self.store().complete_job(fence, now_ms()).await?);
        }
        let chain = ChainWriter::resume(&record, self.store()).await?;
        let capability = self.registry().get(&record.capability).cloned();
        // A dry run, plan or reconciliation commits nothing: re-running it is safe.
        let mutation = crate::transaction::mutates(capability.as_deref(), &record);
        // What must not run settles without dispatch.
        let not_run = match (&capability, record.state) {
            (None, _) => Some((
                ActionState::Failed,
                result::failed_with(
                    action_id,
                    ErrorCode::CapabilityNotFound,
                    "capability is no longer admitted",
                ),
            )),
            // Never dispatched (or its handler died with a previous process).
            (Some(_), ActionState::Cancelling) if started(&record) && mutation => Some((
                ActionState::Failed,
                result::uncertain(
                    action_id,
                    "the handler was interrupted while cancelling a mutation",
                ),
            )),
            (Some(_), ActionState::Cancelling) => {
                Some((ActionState::Cancelled, result::cancelled(action_id)))
            }
            // A previous attempt started this mutation and its outcome is unknown: never re-run.
            (Some(_), ActionState::Running) if mutation => Some((
                ActionState::Failed,
                result::uncertain(
                    action_id,
                    "a previous attempt was interrupted; the provider outcome is unknown",
                ),
            )),
            (Some(_), ActionState::Queued | ActionState::Accepted | ActionState::Running)
                if record.deadline_ms.is_some_and(|d| d <= now_ms()) =>
            {
                Some((
                    ActionState::Expired,
                    result::failed_with(
                        action_id,
                        ErrorCode::DeadlineExceeded,
                        "the deadline passed before execution",
                    ),
                ))
            }
            (Some(_), ActionState::Queued) => {
                self.approval_blocks(&record).await?.map(|(code, message)| {
                    (
                        ActionState::Failed,
                        result::failed_with(action_id, code, message),
                    )
                })
            }
            _ => None,
        };
        if let Some((state, result)) = not_run {
            return self
                .finish_without_dispatch(&record, Some(fence), state, result, chain, json!({}))
                .await;
        }
        let Some(capability) = capability else {
            return Err(RuntimeError::Internal("capability checked above"));
        };
        match record.state {
            ActionState::Queued | ActionState::Accepted | ActionState::Running => {
                let record = if record.state == ActionState::Running {
                    record
                } else {
                    let now = now_ms();
                    let event = action_event(
                        EventKind::ActionStarted,
                        &record,
                        json!({ "attempt": lease.attempt }),
                        now,
                    );
                    let transition = Transition {
                        tenant: record.tenant.clone(),
                        action_id: record.action_id.clone(),
                        from: vec![record.state],
                        to: ActionState::Running,
                        result: None,
                        events: vec![event],
                        receipts: Vec::new(),
                        fence: Some(fence.clone()),
                        finish_job: false,
                        now_ms: now,
                        operation: None,
                    };
                    match self.transition_action(transition).await {
                        Ok(r) => r,
                        // Cancelled between claim and start: the next claim settles it.
                        Err(StoreError::StateConflict { .. }) => {
                            return Ok(self.store().release_job(fence, now_ms()).await?);
                        }
                        Err(err) => return Err(err.into()),
                    }
                };
                self.execute(&capability, &record, Some(fence), chain)
                    .await
                    .map(|_| ())
            }
            _ => Ok(self.store().complete_job(fence, now_ms()).await?),
        }
    }

    /// Why an approval-gated action must not be dispatched now (spec 12.5: immediately before
    /// dispatch the approval is re-validated: still approved, not expired, and its policy hash
    /// still matches the stored action's input, identity and capability), or `None` when it may
    /// run or is not gated.
    async fn approval_blocks(
        &self,
        record: &ActionRecord,
    ) -> Result<Option<(ErrorCode, &'static str)>, RuntimeError> {
        let admitted = AdmittedRequest::of(record)?;
        let Some(approval_id) = admitted.approval_id.as_deref() else {
            return Ok(None);
        };
        let Some(approval) = self
            .store()
            .get_approval(&record.tenant, approval_id)
            .await?
        else {
            return Err(RuntimeError::Storage(StoreError::Corrupt(format!(
                "action {} names approval {approval_id}, which is missing",
                record.action_id
            ))));
        };
        let snapshot = crate::approval::stored_request(&approval)?;
        Ok(match approval.state {
            ApprovalState::Approved if now_ms() >= approval.expires_at_ms => Some((
                ErrorCode::ApprovalExpired,
                "the approval expired before the action could be dispatched",
            )),
            ApprovalState::Approved if !crate::approval::governs(&approval, &snapshot, record)? => {
                Some((
                    ErrorCode::PolicyHashMismatch,
                    "the governed action no longer matches what was approved",
                ))
            }
            ApprovalState::Approved => {
                self.revalidate_approved(record, &admitted, &approval, &snapshot)
                    .await?
            }
            ApprovalState::Revoked => Some((
                ErrorCode::ApprovalRevoked,
                "the approval was revoked before the action ran",
            )),
            ApprovalState::Denied => Some((
                ErrorCode::ApprovalDenied,
                "the approval was denied; the action did not run",
            )),
            ApprovalState::Expired => Some((
                ErrorCode::ApprovalExpired,
                "the approval expired; the action did not run",
            )),
            _ => Some((
                ErrorCode::ApprovalClosed,
                "the action is queued but its approval is not granted",
            )),
        })
    }

    /// Spec 12.5 against what holds **now**, not only the stored snapshot: the requester still
    /// exists and may invoke the capability, the capability's current policy for this input is
    /// the one approved (its hash), and the approving principals still have the standing the
    /// policy needs (they exist, hold the roles or memberships, and none holds an excluded role).
    /// Any change fails the action with a typed code; it is never dispatched.
    async fn revalidate_approved(
        &self,
        record: &ActionRecord,
        admitted: &AdmittedRequest,
        approval: &aip_store::ApprovalRecord,
        snapshot: &crate::approval::Snapshot,
    ) -> Result<Option<(ErrorCode, &'static str)>, RuntimeError> {
        let corrupt = |what: &str| {
            RuntimeError::Storage(StoreError::Corrupt(format!(
                "action {}: {what}",
                record.action_id
            )))
        };
        let Some(capability) = self.registry().get(&record.capability).cloned() else {
            return Ok(Some((
                ErrorCode::CapabilityNotFound,
                "capability is no longer admitted",
            )));
        };
        let Some(requester) = self.current_requester(record, admitted) else {
            return Ok(Some((
                ErrorCode::ScopeDenied,
                "the requester is no longer a configured principal; the action did not run",
            )));
        };
        if !requester.may_invoke(&record.capability) {
            return Ok(Some((
                ErrorCode::ScopeDenied,
                "the requester no longer holds a scope to invoke this capability",
            )));
        }
        let action = &admitted.action;
        let mode = crate::handler::Mode::parse(&record.mode).ok_or_else(|| corrupt("mode"))?;
        let subject = crate::admission::policy::PolicySubject {
            caller: &requester,
            capability: &capability,
            action,
            mode,
        };
        let changed = Some((
            ErrorCode::PolicyHashMismatch,
            "the capability's approval policy changed since it was approved; the action did not run",
        ));
        let (policy, excluded_roles) = match self.policy().evaluate(&subject).await {
            Ok(crate::admission::policy::PolicyDecision::RequireApproval {
                policy,
                excluded_roles,
            }) => (*policy, excluded_roles),
            Ok(_) => return Ok(changed),
            Err(refused) => {
                return Ok(Some((
                    refused.code(),
                    "the current policy refuses the requester; the action did not run",
                )));
            }
        };
        let input_hash = record.input_hash.as_deref().unwrap_or_default();
        let now_hash = crate::approval::policy_hash(
            (&policy, &excluded_roles),
            &record.capability,
            input_hash,
            &admitted.requester(record),
            admitted.transaction.as_ref().unwrap_or(&json!(null)),
        );
        if now_hash != approval.policy_hash {
            return Ok(changed);
        }
        // Standing: each approver as the directory knows it now (an embedded runtime without a
        // directory has only the standing recorded with each decision).
        let directory = &self.config().directory;
        if directory.is_empty() {
            return Ok(None);
        }
        let decisions = self
            .store()
            .list_decisions(&record.tenant, &approval.approval_id)
            .await?;
        let mut votes: Vec<crate::approval::Vote> = Vec::new();
        for d in decisions.iter().filter(|d| d.kind == "approved") {
            let Some(keys) = directory.get(&d.approver) else {
                continue;
            };
            let excluded = excluded_roles
                .iter()
                .chain(&snapshot.excluded_roles)
                .any(|r| keys.contains(&format!("role:{r}")));
            if !excluded && !votes.iter().any(|v| v.principal == d.approver) {
                votes.push(crate::approval::Vote {
                    principal: d.approver.clone(),
                    keys: keys.clone(),
                });
            }
        }
        if !crate::approval::satisfied(&policy, &votes) {
            return Ok(Some((
                ErrorCode::ApproverNotEligible,
                "an approver no longer has the standing the policy requires; the action did not run",
            )));
        }
        Ok(None)
    }

    /// The requester of `record` as configured now: from [`RuntimeConfig::principals`] when the
    /// node has an identity configuration (`None` when the requester is no longer in it), else as
    /// admitted (the stored scopes).
    fn current_requester(
        &self,
        record: &ActionRecord,
        admitted: &AdmittedRequest,
    ) -> Option<Caller> {
        let principals = &self.config().principals;
        if !principals.is_empty() {
            return principals
                .get(&record.principal)
                .filter(|c| c.tenant == record.tenant)
                .cloned();
        }
        Some(admitted.owner(record))
    }

    /// Settles an action no job can finish any more (its job is out of attempts or gone): an
    /// interrupted mutation is an uncertain outcome (never re-run), a cancellation that never
    /// started is confirmed, anything else is `dead_lettered`. Under `lease` when the caller holds
    /// the action's job, else unfenced (the transition is compare-and-set either way).
    pub(crate) async fn settle_unfinishable(
        &self,
        record: &ActionRecord,
        lease: Option<&Lease>,
    ) -> Result<(), RuntimeError> {
        let mutation = crate::transaction::mutates(
            self.registry().get(&record.capability).map(|c| &**c),
            record,
        );
        let chain = ChainWriter::resume(record, self.store()).await?;
        let id = &record.action_id;
        let (state, result) = if record.state == ActionState::Cancelling
            && !(started(record) && mutation)
        {
            (ActionState::Cancelled, result::cancelled(id))
        } else if started(record) && mutation {
            (
                ActionState::Failed,
                result::uncertain(
                    id,
                    "the runtime lost this mutation while it was in flight; the provider outcome is unknown",
                ),
            )
        } else {
            (
                ActionState::DeadLettered,
                result::failed_with(
                    id,
                    ErrorCode::DeadLettered,
                    "the action's job ran out of attempts",
                ),
            )
        };
        tracing::warn!(action = %id, state = state.as_str(), "settled an action no job can finish");
        self.finish_without_dispatch(
            record,
            lease.map(|l| &l.fence),
            state,
            result,
            chain,
            json!({ "recovered": true }),
        )
        .await
    }

    /// Settles every action no job can finish any more (boot recovery and the periodic sweep).
    pub(crate) async fn settle_all_unfinishable(&self) -> Result<(), RuntimeError> {
        let now = now_ms();
        let unfinished = self
            .store()
            .list_unfinished_actions(now, now, aip_store::Limit::max())
            .await?;
        for record in unfinished {
            match self.settle_unfinishable(&record, None).await {
                // Another node (or a worker) settled it first.
                Ok(()) | Err(RuntimeError::Storage(StoreError::StateConflict { .. })) => {}
                Err(RuntimeError::Storage(StoreError::Terminal { .. })) => {}
                Err(err) => {
                    tracing::warn!(action = %record.action_id, error = %err, "unfinishable action not settled");
                }
            }
        }
        Ok(())
    }
}

/// Whether a handler may have started for this action (a sync admission starts it at once).
pub(crate) fn started(record: &ActionRecord) -> bool {
    record.state == ActionState::Running
        || (record.mode != "async" && record.state == ActionState::Cancelling)
}
