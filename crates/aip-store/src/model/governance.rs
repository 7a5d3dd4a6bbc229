//! Approval workflows and escalations (spec 12): their records, writes and queries.

use serde_json::Value;

use super::{Fence, NewEvent, NewJob, NewReceipt, Transition};

string_enum!(
    /// State of an approval workflow (spec 12).
    ApprovalState {
        /// Waiting for decisions.
        Pending = "pending",
        /// Granted: the governed action was resumed.
        Approved = "approved",
        /// Denied: the governed action does not run.
        Denied = "denied",
        /// Expired before it was granted (or before the action could run).
        Expired = "expired",
        /// Revoked before the governed action ran.
        Revoked = "revoked",
        /// The governed action was cancelled while the approval was open.
        Cancelled = "cancelled",
    }
);

impl ApprovalState {
    /// Whether decisions may still change the approval.
    pub fn is_open(self) -> bool {
        self == ApprovalState::Pending
    }
}

/// An approval workflow to create with its governed action (spec 12.2).
#[derive(Debug, Clone)]
pub struct NewApproval {
    /// Approval id (store-wide unique).
    pub approval_id: String,
    /// Tenant of the governed action.
    pub tenant: String,
    /// The governed action.
    pub action_id: String,
    /// Its capability.
    pub capability: String,
    /// The requesting principal.
    pub requester: String,
    /// Hash of the policy snapshot and the governed subject (spec 12.3).
    pub policy_hash: String,
    /// When the approval lapses, epoch ms.
    pub expires_at_ms: i64,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// The approval request as the runtime retains it (the immutable policy snapshot inside).
    pub request: Value,
    /// Who may decide, as the trusted resolver's keys (`principal:<id>`, `role:<name>`,
    /// `group:<name>`, ...): it indexes the approvers' inbox.
    pub approvers: Vec<String>,
}

/// A stored approval workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRecord {
    /// Approval id.
    pub approval_id: String,
    /// Tenant.
    pub tenant: String,
    /// The governed action.
    pub action_id: String,
    /// Its capability.
    pub capability: String,
    /// The requesting principal.
    pub requester: String,
    /// Current state.
    pub state: ApprovalState,
    /// Policy and subject hash.
    pub policy_hash: String,
    /// Expiry, epoch ms.
    pub expires_at_ms: i64,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
    /// Incremented by every write (decisions included): the compare-and-set token.
    pub version: i64,
    /// The approval request.
    pub request: Value,
    /// Who may decide (resolver keys).
    pub approvers: Vec<String>,
}

/// A decision to record on an approval (spec 12.4).
#[derive(Debug, Clone)]
pub struct NewDecision {
    /// Stable decision id: the same id twice is the same decision (replay).
    pub decision_id: String,
    /// The deciding principal (authenticated).
    pub approver: String,
    /// `approved`, `denied`, `expired` or `revoked`.
    pub kind: String,
    /// Decision time, epoch ms.
    pub decided_at_ms: i64,
    /// The decision as the runtime retains it.
    pub body: Value,
}

/// A stored decision.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionRecord {
    /// The approval.
    pub approval_id: String,
    /// Decision id.
    pub decision_id: String,
    /// The deciding principal.
    pub approver: String,
    /// Decision kind.
    pub kind: String,
    /// Decision time, epoch ms.
    pub decided_at_ms: i64,
    /// The decision.
    pub body: Value,
}

/// One write to an approval, all in one transaction: a decision, a state change, the governed
/// action's transition, the resumed action's job, receipts and events. Compare-and-set on the
/// approval's `version`, so of two concurrent deciders exactly one writes.
#[derive(Debug, Clone)]
pub struct ApprovalWrite {
    /// Tenant.
    pub tenant: String,
    /// The approval.
    pub approval_id: String,
    /// The version the writer read; another write since is a [`StoreError::StateConflict`](crate::StoreError::StateConflict).
    pub expected_version: i64,
    /// A decision to record; a decision id already recorded writes nothing else
    /// ([`ApprovalWritten::Replayed`]).
    pub decision: Option<NewDecision>,
    /// The approval's new state, if it changes.
    pub to: Option<ApprovalState>,
    /// The governed action's transition, if it moves.
    pub action: Option<Transition>,
    /// A job to queue (the resumed action's).
    pub job: Option<NewJob>,
    /// Receipts appended.
    pub receipts: Vec<NewReceipt>,
    /// Events appended.
    pub events: Vec<NewEvent>,
    /// When set, completes this leased job under its fence (the expiry timer that wrote this).
    pub finish_job: Option<Fence>,
    /// Audit events of the write (spec 18.3: a decision is audited with it, never without it).
    pub audit: Vec<super::NewAudit>,
    /// Time, epoch ms.
    pub now_ms: i64,
}

/// What an approval write did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ApprovalWritten {
    /// Written; the approval as it now stands.
    Written(ApprovalRecord),
    /// The decision id was already recorded: nothing was written.
    Replayed(DecisionRecord),
}

/// Filters of an approval list; `tenant` and `reader` bound visibility.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalQuery {
    /// Tenant.
    pub tenant: String,
    /// A reader who sees only the approvals it requested or may decide: its principal id and its
    /// resolver keys. `None` for tenant-wide readers.
    pub reader: Option<(String, Vec<String>)>,
    /// Only approvals in this state.
    pub state: Option<ApprovalState>,
    /// Only approvals this principal requested.
    pub requester: Option<String>,
    /// Only approvals one of these resolver keys may decide.
    pub approver_keys: Option<Vec<String>>,
}

string_enum!(
    /// State of an escalation (spec 12.7): open, or how it ended (the resolution statuses).
    EscalationState {
        /// Waiting for a human.
        Open = "open",
        /// Resolved: approved.
        Approved = "approved",
        /// Resolved: rejected.
        Rejected = "rejected",
        /// Resolved: the human modified the work.
        Modified = "modified",
        /// Resolved: the human took over.
        HandoffCompleted = "handoff_completed",
        /// Nobody resolved it in time.
        Expired = "expired",
        /// Withdrawn or cancelled.
        Cancelled = "cancelled",
    }
);

impl EscalationState {
    /// Whether a resolution may still be recorded.
    pub fn is_open(self) -> bool {
        self == EscalationState::Open
    }
}

/// An escalation to store (spec 12.7).
#[derive(Debug, Clone)]
pub struct NewEscalation {
    /// Escalation id (the raising envelope's message id), unique per tenant.
    pub escalation_id: String,
    /// Tenant.
    pub tenant: String,
    /// The raising (authenticated) principal.
    pub requester: String,
    /// `approval`, `input`, `handoff` or `policy_exception`.
    pub kind: String,
    /// The raising envelope's correlation id.
    pub correlation_id: Option<String>,
    /// The raising envelope's session.
    pub session_id: Option<String>,
    /// When it expires unresolved, epoch ms.
    pub expires_at_ms: Option<i64>,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// The escalation body.
    pub body: Value,
}

/// A stored escalation.
#[derive(Debug, Clone, PartialEq)]
pub struct EscalationRecord {
    /// Escalation id.
    pub escalation_id: String,
    /// Tenant.
    pub tenant: String,
    /// The raising principal.
    pub requester: String,
    /// Escalation kind.
    pub kind: String,
    /// Current state.
    pub state: EscalationState,
    /// Correlation id of the raising envelope.
    pub correlation_id: Option<String>,
    /// Session of the raising envelope.
    pub session_id: Option<String>,
    /// Expiry, epoch ms.
    pub expires_at_ms: Option<i64>,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
    /// The compare-and-set token.
    pub version: i64,
    /// The escalation body.
    pub body: Value,
    /// Who resolved it (absent for the runtime's expiry).
    pub resolver: Option<String>,
    /// The resolution body, once resolved.
    pub resolution: Option<Value>,
}

/// What creating an escalation did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum EscalationCreated {
    /// Stored (with its expiry timer, when it has one).
    Created(EscalationRecord),
    /// The id was already taken in the tenant: nothing was written; the stored one.
    Existing(EscalationRecord),
}

/// One compare-and-set resolution of an open escalation.
#[derive(Debug, Clone)]
pub struct EscalationResolve {
    /// Tenant.
    pub tenant: String,
    /// Escalation id.
    pub escalation_id: String,
    /// The version the writer read; a different stored version (or a closed escalation) is a
    /// [`StoreError::StateConflict`](crate::StoreError::StateConflict).
    pub expected_version: i64,
    /// The resolved state (not `open`).
    pub to: EscalationState,
    /// The resolving principal (`None` for the runtime's expiry).
    pub resolver: Option<String>,
    /// The resolution body.
    pub resolution: Value,
    /// When set, completes this leased job under its fence (the expiry timer that wrote this).
    pub finish_job: Option<Fence>,
    /// Time, epoch ms.
    pub now_ms: i64,
}

/// Filters of an escalation list; `tenant` and `requester_only` bound visibility.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EscalationQuery {
    /// Tenant.
    pub tenant: String,
    /// A reader who sees only the escalations it raised; `None` for readers who see the tenant's
    /// (resolvers and tenant-wide readers).
    pub requester_only: Option<String>,
    /// Only escalations in this state.
    pub state: Option<EscalationState>,
    /// Only escalations this principal raised.
    pub requester: Option<String>,
    /// Only escalations of this kind.
    pub kind: Option<String>,
}
