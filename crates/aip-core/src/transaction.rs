//! Transactions, plans and compensation (spec 13).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{
    Action, ActionId, ActionResult, ActionTransaction, ApprovalPolicy, CapabilityId, Checker,
    IdentityContext, Principal, ProtocolError, ReceiptChain, SideEffect, Timestamp, TransactionId,
    Validate,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// First-class request to execute a transactional AIP action.
///
/// `Action.transaction` remains the canonical semantic context for the
/// operation. This wrapper makes transaction workflows explicit on the wire so
/// gateways and runtimes can route, audit, and validate plan/commit/compensate
/// flows without embedding transaction commands inside adapter-specific JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransactionRequest {
    /// Stable transaction id for correlation across plan, commit, and compensation.
    pub transaction_id: TransactionId,
    /// Action carrying the transactional operation.
    pub action: Action,
    /// Principal requesting the transactional operation.
    pub requested_by: Principal,
    /// Human-readable reason for policy, approval, and audit systems.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Optional request metadata for scheduling, audit, or transport bindings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Durable provider operation reference for reconciliation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_operation: Option<ProviderOperationRef>,
    /// Opaque cursor from the preceding reconciliation attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciliation_cursor: Option<String>,
}

impl Validate for TransactionRequest {
    fn validate(&self, v: &mut Checker) {
        v.field("action", |v| self.action.validate(v));
        v.field("requested_by", |v| self.requested_by.validate(v));
        if let Some(x) = &self.provider_operation {
            v.field("provider_operation", |v| x.validate(v));
        }
        crate::rules::transaction_request(self, v);
    }
}

/// Durable reference to an operation accepted by an external provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderOperationRef {
    /// Provider or connector id.
    pub provider: String,
    /// Provider-local operation id.
    pub operation_id: String,
    /// Optional provider request or trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl Validate for ProviderOperationRef {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Result of a first-class transactional AIP action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransactionResult {
    /// Stable transaction id from the request or action context.
    pub transaction_id: TransactionId,
    /// Action associated with this transaction.
    pub action_id: ActionId,
    /// Capability associated with the transaction.
    pub capability_id: CapabilityId,
    /// Transaction context that was evaluated.
    pub transaction: ActionTransaction,
    /// Wire-visible transaction status.
    pub status: TransactionProtocolStatus,
    /// Execution plan, when applicable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<TransactionPlan>,
    /// Final action result when execution reached a handler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ActionResult>,
    /// Protocol-level failure when no valid action result exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProtocolError>,
    /// Receipt chain proving the transaction decision or terminal state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_chain: Option<ReceiptChain>,
    /// Durable provider operation reference used for reconciliation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_operation: Option<ProviderOperationRef>,
    /// Opaque provider cursor used to continue reconciliation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciliation_cursor: Option<String>,
    /// Earliest time at which reconciliation should be retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_after: Option<Timestamp>,
}

impl Validate for TransactionResult {
    fn validate(&self, v: &mut Checker) {
        v.field("transaction", |v| self.transaction.validate(v));
        if let Some(x) = &self.plan {
            v.field("plan", |v| x.validate(v));
        }
        if let Some(x) = &self.result {
            v.field("result", |v| x.validate(v));
        }
        if let Some(x) = &self.error {
            v.field("error", |v| x.validate(v));
        }
        if let Some(x) = &self.receipt_chain {
            v.field("receipt_chain", |v| x.validate(v));
        }
        if let Some(x) = &self.provider_operation {
            v.field("provider_operation", |v| x.validate(v));
        }
        if let Some(x) = &self.reconcile_after {
            v.field("reconcile_after", |v| x.validate(v));
        }
        crate::rules::transaction_result(self, v);
    }
}

/// Transaction lifecycle state exposed on the AIP wire.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TransactionProtocolStatus {
    /// Dry-run validation or simulation completed.
    DryRunCompleted,
    /// A durable plan was created.
    Planned,
    /// A provider accepted and prepared the operation without committing it.
    Prepared,
    /// One commit action atomically owns execution of the plan.
    Committing,
    /// A previously planned or direct operation was committed.
    Committed,
    /// A compensating action is executing.
    Compensating,
    /// A compensating operation completed.
    Compensated,
    /// The transaction is waiting for human approval or input.
    RequiresHuman,
    /// The transaction was cancelled.
    Cancelled,
    /// The operation explicitly does not support rollback.
    RollbackNotSupported,
    /// The transaction failed before reaching a committed terminal state.
    Failed,
    /// The provider may have committed, but no definitive result is available.
    OutcomeUnknown,
    /// Provider state is being reconciled before retry or compensation.
    Reconciling,
    /// Reconciliation established the durable provider outcome.
    Reconciled,
}

crate::wire_enum!(TransactionProtocolStatus { DryRunCompleted => "dry_run_completed", Planned => "planned", Prepared => "prepared", Committing => "committing", Committed => "committed", Compensating => "compensating", Compensated => "compensated", RequiresHuman => "requires_human", Cancelled => "cancelled", RollbackNotSupported => "rollback_not_supported", Failed => "failed", OutcomeUnknown => "outcome_unknown", Reconciling => "reconciling", Reconciled => "reconciled" });

/// Durable execution plan produced by a transactional `Plan` action.
///
/// The plan is protocol-visible evidence for a later `Commit`. It captures the
/// exact action input hash, capability binding, relevant enterprise policy
/// metadata, and identity snapshot so runtimes can reject commits that no
/// longer match the planned operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransactionPlan {
    /// Stable plan id referenced by commit requests.
    pub plan_id: String,
    /// Stable transaction id for the plan.
    pub transaction_id: TransactionId,
    /// Action that created the plan.
    pub action_id: ActionId,
    /// Capability the plan was produced for.
    pub capability_id: CapabilityId,
    /// Planned transaction context.
    pub transaction: ActionTransaction,
    /// Principal that requested the plan.
    pub planned_by: Principal,
    /// Canonical SHA-256 hash of the planned action input.
    pub input_hash: String,
    /// Optional redacted or raw input snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_snapshot: Option<Value>,
    /// Expected side effects declared by the capability contract.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicted_side_effects: Vec<SideEffect>,
    /// Whether committing the plan requires approval.
    pub approval_required: bool,
    /// Approval policy evaluated during planning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    /// Compensation contract available for the planned operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation: Option<CompensationContract>,
    /// Dry-run fidelity advertised by the capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run_fidelity: Option<DryRunFidelity>,
    /// Identity snapshot captured during planning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityContext>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Optional plan expiration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// Additional runtime metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Validate for TransactionPlan {
    fn validate(&self, v: &mut Checker) {
        v.field("transaction", |v| self.transaction.validate(v));
        v.field("planned_by", |v| self.planned_by.validate(v));
        if let Some(x) = &self.approval_policy {
            v.field("approval_policy", |v| x.validate(v));
        }
        if let Some(x) = &self.compensation {
            v.field("compensation", |v| x.validate(v));
        }
        if let Some(x) = &self.identity {
            v.field("identity", |v| x.validate(v));
        }
        v.field("created_at", |v| self.created_at.validate(v));
        if let Some(x) = &self.expires_at {
            v.field("expires_at", |v| x.validate(v));
        }
    }
}

/// Compensation behavior declared by a capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompensationContract {
    /// Compensation mode.
    pub mode: CompensationMode,
    /// Capability used to compensate this operation, when available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation_capability_id: Option<CapabilityId>,
    /// Maximum window for compensation.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub compensation_window_ms: Option<u64>,
    /// Whether compensation itself requires approval.
    pub requires_approval: bool,
}

impl Validate for CompensationContract {
    fn validate(&self, v: &mut Checker) {
        crate::rules::compensation_contract(self, v);
    }
}

/// Compensation support declared by a capability.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CompensationMode {
    /// No compensation is required for successful execution.
    NotRequired,
    /// A compensating capability is supported.
    Supported,
    /// Compensation is attempted but cannot be guaranteed.
    BestEffort,
    /// Rollback or compensation is not supported.
    RollbackNotSupported,
}

crate::wire_enum!(CompensationMode { NotRequired => "not_required", Supported => "supported", BestEffort => "best_effort", RollbackNotSupported => "rollback_not_supported" });

/// Dry-run fidelity declared by a capability.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DryRunFidelity {
    /// Only schema validation is performed.
    SchemaOnly,
    /// Schema and policy validation are performed.
    PolicyAndSchema,
    /// Downstream validation is performed without commit.
    DownstreamValidation,
    /// Provider can simulate the full operation.
    FullSimulation,
}

crate::wire_enum!(DryRunFidelity { SchemaOnly => "schema_only", PolicyAndSchema => "policy_and_schema", DownstreamValidation => "downstream_validation", FullSimulation => "full_simulation" });

/// Request for one transaction view.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransactionQueryRequest {
    /// Transaction id selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<TransactionId>,
    /// Plan id selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    /// Action id selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<ActionId>,
    /// Optional tenant boundary expected by the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Include terminal action result when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_result: bool,
    /// Include receipt chain when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_receipts: bool,
}

impl Validate for TransactionQueryRequest {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Durable transaction read-model view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransactionView {
    /// Transaction id.
    pub transaction_id: TransactionId,
    /// Associated action id.
    pub action_id: ActionId,
    /// Associated capability id.
    pub capability_id: CapabilityId,
    /// Transaction context.
    pub transaction: ActionTransaction,
    /// Stable transaction status label.
    pub status: String,
    /// Durable execution plan, when available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<TransactionPlan>,
    /// Final result when requested and available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ActionResult>,
    /// Receipt chain when requested and available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_chain: Option<ReceiptChain>,
    /// Creation timestamp.
    pub created_at: Timestamp,
    /// Last update timestamp.
    pub updated_at: Timestamp,
}

impl Validate for TransactionView {
    fn validate(&self, v: &mut Checker) {
        v.field("transaction", |v| self.transaction.validate(v));
        if let Some(x) = &self.plan {
            v.field("plan", |v| x.validate(v));
        }
        if let Some(x) = &self.result {
            v.field("result", |v| x.validate(v));
        }
        if let Some(x) = &self.receipt_chain {
            v.field("receipt_chain", |v| x.validate(v));
        }
        v.field("created_at", |v| self.created_at.validate(v));
        v.field("updated_at", |v| self.updated_at.validate(v));
    }
}
