//! Manifests, capabilities, contracts and resources (spec 9).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{
    ApprovalPolicy, CapabilityId, Checker, CompensationContract, DryRunFidelity, MessagePart,
    Principal, PrincipalId, ProfileId, RiskLevel, Timestamp, TransactionMode, Validate,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Request for a participant manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestRequest {
    /// Requested profiles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<ProfileId>,
    /// Optional native discovery filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<ManifestFilter>,
}

impl Validate for ManifestRequest {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.filter {
            v.field("filter", |v| x.validate(v));
        }
    }
}

/// Filter for native manifest and capability discovery requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestFilter {
    /// Capability ids to include.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capability_ids: Vec<CapabilityId>,
    /// Resource kind labels to include.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_kinds: Vec<String>,
    /// Profile ids to include.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<ProfileId>,
    /// Risk levels to include.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub risk: Vec<RiskLevel>,
    /// Required side-effect categories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side_effects: Vec<SideEffect>,
    /// Filter by approval requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_approval: Option<bool>,
    /// Filter capabilities that support streaming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_streaming: Option<bool>,
    /// Filter capabilities that support transaction semantics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_transactions: Option<bool>,
}

impl Validate for ManifestFilter {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// AIP participant manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Manifest schema version.
    pub manifest_version: String,
    /// Provider identity.
    pub agent: Principal,
    /// Exposed capabilities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<Capability>,
    /// Supported profiles.
    pub profiles: Vec<ProfileId>,
    /// Readable resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    /// Supported channel operations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<Value>,
    /// Auth/signature requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Value>,
    /// Audit/compliance metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governance: Option<Value>,
    /// Limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Value>,
    /// Profile compatibility metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<Value>,
    /// Vendor extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Value>,
}

impl Validate for Manifest {
    fn validate(&self, v: &mut Checker) {
        v.field("agent", |v| self.agent.validate(v));
        v.field("capabilities", |v| v.each(&self.capabilities));
        v.field("resources", |v| v.each(&self.resources));
        crate::rules::manifest(self, v);
    }
}

/// Callable operation exposed by a participant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    /// Stable capability id.
    pub id: CapabilityId,
    /// Human-readable operation name.
    pub name: String,
    /// Capability category.
    pub kind: CapabilityKind,
    /// JSON Schema describing accepted input.
    pub input_schema: Value,
    /// JSON Schema describing output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Operational risk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskLevel>,
    /// Stability classification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stability: Option<Stability>,
    /// Pricing or metering hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Value>,
    /// Required auth/scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Value>,
    /// Supported profile bindings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<Binding>,
    /// Whether a human approval is required before invocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_human_approval: Option<bool>,
    /// Enterprise-grade capability contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<CapabilityContract>,
}

impl Validate for Capability {
    fn validate(&self, v: &mut Checker) {
        v.field("bindings", |v| v.each(&self.bindings));
        if let Some(x) = &self.contract {
            v.field("contract", |v| x.validate(v));
        }
        crate::rules::capability(self, v);
    }
}

/// Capability category.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CapabilityKind {
    /// Agent-level capability.
    Agent,
    /// Tool/function capability.
    Tool,
    /// Workflow capability.
    Workflow,
    /// Channel-facing operation.
    Channel,
    /// Readable resource.
    Resource,
    /// Human task.
    HumanTask,
}

crate::wire_enum!(CapabilityKind { Agent => "agent", Tool => "tool", Workflow => "workflow", Channel => "channel", Resource => "resource", HumanTask => "human_task" });

/// Stability state for a published capability.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Stability {
    /// Stable public behavior.
    Stable,
    /// Experimental behavior.
    Experimental,
    /// Deprecated behavior.
    Deprecated,
}

crate::wire_enum!(Stability { Stable => "stable", Experimental => "experimental", Deprecated => "deprecated" });

/// Profile-specific binding metadata for a capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Binding {
    /// Profile id that owns this binding.
    pub profile: ProfileId,
    /// Profile-specific binding members (the schema leaves `Binding` open).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

impl Validate for Binding {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Versioned enterprise contract for a capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityContract {
    /// Side effects a caller must assume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side_effects: Vec<SideEffect>,
    /// Idempotency requirements.
    pub idempotency: IdempotencyContract,
    /// Execution support matrix.
    pub execution: ExecutionContract,
    /// Data handling policy.
    pub data: DataContract,
    /// Credential reference and scope requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<CredentialPolicy>,
    /// Approval policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalPolicy>,
    /// Service-level scheduling hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla: Option<ServiceLevelContract>,
    /// Transactional behavior.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<TransactionContract>,
    /// Compensation behavior.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation: Option<CompensationContract>,
}

impl Validate for CapabilityContract {
    fn validate(&self, v: &mut Checker) {
        v.field("idempotency", |v| self.idempotency.validate(v));
        v.field("execution", |v| self.execution.validate(v));
        v.field("data", |v| self.data.validate(v));
        if let Some(x) = &self.credentials {
            v.field("credentials", |v| x.validate(v));
        }
        if let Some(x) = &self.approval {
            v.field("approval", |v| x.validate(v));
        }
        if let Some(x) = &self.sla {
            v.field("sla", |v| x.validate(v));
        }
        if let Some(x) = &self.transaction {
            v.field("transaction", |v| x.validate(v));
        }
        if let Some(x) = &self.compensation {
            v.field("compensation", |v| x.validate(v));
        }
        crate::rules::capability_contract(self, v);
    }
}

/// Idempotency requirements declared by a capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdempotencyContract {
    /// Requirement level.
    pub requirement: IdempotencyRequirement,
    /// Duplicate key behavior.
    pub collision_behavior: IdempotencyCollisionBehavior,
    /// Namespace used to evaluate key uniqueness.
    pub key_scope: IdempotencyKeyScope,
    /// Optional retention period for stored keys.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub ttl_ms: Option<u64>,
}

impl Validate for IdempotencyContract {
    fn validate(&self, v: &mut Checker) {
        crate::rules::idempotency_contract(self, v);
    }
}

/// Whether an idempotency key is required for a capability invocation.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum IdempotencyRequirement {
    /// Runtime must reject invocations without an idempotency key.
    Required,
    /// Runtime may accept invocations without an idempotency key.
    Optional,
    /// Downstream operation cannot provide idempotent behavior.
    Unsupported,
}

crate::wire_enum!(IdempotencyRequirement { Required => "required", Optional => "optional", Unsupported => "unsupported" });

/// Behavior when a duplicate idempotency key is observed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum IdempotencyCollisionBehavior {
    /// Return the originally stored result for the key.
    ReturnOriginalResult,
    /// Reject duplicate keys as conflicts.
    RejectConflict,
    /// Return the original result only when an input hash matches.
    RevalidateInputHash,
}

crate::wire_enum!(IdempotencyCollisionBehavior { ReturnOriginalResult => "return_original_result", RejectConflict => "reject_conflict", RevalidateInputHash => "revalidate_input_hash" });

/// Scope used when evaluating an idempotency key.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum IdempotencyKeyScope {
    /// Key is unique per action id.
    Action,
    /// Key is unique per capability.
    Capability,
    /// Key is unique per principal.
    Principal,
    /// Key is unique per tenant.
    Tenant,
    /// Key is unique per external account.
    ExternalAccount,
}

crate::wire_enum!(IdempotencyKeyScope { Action => "action", Capability => "capability", Principal => "principal", Tenant => "tenant", ExternalAccount => "external_account" });

/// Execution behavior declared by a capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionContract {
    /// Whether synchronous invocation is supported.
    pub supports_sync: bool,
    /// Whether asynchronous invocation is supported.
    pub supports_async: bool,
    /// Whether streaming invocation is supported.
    pub supports_streaming: bool,
    /// Whether cancellation is supported.
    pub supports_cancel: bool,
    /// Whether retry is supported by the connector/downstream operation.
    pub supports_retry: bool,
    /// Expected completion behavior.
    pub expected_completion: ExpectedCompletionMode,
    /// Retry safety classification.
    pub retry_safety: RetrySafety,
}

impl Validate for ExecutionContract {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Expected completion style for an invocation.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ExpectedCompletionMode {
    /// Caller should expect a synchronous final result.
    Sync,
    /// Caller should expect asynchronous completion.
    Async,
    /// Caller should expect streamed progress or output.
    Streaming,
    /// Runtime may choose any supported completion mode.
    Any,
}

crate::wire_enum!(ExpectedCompletionMode { Sync => "sync", Async => "async", Streaming => "streaming", Any => "any" });

/// Retry safety declared by a capability.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RetrySafety {
    /// Retry is safe without additional idempotency constraints.
    Safe,
    /// Retry is safe only when an idempotency key is present.
    SafeWithIdempotencyKey,
    /// Retry is unsafe and should not be automatic.
    Unsafe,
    /// Retry safety is unknown and must be treated conservatively.
    Unknown,
}

crate::wire_enum!(RetrySafety { Safe => "safe", SafeWithIdempotencyKey => "safe_with_idempotency_key", Unsafe => "unsafe", Unknown => "unknown" });

/// Data handling contract for a capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataContract {
    /// Sensitivity classification.
    pub sensitivity: DataSensitivity,
    /// Whether personally identifiable information may be present.
    pub contains_pii: bool,
    /// Whether redaction is required before logging or cross-domain delegation.
    pub redaction_required: bool,
    /// Data residency restrictions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residency: Option<DataResidency>,
    /// Data retention policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RetentionPolicy>,
}

impl Validate for DataContract {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.residency {
            v.field("residency", |v| x.validate(v));
        }
        if let Some(x) = &self.retention {
            v.field("retention", |v| x.validate(v));
        }
    }
}

/// Data sensitivity classification.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DataSensitivity {
    /// Public data.
    Public,
    /// Internal operational data.
    Internal,
    /// Confidential business data.
    Confidential,
    /// Restricted data requiring strong access controls.
    Restricted,
    /// Regulated data such as medical, legal, or financial records.
    Regulated,
    /// Data sensitivity was not declared by the provider.
    Unknown,
}

crate::wire_enum!(DataSensitivity { Public => "public", Internal => "internal", Confidential => "confidential", Restricted => "restricted", Regulated => "regulated", Unknown => "unknown" });

/// Data residency restrictions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataResidency {
    /// Regions where processing is allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_regions: Vec<String>,
    /// Regions where processing is prohibited.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prohibited_regions: Vec<String>,
}

impl Validate for DataResidency {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Data retention declaration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetentionPolicy {
    /// Minimum retention period.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub retain_for_ms: Option<u64>,
    /// Maximum retention period.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub delete_after_ms: Option<u64>,
    /// Whether legal hold can override deletion.
    pub legal_hold_allowed: bool,
}

impl Validate for RetentionPolicy {
    fn validate(&self, v: &mut Checker) {
        crate::rules::retention_policy(self, v);
    }
}

/// Credential requirements declared by a capability contract.
///
/// This policy never carries raw credential material. It only describes the
/// credential reference, issuer, and scope requirements that a runtime must
/// verify before dispatching an action to a connector or downstream system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialPolicy {
    /// Whether an external credential reference or OAuth state is required.
    pub required: bool,
    /// Accepted credential issuers. An empty list means any issuer is accepted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_issuers: Vec<String>,
    /// Required downstream scopes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_scopes: Vec<String>,
    /// Whether an expired OAuth state can proceed when refresh is available.
    pub allow_oauth_refresh: bool,
}

impl Validate for CredentialPolicy {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Service-level declaration for scheduling and operations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceLevelContract {
    /// Expected end-to-end latency.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub expected_latency_ms: Option<u64>,
    /// Runtime timeout.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub timeout_ms: Option<u64>,
    /// Whether the provider expects async execution for this capability.
    pub async_expected: bool,
    /// Maximum acceptable queue delay before escalation.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub max_queue_delay_ms: Option<u64>,
    /// Human-readable availability target, for example `99.9%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_target: Option<String>,
}

impl Validate for ServiceLevelContract {
    fn validate(&self, v: &mut Checker) {
        crate::rules::service_level_contract(self, v);
    }
}

/// Transaction modes supported by a capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransactionContract {
    /// Supported modes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_modes: Vec<TransactionMode>,
    /// Whether commit must reference a previously produced plan.
    pub requires_plan_before_commit: bool,
    /// Dry-run fidelity.
    pub dry_run_fidelity: DryRunFidelity,
}

impl Validate for TransactionContract {
    fn validate(&self, v: &mut Checker) {
        crate::rules::transaction_contract(self, v);
    }
}

/// Side effect category for an enterprise capability.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SideEffect {
    /// Read data without intended mutation.
    Read,
    /// Mutate existing state or create new state.
    Write,
    /// Delete or destroy state.
    Delete,
    /// Send a user-visible or external message.
    SendMessage,
    /// Move money, create financial obligations, or change billing state.
    Financial,
    /// Change identity, account, access, or credential state.
    Identity,
    /// Touch medical or health-related records.
    Medical,
    /// Touch legal, contractual, or compliance-sensitive records.
    Legal,
    /// Call an external network service.
    ExternalNetwork,
    /// Execute code or scripts supplied at runtime.
    CodeExecution,
}

crate::wire_enum!(SideEffect { Read => "read", Write => "write", Delete => "delete", SendMessage => "send_message", Financial => "financial", Identity => "identity", Medical => "medical", Legal => "legal", ExternalNetwork => "external_network", CodeExecution => "code_execution" });

/// Readable resource advertised by a manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// Stable resource id.
    pub id: String,
    /// Resource name.
    pub name: String,
    /// Native resource kind used by discovery and operational filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Capability that owns or exposes this resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_id: Option<CapabilityId>,
    /// Resource description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Resource MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Tenant boundary that owns or can read the resource, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Native read policy for this resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<ResourceAccessPolicy>,
    /// Resource expiration timestamp, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

impl Validate for Resource {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.access {
            v.field("access", |v| x.validate(v));
        }
        if let Some(x) = &self.expires_at {
            v.field("expires_at", |v| x.validate(v));
        }
    }
}

/// Native resource read policy used by discovery and operational read APIs.
///
/// The policy is intentionally generic: product-specific ACL objects remain in
/// adapters, while AIP resources publish the minimal principal/scope/tenant
/// requirements needed by gateways and runtimes to avoid leaking resource
/// metadata across trust boundaries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceAccessPolicy {
    /// Whether any authenticated principal can read the resource.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub public: bool,
    /// Principals explicitly allowed to read the resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_principals: Vec<PrincipalId>,
    /// Any one of these scopes authorizes the read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_scopes: Vec<String>,
    /// Whether a matching tenant boundary is required when `tenant_id` exists.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub tenant_required: bool,
}

impl Validate for ResourceAccessPolicy {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Native resource list request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceListRequest {
    /// Capability id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_id: Option<CapabilityId>,
    /// Resource kind label filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Tenant id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Opaque page cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Maximum number of resources to return.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u32"
    )]
    pub limit: Option<u32>,
}

impl Validate for ResourceListRequest {
    fn validate(&self, v: &mut Checker) {
        crate::rules::resource_list_request(self, v);
    }
}

/// Native resource list result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceList {
    /// Resources visible to the caller.
    pub resources: Vec<Resource>,
    /// Cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl Validate for ResourceList {
    fn validate(&self, v: &mut Checker) {
        v.field("resources", |v| v.each(&self.resources));
        crate::rules::resource_list(self, v);
    }
}

/// Native resource read request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceReadRequest {
    /// Resource id to read.
    pub resource_id: String,
    /// Optional tenant boundary expected by the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Optional resource version selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Acceptable MIME types or profile labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept: Vec<String>,
}

impl Validate for ResourceReadRequest {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Native resource read result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceReadResult {
    /// Resource metadata.
    pub resource: Resource,
    /// Optional resource content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<MessagePart>,
    /// Optional entity tag for cache validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// Optional expiration timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

impl Validate for ResourceReadResult {
    fn validate(&self, v: &mut Checker) {
        v.field("resource", |v| self.resource.validate(v));
        v.field("content", |v| v.each(&self.content));
        if let Some(x) = &self.expires_at {
            v.field("expires_at", |v| x.validate(v));
        }
    }
}
