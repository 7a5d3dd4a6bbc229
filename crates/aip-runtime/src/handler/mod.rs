//! Capability handlers: what the runtime dispatches an admitted action to (spec 11.2), the `http`
//! handler for capabilities served by any HTTP service, and the built-in demo capabilities.

pub mod demo;
pub mod http;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerSupport {
    /// Modes the handler can run in.
    pub modes: BTreeSet<Mode>,
    /// Whether the handler observes the cancellation token and confirms cancellation.
    pub cancellable: bool,
    /// Whether the handler performs a provider side effect (a mutation).
    pub mutation: bool,
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
    /// Signalled when cancellation of this action is requested (spec 11.8).
    #[serde(skip)]
    pub cancellation: CancellationToken,
    /// Where a streaming action emits its chunks (spec 11.6); inert in other modes.
    #[serde(skip)]
    pub chunks: crate::stream::ChunkSink,
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

    /// Execute one admitted action. `input` has already passed the capability input schema.
    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError>;
}
