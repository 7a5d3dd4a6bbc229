//! Transactions and compensation (spec 13). An action's `transaction` context is checked at
//! admission (`admit`, below) against the capability's transaction contract and the stored
//! transaction; the action is then linked to the transaction row in its own admission transaction
//! (`aip_store::TransactionLink`), compare-and-set, so exactly one commit owns a plan (13.4).
//!
//! Every later state of a transaction follows from the durable lifecycles of the actions linked to
//! it (`status.rs`): a commit that failed with an uncertain outcome is `outcome_unknown`, and
//! because such an action is never re-run (the worker settles an interrupted mutation as
//! uncertain), the commit is never retried automatically, after a restart or on another node
//! (13.6). Only a reconciliation's definitive answer moves it on: `reconciled` as committed (then
//! compensable), or as not committed (then the plan may be committed again). Compensation is a new
//! governed action of the compensating capability (13.7).

pub(crate) mod admit;
pub(crate) mod reconcile;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod status;

use std::collections::BTreeSet;

use aip_core::{
    ActionTransaction, CompensationMode, DryRunFidelity, IdentityContext, ProviderOperationRef,
    TenantRef, Timestamp, TransactionMode, TransactionPlan,
};
use aip_store::{ActionRecord, TransactionLink, TransactionRecord, TransactionRole};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::admission::ActionRequest;
use crate::caller::Caller;
use crate::error::{RuntimeError, TransactionError};
use crate::events::bare_principal;
use crate::handler::{Compensated, TransactionContext};
use crate::registry::AdmittedCapability;
use crate::runtime::Runtime;
use status::Derived;

/// Longest plan lifetime a handler may declare (7 days).
pub const MAX_PLAN_TTL_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// How long a plan stays committable unless its capability says otherwise (15 minutes).
pub const DEFAULT_PLAN_TTL_MS: u64 = 15 * 60 * 1000;

/// What admission stores with a transactional action (`request.transaction`): everything its
/// execution needs, from trusted state only. The approval policy hash covers it, so an approval
/// for one plan can never authorize another (spec 26.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Slot {
    pub(crate) mode: TransactionMode,
    pub(crate) transaction_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plan_id: Option<String>,
    /// With `plan`: the plan this action makes; with `commit`: the plan it commits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plan: Option<TransactionPlan>,
    /// With `commit`: the canonical hash of `plan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plan_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) operation: Option<ProviderOperationRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) compensates: Option<Compensated>,
    /// With `dry_run`: the fidelity the dry run runs at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fidelity: Option<DryRunFidelity>,
    /// With `reconcile`: the cursor the previous reconciliation returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cursor: Option<String>,
}

impl Slot {
    /// The slot of a `mode` step of `transaction_id`, with nothing else yet.
    pub(crate) fn new(mode: TransactionMode, transaction_id: &str) -> Self {
        Slot {
            mode,
            transaction_id: transaction_id.to_owned(),
            plan_id: None,
            plan: None,
            plan_hash: None,
            operation: None,
            compensates: None,
            fidelity: None,
            cursor: None,
        }
    }

    /// Whether this mode may produce a business side effect (a mutation).
    pub(crate) fn mutates(&self) -> bool {
        !matches!(
            self.mode,
            TransactionMode::DryRun | TransactionMode::Plan | TransactionMode::Reconcile
        )
    }

    /// The handler's view of it.
    pub(crate) fn context(&self) -> TransactionContext {
        TransactionContext {
            mode: self.mode,
            transaction_id: self.transaction_id.clone(),
            plan: (self.mode == TransactionMode::Commit)
                .then(|| self.plan.clone())
                .flatten(),
            operation: self.operation.clone(),
            compensates: self.compensates.clone(),
            reconciliation_cursor: self.cursor.clone(),
        }
    }
}

/// The stored slot of an action, if it is transactional. A slot that does not decode is
/// corruption, never "not transactional".
pub(crate) fn slot_of(record: &ActionRecord) -> Result<Option<Slot>, RuntimeError> {
    Ok(crate::admission::admitted::AdmittedParts::of(record)?.transaction)
}

/// Whether running `record` may produce its capability's side effect: a mutating handler, unless
/// the action is a dry run, a plan or a reconciliation (a slot that does not decode counts as
/// mutating).
pub(crate) fn mutates(capability: Option<&AdmittedCapability>, record: &ActionRecord) -> bool {
    runs_mutation(capability, slot_of(record).ok().flatten().as_ref())
}

/// [`mutates`] for an action whose slot is already decoded.
pub(crate) fn runs_mutation(capability: Option<&AdmittedCapability>, slot: Option<&Slot>) -> bool {
    let handler_mutates = capability.is_none_or(|c| c.handler.support().mutation);
    handler_mutates && slot.is_none_or(Slot::mutates)
}

/// The transaction receipt (spec 18.1's `transaction_*` types) of a step that settled in `state`
/// with `result`, if the step has one: the plan, the dry run, the commit, the compensation, the
/// failure of any of them, and a reconciliation's definitive answer. Spec 18.1's receipt types are
/// a closed set with no `reconciled` member, so a reconciliation that found the operation committed
/// writes `transaction_committed` and one that found it not committed `transaction_failed`, each
/// with `mode: "reconcile"` and the provider's answer; a `pending` answer or a reconciliation that
/// itself failed moves the transaction nowhere and writes none (its result and events say so).
pub(crate) fn receipt_for(
    slot: &Slot,
    state: aip_store::ActionState,
    result: &aip_core::ActionResult,
) -> Option<(aip_core::ReceiptType, Value)> {
    use aip_core::ReceiptType as R;
    use aip_store::ActionState as A;
    let mut body = json!({ "transaction_id": slot.transaction_id, "mode": slot.mode.as_str() });
    if let Some(plan) = &slot.plan_id {
        body["plan_id"] = json!(plan);
    }
    if let Some(hash) = &slot.plan_hash {
        body["plan_hash"] = json!(hash);
    }
    if let Some(operation) = &slot.operation {
        body["provider_operation"] = json!(operation);
    }
    let kind = match (slot.mode, state) {
        (TransactionMode::Reconcile, A::Completed) => {
            let output = result.output.as_ref();
            let kind = match status::reconciled(Some(result))? {
                status::Outcome::Committed(_) => R::TransactionCommitted,
                status::Outcome::NotCommitted => R::TransactionFailed,
                status::Outcome::Pending(..) => return None,
            };
            body["provider_answer"] = json!({
                "outcome": output.and_then(|o| o.get("outcome")),
                "output_hash": output
                    .and_then(|o| o.get("output"))
                    .map(aip_core::canonical::canonical_hash),
            });
            body["uncertain_outcome"] = json!(false);
            kind
        }
        (TransactionMode::Reconcile, _) => return None,
        (TransactionMode::DryRun, A::Completed) => R::TransactionDryRunCompleted,
        (TransactionMode::Plan, A::Completed) => {
            if let Some(plan) = &slot.plan {
                body["plan_hash"] = json!(
                    serde_json::to_value(plan)
                        .ok()
                        .map(|p| aip_core::canonical::canonical_hash(&p))
                );
            }
            R::TransactionPlanned
        }
        (TransactionMode::Compensate, A::Completed) => {
            body["compensation_for"] = json!(slot.compensates.as_ref().map(|c| &c.action_id));
            R::TransactionCompensated
        }
        (_, A::Completed) => R::TransactionCommitted,
        (_, A::Cancelled) => return None,
        _ => {
            let error = result.error.as_ref();
            body["error_code"] = json!(error.map(|e| e.code.clone()));
            body["uncertain_outcome"] = json!(error.is_some_and(|e| e.uncertain_outcome()));
            R::TransactionFailed
        }
    };
    Some((kind, body))
}

/// The provider operation of a settled commit or direct execution (spec 13.6, 19.3): the one its
/// handler reported, else the runtime's. A failure's error keeps it in `details.provider_operation`;
/// a reported one is returned to be recorded on the transaction with the settlement.
pub(crate) fn reported_operation(
    slot: &Slot,
    reported: Option<ProviderOperationRef>,
    result: &mut aip_core::ActionResult,
) -> Option<aip_store::ReportedOperation> {
    if !matches!(
        slot.mode,
        TransactionMode::Commit | TransactionMode::Execute
    ) {
        return None;
    }
    let effective = reported.clone().or_else(|| slot.operation.clone());
    if let (Some(error), Some(operation)) = (result.error.as_mut(), &effective) {
        let mut details = error.details.take().unwrap_or_else(|| json!({}));
        if let Value::Object(map) = &mut details {
            map.insert("provider_operation".into(), json!(operation));
        }
        error.details = Some(details);
    }
    let operation = serde_json::to_value(reported?).ok()?;
    Some(aip_store::ReportedOperation {
        transaction_id: slot.transaction_id.clone(),
        operation,
    })
}

/// What the final lifecycle event of a transactional step says of its transaction.
pub(crate) fn event_data(
    slot: &Slot,
    state: aip_store::ActionState,
    result: &aip_core::ActionResult,
) -> Value {
    let status = status::of_settled(slot.mode, state, Some(result));
    json!({ "transaction": {
        "transaction_id": slot.transaction_id,
        "mode": slot.mode.as_str(),
        "status": status.map(|s| s.as_str()),
    } })
}

/// What admission decided for a transactional action.
#[derive(Debug, Clone)]
pub(crate) struct Admitted {
    pub(crate) slot: Slot,
    pub(crate) link: TransactionLink,
}

/// The outcome of the transaction checks: admit with this link, or refuse, but only once the
/// store has ruled out a re-send or an idempotent replay (which answer with the earlier action).
#[derive(Debug)]
pub(crate) enum Checked {
    /// Not transactional.
    None,
    /// Admit, linked.
    Admit(Box<Admitted>),
    /// Refuse with this error unless the store finds an earlier action that answers the request.
    Refuse(RuntimeError),
}

/// A link that can never be written: an admission carrying it ends as a re-send, an idempotent
/// replay, or a `StateConflict` (then the deferred refusal is returned). Nothing else is admitted.
pub(crate) fn unwritable_link() -> TransactionLink {
    TransactionLink {
        transaction_id: String::new(),
        role: TransactionRole::DryRun,
        expected_version: Some(-1),
        capability: String::new(),
        principal: String::new(),
        plan: None,
        operation: None,
    }
}

impl Runtime {
    /// The transaction checks of `request` (spec 13.1-13.7), reading the stored transaction.
    pub(crate) async fn check_transaction(
        &self,
        caller: &Caller,
        capability: &AdmittedCapability,
        request: &ActionRequest,
        input_hash: &str,
        now: i64,
    ) -> Checked {
        let action = &request.action;
        let context = match &action.transaction {
            Some(t) => t.clone(),
            // A plain call to a transactional capability executes directly, recorded as a
            // transaction (so an unknown outcome can be reconciled).
            None if capability.transaction_contract().is_some() => ActionTransaction {
                mode: TransactionMode::Execute,
                transaction_id: None,
                plan_id: None,
                compensation_for: None,
            },
            None => return Checked::None,
        };
        match self
            .transaction_admission(caller, capability, request, &context, input_hash, now)
            .await
        {
            Ok(admitted) => Checked::Admit(Box::new(admitted)),
            Err(err) => Checked::Refuse(err),
        }
    }

    async fn transaction_admission(
        &self,
        caller: &Caller,
        capability: &AdmittedCapability,
        request: &ActionRequest,
        context: &ActionTransaction,
        input_hash: &str,
        now: i64,
    ) -> Result<Admitted, RuntimeError> {
        let action = &request.action;
        let action_id = action.id.as_str();
        if context.mode == TransactionMode::Compensate {
            return self.admit_compensation(caller, capability, context).await;
        }
        let contract = capability
            .transaction_contract()
            .ok_or(RuntimeError::UnsupportedContext("transaction"))?;
        let declared = contract.supported_modes.contains(&context.mode);
        if !declared || context.mode == TransactionMode::RollbackNotSupported {
            return Err(TransactionError::ModeUnsupported(context.mode.as_str().to_owned()).into());
        }
        let capability_id = capability.capability.id.as_str();
        let link = |role, transaction_id: &str, version| TransactionLink {
            transaction_id: transaction_id.to_owned(),
            role,
            expected_version: version,
            capability: capability_id.to_owned(),
            principal: caller.id.clone(),
            plan: None,
            operation: None,
        };
        let slot = Slot::new;
        match context.mode {
            TransactionMode::DryRun | TransactionMode::Plan => {
                let (transaction_id, version) = self
                    .open_or_join(caller, capability_id, context, false)
                    .await?;
                let role = if context.mode == TransactionMode::Plan {
                    TransactionRole::Plan
                } else {
                    TransactionRole::DryRun
                };
                let mut link = link(role, &transaction_id, version);
                let mut slot = slot(context.mode, &transaction_id);
                if context.mode == TransactionMode::DryRun {
                    slot.fidelity = Some(contract.dry_run_fidelity);
                } else {
                    let plan = self.make_plan(
                        caller,
                        capability,
                        request,
                        &transaction_id,
                        input_hash,
                        now,
                    )?;
                    let expires = plan.expires_at.as_ref().and_then(Timestamp::unix_millis);
                    let value = serde_json::to_value(&plan).map_err(corrupt)?;
                    link.plan = Some((plan.plan_id.clone(), value, expires));
                    slot.plan_id = Some(plan.plan_id.clone());
                    slot.plan = Some(plan);
                }
                Ok(Admitted { slot, link })
            }
            TransactionMode::Execute => {
                if contract.requires_plan_before_commit {
                    return Err(TransactionError::ModeUnsupported(
                        "execute (this capability commits only a plan)".into(),
                    )
                    .into());
                }
                let (transaction_id, version) = self
                    .open_or_join(caller, capability_id, context, true)
                    .await?;
                let operation = operation_for(caller, capability_id, action_id);
                let mut link = link(TransactionRole::Execute, &transaction_id, version);
                link.operation = Some(serde_json::to_value(&operation).map_err(corrupt)?);
                let mut slot = slot(TransactionMode::Execute, &transaction_id);
                slot.operation = Some(operation);
                Ok(Admitted { slot, link })
            }
            TransactionMode::Commit => {
                self.admit_commit(caller, capability, request, context, input_hash, now)
                    .await
            }
            TransactionMode::Reconcile => {
                let record = self.owned_transaction(caller, context).await?;
                if record.capability != capability_id {
                    return Err(TransactionError::Conflict(
                        "a reconciliation runs the transaction's own capability".into(),
                    )
                    .into());
                }
                let derived = self.derive(&record).await?;
                if derived.status != Some(aip_core::TransactionProtocolStatus::OutcomeUnknown) {
                    return Err(TransactionError::NotReconcilable(format!(
                        "the transaction is {}, not outcome_unknown",
                        derived.label()
                    ))
                    .into());
                }
                let operation: ProviderOperationRef = record
                    .operation
                    .clone()
                    .map(serde_json::from_value)
                    .transpose()
                    .map_err(corrupt)?
                    .ok_or_else(|| {
                        TransactionError::NotReconcilable(
                            "no provider operation is recorded".into(),
                        )
                    })?;
                let mut slot = slot(TransactionMode::Reconcile, &record.transaction_id);
                slot.operation = Some(operation);
                // Spec 13.6: continue from the cursor the previous reconciliation returned.
                slot.cursor = derived.reconciliation_cursor.clone();
                Ok(Admitted {
                    slot,
                    link: link(
                        TransactionRole::Reconcile,
                        &record.transaction_id,
                        Some(record.version),
                    ),
                })
            }
            // Refused above.
            TransactionMode::Compensate | TransactionMode::RollbackNotSupported => {
                Err(TransactionError::ModeUnsupported(context.mode.as_str().to_owned()).into())
            }
        }
    }

    /// A new transaction (a fresh id when none is named), or, for a dry run or a plan, the
    /// caller's transaction of this capability that has not been planned or committed yet.
    async fn open_or_join(
        &self,
        caller: &Caller,
        capability_id: &str,
        context: &ActionTransaction,
        fresh_only: bool,
    ) -> Result<(String, Option<i64>), RuntimeError> {
        let Some(id) = context.transaction_id.as_ref() else {
            return Ok((aip_core::generate_with_prefix("txn_"), None));
        };
        let id = id.as_str();
        if id.is_empty() || id.len() > 256 {
            return Err(
                TransactionError::Conflict("transaction ids are 1..=256 bytes".into()).into(),
            );
        }
        match self.store().get_transaction(&caller.tenant, id).await? {
            None => Ok((id.to_owned(), None)),
            Some(record) => {
                let ours = record.principal == caller.id && record.capability == capability_id;
                if fresh_only
                    || !ours
                    || record.plan_id.is_some()
                    || record.commit_action_id.is_some()
                {
                    Err(
                        TransactionError::Conflict(format!("transaction {id} is already in use"))
                            .into(),
                    )
                } else {
                    Ok((id.to_owned(), Some(record.version)))
                }
            }
        }
    }

    /// The transaction `context` names (by id or plan id), if it is the caller's; otherwise
    /// `NotFound`, as for a missing id.
    async fn owned_transaction(
        &self,
        caller: &Caller,
        context: &ActionTransaction,
    ) -> Result<TransactionRecord, RuntimeError> {
        let found = match (&context.transaction_id, &context.plan_id) {
            (Some(id), _) => {
                self.store()
                    .get_transaction(&caller.tenant, id.as_str())
                    .await?
            }
            (None, Some(plan)) => {
                self.store()
                    .transaction_by_plan(&caller.tenant, plan)
                    .await?
            }
            (None, None) => {
                return Err(TransactionError::Conflict(
                    "name the transaction (transaction_id or plan_id)".into(),
                )
                .into());
            }
        };
        let record = found
            .filter(|r| r.principal == caller.id)
            .ok_or(RuntimeError::NotFound("transaction"))?;
        if let (Some(id), Some(plan)) = (&context.transaction_id, &context.plan_id)
            && record.plan_id.as_deref() != Some(plan.as_str())
        {
            return Err(TransactionError::PlanMismatch(format!(
                "plan {plan} is not the plan of transaction {id}"
            ))
            .into());
        }
        Ok(record)
    }

    /// The durable plan of spec 13.3 for a `plan` action.
    fn make_plan(
        &self,
        caller: &Caller,
        capability: &AdmittedCapability,
        request: &ActionRequest,
        transaction_id: &str,
        input_hash: &str,
        now: i64,
    ) -> Result<TransactionPlan, RuntimeError> {
        let action = &request.action;
        let contract = capability.capability.contract.as_ref();
        let ttl = capability
            .handler
            .support()
            .transactions
            .map_or(0, |t| t.plan_ttl_ms)
            .clamp(1, MAX_PLAN_TTL_MS);
        let policy = capability.approval_for(&action.input).cloned();
        let redact = contract.is_none_or(|c| c.data.redaction_required);
        Ok(TransactionPlan {
            plan_id: aip_core::generate_with_prefix("plan_"),
            transaction_id: aip_core::TransactionId::new(transaction_id),
            action_id: action.id.clone(),
            capability_id: action.capability_id.clone(),
            transaction: ActionTransaction {
                mode: TransactionMode::Plan,
                transaction_id: Some(aip_core::TransactionId::new(transaction_id)),
                plan_id: None,
                compensation_for: None,
            },
            planned_by: bare_principal(&caller.id, caller.kind),
            input_hash: input_hash.to_owned(),
            input_snapshot: (!redact).then(|| action.input.clone()),
            predicted_side_effects: contract.map(|c| c.side_effects.clone()).unwrap_or_default(),
            approval_required: policy.is_some(),
            approval_policy: policy,
            compensation: contract.and_then(|c| c.compensation.clone()),
            dry_run_fidelity: capability
                .transaction_contract()
                .map(|c| c.dry_run_fidelity),
            identity: Some(IdentityContext {
                tenant: Some(TenantRef {
                    id: caller.tenant.clone(),
                    system: None,
                }),
                ..IdentityContext::default()
            }),
            created_at: Timestamp::from_unix_millis(now).ok_or_else(|| corrupt("clock"))?,
            expires_at: Timestamp::from_unix_millis(
                now.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)),
            ),
            metadata: Some(json!({ "identity_hash": identity_hash(caller) })),
        })
    }

    /// Spec 13.4: a commit must name a plan that is the caller's, planned, unexpired, unclaimed
    /// (or whose last commit was reconciled as not committed), and that still matches capability,
    /// input, identity, approval policy and transaction context.
    async fn admit_commit(
        &self,
        caller: &Caller,
        capability: &AdmittedCapability,
        request: &ActionRequest,
        context: &ActionTransaction,
        input_hash: &str,
        now: i64,
    ) -> Result<Admitted, RuntimeError> {
        let plan_id = context
            .plan_id
            .as_deref()
            .ok_or_else(|| TransactionError::PlanMismatch("a commit names its plan_id".into()))?;
        let record = self
            .store()
            .transaction_by_plan(&caller.tenant, plan_id)
            .await?
            .filter(|r| r.principal == caller.id)
            .ok_or(RuntimeError::NotFound("plan"))?;
        let plan: TransactionPlan = record
            .plan
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(corrupt)?
            .ok_or_else(|| corrupt("a planned transaction has no plan"))?;
        let mismatch = |what: &str| -> RuntimeError {
            TransactionError::PlanMismatch(format!("the commit's {what} differs from the plan's"))
                .into()
        };
        if plan.capability_id != request.action.capability_id {
            return Err(mismatch("capability"));
        }
        if context
            .transaction_id
            .as_ref()
            .is_some_and(|t| *t != plan.transaction_id)
        {
            return Err(mismatch("transaction context"));
        }
        if plan.input_hash != input_hash {
            return Err(mismatch("input"));
        }
        let planned_identity = plan
            .metadata
            .as_ref()
            .and_then(|m| m.get("identity_hash"))
            .and_then(Value::as_str);
        if plan.planned_by.id.as_str() != caller.id
            || planned_identity != Some(identity_hash(caller).as_str())
        {
            return Err(mismatch("identity"));
        }
        if capability.approval_for(&request.action.input) != plan.approval_policy.as_ref() {
            return Err(mismatch("approval policy"));
        }
        if record.plan_expires_at_ms.is_some_and(|e| e <= now) {
            return Err(TransactionError::PlanExpired.into());
        }
        let derived = self.derive(&record).await?;
        if derived.status.is_none() {
            return Err(TransactionError::Conflict(
                "the plan is still being made; commit it once it is planned".into(),
            )
            .into());
        }
        let committable = match derived.status {
            Some(aip_core::TransactionProtocolStatus::Planned) => true,
            Some(aip_core::TransactionProtocolStatus::Reconciled) => !derived.committed,
            _ => false,
        };
        if !committable {
            return Err(TransactionError::PlanClaimed(format!(
                "the plan's transaction is {}",
                derived.label()
            ))
            .into());
        }
        let operation = operation_for(
            caller,
            capability.capability.id.as_str(),
            request.action.id.as_str(),
        );
        let plan_hash =
            aip_core::canonical::canonical_hash(&serde_json::to_value(&plan).map_err(corrupt)?);
        let transaction_id = plan.transaction_id.as_str().to_owned();
        Ok(Admitted {
            link: TransactionLink {
                transaction_id: transaction_id.clone(),
                role: TransactionRole::Commit,
                expected_version: Some(record.version),
                capability: record.capability.clone(),
                principal: record.principal.clone(),
                plan: None,
                operation: Some(serde_json::to_value(&operation).map_err(corrupt)?),
            },
            slot: Slot {
                plan_id: Some(plan_id.to_owned()),
                plan: Some(plan),
                plan_hash: Some(plan_hash),
                operation: Some(operation),
                ..Slot::new(TransactionMode::Commit, &transaction_id)
            },
        })
    }

    /// Spec 13.7: a compensation runs the compensating capability the committed operation's
    /// contract names, as a new governed action, once the operation is known to have committed.
    async fn admit_compensation(
        &self,
        caller: &Caller,
        capability: &AdmittedCapability,
        context: &ActionTransaction,
    ) -> Result<Admitted, RuntimeError> {
        let target = context
            .compensation_for
            .as_ref()
            .ok_or(TransactionError::NotCompensable(
                "a compensation names compensation_for",
            ))?;
        let (record, role) = self
            .store()
            .transaction_of_action(&caller.tenant, target.as_str())
            .await?
            .filter(|(r, _)| r.principal == caller.id)
            .ok_or(RuntimeError::NotFound("action"))?;
        if !matches!(role, TransactionRole::Commit | TransactionRole::Execute)
            || record.commit_action_id.as_deref() != Some(target.as_str())
        {
            return Err(TransactionError::NotCompensable(
                "the target is not the transaction's commit",
            )
            .into());
        }
        if context
            .transaction_id
            .as_ref()
            .is_some_and(|t| t.as_str() != record.transaction_id)
        {
            return Err(TransactionError::PlanMismatch(
                "compensation_for belongs to another transaction".into(),
            )
            .into());
        }
        let committed_capability =
            self.registry()
                .get(&record.capability)
                .ok_or(TransactionError::NotCompensable(
                    "the committed capability is no longer admitted",
                ))?;
        let compensation = committed_capability
            .capability
            .contract
            .as_ref()
            .and_then(|c| c.compensation.as_ref());
        match compensation.map(|c| c.mode) {
            Some(CompensationMode::RollbackNotSupported) => {
                return Err(TransactionError::RollbackNotSupported.into());
            }
            Some(CompensationMode::Supported | CompensationMode::BestEffort) => {}
            Some(CompensationMode::NotRequired) | None => {
                return Err(TransactionError::NotCompensable(
                    "the committed capability declares no compensation",
                )
                .into());
            }
        }
        let names_us = compensation
            .and_then(|c| c.compensation_capability_id.as_ref())
            .is_some_and(|id| *id == capability.capability.id);
        if !names_us {
            return Err(TransactionError::NotCompensable(
                "this capability is not the declared compensating capability",
            )
            .into());
        }
        let derived = self.derive(&record).await?;
        if !derived.committed {
            return Err(TransactionError::NotCompensable(
                "the operation is not known to have committed",
            )
            .into());
        }
        if derived.compensation_active_or_done {
            return Err(TransactionError::Conflict(
                "a compensation of this operation is running or done".into(),
            )
            .into());
        }
        let committed = self
            .store()
            .get_action(&caller.tenant, target.as_str())
            .await?
            .ok_or(RuntimeError::NotFound("action"))?;
        if let (Some(window), Some(committed_at)) = (
            compensation.and_then(|c| c.compensation_window_ms),
            Some(committed.updated_at_ms),
        ) && committed_at.saturating_add(i64::try_from(window).unwrap_or(i64::MAX))
            < crate::clock::now_ms()
        {
            return Err(
                TransactionError::NotCompensable("the compensation window has passed").into(),
            );
        }
        let output = derived.committed_output.clone();
        let operation = record
            .operation
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(corrupt)?;
        Ok(Admitted {
            link: TransactionLink {
                transaction_id: record.transaction_id.clone(),
                role: TransactionRole::Compensate,
                expected_version: Some(record.version),
                capability: record.capability.clone(),
                principal: record.principal.clone(),
                plan: None,
                operation: None,
            },
            slot: Slot {
                plan_id: record.plan_id.clone(),
                compensates: Some(Compensated {
                    action_id: target.as_str().to_owned(),
                    capability_id: record.capability.clone(),
                    operation,
                    output,
                }),
                ..Slot::new(TransactionMode::Compensate, &record.transaction_id)
            },
        })
    }

    /// The derived state of `record` (see `status.rs`).
    pub(crate) async fn derive(&self, record: &TransactionRecord) -> Result<Derived, RuntimeError> {
        status::derive(self, record).await
    }
}

/// The provider operation a commit runs under: derived from the tenant and the commit's action id,
/// so it is known before dispatch and survives any crash (spec 13.6: reconciliation needs it).
fn operation_for(caller: &Caller, capability_id: &str, action_id: &str) -> ProviderOperationRef {
    let digest =
        aip_core::canonical::sha256_hex(format!("{}\n{action_id}", caller.tenant).as_bytes());
    ProviderOperationRef {
        provider: capability_id.to_owned(),
        operation_id: format!("op_{}", &digest[..32]),
        request_id: None,
    }
}

/// The canonical hash of the trusted identity a plan was made under: principal, kind, tenant,
/// scopes and external account, as configuration bound them.
fn identity_hash(caller: &Caller) -> String {
    let mut scopes: BTreeSet<&str> = BTreeSet::new();
    scopes.extend(caller.scopes.iter().map(String::as_str));
    aip_core::canonical::canonical_hash(&json!({
        "principal": caller.id,
        "kind": caller.kind,
        "tenant": caller.tenant,
        "scopes": scopes,
        "external_account": caller.external_account,
    }))
}

fn corrupt(e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Storage(aip_store::StoreError::Corrupt(format!("transaction: {e}")))
}
