//! The closed set of wire error codes this implementation emits (spec 19.1, 25.2): one variant per
//! code, each with its one category. Every crate names codes through [`ErrorCode`], never as string
//! literals, so a code cannot drift between the place that raises it and the place that maps it.
//!
//! `ProtocolError.code` stays a string on the wire: peers may send codes this set does not know.
//! Codes a capability handler reports are the handler's own (namespaced by the runtime); they are not
//! variants here.

use crate::decode_error::LimitKind;
use crate::rules::Rule;
use crate::{ErrorCategory, ProtocolError};

macro_rules! error_codes {
    ($( $(#[$meta:meta])* $variant:ident = $code:literal, $category:ident; )+) => {
        /// A wire error code with its category (spec 19.1). `Display` prints the code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $( $(#[$meta])* $variant, )+
            /// A bound of [`crate::Limits`] was exceeded (spec 22.8).
            Limit(LimitKind),
            /// A semantic rule of the spec text failed (spec 6.4).
            Semantic(Rule),
        }

        impl ErrorCode {
            /// The codes without a nested kind, in declaration order.
            const FLAT: &'static [ErrorCode] = &[$(ErrorCode::$variant),+];

            /// The stable namespaced code.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)+
                    ErrorCode::Limit(kind) => kind.code(),
                    ErrorCode::Semantic(rule) => rule.code(),
                }
            }

            /// The protocol category (spec 19.1); one per code.
            pub fn category(self) -> ErrorCategory {
                match self {
                    $(ErrorCode::$variant => ErrorCategory::$category,)+
                    ErrorCode::Limit(_) | ErrorCode::Semantic(_) => ErrorCategory::Permanent,
                }
            }
        }
    };
}

error_codes! {
    // ---- core and envelope (spec 6.4, 7) ----
    /// The message type is registered but this runtime does not serve it, or not on this endpoint.
    UnsupportedMessage = "aip.core.unsupported_message_type", Permanent;
    /// Nothing visible under this id (also for objects of other readers, spec 16.3).
    NotFound = "aip.core.not_found", Permanent;
    /// The bytes are not one UTF-8 JSON value (spec 5.1).
    MalformedJson = "aip.envelope.malformed_json", Permanent;
    /// `aip_version` is not `1.0` (spec 23.1).
    UnsupportedVersion = "aip.envelope.unsupported_version", Permanent;
    /// `message_type` is not registered (spec 7).
    UnknownMessageType = "aip.envelope.unsupported_message_type", Permanent;
    /// The value does not satisfy the message's JSON Schema (spec 6.4).
    SchemaViolation = "aip.envelope.schema_violation", Permanent;
    // ---- capability schemas (spec 22.8) ----
    /// A capability schema does not compile.
    SchemaInvalid = "aip.schema.invalid", Permanent;
    /// A capability schema nests deeper than the bound.
    SchemaTooDeep = "aip.schema.too_deep", Permanent;
    /// A capability schema has more nodes than the bound.
    SchemaTooManyNodes = "aip.schema.too_many_nodes", Permanent;
    /// A capability schema's text is larger than the bound.
    SchemaTooLarge = "aip.schema.too_large", Permanent;
    /// An input schema is not an object schema (spec 9.3).
    SchemaNotObject = "aip.schema.not_an_object_schema", Permanent;
    // ---- envelope signatures (spec 22.2) ----
    /// The signed document is not a JSON object.
    SignatureNotAnObject = "aip.signature.not_an_object", Auth;
    /// The envelope has no `security` object.
    SignatureMissingSecurity = "aip.signature.missing_security", Auth;
    /// `security.did` is missing.
    SignatureMissingDid = "aip.signature.missing_did", Auth;
    /// `security.signature` is missing.
    SignatureMissingSignature = "aip.signature.missing_signature", Auth;
    /// `security.did` is not an Ed25519 `did:key`.
    SignatureInvalidDid = "aip.signature.invalid_did", Auth;
    /// The signature is not standard Base64 of 64 bytes.
    SignatureBadEncoding = "aip.signature.bad_encoding", Auth;
    /// The signature does not verify.
    SignatureInvalid = "aip.signature.invalid", Auth;
    // ---- receipt chains (spec 18.2) ----
    /// A receipt or chain does not decode.
    ReceiptMalformed = "aip.receipt.malformed", Permanent;
    /// A receipt has no hash.
    ReceiptMissingHash = "aip.receipt.missing_hash", Permanent;
    /// A receipt's hash is not the hash of its content.
    ReceiptHashMismatch = "aip.receipt.hash_mismatch", Permanent;
    /// A receipt was hashed in the `hash: null` form, not the spec's omitted form.
    ReceiptNullFormHash = "aip.receipt.null_form_hash", Permanent;
    /// The first receipt names a previous hash.
    ReceiptFirstHasPrevious = "aip.receipt.first_has_previous", Permanent;
    /// A receipt's `previous_hash` is not its predecessor's hash.
    ReceiptBrokenLink = "aip.receipt.broken_link", Permanent;
    /// A non-empty chain has no root hash.
    ReceiptMissingRootHash = "aip.receipt.missing_root_hash", Permanent;
    /// The root hash is not the hash of the receipt hashes.
    ReceiptRootMismatch = "aip.receipt.root_mismatch", Permanent;
    // ---- discovery and authorization (spec 9, 22.5) ----
    /// No admitted capability has this id, or the caller cannot see it.
    CapabilityNotFound = "aip.discovery.capability_not_found", Permanent;
    /// The caller's scopes do not allow the request.
    ScopeDenied = "aip.policy.scope_denied", Policy;
    /// The capability needs an approval workflow this runtime does not provide.
    ApprovalUnavailable = "aip.policy.approval_unavailable", Policy;
    /// The approval was denied: the governed action does not run (spec 12.4).
    ApprovalDenied = "aip.policy.approval_denied", Policy;
    /// The approval expired before it was granted, or before its action could run.
    ApprovalExpired = "aip.policy.approval_expired", Policy;
    /// The approval was revoked before its action ran.
    ApprovalRevoked = "aip.policy.approval_revoked", Policy;
    /// The approval is no longer open for this decision (decided, expired, revoked or cancelled).
    ApprovalClosed = "aip.policy.approval_closed", Permanent;
    /// The claimed approver is not the authenticated principal (approval spoofing).
    ApproverMismatch = "aip.policy.approver_mismatch", Auth;
    /// The authenticated principal holds no authority the approval's rule accepts.
    ApproverNotEligible = "aip.policy.approver_not_eligible", Policy;
    /// Separation of duties forbids this principal deciding (for example, the requester itself).
    SeparationOfDuties = "aip.policy.separation_of_duties", Policy;
    /// The decision names another policy hash than the stored one, or the governed subject changed.
    PolicyHashMismatch = "aip.policy.policy_hash_mismatch", Permanent;
    /// A decision constraint is unknown, malformed or not satisfied by the governed input.
    ConstraintInvalid = "aip.policy.constraint_invalid", Permanent;
    /// The policy requires evidence the decision does not carry.
    EvidenceRequired = "aip.policy.evidence_required", Permanent;
    /// A decision id was reused for a different decision.
    DecisionConflict = "aip.policy.decision_conflict", Permanent;
    /// A principal named in the payload (`requested_by`, `resolved_by`) is not the authenticated
    /// principal.
    PrincipalMismatch = "aip.auth.principal_mismatch", Auth;
    /// The escalation is no longer open (resolved, expired or cancelled).
    EscalationClosed = "aip.policy.escalation_closed", Permanent;
    /// An escalation id was reused for a different escalation.
    EscalationConflict = "aip.policy.escalation_conflict", Permanent;
    /// The resolution is not one of the escalation's allowed decisions, or not this principal's.
    ResolutionNotAllowed = "aip.policy.resolution_not_allowed", Policy;
    /// No bearer token, or an unknown one.
    Unauthenticated = "aip.auth.unauthenticated", Auth;
    // ---- actions (spec 11) ----
    /// The input does not satisfy the capability input schema.
    InvalidInput = "aip.action.invalid_input", Permanent;
    /// The capability contract does not support the requested mode.
    UnsupportedMode = "aip.action.unsupported_mode", Permanent;
    /// The action carries a context (transaction, callback, delegation, ...) this runtime does not
    /// implement: refused rather than ignored (spec 22.1).
    UnsupportedContext = "aip.action.unsupported_context", Permanent;
    /// `timeout_ms` is zero or above the configured maximum.
    InvalidTimeout = "aip.action.invalid_timeout", Permanent;
    /// The action id is taken by a different request.
    DuplicateActionId = "aip.action.duplicate_id", Permanent;
    /// The action cannot be cancelled.
    NotCancellable = "aip.action.not_cancellable", Permanent;
    /// The action is already terminal.
    Terminal = "aip.action.terminal", Permanent;
    /// The action's deadline passed.
    DeadlineExceeded = "aip.action.deadline_exceeded", Temporary;
    /// The handler confirmed cancellation (an `error` chunk's code).
    Cancelled = "aip.action.cancelled", Permanent;
    /// The handler's output does not satisfy the output schema (spec 11.7).
    OutputSchemaViolation = "aip.action.output_schema_violation", Connector;
    /// The action's job ran out of attempts (spec 11.5 `dead_lettered`).
    DeadLettered = "aip.action.dead_lettered", Temporary;
    // ---- transactions (spec 13) ----
    /// The capability does not accept this transaction mode (its contract's `supported_modes`), or
    /// the mode is not one a request may carry.
    TransactionModeUnsupported = "aip.transaction.mode_unsupported", Permanent;
    /// The transaction id belongs to another capability or principal, or the transaction's state
    /// does not allow this step.
    TransactionConflict = "aip.transaction.conflict", Permanent;
    /// The plan's expiry passed: it can no longer be committed (spec 13.4).
    PlanExpired = "aip.transaction.plan_expired", Permanent;
    /// The commit no longer matches its plan: capability, input, identity, policy, approval or
    /// transaction context changed (spec 13.4).
    PlanMismatch = "aip.transaction.plan_mismatch", Permanent;
    /// The plan is owned by another commit, or already terminal (spec 13.4).
    PlanClaimed = "aip.transaction.plan_claimed", Permanent;
    /// The operation declares that it cannot be rolled back or compensated (spec 13.7).
    RollbackNotSupported = "aip.transaction.rollback_not_supported", Permanent;
    /// The target is not a committed operation this capability may compensate (spec 13.7).
    NotCompensable = "aip.transaction.not_compensable", Permanent;
    /// The transaction has no unknown outcome to reconcile, or a reconciliation is running (13.6).
    NotReconcilable = "aip.transaction.not_reconcilable", Permanent;
    // ---- delegation (spec 14) ----
    /// The sender of a delegation is not a configured peer, or its signature is not the peer's key.
    DelegationPeerUnauthenticated = "aip.delegation.peer_unauthenticated", Auth;
    /// The request names another requester or delegate than the authenticated peer and this node.
    DelegationPeerMismatch = "aip.delegation.peer_mismatch", Policy;
    /// The chain is longer than ten entries or the configured limit (spec 14.3).
    DelegationChainTooLong = "aip.delegation.chain_too_long", Policy;
    /// This node already appears in the chain (spec 14.3).
    DelegationLoop = "aip.delegation.loop", Policy;
    /// A hop grants more than it received (spec 14.3).
    DelegationScopeWidened = "aip.delegation.scope_widened", Policy;
    /// The delegated scope does not cover the child's capability.
    DelegationScopeInsufficient = "aip.delegation.scope_insufficient", Policy;
    /// A chain entry or a delegated authority grant expired (spec 8.4, 14.3).
    DelegationExpired = "aip.delegation.expired", Policy;
    /// The chain passes through a forbidden trust domain (spec 14.3).
    DelegationTrustDomainForbidden = "aip.delegation.trust_domain_forbidden", Policy;
    /// The chain's tenant constraints exclude the tenant the child would run in (spec 14.3).
    DelegationTenantForbidden = "aip.delegation.tenant_forbidden", Policy;
    /// The chain's region constraints exclude the node that would run the child (spec 14.3).
    DelegationResidencyForbidden = "aip.delegation.residency_forbidden", Policy;
    /// The capability's execution contract here is not the one the delegating node states.
    DelegationContractMismatch = "aip.delegation.contract_mismatch", Permanent;
    /// The chain or the request is malformed (no entry for this hop, an empty scope).
    DelegationChainInvalid = "aip.delegation.chain_invalid", Permanent;
    /// The delegated child failed, or its peer could not give a verifiable outcome.
    DelegationChildFailed = "aip.delegation.child_failed", Connector;
    // ---- callbacks (spec 17) ----
    /// The callback is malformed: an unknown profile, an unreadable target, unknown metadata.
    CallbackTargetInvalid = "aip.callback.target_invalid", Permanent;
    /// Deployment policy refuses the callback target (spec 17.1, 17.4): scheme, host allowlist,
    /// address policy, subject prefix.
    CallbackTargetDenied = "aip.callback.target_denied", Policy;
    /// Only a failed or dead-lettered delivery can be re-driven.
    CallbackNotRedrivable = "aip.callback.not_redrivable", Permanent;
    /// The worker's lease was superseded before the provider committed: nothing was committed.
    LeaseLost = "aip.runtime.lease_lost", Temporary;
    // ---- idempotency (spec 9.5) ----
    /// The capability requires an idempotency key.
    IdempotencyKeyRequired = "aip.idempotency.key_required", Permanent;
    /// The capability does not support idempotency keys.
    IdempotencyUnsupported = "aip.idempotency.unsupported", Permanent;
    /// The key is owned by an earlier action with a conflicting invocation.
    IdempotencyConflict = "aip.idempotency.conflict", Permanent;
    /// The key scope is `external_account` and the caller has none bound.
    ExternalAccountUnbound = "aip.idempotency.external_account_unbound", Policy;
    // ---- reads (spec 16) ----
    /// A list limit, wait or filter outside its bounds.
    InvalidQuery = "aip.read.invalid_query", Permanent;
    /// A cursor this reader did not receive for this query.
    InvalidCursor = "aip.read.invalid_cursor", Permanent;
    /// The cursor points into history that retention purged (spec 16.2): read again without it.
    CursorExpired = "aip.read.cursor_expired", Permanent;
    /// What was asked for was removed by retention (spec 16.2, 18.2); the answer names its archive.
    Purged = "aip.read.purged", Permanent;
    // ---- security (spec 22.2-22.3) ----
    /// The envelope signature is missing, invalid, or its signer is not trusted.
    SecuritySignatureInvalid = "aip.security.signature_invalid", Auth;
    /// `sent_at` is outside the accepted clock skew.
    ClockSkew = "aip.security.clock_skew", Auth;
    /// The message id was already claimed within the replay window.
    Replay = "aip.security.replay", Auth;
    // ---- sessions (spec 10) ----
    /// The session state does not allow the request.
    SessionInvalidState = "aip.session.invalid_state", Permanent;
    /// The session's lifetime has passed: it takes no actions and cannot be resumed (spec 10.5).
    SessionExpired = "aip.session.expired", Permanent;
    /// The resume token is unknown, expired, used or another session's.
    ResumeTokenInvalid = "aip.session.resume_token_invalid", Auth;
    /// A handshake was rejected (in `HandshakeResponse.rejection_reason`).
    SessionRejected = "aip.session.rejected", Policy;
    // ---- runtime ----
    /// The caller's principal or tenant sent more work than its rate limit allows; send it again
    /// after `details.retry_after_ms` (spec 22.8). Nothing was admitted.
    RateLimited = "aip.limit.rate_limited", Policy;
    /// The caller's principal or tenant already holds as many unfinished actions as its
    /// concurrency quota allows; send it again once one finishes (spec 22.8). Nothing was admitted.
    QuotaExceeded = "aip.limit.quota_exceeded", Policy;
    /// Durable storage failed; nothing was acknowledged.
    StorageUnavailable = "aip.runtime.storage_unavailable", Temporary;
    /// The node is shutting down and takes no new work; send it again (to another node, or after
    /// the restart). Reads are still served.
    Draining = "aip.runtime.draining", Temporary;
    /// The node is handling as many requests as it is configured to (spec 22.8); send it again
    /// after `Retry-After`. Nothing was done.
    Overloaded = "aip.runtime.overloaded", Temporary;
    /// As many actions as the deployment bounds already wait for a worker (spec 22.8); send it
    /// again after `Retry-After`. Nothing was admitted.
    QueueFull = "aip.runtime.queue_full", Temporary;
    /// The request was not answered within the node's request timeout. An action it submitted
    /// may have been admitted and runs on: read it by its id.
    RequestTimeout = "aip.runtime.request_timeout", Temporary;
    /// A capability handler panicked; its action failed and the worker goes on.
    HandlerPanicked = "aip.runtime.handler_panicked", Connector;
    /// The runtime failed in a way it did not expect; nothing was acknowledged.
    Internal = "aip.runtime.internal", Temporary;
    // ---- connectors (spec 19.3) ----
    /// The connector failed without a code of its own.
    ConnectorFailed = "aip.connector.failed", Connector;
    /// The provider may or may not have committed the side effect (spec 13.6).
    UncertainOutcome = "aip.connector.uncertain_outcome", Connector;
    /// The `http` handler service answered a non-success status.
    ConnectorHttpStatus = "aip.connector.http_status", Connector;
    /// The `http` handler service could not be reached; nothing was sent.
    ConnectorUnreachable = "aip.connector.unreachable", Connector;
    /// A connector reported a code that is not a namespaced code.
    ConnectorInvalidCode = "aip.connector.invalid_code", Connector;
    /// An upstream MCP tool answered with `isError`.
    ConnectorToolError = "aip.connector.tool_error", Connector;
    /// An upstream answered with a protocol error or something that is not its protocol.
    ConnectorProtocol = "aip.connector.protocol_error", Connector;
    // ---- streams (spec 11.6) ----
    /// A chunk was emitted after `done`.
    StreamClosed = "aip.stream.closed", Permanent;
    /// A chunk could not be encoded.
    StreamEncode = "aip.stream.encode", Permanent;
    /// Another worker owns the action now.
    StreamLeaseLost = "aip.stream.lease_lost", Temporary;
    /// A chunk could not be persisted.
    StreamPersistFailed = "aip.stream.persist_failed", Temporary;
    // ---- transports (spec 20) ----
    /// The request body's media type is not accepted.
    UnsupportedMediaType = "aip.transport.unsupported_media_type", Permanent;
    /// The request body was refused before decoding (size, read failure).
    BodyRejected = "aip.transport.body_rejected", Permanent;
    /// The consumer did not keep up; the stream was closed.
    SlowConsumer = "aip.transport.slow_consumer", Transport;
    /// The connection follows its maximum number of streams.
    TooManyStreams = "aip.transport.too_many_streams", Temporary;
    /// A WebSocket binary frame (spec 20.3).
    UnsupportedFrame = "aip.transport.unsupported_frame", Permanent;
    /// `/aip/v1/ws` was requested without a WebSocket upgrade.
    WebsocketUpgradeRequired = "aip.transport.websocket_upgrade_required", Permanent;
    /// The Origin header is not allowed (DNS-rebinding protection).
    OriginNotAllowed = "aip.transport.origin_not_allowed", Policy;
    /// The Host header is not allowed (DNS-rebinding protection).
    HostNotAllowed = "aip.transport.host_not_allowed", Policy;
    // ---- webhook ingress (spec 21.3) ----
    /// A signed webhook event's type is not one its subscription maps to a capability.
    WebhookEventTypeNotAllowed = "aip.webhook.event_type_not_allowed", Policy;
    // ---- built-in demo capabilities ----
    /// A demo capability's input is outside its bounds.
    DemoInvalidInput = "aip.demo.invalid_input", Permanent;
    /// `cap:demo:book` already recorded this booking.
    DemoDuplicateBooking = "aip.demo.duplicate_booking", Permanent;
    /// `cap:demo:transfer` already recorded a transfer for this action (a second dispatch).
    DemoDuplicateTransfer = "aip.demo.duplicate_transfer", Permanent;
    /// `cap:demo:payment`'s account balance does not cover the payment.
    DemoInsufficientFunds = "aip.demo.insufficient_funds", Permanent;
    /// `cap:demo:refund` found no payment to refund, or it was refunded already.
    DemoNothingToRefund = "aip.demo.nothing_to_refund", Permanent;
    /// The demo capabilities' store is unavailable.
    DemoStoreUnavailable = "aip.demo.store_unavailable", Temporary;
}

impl ErrorCode {
    /// Every code: the flat ones, then each limit kind and each semantic rule.
    pub fn all() -> impl Iterator<Item = ErrorCode> {
        Self::FLAT
            .iter()
            .copied()
            .chain(LimitKind::ALL.iter().map(|k| ErrorCode::Limit(*k)))
            .chain(Rule::ALL.iter().map(|r| ErrorCode::Semantic(*r)))
    }

    /// The code whose wire string is `code`, if this implementation emits it.
    pub fn parse(code: &str) -> Option<Self> {
        Self::all().find(|c| c.as_str() == code)
    }

    /// A wire error with this code, its category and `message`; `retryable` is left unset.
    pub fn error(self, message: impl Into<String>) -> ProtocolError {
        ProtocolError::new(self.as_str(), self.category(), message)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Whether `code` is a namespaced code: dot-separated lowercase segments of `[a-z0-9_]`, each
/// starting with a letter, at least two segments, at most 128 bytes (spec 19.1, 25.2).
pub fn is_namespaced_code(code: &str) -> bool {
    let mut segments = 0;
    let well_formed = code.len() <= 128
        && code.split('.').all(|segment| {
            segments += 1;
            segment
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase())
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        });
    well_formed && segments >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_namespaced_under_aip_and_used_once() {
        let mut seen = std::collections::BTreeMap::new();
        for code in ErrorCode::all() {
            assert!(is_namespaced_code(code.as_str()), "{code}");
            assert!(code.as_str().starts_with("aip."), "{code}");
            // Rules that restate an envelope check share its code; nothing else may.
            if let Some(earlier) = seen.insert(code.as_str(), code) {
                assert!(
                    matches!(code, ErrorCode::Semantic(_)),
                    "{code} is used by {earlier:?} and {code:?}"
                );
            }
        }
    }

    #[test]
    fn a_code_parses_back_to_itself() {
        for code in ErrorCode::all().filter(|c| !matches!(c, ErrorCode::Semantic(_))) {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::parse("aip.nope.never"), None);
    }

    #[test]
    fn codes_outside_the_grammar_are_not_namespaced() {
        for bad in [
            "",
            "timeout",
            "Upstream.Failed",
            "a..b",
            ".a.b",
            "a.b.",
            "a.1b",
            "a b.c",
        ] {
            assert!(!is_namespaced_code(bad), "{bad:?}");
        }
        assert!(!is_namespaced_code(&format!("a.{}", "b".repeat(127))));
        assert!(is_namespaced_code("stripe.card_declined"));
    }
}
