//! The transactional demo (spec 13), usable with no configuration: `cap:demo:payment` pays through a
//! simulated provider whose ledger lives in the store's application records (so every effect is
//! observable), and `cap:demo:refund` compensates a payment as a governed action of its own.
//!
//! The provider keys each payment by the runtime's provider operation id, so a commit is idempotent
//! at the provider and a reconciliation finds it after any crash; it writes under the worker's lease
//! fence, so a worker whose lease was superseded can never pay. The optional `test_outcome` input
//! makes the provider misbehave on purpose: `commit_then_timeout` pays and then reports no answer
//! (an uncertain outcome that did commit), `timeout_before_commit` reports no answer without paying
//! (an uncertain outcome that did not). `hold_ms` delays the commit (for lease tests).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use aip_core::{Capability, DryRunFidelity, ErrorCode, ProviderOperationRef, TransactionMode};
use aip_store::{AppRecord, Store, StoreError};
use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    ActionHandler, HandlerError, HandlerOutput, HandlerSupport, Mode, Reconciliation,
    TransactionSupport, TrustedContext,
};
use crate::registry::CapabilityEntry;

/// Id of the transactional demo payment.
pub const PAYMENT: &str = "cap:demo:payment";
/// Id of the payment's compensating refund.
pub const REFUND: &str = "cap:demo:refund";
/// Id of the read-only view of the simulated provider's ledger.
pub const LEDGER_READ: &str = "cap:demo:ledger";
/// Most payments and refunds one ledger read lists (each, newest last).
pub const LEDGER_READ_LIMIT: u32 = 100;
/// The simulated provider's ledger of payments (application records, keyed by operation id).
pub const PAYMENTS: &str = "demo.payments";
/// The simulated provider's refunds (keyed by the refunded payment).
pub const REFUNDS: &str = "demo.refunds";
/// The simulated provider's name in the operation references it reports.
pub const LEDGER: &str = "demo-ledger";
/// Payments of at least this many minor units are committed only once an approver approved the
/// commit (spec 26.2).
pub const PAYMENT_APPROVAL_MINOR: u64 = 100_000;
/// What the simulated account holds: larger payments fail for insufficient funds.
pub const ACCOUNT_BALANCE_MINOR: u64 = 10_000_000;
/// Longest `hold_ms`.
pub const MAX_HOLD_MS: u64 = 60_000;
/// How long a payment plan stays committable.
pub const PLAN_TTL_MS: u64 = crate::transaction::DEFAULT_PLAN_TTL_MS;

/// The payment and refund capabilities with their handlers over `store`.
pub fn capabilities(store: &Arc<dyn Store>) -> Vec<CapabilityEntry> {
    let mut entries = Vec::new();
    let decoded = [
        (
            payment_capability(),
            Arc::new(PaymentHandler::new(Arc::clone(store))) as Arc<dyn ActionHandler>,
        ),
        (
            refund_capability(),
            Arc::new(RefundHandler {
                store: Arc::clone(store),
            }),
        ),
        (
            ledger_capability(),
            Arc::new(LedgerHandler {
                store: Arc::clone(store),
            }),
        ),
    ];
    for (value, handler) in decoded {
        match serde_json::from_value::<Capability>(value) {
            Ok(capability) => {
                let refund = capability.id.as_str() == REFUND;
                let approval_tiers = if capability.id.as_str() == PAYMENT {
                    payment_tiers()
                } else {
                    Vec::new()
                };
                entries.push(CapabilityEntry {
                    capability,
                    handler,
                    approval_tiers,
                    approval_excluded_roles: Vec::new(),
                    // The refund runs only as the compensation of a payment (whose large commits
                    // are approved); the contract says compensation needs no approval of its own.
                    allow_without_approval: refund,
                });
            }
            // Fixed literals: a failure is a wire-model change, caught by the demo tests.
            Err(err) => tracing::error!(%err, "demo payment capability does not decode"),
        }
    }
    entries
}

/// The manifest entry of `cap:demo:payment`.
pub fn payment_capability() -> Value {
    json!({
        "id": PAYMENT, "name": "Pay", "kind": "tool", "risk": "high", "stability": "stable",
        "description": "Pays through a simulated provider: dry run (full simulation), plan, commit, reconcile; compensated by cap:demo:refund. Commits from 100000 minor units need an approver.",
        "input_schema": { "type": "object", "properties": {
            "amount_minor": { "type": "integer", "minimum": 1, "maximum": 1_000_000_000_000u64 },
            "to": { "type": "string", "minLength": 1, "maxLength": 200 },
            "memo": { "type": "string", "maxLength": 500 },
            "test_outcome": { "enum": ["commit_then_timeout", "timeout_before_commit"] },
            "hold_ms": { "type": "integer", "minimum": 0, "maximum": MAX_HOLD_MS } },
            "required": ["amount_minor", "to"], "additionalProperties": false },
        "output_schema": { "type": "object", "required": ["payment_id", "amount_minor", "fee_minor", "to"] },
        "contract": {
            "side_effects": ["write", "financial"],
            "idempotency": { "requirement": "optional", "collision_behavior": "reject_conflict", "key_scope": "tenant" },
            "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": false, "expected_completion": "any", "retry_safety": "safe_with_idempotency_key" },
            "data": { "sensitivity": "confidential", "contains_pii": false, "redaction_required": false },
            "transaction": { "supported_modes": ["execute", "dry_run", "plan", "commit", "reconcile"],
                             "requires_plan_before_commit": false, "dry_run_fidelity": "full_simulation" },
            "compensation": { "mode": "supported", "compensation_capability_id": REFUND,
                              "compensation_window_ms": 7 * 24 * 60 * 60 * 1000u64, "requires_approval": false },
        },
    })
}

/// The manifest entry of `cap:demo:ledger`: what the simulated provider paid and refunded in the
/// caller's tenant, so a user sees the effects of payments and compensations without the database.
pub fn ledger_capability() -> Value {
    json!({
        "id": LEDGER_READ, "name": "Read the payment ledger", "kind": "tool", "risk": "low", "stability": "stable",
        "description": "Lists what the simulated provider of cap:demo:payment paid and refunded in the caller's tenant: their counts, the first 100 of each, and the amounts of those listed, in minor units.",
        "input_schema": { "type": "object", "additionalProperties": false },
        "output_schema": { "type": "object", "required": ["payments", "refunds", "paid_minor", "refunded_minor"] },
        "contract": {
            "side_effects": ["read"],
            "idempotency": { "requirement": "unsupported", "collision_behavior": "reject_conflict", "key_scope": "principal" },
            "execution": { "supports_sync": true, "supports_async": false, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": true, "expected_completion": "sync", "retry_safety": "safe" },
            "data": { "sensitivity": "confidential", "contains_pii": false, "redaction_required": false },
        },
    })
}

/// `cap:demo:ledger`: reads the provider's payments and refunds of the caller's tenant.
pub struct LedgerHandler {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for LedgerHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerHandler").finish_non_exhaustive()
    }
}

#[async_trait]
impl ActionHandler for LedgerHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync]),
            cancellable: false,
            mutation: false,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        _input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let unavailable = |_| HandlerError::Failed {
            code: ErrorCode::DemoStoreUnavailable.as_str().into(),
            message: "the provider's ledger is unavailable".into(),
            retryable: true,
        };
        let limit = aip_store::Limit::new(LEDGER_READ_LIMIT).map_err(unavailable)?;
        let mut out = serde_json::Map::new();
        for (collection, key, total) in [
            (PAYMENTS, "payments", "paid_minor"),
            (REFUNDS, "refunds", "refunded_minor"),
        ] {
            let count = self
                .store
                .count_records(collection, &ctx.tenant)
                .await
                .map_err(unavailable)?;
            let records: Vec<Value> = self
                .store
                .list_records(collection, &ctx.tenant, limit)
                .await
                .map_err(unavailable)?
                .into_iter()
                .map(|r| r.body)
                .collect();
            // Totals over the listed records; `count` says whether the list is the whole ledger.
            let sum: u64 = records
                .iter()
                .filter_map(|r| r.get("amount_minor").and_then(Value::as_u64))
                .fold(0, u64::saturating_add);
            out.insert(format!("{key}_count"), json!(count));
            out.insert(key.into(), Value::Array(records));
            out.insert(total.into(), json!(sum));
        }
        Ok(HandlerOutput {
            output: Value::Object(out),
            message: Vec::new(),
        })
    }
}

/// The manifest entry of `cap:demo:refund`.
pub fn refund_capability() -> Value {
    json!({
        "id": REFUND, "name": "Refund a payment", "kind": "tool", "risk": "high", "stability": "stable",
        "description": "Refunds one payment of cap:demo:payment; runs only as its compensation (transaction mode compensate, compensation_for: the payment's action). Needs an idempotency key.",
        "input_schema": { "type": "object", "properties": {
            "reason": { "type": "string", "maxLength": 500 } },
            "additionalProperties": false },
        "output_schema": { "type": "object", "required": ["refund_id", "payment_id", "amount_minor"] },
        "contract": {
            "side_effects": ["write", "financial"],
            "idempotency": { "requirement": "required", "collision_behavior": "reject_conflict", "key_scope": "tenant" },
            "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": false, "expected_completion": "any", "retry_safety": "safe_with_idempotency_key" },
            "data": { "sensitivity": "confidential", "contains_pii": false, "redaction_required": false },
        },
    })
}

/// Commits of large payments need one approver (role `approver`, not the requester).
fn payment_tiers() -> Vec<crate::approval::ApprovalTier> {
    super::demo::demo_tier(
        &format!("amount_minor >= {PAYMENT_APPROVAL_MINOR}"),
        json!({
            "required": true,
            "reason": "large payments are approved by an approver",
            "approver_selector": { "type": "role", "name": "approver" },
            "rule": { "operator": "role", "name": "approver" },
            "minimum_distinct_principals": 1,
            "separation_of_duties": { "requester_must_differ": true },
            "ttl_ms": 24 * 60 * 60 * 1000,
            "evidence_requirements": ["input_snapshot", "policy_decision"],
            "policy_version": "demo-payment-1",
        }),
    )
}

/// `cap:demo:payment` over the simulated provider.
#[derive(Clone)]
pub struct PaymentHandler {
    store: Arc<dyn Store>,
    plan_ttl_ms: u64,
}

impl std::fmt::Debug for PaymentHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaymentHandler").finish_non_exhaustive()
    }
}

impl PaymentHandler {
    /// A payment handler whose provider ledger is in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self::with_plan_ttl(store, PLAN_TTL_MS)
    }

    /// [`PaymentHandler::new`] whose plans stay committable `plan_ttl_ms`.
    pub fn with_plan_ttl(store: Arc<dyn Store>, plan_ttl_ms: u64) -> Self {
        Self { store, plan_ttl_ms }
    }
}

fn failed(code: ErrorCode, message: impl Into<String>) -> HandlerError {
    HandlerError::Failed {
        code: code.as_str().into(),
        message: message.into(),
        retryable: false,
    }
}

/// The provider's quote: amount, fee (1%, at least 1) and total; funds checked.
fn quote(input: &Value) -> Result<(u64, u64, String), HandlerError> {
    let amount = input
        .get("amount_minor")
        .and_then(Value::as_u64)
        .ok_or_else(|| failed(ErrorCode::DemoInvalidInput, "amount_minor is required"))?;
    let to = input
        .get("to")
        .and_then(Value::as_str)
        .ok_or_else(|| failed(ErrorCode::DemoInvalidInput, "to is required"))?
        .to_owned();
    let fee = (amount / 100).max(1);
    if amount.saturating_add(fee) > ACCOUNT_BALANCE_MINOR {
        return Err(failed(
            ErrorCode::DemoInsufficientFunds,
            format!("the account holds {ACCOUNT_BALANCE_MINOR} minor units"),
        ));
    }
    Ok((amount, fee, to))
}

#[async_trait]
impl ActionHandler for PaymentHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: false,
            mutation: true,
            transactions: Some(TransactionSupport {
                modes: BTreeSet::from([
                    TransactionMode::Execute,
                    TransactionMode::DryRun,
                    TransactionMode::Plan,
                    TransactionMode::Commit,
                    TransactionMode::Reconcile,
                ]),
                dry_run_fidelity: DryRunFidelity::FullSimulation,
                plan_ttl_ms: self.plan_ttl_ms,
            }),
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let Some(tx) = &ctx.transaction else {
            return Err(failed(
                ErrorCode::TransactionModeUnsupported,
                "payments run under a transaction context",
            ));
        };
        let (amount, fee, to) = quote(input)?;
        match tx.mode {
            // Full simulation: everything a commit would check and charge, nothing written.
            TransactionMode::DryRun => Ok(HandlerOutput {
                output: json!({ "would_charge_minor": amount + fee, "amount_minor": amount, "fee_minor": fee, "to": to }),
                message: Vec::new(),
            }),
            TransactionMode::Plan => Ok(HandlerOutput {
                output: json!({ "total_minor": amount + fee, "amount_minor": amount, "fee_minor": fee, "to": to }),
                message: Vec::new(),
            }),
            TransactionMode::Commit | TransactionMode::Execute => {
                let operation = tx.operation.as_ref().ok_or_else(|| {
                    failed(
                        ErrorCode::Internal,
                        "a commit runs under a provider operation",
                    )
                })?;
                self.pay(ctx, input, operation, (amount, fee, to)).await
            }
            other => Err(failed(
                ErrorCode::TransactionModeUnsupported,
                format!("payments do not run in mode {}", other.as_str()),
            )),
        }
    }

    async fn reconcile(
        &self,
        ctx: &TrustedContext,
        operation: &ProviderOperationRef,
    ) -> Result<Reconciliation, HandlerError> {
        match self
            .store
            .get_record(PAYMENTS, &ctx.tenant, &operation.operation_id)
            .await
        {
            Ok(Some(payment)) => Ok(Reconciliation::Committed {
                output: payment.body,
            }),
            Ok(None) => Ok(Reconciliation::NotCommitted),
            Err(_) => Ok(Reconciliation::Pending {
                retry_after_ms: 5_000,
                cursor: None,
            }),
        }
    }
}

impl PaymentHandler {
    async fn pay(
        &self,
        ctx: &TrustedContext,
        input: &Value,
        operation: &ProviderOperationRef,
        (amount, fee, to): (u64, u64, String),
    ) -> Result<HandlerOutput, HandlerError> {
        let test_outcome = input.get("test_outcome").and_then(Value::as_str);
        if let Some(hold) = input.get("hold_ms").and_then(Value::as_u64) {
            tokio::time::sleep(Duration::from_millis(hold.min(MAX_HOLD_MS))).await;
        }
        if test_outcome == Some("timeout_before_commit") {
            return Err(HandlerError::UncertainOutcome(
                "the provider did not answer (the payment was never sent)".into(),
            ));
        }
        // The provider accepts the request and names it: reported before the outcome is known, so
        // a commit that then times out still carries the provider's own reference.
        ctx.provider_operation.report(ProviderOperationRef {
            provider: LEDGER.into(),
            operation_id: operation.operation_id.clone(),
            request_id: Some(format!(
                "req_{}",
                &aip_core::canonical::sha256_hex(ctx.action_id.as_bytes())[..16]
            )),
        });
        let tx = ctx.transaction.as_ref();
        let body = json!({
            "payment_id": operation.operation_id,
            "amount_minor": amount,
            "fee_minor": fee,
            "to": to,
            "memo": input.get("memo"),
            "transaction_id": tx.map(|t| t.transaction_id.clone()),
            "plan_id": tx.and_then(|t| t.plan.as_ref()).map(|p| p.plan_id.clone()),
            "action_id": ctx.action_id,
            "paid_by": ctx.principal_id,
        });
        let record = AppRecord {
            collection: PAYMENTS.into(),
            record_id: operation.operation_id.clone(),
            tenant: ctx.tenant.clone(),
            created_at_ms: crate::clock::now_ms(),
            body: body.clone(),
        };
        let output = match write(&self.store, ctx, record).await {
            Ok(()) => body,
            // The provider is idempotent by operation id: the payment was made before.
            Err(StoreError::Duplicate { .. }) => self
                .store
                .get_record(PAYMENTS, &ctx.tenant, &operation.operation_id)
                .await
                .ok()
                .flatten()
                .map(|r| r.body)
                .ok_or_else(|| {
                    HandlerError::UncertainOutcome("the provider's ledger is unreadable".into())
                })?,
            Err(StoreError::StaleLease) => {
                return Err(failed(
                    ErrorCode::LeaseLost,
                    "this worker's lease was superseded before the payment: nothing was paid",
                ));
            }
            Err(_) => {
                return Err(HandlerError::UncertainOutcome(
                    "the provider's ledger failed during the payment".into(),
                ));
            }
        };
        if test_outcome == Some("commit_then_timeout") {
            return Err(HandlerError::UncertainOutcome(
                "the provider timed out after the payment was sent".into(),
            ));
        }
        Ok(HandlerOutput {
            output,
            message: Vec::new(),
        })
    }
}

/// Writes a provider record under the run's lease fence (never from a superseded worker).
async fn write(
    store: &Arc<dyn Store>,
    ctx: &TrustedContext,
    record: AppRecord,
) -> Result<(), StoreError> {
    match &ctx.fence {
        Some(fence) => {
            store
                .insert_record_fenced(record, fence, crate::clock::now_ms())
                .await
        }
        None => store.insert_record(record).await,
    }
}

/// `cap:demo:refund`: refunds the payment its compensation context names, once.
#[derive(Clone)]
pub struct RefundHandler {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for RefundHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefundHandler").finish_non_exhaustive()
    }
}

#[async_trait]
impl ActionHandler for RefundHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: false,
            mutation: true,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let Some(target) = ctx
            .transaction
            .as_ref()
            .filter(|t| t.mode == TransactionMode::Compensate)
            .and_then(|t| t.compensates.as_ref())
        else {
            return Err(failed(
                ErrorCode::NotCompensable,
                "refunds run only as the compensation of a payment",
            ));
        };
        let Some(operation) = &target.operation else {
            return Err(failed(
                ErrorCode::DemoNothingToRefund,
                "no payment operation is recorded",
            ));
        };
        let payment = self
            .store
            .get_record(PAYMENTS, &ctx.tenant, &operation.operation_id)
            .await
            .map_err(|_| HandlerError::Failed {
                code: ErrorCode::DemoStoreUnavailable.as_str().into(),
                message: "the provider's ledger is unavailable".into(),
                retryable: true,
            })?
            .ok_or_else(|| {
                failed(
                    ErrorCode::DemoNothingToRefund,
                    "the provider has no such payment",
                )
            })?;
        let refund_id = format!("rfd_{}", operation.operation_id);
        let body = json!({
            "refund_id": refund_id,
            "payment_id": operation.operation_id,
            "amount_minor": payment.body.get("amount_minor"),
            "reason": input.get("reason"),
            "action_id": ctx.action_id,
            "compensates": target.action_id,
        });
        let record = AppRecord {
            collection: REFUNDS.into(),
            record_id: refund_id,
            tenant: ctx.tenant.clone(),
            created_at_ms: crate::clock::now_ms(),
            body: body.clone(),
        };
        match write(&self.store, ctx, record).await {
            Ok(()) => Ok(HandlerOutput {
                output: body,
                message: Vec::new(),
            }),
            Err(StoreError::Duplicate { .. }) => Err(failed(
                ErrorCode::DemoNothingToRefund,
                "this payment was refunded already",
            )),
            Err(StoreError::StaleLease) => Err(failed(
                ErrorCode::LeaseLost,
                "this worker's lease was superseded before the refund: nothing was refunded",
            )),
            Err(_) => Err(HandlerError::UncertainOutcome(
                "the provider's ledger failed during the refund".into(),
            )),
        }
    }
}
