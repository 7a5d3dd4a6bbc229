//! Capability handlers: what the runtime dispatches an admitted action to (spec 11.2), the `http`
//! handler for capabilities served by any HTTP service, and the built-in demo capabilities.

pub mod demo;
pub mod http;
pub mod payment;
pub mod peer;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// An invocation mode a handler can serve (spec 11.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The caller waits for the final result on the same request.
    Sync,
    /// The caller gets an ack and reads the result later.
    Async,
    /// The caller receives chunks as they are produced.
    Streaming,
}

impl Mode {
    /// The wire spelling (`sync`, `async`, `streaming`), as stored with the action.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sync => "sync",
            Mode::Async => "async",
            Mode::Streaming => "streaming",
        }
    }

    /// The mode of a stored spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sync" => Some(Mode::Sync),
            "async" => Some(Mode::Async),
            "streaming" => Some(Mode::Streaming),
            _ => None,
        }
    }
}

/// What a handler declares it can do; admission compares it with the capability contract (spec 9.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandlerSupport {
    /// Modes the handler can run in.
    pub modes: BTreeSet<Mode>,
    /// Whether the handler observes the cancellation token and confirms cancellation.
    pub cancellable: bool,
    /// Whether the handler performs a provider side effect (a mutation).
    pub mutation: bool,
    /// The transaction modes it executes (spec 13); `None`: none, and a transaction contract on its
    /// capability is not advertised.
    pub transactions: Option<TransactionSupport>,
}

/// What a handler executes of spec 13. The capability contract may declare no more than this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionSupport {
    /// Modes it executes (`dry_run`, `plan`, `commit`, `execute`, `reconcile`, `compensate`).
    pub modes: BTreeSet<aip_core::TransactionMode>,
    /// The strongest dry-run fidelity it really executes (spec 13.2).
    pub dry_run_fidelity: aip_core::DryRunFidelity,
    /// How long a plan stays committable, ms.
    pub plan_ttl_ms: u64,
}

/// What a transactional action carries to its handler (spec 13), from the runtime's own stored
/// state, never from the request body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransactionContext {
    /// The mode to execute: `dry_run` must commit nothing, `plan` must commit nothing.
    pub mode: aip_core::TransactionMode,
    /// The transaction.
    pub transaction_id: String,
    /// With `commit`: the stored plan being committed.
    pub plan: Option<aip_core::TransactionPlan>,
    /// With `commit` and `execute`: the operation the provider must commit under (its idempotency
    /// key at the provider, so a reconciliation after any crash can find it); with `reconcile`: the
    /// operation to look up.
    pub operation: Option<aip_core::ProviderOperationRef>,
    /// With `compensate`: the committed operation being compensated.
    pub compensates: Option<Compensated>,
    /// With `reconcile`: the cursor the previous reconciliation of this operation returned.
    pub reconciliation_cursor: Option<String>,
}

/// The committed operation a compensating action compensates (spec 13.7).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Compensated {
    /// The committed action.
    pub action_id: String,
    /// Its capability.
    pub capability_id: String,
    /// Its provider operation.
    pub operation: Option<aip_core::ProviderOperationRef>,
    /// Its output, when it completed.
    pub output: Option<Value>,
}

/// What a provider says of an operation whose outcome was unknown (spec 13.6). Only the first two
/// are definitive.
#[derive(Debug, Clone, PartialEq)]
pub enum Reconciliation {
    /// The operation committed; `output` is what the commit would have returned.
    Committed {
        /// The committed operation's output.
        output: Value,
    },
    /// The operation did not commit and never will: the plan may be committed again.
    NotCommitted,
    /// The provider cannot tell yet; ask again after `retry_after_ms`.
    Pending {
        /// When to ask again, ms from now.
        retry_after_ms: u64,
        /// The provider's cursor to continue from: retained and handed to the next
        /// reconciliation (`TransactionContext::reconciliation_cursor`).
        cursor: Option<String>,
    },
}

/// The frozen trusted execution context of spec 11.2, built by the runtime from authenticated state.
///
/// Handlers must take authority from here, never from `Action.input` or `Action.identity`.
#[derive(Debug, Clone, Serialize)]
pub struct TrustedContext {
    /// The action being executed.
    pub action_id: String,
    /// The admitted capability.
    pub capability_id: String,
    /// The mode the action was admitted in.
    pub mode: Mode,
    /// The transport-authenticated principal.
    pub principal_id: String,
    /// The authenticated principal's kind (spec 8.1).
    pub principal_kind: aip_core::PrincipalKind,
    /// How the principal was authenticated (`bearer` or a did:key).
    pub issuer: String,
    /// The tenant bound to the principal by configuration (spec 22.6).
    pub tenant: String,
    /// Scopes granted to the principal by configuration.
    pub scopes: Vec<String>,
    /// The external account bound to the principal by configuration (spec 11.2), if any.
    pub external_account: Option<crate::caller::ExternalAccount>,
    /// The idempotency key, when the action carries one.
    pub idempotency_key: Option<String>,
    /// Session the action belongs to, if any.
    pub session_id: Option<String>,
    /// Correlation id copied from the envelope.
    pub correlation_id: Option<String>,
    /// Trace metadata copied from the envelope.
    pub trace: Option<Value>,
    /// The immutable deadline as milliseconds since the Unix epoch (spec 11.1).
    pub deadline_unix_ms: u64,
    /// The remaining time budget, fixed when the context was frozen.
    #[serde(skip)]
    pub deadline: Instant,
    /// Admission time as milliseconds since the Unix epoch.
    pub admitted_unix_ms: u64,
    /// The delegation chain the action arrived with (spec 14.3), checked at admission; a handler
    /// that delegates further extends it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegation_chain: Vec<aip_core::DelegationEntry>,
    /// Signalled when cancellation of this action is requested (spec 11.8).
    #[serde(skip)]
    pub cancellation: CancellationToken,
    /// Where a streaming action emits its chunks (spec 11.6); inert in other modes.
    #[serde(skip)]
    pub chunks: crate::stream::ChunkSink,
    /// The transaction context of a transactional action (spec 13).
    pub transaction: Option<TransactionContext>,
    /// The fence of the lease this run holds: a provider that can check it in the same write as
    /// its effect (`aip_store::RecordStore::insert_record_fenced`) can never commit from a worker
    /// whose lease was superseded (spec 13.4).
    #[serde(skip)]
    pub fence: Option<aip_store::Fence>,
    /// Where the handler reports the provider's own reference for the operation, with any outcome
    /// (spec 13.6, 19.3): as soon as the provider names it, even if the call then times out.
    #[serde(skip)]
    pub provider_operation: OperationReport,
}

/// A provider operation reference a handler reports while it runs (see
/// [`TrustedContext::provider_operation`]). The last report wins.
#[derive(Debug, Clone, Default)]
pub struct OperationReport(
    std::sync::Arc<std::sync::Mutex<Option<aip_core::ProviderOperationRef>>>,
);

impl OperationReport {
    /// Reports the provider's reference for the operation.
    pub fn report(&self, operation: aip_core::ProviderOperationRef) {
        // A poisoned lock only means a reporter panicked mid-write; the slot stays usable.
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(operation);
    }

    /// The reported reference, if any.
    pub fn reported(&self) -> Option<aip_core::ProviderOperationRef> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl TrustedContext {
    /// Time left before the deadline (zero once it has passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// A successful handler outcome: the structured output of the action.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerOutput {
    /// Structured output; validated against the capability's output schema before `completed`.
    pub output: Value,
    /// User-facing message parts of the result (text, images, audio, files), bounded like the
    /// output; profiles project them (MCP content blocks).
    pub message: Vec<aip_core::MessagePart>,
}

/// Why a handler did not complete. Each variant maps to one lifecycle outcome.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// The handler observed the cancellation signal and confirms nothing was (or remains) done.
    #[error("the handler confirmed cancellation")]
    Cancelled,
    /// The action failed with a definite outcome.
    #[error("handler failed: {code}: {message}")]
    Failed {
        /// Stable namespaced error code.
        code: String,
        /// Human-readable text (redacted of secrets).
        message: String,
        /// Whether retrying the same request may succeed.
        retryable: bool,
    },
    /// The provider may or may not have committed the side effect (spec 13.6, 19.3).
    #[error("uncertain provider outcome: {0}")]
    UncertainOutcome(String),
    /// The immutable deadline passed before the handler finished.
    #[error("deadline exceeded")]
    DeadlineExceeded,
}

/// A capability implementation. Implement this to embed the runtime as a library.
#[async_trait]
pub trait ActionHandler: Send + Sync + 'static {
    /// The declared implementation support, checked against the capability contract on admission.
    fn support(&self) -> HandlerSupport;

    /// Execute one admitted action. `input` has already passed the capability input schema. A
    /// transactional action names its mode in `ctx.transaction`.
    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError>;

    /// The peer this handler delegates to (spec 14), if it does: the parent action's view then
    /// names the delegation.
    fn delegation_peer(&self) -> Option<&str> {
        None
    }

    /// The peer's pinned identity, recorded with the delegation (spec 14.2: a URL alone is not
    /// identity): an AIP peer's did:key, or what binds a non-AIP peer (its origin, the name its
    /// card states, the card digest).
    fn delegation_identity(&self) -> Option<Value> {
        None
    }

    /// Asks again about the delegated child of a parent (`ctx`, `input`) whose outcome was unknown
    /// (spec 14.5): `Committed` with the child's output, `NotCommitted` when it failed or was
    /// cancelled, `Pending` while it runs. Only handlers that delegate implement it.
    async fn follow_child(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<Reconciliation, HandlerError> {
        let _ = (ctx, input);
        Err(HandlerError::Failed {
            code: aip_core::ErrorCode::DelegationChildFailed.as_str().into(),
            message: "this handler delegates nothing".into(),
            retryable: false,
        })
    }

    /// Looks up an operation whose outcome was unknown (spec 13.6). Called only for capabilities
    /// whose [`TransactionSupport`] lists `reconcile`.
    async fn reconcile(
        &self,
        ctx: &TrustedContext,
        operation: &aip_core::ProviderOperationRef,
    ) -> Result<Reconciliation, HandlerError> {
        let _ = (ctx, operation);
        Err(HandlerError::Failed {
            code: aip_core::ErrorCode::TransactionModeUnsupported
                .as_str()
                .into(),
            message: "this handler cannot reconcile operations".into(),
            retryable: false,
        })
    }
}
