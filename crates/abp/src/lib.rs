//! Agent Blueprint Protocol: verification of portable agent artifacts (spec `abp.md`).
//!
//! Pure and synchronous: bytes in, typed verdicts out. No I/O, no async, no `unsafe`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
