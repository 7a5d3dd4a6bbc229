//! Transaction states (spec 13.5), derived from the durable lifecycles of the actions linked to a
//! transaction: the row says which action plans, owns the commit, reconciles or compensates; each
//! action's own state and result say where that step stands. Nothing here is cached, so a state
//! can never disagree with the actions that produced it, after any crash.

use aip_core::{ActionResult, ProtocolError, TransactionMode, TransactionProtocolStatus as S};
use aip_store::{ActionRecord, ActionState, TransactionRecord};
use serde_json::Value;

use crate::action::result;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// Where a transaction stands.
#[derive(Debug, Clone, Default)]
pub(crate) struct Derived {
    /// The wire status, once there is one (`None` while its first dry run or plan runs).
    pub(crate) status: Option<S>,
    /// The stable label of the view: the status, or `dry_running` / `planning` before it.
    pub(crate) label: String,
    /// Whether the operation is known to have committed (committed, or reconciled as committed).
    pub(crate) committed: bool,
    /// The committed operation's output, when known.
    pub(crate) committed_output: Option<Value>,
    /// Whether a compensation is running, waiting, done, or of unknown outcome (no second one).
    pub(crate) compensation_active_or_done: bool,
    /// The action whose result and receipts stand for the transaction now.
    pub(crate) current_action: Option<String>,
    /// Why it failed, when it did.
    pub(crate) error: Option<ProtocolError>,
    /// With a pending reconciliation: when to ask the provider again, epoch ms.
    pub(crate) reconcile_after_ms: Option<i64>,
    /// With a pending reconciliation: the provider's cursor to continue from (spec 13.6).
    pub(crate) reconciliation_cursor: Option<String>,
}

impl Derived {
    /// The label (`planned`, `outcome_unknown`, ... or `planning`).
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    fn set(&mut self, status: S, action: &ActionRecord) {
        self.status = Some(status);
        self.label = status.as_str().to_owned();
        self.current_action = Some(action.action_id.clone());
    }
}

/// One step's status from its action: what a `transaction_result` for that action reports.
/// `None` while a dry run or plan is still running.
pub(crate) fn of_step(mode: TransactionMode, record: &ActionRecord) -> Option<S> {
    let stored = result::stored(record).ok().flatten();
    of_settled(mode, record.state, stored.as_ref())
}

/// [`of_step`] of an action in `state` with result `stored`.
pub(crate) fn of_settled(
    mode: TransactionMode,
    state: ActionState,
    stored: Option<&ActionResult>,
) -> Option<S> {
    Some(match state {
        ActionState::PendingApproval => S::RequiresHuman,
        ActionState::Completed => match mode {
            TransactionMode::DryRun => S::DryRunCompleted,
            TransactionMode::Plan => S::Planned,
            TransactionMode::Compensate => S::Compensated,
            TransactionMode::Reconcile => match reconciled(stored) {
                Some(Outcome::Pending(..)) | None => S::OutcomeUnknown,
                Some(_) => S::Reconciled,
            },
            _ => S::Committed,
        },
        ActionState::Cancelled => S::Cancelled,
        ActionState::Failed | ActionState::Expired | ActionState::DeadLettered => {
            let uncertain = stored
                .and_then(|r| r.error.as_ref())
                .is_some_and(|e| e.uncertain_outcome());
            match mode {
                TransactionMode::Reconcile => S::OutcomeUnknown,
                _ if uncertain => S::OutcomeUnknown,
                _ => S::Failed,
            }
        }
        _ => match mode {
            TransactionMode::DryRun | TransactionMode::Plan => return None,
            TransactionMode::Reconcile => S::Reconciling,
            TransactionMode::Compensate => S::Compensating,
            _ => S::Committing,
        },
    })
}

/// What a completed reconciliation found (its output's `outcome`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Committed(Option<Value>),
    NotCommitted,
    Pending(Option<i64>, Option<String>),
}

pub(crate) fn reconciled(result: Option<&ActionResult>) -> Option<Outcome> {
    let output = result?.output.as_ref()?;
    match output.get("outcome")?.as_str()? {
        "committed" => Some(Outcome::Committed(output.get("output").cloned())),
        "not_committed" => Some(Outcome::NotCommitted),
        "pending" => Some(Outcome::Pending(
            output.get("reconcile_after_ms").and_then(Value::as_i64),
            output
                .get("cursor")
                .and_then(Value::as_str)
                .map(str::to_owned),
        )),
        _ => None,
    }
}

pub(crate) async fn derive(
    runtime: &Runtime,
    record: &TransactionRecord,
) -> Result<Derived, RuntimeError> {
    let get = |id: Option<&str>| {
        let id = id.map(str::to_owned);
        async move {
            match id {
                Some(id) => runtime
                    .store()
                    .get_action(&record.tenant, &id)
                    .await
                    .map_err(RuntimeError::from),
                None => Ok(None),
            }
        }
    };
    let mut d = Derived::default();
    let error_of = |a: &ActionRecord| result::stored(a).ok().flatten().and_then(|r| r.error);
    if let Some(commit) = get(record.commit_action_id.as_deref()).await? {
        let status = of_step(TransactionMode::Commit, &commit).unwrap_or(S::Committing);
        d.set(status, &commit);
        match status {
            S::Committed => {
                d.committed = true;
                d.committed_output = result::stored(&commit)
                    .ok()
                    .flatten()
                    .and_then(|r| r.output);
            }
            S::Failed | S::OutcomeUnknown => d.error = error_of(&commit),
            _ => {}
        }
        if status == S::OutcomeUnknown
            && let Some(reconcile) = get(record.reconcile_action_id.as_deref()).await?
        {
            let step = of_step(TransactionMode::Reconcile, &reconcile).unwrap_or(S::Reconciling);
            d.set(step, &reconcile);
            match reconciled(result::stored(&reconcile).ok().flatten().as_ref()) {
                Some(Outcome::Committed(output)) if step == S::Reconciled => {
                    d.committed = true;
                    d.committed_output = output;
                    d.error = None;
                }
                Some(Outcome::NotCommitted) if step == S::Reconciled => d.error = None,
                Some(Outcome::Pending(after, cursor)) => {
                    d.reconcile_after_ms = after;
                    d.reconciliation_cursor = cursor;
                }
                _ => {
                    if let Some(e) = error_of(&reconcile) {
                        d.error = Some(e);
                    }
                }
            }
        }
        if d.committed
            && let Some(comp) = get(record.compensation_action_id.as_deref()).await?
        {
            let step = of_step(TransactionMode::Compensate, &comp).unwrap_or(S::Compensating);
            match step {
                S::Compensated | S::Compensating | S::RequiresHuman => {
                    d.compensation_active_or_done = true;
                    d.set(step, &comp);
                }
                // A compensation of unknown outcome is never repeated blindly.
                S::OutcomeUnknown => d.compensation_active_or_done = true,
                // Failed or cancelled: the operation stays committed; another may be tried.
                _ => {}
            }
        }
        return Ok(d);
    }
    if let Some(plan) = get(record.plan_action_id.as_deref()).await? {
        match of_step(TransactionMode::Plan, &plan) {
            Some(status) => {
                d.set(status, &plan);
                if status == S::Failed {
                    d.error = error_of(&plan);
                }
            }
            None => {
                d.label = "planning".into();
                d.current_action = Some(plan.action_id.clone());
            }
        }
        return Ok(d);
    }
    if let Some(dry) = get(record.dry_run_action_id.as_deref()).await? {
        match of_step(TransactionMode::DryRun, &dry) {
            Some(status) => {
                d.set(status, &dry);
                if status == S::Failed {
                    d.error = error_of(&dry);
                }
            }
            None => {
                d.label = "dry_running".into();
                d.current_action = Some(dry.action_id.clone());
            }
        }
        return Ok(d);
    }
    Err(RuntimeError::Storage(aip_store::StoreError::Corrupt(
        format!("transaction {} links no action", record.transaction_id),
    )))
}
