//! The transport-independent AIP engine: admission, lifecycles, idempotency, sessions, events, receipts.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
