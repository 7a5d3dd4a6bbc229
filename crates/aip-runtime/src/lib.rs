//! The AIP engine, independent of transports: admission (spec 11.3), lifecycles, idempotency,
//! cancellation, sessions, streaming, events, receipts and the authorized read model.
//!
//! Layout: [`Runtime`] (`runtime.rs`) owns the store, the admitted capabilities and the trusted
//! configuration; `dispatch.rs` is the one table from message type to the module that serves it;
//! `admission/` runs spec 11.3's steps with a [`PolicyGate`]; `action/` submits, executes, cancels
//! and recovers actions; `worker/` is the leased worker every durable job kind shares; `read/`,
//! `session/` and `stream/` serve the rest. Bindings (HTTP, SSE, WebSocket, NATS) live in
//! `aip-server` and map a [`Reply`]'s [`Outcome`] to their own signalling.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod action;
pub mod admission;
pub mod approval;
pub mod callback;
pub mod caller;
mod chain;
pub mod channel;
pub mod clock;
pub mod delegation;
mod dispatch;
pub mod error;
pub mod escalation;
mod events;
pub mod handler;
mod read;
pub mod registry;
mod reply;
pub mod resource;
pub mod retention;
mod runtime;
pub mod scope;
mod security;
mod session;
pub mod settlement;
mod stream;
mod transaction;
mod worker;

pub use action::{ACTION_QUEUE, Submitted};
pub use admission::ActionRequest;
pub use admission::admitted::admitted_action;
pub use admission::policy::{PolicyDecision, PolicyGate, PolicySubject, ScopePolicy};
pub use caller::Caller;
pub use dispatch::{Accept, SERVED};
pub use error::{CallbackError, DelegationError, RuntimeError, TransactionError};
pub use handler::{
    ActionHandler, Compensated, HandlerError, HandlerOutput, HandlerSupport, Mode, OperationReport,
    Reconciliation, TransactionContext, TransactionSupport, TrustedContext,
};
pub use registry::Registry;
pub use reply::{Outcome, Reply};
pub use runtime::{BootIdentity, Drain, Runtime, RuntimeConfig, SignaturePolicy};
pub use security::rate::{QuotaPolicy, Rate, RatePolicy};
pub use security::refusals::{
    AUTH_REFUSED, NODE_LOG_TENANT, Refusal, RefusalPolicy, RefusalReason,
};
pub use session::SessionCheck;
pub use session::{HEARTBEAT_INTERVAL_MS, SESSION_TTL_MS, SessionCancellation};
pub use stream::{
    ActionFollower, ChunkPage, ChunkSink, MAX_CHUNK_BATCH, StreamItem, StreamPosition,
};
pub use transaction::{DEFAULT_PLAN_TTL_MS, MAX_PLAN_TTL_MS};
