//! Receipt wire types (spec 18.1); hashing and chain verification live in [`crate::chain`].
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{Checker, CorrelationId, Principal, ReceiptId, Timestamp, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Hash-linked receipt chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptChain {
    /// Chain id.
    pub chain_id: String,
    /// Receipts in order.
    pub receipts: Vec<Receipt>,
    /// Merkle root or equivalent aggregate hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_hash: Option<String>,
}

impl Validate for ReceiptChain {
    fn validate(&self, v: &mut Checker) {
        v.receipt_chain_here();
        v.field("receipts", |v| v.each(&self.receipts));
        crate::rules::receipt_chain(self, v);
    }
}

/// Receipt event.
///
/// Fields are declared in name order, as are those of the types inside it: serde writes them in
/// that order, so a serialized receipt is already in the canonical form of its hash (18.2) and a
/// verifier can hash its bytes as they stand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// Actor.
    pub actor: Principal,
    /// Correlation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
    /// Structured receipt data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Receipt hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Receipt id.
    pub id: ReceiptId,
    /// Timestamp.
    pub occurred_at: Timestamp,
    /// Previous hash in the chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_hash: Option<String>,
    /// Receipt type.
    pub receipt_type: ReceiptType,
}

impl Validate for Receipt {
    fn validate(&self, v: &mut Checker) {
        v.field("actor", |v| self.actor.validate(v));
        v.field("occurred_at", |v| self.occurred_at.validate(v));
    }
}

/// Receipt type.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptType {
    /// Request received.
    RequestReceived,
    /// Action accepted.
    ActionAccepted,
    /// Policy engine decision recorded.
    PolicyDecision,
    /// Approval request created.
    ApprovalRequested,
    /// Approval was granted.
    ApprovalGranted,
    /// Approval was denied.
    ApprovalDenied,
    /// Approval expired before a decision.
    ApprovalExpired,
    /// Approval was revoked.
    ApprovalRevoked,
    /// Tool executed.
    ToolExecuted,
    /// Delegation made.
    DelegationMade,
    /// Human approved.
    HumanApproved,
    /// Result returned.
    ResultReturned,
    /// Settlement recorded.
    SettlementRecorded,
    /// Transaction plan created.
    TransactionPlanned,
    /// A commit action atomically acquired the transaction plan.
    TransactionCommitStarted,
    /// Transaction committed.
    TransactionCommitted,
    /// Compensating transaction executed.
    TransactionCompensated,
    /// Dry-run validation or simulation completed.
    TransactionDryRunCompleted,
    /// Transaction was blocked because rollback is unsupported.
    TransactionRollbackUnsupported,
    /// Transaction failed.
    TransactionFailed,
    /// Callback delivery attempt started.
    CallbackDeliveryAttempted,
    /// Callback delivery completed.
    CallbackDelivered,
    /// Callback delivery failed.
    CallbackDeliveryFailed,
}

crate::wire_enum!(ReceiptType { RequestReceived => "request_received", ActionAccepted => "action_accepted", PolicyDecision => "policy_decision", ApprovalRequested => "approval_requested", ApprovalGranted => "approval_granted", ApprovalDenied => "approval_denied", ApprovalExpired => "approval_expired", ApprovalRevoked => "approval_revoked", ToolExecuted => "tool_executed", DelegationMade => "delegation_made", HumanApproved => "human_approved", ResultReturned => "result_returned", SettlementRecorded => "settlement_recorded", TransactionPlanned => "transaction_planned", TransactionCommitStarted => "transaction_commit_started", TransactionCommitted => "transaction_committed", TransactionCompensated => "transaction_compensated", TransactionDryRunCompleted => "transaction_dry_run_completed", TransactionRollbackUnsupported => "transaction_rollback_unsupported", TransactionFailed => "transaction_failed", CallbackDeliveryAttempted => "callback_delivery_attempted", CallbackDelivered => "callback_delivered", CallbackDeliveryFailed => "callback_delivery_failed" });

/// Request for one receipt chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptQueryRequest {
    /// Receipt chain id selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<String>,
    /// Individual receipt id selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_id: Option<ReceiptId>,
}

impl Validate for ReceiptQueryRequest {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}
