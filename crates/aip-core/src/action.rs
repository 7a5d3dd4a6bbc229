//! Actions, acknowledgements, stream chunks, results, cancellation and heartbeats (spec 11).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{
    ActionId, ApprovalDecision, CapabilityId, Checker, Conversation, IdentityContext, MessagePart,
    Principal, ProfileId, ProtocolError, ReceiptId, SessionId, Timestamp, TransactionId, Validate,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Capability invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// Stable action id.
    pub id: ActionId,
    /// Target capability.
    pub capability_id: CapabilityId,
    /// Structured input payload.
    pub input: Value,
    /// Invocation mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ActionMode>,
    /// Replay-safe dedupe key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Caller timeout.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub timeout_ms: Option<u64>,
    /// Conversation context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Conversation>,
    /// Shared memory/context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_context: Option<Value>,
    /// Delegation authorization chain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegation_chain: Vec<DelegationEntry>,
    /// Federation routing context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub federation: Option<FederationContext>,
    /// Async callback target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback: Option<Callback>,
    /// Trace/span/log metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observability: Option<ObservabilityContext>,
    /// Policy/compliance context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compliance: Option<ComplianceContext>,
    /// Identity, tenant, and credential mapping context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityContext>,
    /// Approval decision authorizing this invocation, if one has been granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalDecision>,
    /// Transactional execution context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<ActionTransaction>,
}

impl Action {
    /// An invocation of `capability_id` with `input` and no mode, key or context: what a
    /// compatibility profile builds before setting the few members its protocol carries.
    pub fn plain(id: ActionId, capability_id: CapabilityId, input: Value) -> Self {
        Self {
            id,
            capability_id,
            input,
            mode: None,
            idempotency_key: None,
            timeout_ms: None,
            conversation: None,
            memory_context: None,
            delegation_chain: Vec::new(),
            federation: None,
            callback: None,
            observability: None,
            compliance: None,
            identity: None,
            approval: None,
            transaction: None,
        }
    }
}

impl Validate for Action {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.conversation {
            v.field("conversation", |v| x.validate(v));
        }
        v.field("delegation_chain", |v| v.each(&self.delegation_chain));
        if let Some(x) = &self.federation {
            v.field("federation", |v| x.validate(v));
        }
        if let Some(x) = &self.callback {
            v.field("callback", |v| x.validate(v));
        }
        if let Some(x) = &self.observability {
            v.field("observability", |v| x.validate(v));
        }
        if let Some(x) = &self.compliance {
            v.field("compliance", |v| x.validate(v));
        }
        if let Some(x) = &self.identity {
            v.field("identity", |v| x.validate(v));
        }
        if let Some(x) = &self.approval {
            v.field("approval", |v| x.validate(v));
        }
        if let Some(x) = &self.transaction {
            v.field("transaction", |v| x.validate(v));
        }
        crate::rules::action(self, v);
    }
}

/// Action invocation mode.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ActionMode {
    /// Request/response action.
    Sync,
    /// Asynchronous action.
    Async,
    /// Streaming action.
    Streaming,
}

crate::wire_enum!(ActionMode { Sync => "sync", Async => "async", Streaming => "streaming" });

/// Delegation chain entry used for multi-agent authorization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegationEntry {
    /// Delegating principal.
    pub from: Principal,
    /// Delegate principal.
    pub to: Principal,
    /// Delegated scope.
    pub scope: String,
    /// Delegation timestamp.
    pub delegated_at: Timestamp,
}

impl Validate for DelegationEntry {
    fn validate(&self, v: &mut Checker) {
        v.field("from", |v| self.from.validate(v));
        v.field("to", |v| self.to.validate(v));
        v.field("delegated_at", |v| self.delegated_at.validate(v));
    }
}

/// Cross-domain routing context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FederationContext {
    /// Current trust domain.
    pub trust_domain: String,
    /// Domains already traversed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<String>,
}

impl Validate for FederationContext {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Async callback target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Callback {
    /// Callback profile id.
    pub profile: ProfileId,
    /// Callback target URI or subject.
    pub target: String,
    /// Profile-specific delivery configuration such as authentication or tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Validate for Callback {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Trace/span metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObservabilityContext {
    /// Trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Span id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    /// Free-form fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Value>,
}

impl Validate for ObservabilityContext {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Policy/compliance metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComplianceContext {
    /// Required compliance regimes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regimes: Vec<String>,
    /// Data classification label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_classification: Option<String>,
    /// Additional policy metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Validate for ComplianceContext {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Transaction context for an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionTransaction {
    /// Transaction mode.
    pub mode: TransactionMode,
    /// Stable transaction id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<TransactionId>,
    /// Plan id produced by a previous planning action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    /// Action being compensated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation_for: Option<ActionId>,
}

impl Validate for ActionTransaction {
    fn validate(&self, v: &mut Checker) {
        crate::rules::action_transaction(self, v);
    }
}

/// Transactional action mode.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TransactionMode {
    /// Execute the action normally.
    Execute,
    /// Validate without committing side effects.
    DryRun,
    /// Produce a durable execution plan.
    Plan,
    /// Commit a previously planned operation.
    Commit,
    /// Execute a declared compensating operation.
    Compensate,
    /// Reconcile a provider operation whose commit outcome is unknown.
    Reconcile,
    /// Explicit state for operations that cannot roll back.
    RollbackNotSupported,
}

crate::wire_enum!(TransactionMode { Execute => "execute", DryRun => "dry_run", Plan => "plan", Commit => "commit", Compensate => "compensate", Reconcile => "reconcile", RollbackNotSupported => "rollback_not_supported" });

/// Acknowledgement for an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// Acknowledged action.
    pub action_id: ActionId,
    /// Acknowledgement state.
    pub status: AckStatus,
    /// Machine/human reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Retry hint.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub retry_after_ms: Option<u64>,
    /// Queue metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<Value>,
}

impl Validate for Ack {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Action acknowledgement state.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AckStatus {
    /// Action accepted for processing.
    Accepted,
    /// Action rejected before processing.
    Rejected,
    /// Action queued.
    Queued,
    /// Action accepted and stream will follow.
    Streaming,
    /// Idempotent replay returned cached result.
    Cached,
}

crate::wire_enum!(AckStatus { Accepted => "accepted", Rejected => "rejected", Queued => "queued", Streaming => "streaming", Cached => "cached" });

/// Partial output, progress, tool event, or terminal stream marker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamChunk {
    /// Source action.
    pub action_id: ActionId,
    /// Monotonic chunk sequence.
    #[serde(deserialize_with = "crate::num::u64")]
    pub sequence: u64,
    /// Chunk kind.
    pub kind: StreamChunkKind,
    /// Structured chunk data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Optional rich message part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<MessagePart>,
}

impl Validate for StreamChunk {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.part {
            v.field("part", |v| x.validate(v));
        }
    }
}

/// Stream chunk kind.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StreamChunkKind {
    /// Partial user-visible output.
    Data,
    /// Progress update.
    Progress,
    /// Tool call update.
    Tool,
    /// Optional reasoning/progress event.
    Thought,
    /// Preview artifact.
    Preview,
    /// Human approval is pending.
    PendingApproval,
    /// Stream-level error.
    Error,
    /// Stream completed.
    Done,
}

crate::wire_enum!(StreamChunkKind { Data => "data", Progress => "progress", Tool => "tool", Thought => "thought", Preview => "preview", PendingApproval => "pending_approval", Error => "error", Done => "done" });

/// Final action result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionResult {
    /// Source action.
    pub action_id: ActionId,
    /// Result status.
    pub status: ActionResultStatus,
    /// Structured output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// User-facing message parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message: Vec<MessagePart>,
    /// Memory/state update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_update: Option<Value>,
    /// Usage/cost metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Signed receipt reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptRef>,
    /// Error details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProtocolError>,
}

impl Validate for ActionResult {
    fn validate(&self, v: &mut Checker) {
        v.field("message", |v| v.each(&self.message));
        if let Some(x) = &self.usage {
            v.field("usage", |v| x.validate(v));
        }
        if let Some(x) = &self.receipt {
            v.field("receipt", |v| x.validate(v));
        }
        if let Some(x) = &self.error {
            v.field("error", |v| x.validate(v));
        }
        crate::rules::action_result(self, v);
    }
}

/// Final action status.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ActionResultStatus {
    /// Action completed.
    Completed,
    /// Action failed.
    Failed,
    /// Action was cancelled.
    Cancelled,
    /// Action is blocked on a durable approval request.
    PendingApproval,
    /// Action requires human input or approval.
    RequiresHuman,
}

crate::wire_enum!(ActionResultStatus { Completed => "completed", Failed => "failed", Cancelled => "cancelled", PendingApproval => "pending_approval", RequiresHuman => "requires_human" });

/// Usage and cost metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Value>,
    /// Tool usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Value>,
    /// End-to-end latency.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub latency_ms: Option<u64>,
    /// Cost metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Value>,
}

impl Validate for Usage {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Reference to a signed receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptRef {
    /// Receipt id.
    pub id: ReceiptId,
    /// Receipt hash.
    pub hash: String,
}

impl Validate for ReceiptRef {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Cancellation request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cancel {
    /// Target to cancel.
    pub target: CancelTarget,
    /// Optional cancellation reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Validate for Cancel {
    fn validate(&self, v: &mut Checker) {
        v.field("target", |v| self.target.validate(v));
    }
}

/// Cancellation target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CancelTarget {
    /// Cancel one action.
    Action(ActionId),
    /// Cancel a session.
    Session(SessionId),
}

impl Validate for CancelTarget {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Liveness/progress signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// Heartbeat sequence.
    #[serde(deserialize_with = "crate::num::u64")]
    pub sequence: u64,
    /// Status text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Progress percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
}

impl Validate for Heartbeat {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Heartbeat acknowledgement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatAck {
    /// Acknowledged heartbeat sequence.
    #[serde(deserialize_with = "crate::num::u64")]
    pub sequence: u64,
    /// Receiver timestamp.
    pub received_at: Timestamp,
}

impl Validate for HeartbeatAck {
    fn validate(&self, v: &mut Checker) {
        v.field("received_at", |v| self.received_at.validate(v));
    }
}
