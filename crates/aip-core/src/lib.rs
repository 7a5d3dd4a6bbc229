//! The AIP 1.0 wire model: envelope, message-type registry, bodies, errors, ids, time, receipts, signatures.
//!
//! Knows nothing about storage or transports.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
