//! JSON Schemas generated from the `aip-core` types, and a compiled validator registry.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
