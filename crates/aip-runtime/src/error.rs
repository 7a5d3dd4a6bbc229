//! The runtime's closed error set: every rejection maps to one wire code, one category and the HTTP
//! status of spec 19.1.

use aip_core::{DecodeError, ErrorCategory, ErrorCode, ProtocolError};
use aip_store::StoreError;

/// The retry hint of a quota refusal: when a slot frees is not known, so a short poll.
pub(crate) const QUOTA_RETRY_AFTER_MS: u64 = 1000;

/// Why the runtime refused or could not finish a request. `Display` text is for humans only.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The envelope or body failed decoding, schema or semantic validation (spec 6.4).
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// The capability producing a resource's content failed or did not finish (spec 9.7).
    #[error("{0}")]
    ResourceProduction(String),
    /// The message type is valid but this runtime does not serve it (spec 7).
    #[error("message type {0} is not supported by this runtime")]
    UnsupportedMessage(String),
    /// No admitted capability has this id, or the caller cannot see it (spec 9.2).
    #[error("capability {0} is not available")]
    UnknownCapability(String),
    /// The caller's scopes do not allow invoking the capability (spec 22.5).
    #[error("the caller may not invoke {0}")]
    ScopeDenied(String),
    /// The request names a tenant other than the caller's (a request-supplied tenant is a selector,
    /// never authority: spec 22.6).
    #[error("the request names a tenant other than the caller's")]
    ForeignTenant,
    /// The caller may see the work but not cancel it (another principal's, without the all scope).
    #[error("the caller may not cancel {0}")]
    CancelDenied(&'static str),
    /// The action input does not satisfy the capability input schema (spec 11.3 step 4).
    #[error("action input does not match the capability input schema: {0}")]
    InvalidInput(String),
    /// The requested mode is not supported by the capability contract (spec 11.1).
    #[error("mode {0} is not supported by this capability")]
    UnsupportedMode(&'static str),
    /// The action carries a context this runtime does not implement; it is refused, never ignored
    /// (spec 22.1). Names the context member.
    #[error("the action's {0} context is not supported by this runtime")]
    UnsupportedContext(&'static str),
    /// `timeout_ms` is zero or above the configured maximum (spec 11.1).
    #[error("timeout_ms must be within 1..={0}")]
    InvalidTimeout(u64),
    /// The capability requires an idempotency key and none was given (spec 9.5).
    #[error("this capability requires an idempotency key")]
    IdempotencyKeyRequired,
    /// The capability does not support idempotency keys; a key would promise deduplication it cannot give.
    #[error("this capability does not support idempotency keys")]
    IdempotencyUnsupported,
    /// The capability scopes idempotency keys to an external account and the caller has no trusted
    /// external-account binding: fail closed rather than widen the scope (spec 9.5, 22.6).
    #[error(
        "this capability scopes idempotency keys to an external account, and the caller has none bound"
    )]
    ExternalAccountUnbound,
    /// The idempotency key is owned by an earlier action with a conflicting invocation (spec 9.5).
    #[error("idempotency key conflicts with an earlier action")]
    IdempotencyConflict,
    /// The action id is already used.
    #[error("action id already used")]
    DuplicateActionId,
    /// The capability's policy needs an approval workflow, which this runtime does not provide: fail closed.
    #[error("capability requires approval, which this runtime cannot grant")]
    ApprovalUnavailable,
    /// Nothing visible under this id (also for objects of other readers, spec 16.3).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The action cannot be cancelled (contract or handler).
    #[error("this action cannot be cancelled")]
    NotCancellable,
    /// The action is already in a terminal state (spec 11.5).
    #[error("the action is already {0}")]
    Terminal(String),
    /// A list limit outside 1..=1000 or a wait above the bound (spec 16.4).
    #[error("{0}")]
    InvalidQuery(&'static str),
    /// A cursor that this reader did not receive for this query (spec 16.2).
    #[error("invalid cursor")]
    InvalidCursor,
    /// The cursor points into history that retention purged (spec 16.2).
    #[error("the cursor is past retention: the history after it was purged; read again without it")]
    CursorExpired,
    /// What was asked for was purged by retention; `archive` names the file that holds it.
    #[error("the {what} was purged by retention{}", archive.as_deref().map(|a| format!("; it is archived in {a}")).unwrap_or_else(|| " without an archive".into()))]
    Purged {
        /// What (a receipt chain).
        what: &'static str,
        /// The archive's file name, when one was written.
        archive: Option<String>,
    },
    /// The envelope signature is missing, malformed or invalid, or its signer is not trusted (spec 22.2).
    #[error("envelope signature rejected: {0}")]
    Signature(&'static str),
    /// `sent_at` is outside the accepted clock skew (spec 22.3).
    #[error("sent_at is outside the accepted clock skew")]
    ClockSkew,
    /// The message id was already claimed within the replay window (spec 22.3).
    #[error("message id already seen: replay rejected")]
    Replay,
    /// The session is unknown, invisible, or not in a state that allows the request (spec 10).
    #[error("session state does not allow this: {0}")]
    SessionState(String),
    /// The session's lifetime has passed (spec 10.5: resuming it is refused, not granted).
    #[error("the session expired: start a new one")]
    SessionExpired,
    /// The resume token is unknown, expired or used (spec 10.5).
    #[error("resume token is invalid, expired or already used")]
    ResumeTokenInvalid,
    /// Durable storage failed; nothing was acknowledged.
    #[error("storage unavailable")]
    Storage(#[source] StoreError),
    /// A rate limit refused the work (spec 22.8); nothing was admitted.
    #[error("the {bucket} rate limit is exhausted: send again in {retry_after_ms} ms")]
    RateLimited {
        /// `principal` or `tenant` (admissions), `principal_reads` or `tenant_reads` (requests
        /// that admit no action).
        bucket: &'static str,
        /// When a token is available again.
        retry_after_ms: u64,
    },
    /// A concurrency quota refused the work (spec 22.8): the principal or tenant already holds
    /// `limit` unfinished actions; nothing was admitted.
    #[error(
        "the {bucket} already holds {limit} unfinished actions, its quota: send again once one finishes"
    )]
    QuotaExceeded {
        /// `principal` or `tenant`.
        bucket: &'static str,
        /// The quota.
        limit: u32,
    },
    /// The queue of actions waiting for a worker is at its bound (spec 22.8); nothing was
    /// admitted.
    #[error("{limit} actions already wait for a worker, the queue's bound: send it again shortly")]
    QueueFull {
        /// The bound.
        limit: u32,
    },
    /// A binding already serves as many requests as it is configured to (spec 22.8): this one was
    /// refused before it was read; nothing was done.
    #[error(
        "this node already serves its {limit} requests in flight on this binding; nothing was done: send it again shortly"
    )]
    Overloaded {
        /// The binding's bound.
        limit: u32,
    },
    /// The node is draining for shutdown: no new work is admitted; nothing was acknowledged.
    #[error("this node is shutting down and admits no new work; send it again shortly")]
    Draining,
    /// The runtime failed unexpectedly (a panicking task); nothing was acknowledged.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// An approval decision was refused (spec 12.4).
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// A principal the payload names (`requested_by`, `resolved_by`) is not the authenticated one.
    #[error("the payload's {0} is not the authenticated principal")]
    PrincipalMismatch(&'static str),
    /// The escalation id is taken by a different escalation.
    #[error("this escalation id was used for another escalation")]
    EscalationConflict,
    /// The escalation is no longer open.
    #[error("the escalation is {0}")]
    EscalationClosed(String),
    /// The resolution is not allowed (not an allowed decision, or not this principal's).
    #[error("resolution not allowed: {0}")]
    ResolutionNotAllowed(&'static str),
    /// A transaction step was refused (spec 13).
    #[error(transparent)]
    Transaction(#[from] TransactionError),
    /// A callback target or delivery request was refused (spec 17).
    #[error(transparent)]
    Callback(#[from] CallbackError),
    /// A delegation or a delegation chain was refused (spec 14).
    #[error(transparent)]
    Delegation(#[from] DelegationError),
}

/// Why a delegation was refused (spec 14); nothing was admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DelegationError {
    /// The sender is not a configured peer authenticated by its key.
    #[error("the sender is not a configured peer authenticated by its signature")]
    PeerUnauthenticated,
    /// The requester or delegate is not the authenticated peer or this node.
    #[error("delegation refused: {0}")]
    PeerMismatch(String),
    /// The chain is too long.
    #[error("the delegation chain is longer than {0} entries")]
    ChainTooLong(usize),
    /// This node is already in the chain.
    #[error("the delegation chain loops back to this node")]
    Loop,
    /// Entry `0` grants more than the entry before it.
    #[error("delegation chain entry {0} widens the scope it received")]
    ScopeWidened(usize),
    /// The delegated scope does not cover the capability.
    #[error("the delegated scope does not cover {0}")]
    ScopeInsufficient(String),
    /// An entry or grant expired.
    #[error("a delegation chain entry or grant expired")]
    Expired,
    /// A forbidden trust domain.
    #[error("the delegation chain passes through forbidden trust domain {0}")]
    TrustDomainForbidden(String),
    /// The chain's tenant constraints exclude the tenant the child would run in here.
    #[error("the delegation chain does not allow running in tenant {0}")]
    TenantForbidden(String),
    /// The chain's region constraints exclude this node.
    #[error("the delegation chain's data residency forbids running here: {0}")]
    ResidencyForbidden(String),
    /// The execution contract differs.
    #[error("the capability's execution contract here is not the one the delegating node states")]
    ContractMismatch,
    /// Malformed chain or request.
    #[error("delegation refused: {0}")]
    ChainInvalid(String),
}

impl DelegationError {
    /// The wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            DelegationError::PeerUnauthenticated => ErrorCode::DelegationPeerUnauthenticated,
            DelegationError::PeerMismatch(_) => ErrorCode::DelegationPeerMismatch,
            DelegationError::ChainTooLong(_) => ErrorCode::DelegationChainTooLong,
            DelegationError::Loop => ErrorCode::DelegationLoop,
            DelegationError::ScopeWidened(_) => ErrorCode::DelegationScopeWidened,
            DelegationError::ScopeInsufficient(_) => ErrorCode::DelegationScopeInsufficient,
            DelegationError::Expired => ErrorCode::DelegationExpired,
            DelegationError::TrustDomainForbidden(_) => ErrorCode::DelegationTrustDomainForbidden,
            DelegationError::TenantForbidden(_) => ErrorCode::DelegationTenantForbidden,
            DelegationError::ResidencyForbidden(_) => ErrorCode::DelegationResidencyForbidden,
            DelegationError::ContractMismatch => ErrorCode::DelegationContractMismatch,
            DelegationError::ChainInvalid(_) => ErrorCode::DelegationChainInvalid,
        }
    }
}

/// Why a callback was refused (spec 17); nothing was admitted or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallbackError {
    /// The callback is malformed (profile, target syntax, metadata).
    #[error("callback refused: {0}")]
    TargetInvalid(String),
    /// Deployment policy refuses the target (spec 17.4).
    #[error("callback target denied: {0}")]
    TargetDenied(String),
    /// The delivery is not failed or dead-lettered.
    #[error("the delivery is {0}; only failed or dead-lettered deliveries can be re-driven")]
    NotRedrivable(String),
}

impl CallbackError {
    /// The wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            CallbackError::TargetInvalid(_) => ErrorCode::CallbackTargetInvalid,
            CallbackError::TargetDenied(_) => ErrorCode::CallbackTargetDenied,
            CallbackError::NotRedrivable(_) => ErrorCode::CallbackNotRedrivable,
        }
    }
}

/// Why a transaction step was refused (spec 13); nothing was admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// The capability does not accept this transaction mode.
    #[error("transaction mode not supported: {0}")]
    ModeUnsupported(String),
    /// The transaction id is another's, or its state does not allow this step.
    #[error("transaction conflict: {0}")]
    Conflict(String),
    /// The plan expired.
    #[error("the plan has expired")]
    PlanExpired,
    /// The commit no longer matches its plan.
    #[error("{0}")]
    PlanMismatch(String),
    /// Another commit owns the plan, or it is terminal.
    #[error("the plan cannot be committed: {0}")]
    PlanClaimed(String),
    /// The committed operation declares it cannot be rolled back.
    #[error("the operation does not support rollback or compensation")]
    RollbackNotSupported,
    /// The target cannot be compensated by this capability.
    #[error("not compensable: {0}")]
    NotCompensable(&'static str),
    /// Nothing to reconcile.
    #[error("not reconcilable: {0}")]
    NotReconcilable(String),
}

impl TransactionError {
    /// The wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            TransactionError::ModeUnsupported(_) => ErrorCode::TransactionModeUnsupported,
            TransactionError::Conflict(_) => ErrorCode::TransactionConflict,
            TransactionError::PlanExpired => ErrorCode::PlanExpired,
            TransactionError::PlanMismatch(_) => ErrorCode::PlanMismatch,
            TransactionError::PlanClaimed(_) => ErrorCode::PlanClaimed,
            TransactionError::RollbackNotSupported => ErrorCode::RollbackNotSupported,
            TransactionError::NotCompensable(_) => ErrorCode::NotCompensable,
            TransactionError::NotReconcilable(_) => ErrorCode::NotReconcilable,
        }
    }
}

/// Why an approval decision was refused (spec 12.4); nothing was recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The claimed approver is not the authenticated principal.
    #[error("the decision's approver is not the authenticated principal")]
    ApproverMismatch,
    /// The authenticated principal holds no authority the approval's rule accepts.
    #[error("the authenticated principal may not decide this approval")]
    NotEligible,
    /// Separation of duties forbids this principal deciding.
    #[error("separation of duties: {0}")]
    SeparationOfDuties(&'static str),
    /// The approval is no longer open for this decision.
    #[error("the approval is {0}")]
    Closed(String),
    /// The approval expired.
    #[error("the approval expired")]
    Expired,
    /// The decision names another policy hash, or the governed subject changed since the request.
    #[error("the policy hash does not match the stored approval")]
    PolicyHashMismatch,
    /// A decision constraint is unknown, malformed or not satisfied by the governed input.
    #[error("constraint {0}")]
    ConstraintInvalid(String),
    /// The policy requires evidence the decision does not carry.
    #[error("the policy requires evidence: {0}")]
    EvidenceRequired(&'static str),
    /// The decision id was already used for another decision.
    #[error("this decision id was recorded for another decision")]
    DecisionConflict,
    /// `expired` decisions are the runtime's (its timer), not a client's.
    #[error("`expired` is recorded by the runtime's timer, not sent")]
    ExpiredIsTheRuntimes,
}

impl ApprovalError {
    /// The wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApprovalError::ApproverMismatch => ErrorCode::ApproverMismatch,
            ApprovalError::NotEligible => ErrorCode::ApproverNotEligible,
            ApprovalError::SeparationOfDuties(_) => ErrorCode::SeparationOfDuties,
            ApprovalError::Closed(_) | ApprovalError::ExpiredIsTheRuntimes => {
                ErrorCode::ApprovalClosed
            }
            ApprovalError::Expired => ErrorCode::ApprovalExpired,
            ApprovalError::PolicyHashMismatch => ErrorCode::PolicyHashMismatch,
            ApprovalError::ConstraintInvalid(_) => ErrorCode::ConstraintInvalid,
            ApprovalError::EvidenceRequired(_) => ErrorCode::EvidenceRequired,
            ApprovalError::DecisionConflict => ErrorCode::DecisionConflict,
        }
    }
}

impl From<StoreError> for RuntimeError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::InvalidCursor | StoreError::ForeignCursor => RuntimeError::InvalidCursor,
            StoreError::CursorExpired => RuntimeError::CursorExpired,
            StoreError::ResumeTokenInvalid => RuntimeError::ResumeTokenInvalid,
            other => RuntimeError::Storage(other),
        }
    }
}

impl RuntimeError {
    /// The stable wire code; one per variant (the decode and schema failures carry their own).
    pub fn code(&self) -> ErrorCode {
        match self {
            RuntimeError::Decode(e) => e.code(),
            RuntimeError::UnsupportedMessage(_) => ErrorCode::UnsupportedMessage,
            RuntimeError::UnknownCapability(_) => ErrorCode::CapabilityNotFound,
            RuntimeError::ScopeDenied(_)
            | RuntimeError::CancelDenied(_)
            | RuntimeError::ForeignTenant => ErrorCode::ScopeDenied,
            RuntimeError::InvalidInput(_) => ErrorCode::InvalidInput,
            RuntimeError::UnsupportedMode(_) => ErrorCode::UnsupportedMode,
            RuntimeError::UnsupportedContext(_) => ErrorCode::UnsupportedContext,
            RuntimeError::InvalidTimeout(_) => ErrorCode::InvalidTimeout,
            RuntimeError::IdempotencyKeyRequired => ErrorCode::IdempotencyKeyRequired,
            RuntimeError::IdempotencyUnsupported => ErrorCode::IdempotencyUnsupported,
            RuntimeError::IdempotencyConflict => ErrorCode::IdempotencyConflict,
            RuntimeError::ExternalAccountUnbound => ErrorCode::ExternalAccountUnbound,
            RuntimeError::DuplicateActionId => ErrorCode::DuplicateActionId,
            RuntimeError::ApprovalUnavailable => ErrorCode::ApprovalUnavailable,
            RuntimeError::NotFound(_) => ErrorCode::NotFound,
            RuntimeError::NotCancellable => ErrorCode::NotCancellable,
            RuntimeError::Terminal(_) => ErrorCode::Terminal,
            RuntimeError::InvalidQuery(_) => ErrorCode::InvalidQuery,
            RuntimeError::InvalidCursor => ErrorCode::InvalidCursor,
            RuntimeError::CursorExpired => ErrorCode::CursorExpired,
            RuntimeError::Purged { .. } => ErrorCode::Purged,
            RuntimeError::Signature(_) => ErrorCode::SecuritySignatureInvalid,
            RuntimeError::ClockSkew => ErrorCode::ClockSkew,
            RuntimeError::Replay => ErrorCode::Replay,
            RuntimeError::SessionState(_) => ErrorCode::SessionInvalidState,
            RuntimeError::SessionExpired => ErrorCode::SessionExpired,
            RuntimeError::ResumeTokenInvalid => ErrorCode::ResumeTokenInvalid,
            RuntimeError::Storage(_) => ErrorCode::StorageUnavailable,
            RuntimeError::Draining => ErrorCode::Draining,
            RuntimeError::RateLimited { .. } => ErrorCode::RateLimited,
            RuntimeError::QuotaExceeded { .. } => ErrorCode::QuotaExceeded,
            RuntimeError::QueueFull { .. } => ErrorCode::QueueFull,
            RuntimeError::Overloaded { .. } => ErrorCode::Overloaded,
            RuntimeError::Internal(_) => ErrorCode::Internal,
            RuntimeError::ResourceProduction(_) => ErrorCode::ConnectorFailed,
            RuntimeError::Approval(e) => e.code(),
            RuntimeError::PrincipalMismatch(_) => ErrorCode::PrincipalMismatch,
            RuntimeError::EscalationConflict => ErrorCode::EscalationConflict,
            RuntimeError::EscalationClosed(_) => ErrorCode::EscalationClosed,
            RuntimeError::ResolutionNotAllowed(_) => ErrorCode::ResolutionNotAllowed,
            RuntimeError::Transaction(e) => e.code(),
            RuntimeError::Callback(e) => e.code(),
            RuntimeError::Delegation(e) => e.code(),
        }
    }

    /// Whether this refuses a request for a security reason, so the refusal itself is audited
    /// (spec 18.3): a capability the caller may not invoke (answered as unknown, so an unknown one
    /// is audited too), a missing scope, another tenant, an unbound account, a principal mismatch, a
    /// failed signature, skew or replay check, an invalid resume token, an approver without
    /// authority, or a refused delegation or callback target. Malformed input is not.
    pub fn is_security_refusal(&self) -> bool {
        match self {
            RuntimeError::ScopeDenied(_)
            | RuntimeError::UnknownCapability(_)
            | RuntimeError::CancelDenied(_)
            | RuntimeError::ForeignTenant
            | RuntimeError::ExternalAccountUnbound
            | RuntimeError::PrincipalMismatch(_)
            | RuntimeError::Signature(_)
            | RuntimeError::ClockSkew
            | RuntimeError::Replay
            | RuntimeError::ResumeTokenInvalid
            | RuntimeError::Delegation(_)
            | RuntimeError::ResolutionNotAllowed(_) => true,
            RuntimeError::Approval(e) => matches!(
                e,
                ApprovalError::ApproverMismatch
                    | ApprovalError::NotEligible
                    | ApprovalError::SeparationOfDuties(_)
            ),
            RuntimeError::Callback(e) => matches!(e, CallbackError::TargetDenied(_)),
            _ => false,
        }
    }

    /// The protocol category (spec 19.1): the code's.
    pub fn category(&self) -> ErrorCategory {
        self.code().category()
    }

    /// Whether the same request may succeed later unchanged.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            RuntimeError::Storage(_)
                | RuntimeError::Internal(_)
                | RuntimeError::Draining
                | RuntimeError::RateLimited { .. }
                | RuntimeError::QuotaExceeded { .. }
                | RuntimeError::QueueFull { .. }
                | RuntimeError::Overloaded { .. }
        )
    }

    /// The wire error; the message never carries secrets (spec 22.7).
    pub fn to_protocol_error(&self) -> ProtocolError {
        if let RuntimeError::Decode(e) = self {
            return e.to_protocol_error();
        }
        let mut error = self.code().error(self.to_string());
        error.retryable = Some(self.retryable());
        match self {
            RuntimeError::RateLimited {
                bucket,
                retry_after_ms,
            } => {
                error.details =
                    Some(serde_json::json!({ "bucket": bucket, "retry_after_ms": retry_after_ms }));
            }
            RuntimeError::QuotaExceeded { bucket, limit } => {
                error.details = Some(serde_json::json!({
                    "bucket": bucket,
                    "limit": limit,
                    "retry_after_ms": QUOTA_RETRY_AFTER_MS,
                }));
            }
            RuntimeError::QueueFull { limit } | RuntimeError::Overloaded { limit } => {
                error.details = Some(serde_json::json!({
                    "limit": limit,
                    "retry_after_ms": QUOTA_RETRY_AFTER_MS,
                }));
            }
            _ => {}
        }
        error
    }
}
