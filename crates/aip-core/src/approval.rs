//! Approval policy, requests, decisions, records and escalation (spec 12).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{
    ActionId, ActionStatus, ActionTransaction, ApprovalId, CapabilityId, Checker, Conversation,
    IdentityContext, Principal, PrincipalId, ReceiptChain, Timestamp, Validate,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// First-class approval decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDecision {
    /// Approval workflow id.
    pub approval_id: ApprovalId,
    /// Decision kind.
    pub decision: ApprovalDecisionKind,
    /// Approver principal.
    pub approver: Principal,
    /// Decision timestamp.
    pub decided_at: Timestamp,
    /// Human-readable reason or comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Constraints attached to the approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<ApprovalConstraint>,
    /// Decision evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceArtifact>,
    /// Stable id for idempotent decision replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_id: Option<String>,
    /// Policy hash the approver evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_hash: Option<String>,
    /// Resolver-produced authority path retained as audit evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authority_path: Vec<String>,
    /// Prior decision being revoked, when `decision` is `revoked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_decision_id: Option<String>,
}

impl Validate for ApprovalDecision {
    fn validate(&self, v: &mut Checker) {
        v.field("approver", |v| self.approver.validate(v));
        v.field("decided_at", |v| self.decided_at.validate(v));
        v.field("constraints", |v| v.each(&self.constraints));
        v.field("evidence", |v| v.each(&self.evidence));
    }
}

/// Approval decision outcome.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecisionKind {
    /// Approval was granted.
    Approved,
    /// Approval was denied.
    Denied,
    /// Approval expired.
    Expired,
    /// Approval was revoked after being granted.
    Revoked,
}

crate::wire_enum!(ApprovalDecisionKind { Approved => "approved", Denied => "denied", Expired => "expired", Revoked => "revoked" });

/// Restriction attached to an approval decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalConstraint {
    /// Field or path being constrained.
    pub field: String,
    /// Operator name, for example `lte`, `eq`, or `matches`.
    pub operator: String,
    /// Constraint value.
    pub value: Value,
}

impl Validate for ApprovalConstraint {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Evidence artifact used by approval and audit workflows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceArtifact {
    /// Stable artifact id.
    pub id: String,
    /// Evidence kind.
    pub kind: String,
    /// URI for retrievable evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Integrity hash for the artifact or redacted view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Whether the artifact has been redacted.
    pub redacted: bool,
}

impl Validate for EvidenceArtifact {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// First-class approval request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    /// Stable approval workflow id.
    pub id: ApprovalId,
    /// Action requiring approval.
    pub action_id: ActionId,
    /// Capability requiring approval.
    pub capability_id: CapabilityId,
    /// Principal requesting approval.
    pub requester: Principal,
    /// Principal whose work is being approved.
    pub subject: Principal,
    /// Approver selector.
    pub approver_selector: ApproverSelector,
    /// Human-readable reason.
    pub reason: String,
    /// Evidence artifacts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceArtifact>,
    /// Expiration timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// External or internal policy decision id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_decision_id: Option<String>,
    /// Identity context used by policy and audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityContext>,
    /// Immutable approval policy snapshot evaluated for this request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_snapshot: Option<ApprovalPolicy>,
    /// SHA-256 hash of the canonical policy snapshot and governed subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_hash: Option<String>,
    /// Principal operating the action, when distinct from the requester.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<Principal>,
    /// Risk evaluated for delegated-authority limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskLevel>,
    /// Governed numeric value evaluated for delegated-authority limits.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub governed_value: Option<u64>,
}

impl Validate for ApprovalRequest {
    fn validate(&self, v: &mut Checker) {
        v.field("requester", |v| self.requester.validate(v));
        v.field("subject", |v| self.subject.validate(v));
        v.field("approver_selector", |v| self.approver_selector.validate(v));
        v.field("evidence", |v| v.each(&self.evidence));
        if let Some(x) = &self.expires_at {
            v.field("expires_at", |v| x.validate(v));
        }
        if let Some(x) = &self.identity {
            v.field("identity", |v| x.validate(v));
        }
        if let Some(x) = &self.policy_snapshot {
            v.field("policy_snapshot", |v| x.validate(v));
        }
        if let Some(x) = &self.operator {
            v.field("operator", |v| x.validate(v));
        }
    }
}

/// Principal, role, group, policy, or external system that can approve work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ApproverSelector {
    /// Specific approving principal.
    Principal {
        /// Principal id.
        id: PrincipalId,
    },
    /// Role name.
    Role {
        /// Role identifier.
        name: String,
    },
    /// Group name.
    Group {
        /// Group identifier.
        name: String,
    },
    /// Tenant-owned approval policy.
    TenantPolicy,
    /// External approval system.
    ExternalSystem {
        /// External system identifier.
        system: String,
    },
}

impl Validate for ApproverSelector {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Approval policy declared by a capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalPolicy {
    /// Whether approval is required before execution.
    pub required: bool,
    /// Reason shown to an approver or audit trail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Approver selection rule.
    pub approver_selector: ApproverSelector,
    /// Time-to-live for approval requests.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub ttl_ms: Option<u64>,
    /// Required evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_requirements: Vec<EvidenceRequirement>,
    /// Delegated approval authority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegated_authority: Option<DelegatedApprovalAuthority>,
    /// Composable authority expression. When absent, the legacy
    /// `approver_selector` is interpreted as one leaf predicate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<ApprovalRule>,
    /// Minimum number of distinct approving principals for the workflow.
    #[serde(
        default = "crate::num::default_1_u32",
        deserialize_with = "crate::num::u32"
    )]
    pub minimum_distinct_principals: u32,
    /// Separation-of-duties requirements.
    #[serde(default)]
    pub separation_of_duties: SeparationOfDuties,
    /// Stable policy version retained in approval evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<String>,
}

impl Validate for ApprovalPolicy {
    fn validate(&self, v: &mut Checker) {
        v.field("approver_selector", |v| self.approver_selector.validate(v));
        if let Some(x) = &self.delegated_authority {
            v.field("delegated_authority", |v| x.validate(v));
        }
        if let Some(x) = &self.rule {
            v.field("rule", |v| x.validate(v));
        }
        v.field("separation_of_duties", |v| {
            self.separation_of_duties.validate(v)
        });
        crate::rules::approval_policy(self, v);
    }
}

/// Evidence required before approval can be decided.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceRequirement {
    /// Human-readable reason.
    Reason,
    /// Snapshot of the action input.
    InputSnapshot,
    /// Policy engine decision.
    PolicyDecision,
    /// External ticket or case.
    ExternalTicket,
    /// Attachment or artifact.
    Attachment,
}

crate::wire_enum!(EvidenceRequirement { Reason => "reason", InputSnapshot => "input_snapshot", PolicyDecision => "policy_decision", ExternalTicket => "external_ticket", Attachment => "attachment" });

/// Delegated approval authority.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegatedApprovalAuthority {
    /// Principal receiving delegated approval authority.
    pub principal: PrincipalId,
    /// Delegated scope labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
    /// Expiration timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

impl Validate for DelegatedApprovalAuthority {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.expires_at {
            v.field("expires_at", |v| x.validate(v));
        }
    }
}

/// Composable approval authority expression.
///
/// Leaf predicates are evaluated only against authority memberships returned
/// by a trusted resolver. Values carried in an action or decision payload are
/// never sufficient to satisfy a predicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "operator", rename_all = "snake_case", deny_unknown_fields)]
pub enum ApprovalRule {
    /// Every child expression must be satisfied.
    All {
        /// Child expressions.
        rules: Vec<ApprovalRule>,
        /// Explicitly permits one verified decision to satisfy more than one child.
        #[serde(default, skip_serializing_if = "crate::num::is_false")]
        allow_decision_reuse: bool,
    },
    /// At least one child expression must be satisfied.
    Any {
        /// Child expressions.
        rules: Vec<ApprovalRule>,
    },
    /// At least `required` distinct matching decisions must be present.
    Quorum {
        /// Required number of decisions.
        #[serde(deserialize_with = "crate::num::u32")]
        required: u32,
        /// Expressions that can contribute to the quorum.
        rules: Vec<ApprovalRule>,
        /// Whether one principal may contribute at most one vote.
        #[serde(default = "crate::num::default_true")]
        distinct_principals: bool,
    },
    /// A specific principal must approve.
    Principal {
        /// Required principal id.
        id: PrincipalId,
    },
    /// A member of a trusted role must approve.
    Role {
        /// Required role name.
        name: String,
    },
    /// A member of a trusted group must approve.
    Group {
        /// Required group name.
        name: String,
    },
    /// A member authorized by a tenant policy must approve.
    TenantPolicy {
        /// Stable tenant policy id.
        policy_id: String,
    },
    /// A verified external approval system must approve.
    ExternalSystem {
        /// External system id.
        system: String,
    },
    /// A non-revoked delegated authority grant must match the operation.
    DelegatedAuthority {
        /// Required delegated scope.
        scope: String,
        /// Maximum accepted risk for this grant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_risk: Option<RiskLevel>,
        /// Maximum governed numeric value for this grant.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "crate::num::opt_u64"
        )]
        max_value: Option<u64>,
    },
}

impl Validate for ApprovalRule {
    fn validate(&self, v: &mut Checker) {
        match self {
            ApprovalRule::All { rules, .. } => {
                v.field("rules", |v| v.each(rules));
            }
            ApprovalRule::Any { rules, .. } => {
                v.field("rules", |v| v.each(rules));
            }
            ApprovalRule::Quorum { rules, .. } => {
                v.field("rules", |v| v.each(rules));
            }
            ApprovalRule::Principal { .. } => {}
            ApprovalRule::Role { .. } => {}
            ApprovalRule::Group { .. } => {}
            ApprovalRule::TenantPolicy { .. } => {}
            ApprovalRule::ExternalSystem { .. } => {}
            ApprovalRule::DelegatedAuthority { .. } => {}
        }
    }
}

/// Operational risk classification.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    /// Low-risk capability.
    Low,
    /// Medium-risk capability.
    Medium,
    /// High-risk capability.
    High,
    /// Critical-risk capability.
    Critical,
}

crate::wire_enum!(RiskLevel { Low => "low", Medium => "medium", High => "high", Critical => "critical" });

/// Separation-of-duties requirements for an approval workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeparationOfDuties {
    /// The requester cannot approve the request.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub requester_must_differ: bool,
    /// The action operator cannot approve the request.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub operator_must_differ: bool,
    /// Explicitly permits self-approval when no stricter rule prohibits it.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub allow_self_approval: bool,
}

impl Validate for SeparationOfDuties {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Request for one approval record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalQueryRequest {
    /// Approval id to inspect.
    pub approval_id: ApprovalId,
    /// Optional tenant boundary expected by the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Include linked action status when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_action_status: bool,
    /// Include receipt chain when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_receipts: bool,
    /// Export the immutable governed action payload used for approval.
    ///
    /// This field contains potentially sensitive action input and is available
    /// only to an approval-visible actor authorized for both `approval:export`
    /// and `approval:sensitive`.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_evidence_payload: bool,
}

impl Validate for ApprovalQueryRequest {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Request for filtered approval records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalListRequest {
    /// Approval status label such as `pending`, `approved`, or `denied`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Approver principal filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<PrincipalId>,
    /// Requester principal filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<PrincipalId>,
    /// Tenant id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Opaque page cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Maximum number of records to return.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u32"
    )]
    pub limit: Option<u32>,
    /// Include linked action status when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_action_status: bool,
    /// Include receipt chains when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_receipts: bool,
}

impl Validate for ApprovalListRequest {
    fn validate(&self, v: &mut Checker) {
        crate::rules::approval_list_request(self, v);
    }
}

/// Durable approval read-model view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRecordView {
    /// Original approval request.
    pub request: ApprovalRequest,
    /// Final decision, when available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ApprovalDecision>,
    /// Stable lifecycle status label.
    pub status: String,
    /// Linked action status, when requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_status: Option<ActionStatus>,
    /// Receipt chain, when requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_chain: Option<ReceiptChain>,
    /// Sensitive immutable action evidence, when explicitly exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_payload: Option<ApprovalEvidencePayload>,
    /// Creation timestamp.
    pub created_at: Timestamp,
    /// Last update timestamp.
    pub updated_at: Timestamp,
}

impl Validate for ApprovalRecordView {
    fn validate(&self, v: &mut Checker) {
        v.field("request", |v| self.request.validate(v));
        if let Some(x) = &self.decision {
            v.field("decision", |v| x.validate(v));
        }
        if let Some(x) = &self.action_status {
            v.field("action_status", |v| x.validate(v));
        }
        if let Some(x) = &self.receipt_chain {
            v.field("receipt_chain", |v| x.validate(v));
        }
        if let Some(x) = &self.evidence_payload {
            v.field("evidence_payload", |v| x.validate(v));
        }
        v.field("created_at", |v| self.created_at.validate(v));
        v.field("updated_at", |v| self.updated_at.validate(v));
    }
}

/// Immutable governed action payload exported for an approval decision.
///
/// Runtimes derive this view from the durable queued action. It is never copied
/// into the approval request, receipts, audit events, callbacks, or ordinary
/// read responses. `input_hash` uses the same canonical hash represented by an
/// approval request's `input_snapshot` evidence artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalEvidencePayload {
    /// Action protected by the approval.
    pub action_id: ActionId,
    /// Capability protected by the approval.
    pub capability_id: CapabilityId,
    /// Canonical SHA-256 hash covering capability, input, and transaction.
    pub input_hash: String,
    /// Exact action input supplied to the governed capability.
    pub input: Value,
    /// Transaction context, including plan binding, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<ActionTransaction>,
    /// Trusted identity context resolved for the governed action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityContext>,
}

impl Validate for ApprovalEvidencePayload {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.transaction {
            v.field("transaction", |v| x.validate(v));
        }
        if let Some(x) = &self.identity {
            v.field("identity", |v| x.validate(v));
        }
    }
}

/// Filtered approval list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalList {
    /// Approval records visible to the caller.
    pub approvals: Vec<ApprovalRecordView>,
    /// Cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl Validate for ApprovalList {
    fn validate(&self, v: &mut Checker) {
        v.field("approvals", |v| v.each(&self.approvals));
        crate::rules::approval_list(self, v);
    }
}

/// Human-in-the-loop escalation request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Escalation {
    /// Escalation category.
    pub kind: EscalationKind,
    /// Human-readable reason.
    pub reason: String,
    /// Requesting actor.
    pub requested_by: Principal,
    /// Human input form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Value>,
    /// Risk level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskLevel>,
    /// Escalation timeout.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub timeout_ms: Option<u64>,
    /// Allowed decisions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_decisions: Vec<EscalationDecision>,
    /// Channel context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Conversation>,
}

impl Validate for Escalation {
    fn validate(&self, v: &mut Checker) {
        v.field("requested_by", |v| self.requested_by.validate(v));
        if let Some(x) = &self.conversation {
            v.field("conversation", |v| x.validate(v));
        }
    }
}

/// Human escalation category.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EscalationKind {
    /// Human approval request.
    Approval,
    /// Human input request.
    Input,
    /// Human handoff request.
    Handoff,
    /// Policy exception review.
    PolicyException,
}

crate::wire_enum!(EscalationKind { Approval => "approval", Input => "input", Handoff => "handoff", PolicyException => "policy_exception" });

/// Human decision options.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EscalationDecision {
    /// Approve work.
    Approve,
    /// Reject work.
    Reject,
    /// Modify work.
    Modify,
    /// Hand off work.
    Handoff,
    /// Cancel work.
    Cancel,
}

crate::wire_enum!(EscalationDecision { Approve => "approve", Reject => "reject", Modify => "modify", Handoff => "handoff", Cancel => "cancel" });

/// Escalation resolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EscalationResolution {
    /// Resolution status.
    pub status: EscalationResolutionStatus,
    /// Resolving actor.
    pub resolved_by: Principal,
    /// Resolution timestamp.
    pub resolved_at: Timestamp,
    /// Modified payload or result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

impl Validate for EscalationResolution {
    fn validate(&self, v: &mut Checker) {
        v.field("resolved_by", |v| self.resolved_by.validate(v));
        v.field("resolved_at", |v| self.resolved_at.validate(v));
    }
}

/// Escalation resolution status.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EscalationResolutionStatus {
    /// Human approved.
    Approved,
    /// Human rejected.
    Rejected,
    /// Human modified the input/action.
    Modified,
    /// Human took over.
    HandoffCompleted,
    /// Escalation expired.
    Expired,
    /// Escalation was cancelled.
    Cancelled,
}

crate::wire_enum!(EscalationResolutionStatus { Approved => "approved", Rejected => "rejected", Modified => "modified", HandoffCompleted => "handoff_completed", Expired => "expired", Cancelled => "cancelled" });
