//! The AIP engine, independent of transports: admission (spec 11.3), lifecycles, idempotency,
//! cancellation, events, receipts and the authorized read model.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod caller;
pub mod clock;
pub mod demo;
pub mod engine;
pub mod error;
pub mod handler;
pub mod http_handler;
pub mod read;
pub mod receipts;
pub mod registry;
pub mod session;
pub mod stream;

pub use caller::Caller;
pub use engine::{Endpoint, Reply, Runtime, RuntimeConfig, SignaturePolicy};
pub use error::RuntimeError;
pub use handler::{
    ActionHandler, HandlerError, HandlerOutput, HandlerSupport, Mode, TrustedContext,
};
pub use registry::Registry;
pub use stream::{ActionFollower, ChunkPage, ChunkSink, StreamItem, StreamPosition};
