//! The semantic rules: cross-field MUSTs from the spec text that the JSON Schemas cannot express.
//!
//! Each [`Rule`] has one stable wire code and cites its section. The per-type functions below are
//! called by the generated [`Validate`] walkers.

use std::collections::HashSet;

use crate::validate::Checker;
use crate::*;

/// Largest `limit` and largest record count in a native list (spec 16.4).
pub const MAX_LIST_LIMIT: u32 = 1000;
/// Longest bounded action wait in milliseconds (spec 16.4).
pub const MAX_WAIT_MS: u64 = 30_000;
/// Longest delegation chain on a native action (spec 14.3).
pub const MAX_DELEGATION_CHAIN: usize = 10;
/// The only manifest version of this specification (spec 9.1).
pub const MANIFEST_VERSION: &str = "aip-manifest/v1";

/// A semantic rule of AIP 1.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// 5.2: wire timestamps use RFC 3339.
    Timestamp,
    /// 5.3, 8.1: principal, capability and profile ids are non-empty.
    EmptyIdentifier,
    /// 6.1: `message_type` equals the type implied by the body key.
    TypeMismatch,
    /// 6.4: `message_id` is non-empty.
    EmptyMessageId,
    /// 6.4: an envelope `idempotency_key`, when present, is non-empty.
    EmptyIdempotencyKey,
    /// 9.1: `manifest_version` is exactly `aip-manifest/v1`.
    ManifestVersion,
    /// 9.1: `profiles` is not empty.
    EmptyProfiles,
    /// 9.1: capability ids within one manifest are unique.
    DuplicateCapabilityId,
    /// 9.3: a capability input schema is a JSON object schema.
    InputSchemaNotObject,
    /// 9.4: a contract declares at least one side effect.
    NoSideEffects,
    /// 9.4: a contract supports at least one of sync, async or streaming.
    NoExecutionMode,
    /// 9.4, 13.7: `supported` compensation names its compensating capability.
    CompensationWithoutCapability,
    /// 9.4: a transaction contract lists at least one supported mode.
    NoTransactionModes,
    /// 9.4: declared positive durations are greater than zero.
    NonPositiveDuration,
    /// 11.1: an action's `input` is not null.
    NullInput,
    /// 11.1: an action timeout, when present, is greater than zero.
    ZeroTimeout,
    /// 12.4: an action's `approval` carries the decision `approved`.
    ApprovalNotApproved,
    /// 11.6: chunk sequences increase monotonically and are never reused for different content.
    StreamSequence,
    /// 16.5: action event responses contain only events and chunks of the requested action.
    OutOfScope,
    /// 11.7: a failed result carries an error.
    FailedWithoutError,
    /// 13.1: a `commit` transaction names its `plan_id`.
    CommitWithoutPlan,
    /// 13.1: a `compensate` transaction names `compensation_for`.
    CompensateWithoutTarget,
    /// 13.1: a transaction request's id matches the id inside its action's transaction.
    TransactionIdMismatch,
    /// 13.3: a planned result carries a plan whose transaction, action and capability ids match.
    PlanMismatch,
    /// 13.5: a failed transaction result carries a protocol error or a failed result with an error.
    FailedTransactionWithoutError,
    /// 14.1: parent and child action ids differ.
    DelegationToSelf,
    /// 14.1: a delegation scope is non-empty.
    EmptyScope,
    /// 14.3: a native action carries at most ten delegation-chain entries.
    DelegationChainTooLong,
    /// 14.3: a delegation chain has no loops.
    DelegationLoop,
    /// 14.4: a terminal delegation result carries an action result or a protocol error.
    TerminalWithoutOutcome,
    /// 16.4: a list limit is between 1 and 1000.
    ListLimit,
    /// 16.4: a response holds at most 1000 records.
    TooManyRecords,
    /// 16.4: a bounded wait is at most 30,000 ms.
    WaitTooLong,
    /// 18.2: a non-empty receipt chain includes `root_hash`.
    MissingRootHash,
    /// 19.1: an error code is a non-empty string.
    EmptyErrorCode,
    /// 10.1: a handshake purpose is non-empty.
    EmptyPurpose,
    /// 15.2: an image, file or audio part carries a URL or inline data.
    PartWithoutContent,
}

impl Rule {
    /// Every rule.
    pub const ALL: &[Rule] = &[
        Rule::Timestamp,
        Rule::EmptyIdentifier,
        Rule::TypeMismatch,
        Rule::EmptyMessageId,
        Rule::EmptyIdempotencyKey,
        Rule::ManifestVersion,
        Rule::EmptyProfiles,
        Rule::DuplicateCapabilityId,
        Rule::InputSchemaNotObject,
        Rule::NoSideEffects,
        Rule::NoExecutionMode,
        Rule::CompensationWithoutCapability,
        Rule::NoTransactionModes,
        Rule::NonPositiveDuration,
        Rule::NullInput,
        Rule::ZeroTimeout,
        Rule::ApprovalNotApproved,
        Rule::StreamSequence,
        Rule::OutOfScope,
        Rule::FailedWithoutError,
        Rule::CommitWithoutPlan,
        Rule::CompensateWithoutTarget,
        Rule::TransactionIdMismatch,
        Rule::PlanMismatch,
        Rule::FailedTransactionWithoutError,
        Rule::DelegationToSelf,
        Rule::EmptyScope,
        Rule::DelegationChainTooLong,
        Rule::DelegationLoop,
        Rule::TerminalWithoutOutcome,
        Rule::ListLimit,
        Rule::TooManyRecords,
        Rule::WaitTooLong,
        Rule::MissingRootHash,
        Rule::EmptyErrorCode,
        Rule::EmptyPurpose,
        Rule::PartWithoutContent,
    ];

    /// The stable wire code reported in `ProtocolError.code`.
    pub fn code(self) -> &'static str {
        match self {
            Rule::Timestamp => "aip.semantic.invalid_timestamp",
            Rule::EmptyIdentifier => "aip.semantic.empty_identifier",
            Rule::TypeMismatch => "aip.envelope.type_mismatch",
            Rule::EmptyMessageId => "aip.envelope.empty_message_id",
            Rule::EmptyIdempotencyKey => "aip.envelope.empty_idempotency_key",
            Rule::ManifestVersion => "aip.semantic.manifest_version",
            Rule::EmptyProfiles => "aip.semantic.empty_profiles",
            Rule::DuplicateCapabilityId => "aip.semantic.duplicate_capability_id",
            Rule::InputSchemaNotObject => "aip.semantic.input_schema_not_object",
            Rule::NoSideEffects => "aip.semantic.contract_without_side_effects",
            Rule::NoExecutionMode => "aip.semantic.contract_without_execution_mode",
            Rule::CompensationWithoutCapability => "aip.semantic.compensation_without_capability",
            Rule::NoTransactionModes => "aip.semantic.transaction_contract_without_modes",
            Rule::NonPositiveDuration => "aip.semantic.non_positive_duration",
            Rule::NullInput => "aip.semantic.null_input",
            Rule::ZeroTimeout => "aip.semantic.zero_timeout",
            Rule::ApprovalNotApproved => "aip.semantic.approval_not_approved",
            Rule::StreamSequence => "aip.semantic.stream_sequence",
            Rule::OutOfScope => "aip.semantic.out_of_scope",
            Rule::FailedWithoutError => "aip.semantic.failed_without_error",
            Rule::CommitWithoutPlan => "aip.semantic.commit_without_plan",
            Rule::CompensateWithoutTarget => "aip.semantic.compensate_without_target",
            Rule::TransactionIdMismatch => "aip.semantic.transaction_id_mismatch",
            Rule::PlanMismatch => "aip.semantic.plan_mismatch",
            Rule::FailedTransactionWithoutError => "aip.semantic.failed_transaction_without_error",
            Rule::DelegationToSelf => "aip.semantic.delegation_to_self",
            Rule::EmptyScope => "aip.semantic.empty_scope",
            Rule::DelegationChainTooLong => "aip.semantic.delegation_chain_too_long",
            Rule::DelegationLoop => "aip.semantic.delegation_loop",
            Rule::TerminalWithoutOutcome => "aip.semantic.terminal_without_outcome",
            Rule::ListLimit => "aip.semantic.list_limit",
            Rule::TooManyRecords => "aip.semantic.too_many_records",
            Rule::WaitTooLong => "aip.semantic.wait_too_long",
            Rule::MissingRootHash => "aip.semantic.missing_root_hash",
            Rule::EmptyErrorCode => "aip.semantic.empty_error_code",
            Rule::EmptyPurpose => "aip.semantic.empty_purpose",
            Rule::PartWithoutContent => "aip.semantic.part_without_content",
        }
    }

    /// The spec section the rule comes from.
    pub fn section(self) -> &'static str {
        match self {
            Rule::Timestamp => "5.2",
            Rule::EmptyIdentifier => "5.3",
            Rule::TypeMismatch => "6.1",
            Rule::EmptyMessageId | Rule::EmptyIdempotencyKey => "6.4",
            Rule::ManifestVersion | Rule::EmptyProfiles | Rule::DuplicateCapabilityId => "9.1",
            Rule::InputSchemaNotObject => "9.3",
            Rule::NoSideEffects
            | Rule::NoExecutionMode
            | Rule::CompensationWithoutCapability
            | Rule::NoTransactionModes
            | Rule::NonPositiveDuration => "9.4",
            Rule::NullInput | Rule::ZeroTimeout => "11.1",
            Rule::ApprovalNotApproved => "12.4",
            Rule::StreamSequence => "11.6",
            Rule::OutOfScope => "16.5",
            Rule::FailedWithoutError => "11.7",
            Rule::CommitWithoutPlan
            | Rule::CompensateWithoutTarget
            | Rule::TransactionIdMismatch => "13.1",
            Rule::PlanMismatch => "13.3",
            Rule::FailedTransactionWithoutError => "13.5",
            Rule::DelegationToSelf | Rule::EmptyScope => "14.1",
            Rule::DelegationChainTooLong | Rule::DelegationLoop => "14.3",
            Rule::TerminalWithoutOutcome => "14.4",
            Rule::ListLimit | Rule::TooManyRecords | Rule::WaitTooLong => "16.4",
            Rule::MissingRootHash => "18.2",
            Rule::EmptyErrorCode => "19.1",
            Rule::EmptyPurpose => "10.1",
            Rule::PartWithoutContent => "15.2",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (spec {})", self.code(), self.section())
    }
}

fn non_empty_id(v: &mut Checker, name: &'static str, id: &str) {
    if id.is_empty() {
        v.report_at(
            name,
            Rule::EmptyIdentifier,
            format!("`{name}` must be non-empty"),
        );
    }
}

fn positive(v: &mut Checker, name: &'static str, value: Option<u64>) {
    if value == Some(0) {
        v.report_at(
            name,
            Rule::NonPositiveDuration,
            format!("`{name}` must be greater than zero"),
        );
    }
}

fn limit(v: &mut Checker, value: Option<u32>) {
    if let Some(l) = value
        && !(1..=MAX_LIST_LIMIT).contains(&l)
    {
        v.report_at(
            "limit",
            Rule::ListLimit,
            format!("limit {l} is outside 1..=1000"),
        );
    }
}

fn wait(v: &mut Checker, value: Option<u64>) {
    if let Some(w) = value
        && w > MAX_WAIT_MS
    {
        v.report_at(
            "wait_ms",
            Rule::WaitTooLong,
            format!("wait_ms {w} exceeds 30000"),
        );
    }
}

fn records(v: &mut Checker, name: &'static str, len: usize) {
    if len > MAX_LIST_LIMIT as usize {
        v.report_at(
            name,
            Rule::TooManyRecords,
            format!("{len} records exceed the 1000-record bound"),
        );
    }
}

pub(crate) fn principal(p: &Principal, v: &mut Checker) {
    non_empty_id(v, "id", p.id.as_str());
}

pub(crate) fn handshake(h: &Handshake, v: &mut Checker) {
    if h.purpose.is_empty() {
        v.report_at(
            "purpose",
            Rule::EmptyPurpose,
            "a handshake purpose must be non-empty",
        );
    }
    for (i, p) in h.profiles.iter().enumerate() {
        if p.is_empty() {
            v.field("profiles", |v| {
                v.index(i, |v| v.report(Rule::EmptyIdentifier, "empty profile id"))
            });
        }
    }
}

pub(crate) fn protocol_error(e: &ProtocolError, v: &mut Checker) {
    if e.code.is_empty() {
        v.report_at(
            "code",
            Rule::EmptyErrorCode,
            "an error code must be non-empty",
        );
    }
}

pub(crate) fn action(a: &Action, v: &mut Checker) {
    non_empty_id(v, "capability_id", a.capability_id.as_str());
    if a.input.is_null() {
        v.report_at("input", Rule::NullInput, "action input must not be null");
    }
    if a.timeout_ms == Some(0) {
        v.report_at(
            "timeout_ms",
            Rule::ZeroTimeout,
            "an action timeout must be greater than zero",
        );
    }
    // 12.4: only an `approved` decision can authorize an invocation; refusing the others at decode
    // keeps a denied, expired or revoked decision from reaching any later step.
    if let Some(approval) = &a.approval
        && approval.decision != ApprovalDecisionKind::Approved
    {
        v.field("approval", |v| {
            v.report_at(
                "decision",
                Rule::ApprovalNotApproved,
                format!(
                    "an action is authorized only by an `approved` decision, not `{}`",
                    approval.decision
                ),
            )
        });
    }
    delegation_chain(&a.delegation_chain, v);
}

/// 14.3: at most ten entries; no principal may appear twice along the path
/// `chain[0].from, chain[0].to, chain[1].to, ...`, and no entry delegates to its own principal.
fn delegation_chain(chain: &[DelegationEntry], v: &mut Checker) {
    if chain.len() > MAX_DELEGATION_CHAIN {
        v.report_at(
            "delegation_chain",
            Rule::DelegationChainTooLong,
            format!("{} entries exceed the ten-entry bound", chain.len()),
        );
        return;
    }
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, entry) in chain.iter().enumerate() {
        let from = entry.from.id.as_str();
        let to = entry.to.id.as_str();
        let looped = from == to || (i == 0 && !seen.insert(from)) || !seen.insert(to);
        if i > 0 {
            seen.insert(from);
        }
        if looped {
            v.field("delegation_chain", |v| {
                v.index(i, |v| {
                    v.report(
                        Rule::DelegationLoop,
                        format!("`{to}` appears twice in the chain"),
                    )
                })
            });
            return;
        }
    }
}

pub(crate) fn action_transaction(t: &ActionTransaction, v: &mut Checker) {
    match t.mode {
        TransactionMode::Commit if t.plan_id.is_none() => {
            v.report_at(
                "plan_id",
                Rule::CommitWithoutPlan,
                "a commit must include plan_id",
            );
        }
        TransactionMode::Compensate if t.compensation_for.is_none() => {
            v.report_at(
                "compensation_for",
                Rule::CompensateWithoutTarget,
                "a compensation must include compensation_for",
            );
        }
        _ => {}
    }
}

/// 11.6 over a retained sequence of chunks: per action, sequences strictly increase; an equal sequence
/// is tolerated only as a duplicate delivery of identical content.
fn chunk_sequences(name: &'static str, chunks: &[StreamChunk], v: &mut Checker) {
    let mut last: std::collections::HashMap<&str, &StreamChunk> = std::collections::HashMap::new();
    for (i, c) in chunks.iter().enumerate() {
        if let Some(prev) = last.get(c.action_id.as_str()) {
            let bad = c.sequence < prev.sequence || (c.sequence == prev.sequence && *prev != c);
            if bad {
                v.field(name, |v| {
                    v.index(i, |v| {
                        v.report_at(
                            "sequence",
                            Rule::StreamSequence,
                            format!(
                                "sequence {} after {} breaks monotonic order",
                                c.sequence, prev.sequence
                            ),
                        )
                    })
                });
                return;
            }
        }
        last.insert(c.action_id.as_str(), c);
    }
}

pub(crate) fn action_result(r: &ActionResult, v: &mut Checker) {
    if r.status == ActionResultStatus::Failed && r.error.is_none() {
        v.report_at(
            "error",
            Rule::FailedWithoutError,
            "a failed result must include error",
        );
    }
}

pub(crate) fn action_status(s: &ActionStatus, v: &mut Checker) {
    chunk_sequences("chunks", &s.chunks, v);
    for (i, c) in s.chunks.iter().enumerate() {
        if c.action_id != s.action_id {
            v.field("chunks", |v| {
                v.index(i, |v| {
                    v.report_at("action_id", Rule::OutOfScope, "chunk of another action")
                })
            });
        }
    }
}

pub(crate) fn action_events(e: &ActionEvents, v: &mut Checker) {
    records(v, "events", e.events.len());
    records(v, "chunks", e.chunks.len());
    for (i, ev) in e.events.iter().enumerate() {
        if ev.action_id.as_ref().is_some_and(|a| *a != e.action_id) {
            v.field("events", |v| {
                v.index(i, |v| {
                    v.report_at("action_id", Rule::OutOfScope, "event of another action")
                })
            });
        }
    }
    for (i, c) in e.chunks.iter().enumerate() {
        if c.action_id != e.action_id {
            v.field("chunks", |v| {
                v.index(i, |v| {
                    v.report_at("action_id", Rule::OutOfScope, "chunk of another action")
                })
            });
        }
    }
    chunk_sequences("chunks", &e.chunks, v);
}

pub(crate) fn action_status_request(r: &ActionStatusRequest, v: &mut Checker) {
    wait(v, r.wait_ms);
}

pub(crate) fn action_result_request(r: &ActionResultRequest, v: &mut Checker) {
    wait(v, r.wait_ms);
}

pub(crate) fn action_list_request(r: &ActionListRequest, v: &mut Checker) {
    limit(v, r.limit);
}

pub(crate) fn action_events_request(r: &ActionEventsRequest, v: &mut Checker) {
    limit(v, r.limit);
}

pub(crate) fn approval_list_request(r: &ApprovalListRequest, v: &mut Checker) {
    limit(v, r.limit);
}

pub(crate) fn callback_delivery_list_request(r: &CallbackDeliveryListRequest, v: &mut Checker) {
    limit(v, r.limit);
}

pub(crate) fn session_list_request(r: &SessionListRequest, v: &mut Checker) {
    limit(v, r.limit);
}

pub(crate) fn event_stream_request(r: &EventStreamRequest, v: &mut Checker) {
    limit(v, r.limit);
}

pub(crate) fn audit_query_request(r: &AuditQueryRequest, v: &mut Checker) {
    limit(v, r.limit);
}

pub(crate) fn resource_list_request(r: &ResourceListRequest, v: &mut Checker) {
    limit(v, r.limit);
}

pub(crate) fn action_list(l: &ActionList, v: &mut Checker) {
    records(v, "actions", l.actions.len());
}

pub(crate) fn approval_list(l: &ApprovalList, v: &mut Checker) {
    records(v, "approvals", l.approvals.len());
}

pub(crate) fn callback_delivery_list(l: &CallbackDeliveryList, v: &mut Checker) {
    records(v, "deliveries", l.deliveries.len());
}

pub(crate) fn session_list(l: &SessionList, v: &mut Checker) {
    records(v, "sessions", l.sessions.len());
}

pub(crate) fn event_stream(l: &EventStream, v: &mut Checker) {
    records(v, "events", l.events.len());
}

pub(crate) fn audit_query_result(l: &AuditQueryResult, v: &mut Checker) {
    records(v, "events", l.events.len());
    records(v, "receipt_chains", l.receipt_chains.len());
}

pub(crate) fn resource_list(l: &ResourceList, v: &mut Checker) {
    records(v, "resources", l.resources.len());
}

pub(crate) fn session_resume(l: &SessionResume, v: &mut Checker) {
    records(v, "replayed_events", l.replayed_events.len());
}

pub(crate) fn manifest(m: &Manifest, v: &mut Checker) {
    if m.manifest_version != MANIFEST_VERSION {
        v.report_at(
            "manifest_version",
            Rule::ManifestVersion,
            format!("manifest_version must be `{MANIFEST_VERSION}`"),
        );
    }
    if m.profiles.is_empty() {
        v.report_at(
            "profiles",
            Rule::EmptyProfiles,
            "profiles must not be empty",
        );
    }
    for (i, p) in m.profiles.iter().enumerate() {
        if p.is_empty() {
            v.field("profiles", |v| {
                v.index(i, |v| v.report(Rule::EmptyIdentifier, "empty profile id"))
            });
        }
    }
    let mut seen = HashSet::new();
    for (i, c) in m.capabilities.iter().enumerate() {
        if !seen.insert(c.id.as_str()) {
            v.field("capabilities", |v| {
                v.index(i, |v| {
                    v.report_at(
                        "id",
                        Rule::DuplicateCapabilityId,
                        format!("capability id `{}` repeats", c.id),
                    )
                })
            });
        }
    }
}

pub(crate) fn capability(c: &Capability, v: &mut Checker) {
    non_empty_id(v, "id", c.id.as_str());
    let is_object_schema = c
        .input_schema
        .as_object()
        .is_some_and(|o| o.get("type").and_then(|t| t.as_str()) == Some("object"));
    if !is_object_schema {
        v.report_at(
            "input_schema",
            Rule::InputSchemaNotObject,
            "input_schema must be a JSON object schema (`\"type\": \"object\"`)",
        );
    }
}

pub(crate) fn capability_contract(c: &CapabilityContract, v: &mut Checker) {
    if c.side_effects.is_empty() {
        v.report_at(
            "side_effects",
            Rule::NoSideEffects,
            "a contract must declare at least one side effect",
        );
    }
    let e = &c.execution;
    if !(e.supports_sync || e.supports_async || e.supports_streaming) {
        v.report_at(
            "execution",
            Rule::NoExecutionMode,
            "a contract must support sync, async or streaming",
        );
    }
}

pub(crate) fn compensation_contract(c: &CompensationContract, v: &mut Checker) {
    if c.mode == CompensationMode::Supported
        && c.compensation_capability_id
            .as_ref()
            .is_none_or(|id| id.is_empty())
    {
        v.report_at(
            "compensation_capability_id",
            Rule::CompensationWithoutCapability,
            "supported compensation must name its compensating capability",
        );
    }
    positive(v, "compensation_window_ms", c.compensation_window_ms);
}

pub(crate) fn transaction_contract(c: &TransactionContract, v: &mut Checker) {
    if c.supported_modes.is_empty() {
        v.report_at(
            "supported_modes",
            Rule::NoTransactionModes,
            "a transaction contract must list a supported mode",
        );
    }
}

pub(crate) fn idempotency_contract(c: &IdempotencyContract, v: &mut Checker) {
    positive(v, "ttl_ms", c.ttl_ms);
}

pub(crate) fn service_level_contract(c: &ServiceLevelContract, v: &mut Checker) {
    positive(v, "expected_latency_ms", c.expected_latency_ms);
    positive(v, "timeout_ms", c.timeout_ms);
    positive(v, "max_queue_delay_ms", c.max_queue_delay_ms);
}

pub(crate) fn retention_policy(c: &RetentionPolicy, v: &mut Checker) {
    positive(v, "retain_for_ms", c.retain_for_ms);
    positive(v, "delete_after_ms", c.delete_after_ms);
}

pub(crate) fn approval_policy(c: &ApprovalPolicy, v: &mut Checker) {
    positive(v, "ttl_ms", c.ttl_ms);
}

pub(crate) fn transaction_request(r: &TransactionRequest, v: &mut Checker) {
    if let Some(inner) = r
        .action
        .transaction
        .as_ref()
        .and_then(|t| t.transaction_id.as_ref())
        && *inner != r.transaction_id
    {
        v.report_at(
            "transaction_id",
            Rule::TransactionIdMismatch,
            format!(
                "transaction_id `{}` differs from the action's `{inner}`",
                r.transaction_id
            ),
        );
    }
}

pub(crate) fn transaction_result(r: &TransactionResult, v: &mut Checker) {
    if let Some(inner) = r.transaction.transaction_id.as_ref()
        && *inner != r.transaction_id
    {
        v.report_at(
            "transaction_id",
            Rule::TransactionIdMismatch,
            "transaction_id differs from transaction.transaction_id",
        );
    }
    match &r.plan {
        None if r.status == TransactionProtocolStatus::Planned => {
            v.report_at(
                "plan",
                Rule::PlanMismatch,
                "a planned result must contain its plan",
            );
        }
        Some(p) => {
            let mismatch = if p.transaction_id != r.transaction_id {
                Some("transaction_id")
            } else if p.action_id != r.action_id {
                Some("action_id")
            } else if p.capability_id != r.capability_id {
                Some("capability_id")
            } else {
                None
            };
            if let Some(member) = mismatch {
                v.field("plan", |v| {
                    v.report_at(
                        member,
                        Rule::PlanMismatch,
                        format!("plan {member} differs from the result's"),
                    )
                });
            }
        }
        None => {}
    }
    if r.status == TransactionProtocolStatus::Failed {
        let result_has_error = r
            .result
            .as_ref()
            .is_some_and(|a| a.status == ActionResultStatus::Failed && a.error.is_some());
        if r.error.is_none() && !result_has_error {
            v.report_at(
                "error",
                Rule::FailedTransactionWithoutError,
                "a failed transaction result needs a protocol error or a failed action result with an error",
            );
        }
    }
}

pub(crate) fn delegation_request(d: &DelegationRequest, v: &mut Checker) {
    if d.parent_action_id == d.child_action.id {
        v.field("child_action", |v| {
            v.report_at(
                "id",
                Rule::DelegationToSelf,
                "parent and child action ids must differ",
            )
        });
    }
    if d.scope.is_empty() {
        v.report_at(
            "scope",
            Rule::EmptyScope,
            "a delegation scope must be non-empty",
        );
    }
}

pub(crate) fn delegation_result(d: &DelegationResult, v: &mut Checker) {
    if d.parent_action_id == d.child_action_id {
        v.report_at(
            "child_action_id",
            Rule::DelegationToSelf,
            "parent and child action ids must differ",
        );
    }
    let terminal = matches!(
        d.status,
        DelegationStatus::Completed | DelegationStatus::Failed | DelegationStatus::Cancelled
    );
    if terminal && d.result.is_none() && d.error.is_none() {
        v.report_at(
            "result",
            Rule::TerminalWithoutOutcome,
            "a terminal delegation result needs a result or an error",
        );
    }
}

pub(crate) fn receipt_chain(c: &ReceiptChain, v: &mut Checker) {
    if !c.receipts.is_empty() && c.root_hash.is_none() {
        v.report_at(
            "root_hash",
            Rule::MissingRootHash,
            "a non-empty receipt chain must include root_hash",
        );
    }
}

pub(crate) fn message_part(p: &MessagePart, v: &mut Checker) {
    let (url, data) = match p {
        MessagePart::Image { url, data, .. }
        | MessagePart::File { url, data, .. }
        | MessagePart::Audio { url, data, .. } => (url, data),
        _ => return,
    };
    if url.is_none() && data.is_none() {
        v.report(
            Rule::PartWithoutContent,
            "an image, file or audio part needs a url or inline data",
        );
    }
}
