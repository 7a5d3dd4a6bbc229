//! Agent Blueprint Protocol: verification of portable agent artifacts (spec `abp.md`).
//!
//! Pure and synchronous: bytes in, typed verdicts out. No async, no `unsafe`; the only I/O is
//! [`conformance::read_dir`]. Layers, strictly downward: bytes ([`json`], [`jcs`], [`base64url`],
//! [`digest`]) → artifacts ([`blueprint`], [`deployment`], [`extension`], [`schema`], [`predicate`],
//! [`portability`]) → algebra ([`bounds`], [`compatibility`], [`signature`], [`federation`],
//! [`reconcile`]) → [`conformance`]. Every result is evidence, never an authorization.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod base64url;
pub mod blueprint;
pub mod bounds;
pub mod compatibility;
pub mod conformance;
pub mod deployment;
pub mod digest;
pub mod error;
pub mod extension;
pub mod federation;
pub mod jcs;
pub mod json;
pub mod portability;
pub mod predicate;
pub mod reconcile;
pub mod schema;
mod shape;
pub mod signature;

pub use error::{CeilingKey, Code, Error, Result};
pub use shape::parse_timestamp_ms;
