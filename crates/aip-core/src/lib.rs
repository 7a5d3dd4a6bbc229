//! The AIP 1.0 wire model: the envelope, the message-type registry, every body type, ids, time,
//! typed protocol errors, semantic validation, canonical JSON, receipts and `did:key` signatures.
//!
//! Entry points: [`decode_envelope`] (bounded bytes → typed, validated [`Envelope`], spec 6.4),
//! [`Envelope::to_json_vec`] (back to the wire), [`canonical::to_canonical_vec`],
//! [`chain`] (receipt hashing and chain verification, 18.2), [`signing`] (22.2) and [`session_crypto`] (22.11).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// Wire-string helpers for a closed value enum: `ALL`, `as_str` and `Display`.
#[macro_export]
#[doc(hidden)]
macro_rules! wire_enum {
    ($name:ident { $($variant:ident => $wire:literal),+ $(,)? }) => {
        impl $name {
            /// Every value, in schema order.
            pub const ALL: &[$name] = &[$($name::$variant),+];

            /// The wire string of this value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub mod action;
pub mod approval;
pub mod audit;
pub mod callback;
pub mod canonical;
pub mod chain;
pub mod code;
pub mod content;
pub mod decode;
pub mod decode_error;
pub mod delegation;
pub mod envelope;
pub mod error;
pub mod ids;
pub mod lifecycle;
pub mod limits;
pub mod manifest;
mod num;
pub mod principal;
pub mod receipt;
pub mod registry;
pub mod retry;
pub mod rules;
pub mod session;
pub mod session_crypto;
pub mod signing;
pub mod time;
pub mod transaction;
pub mod validate;

pub use action::*;
pub use approval::*;
pub use audit::*;
pub use callback::*;
pub use code::{ErrorCode, is_namespaced_code};
pub use content::*;
pub use decode::{
    decode_body, decode_envelope, decode_envelope_value, decode_value, envelope_from_value,
};
pub use decode_error::{DecodeError, LimitKind};
pub use delegation::*;
pub use envelope::{AipVersion, Envelope};
pub use error::*;
pub use ids::*;
pub use lifecycle::*;
pub use limits::Limits;
pub use manifest::*;
pub use principal::*;
pub use receipt::*;
pub use registry::{MessageBody, MessageType};
pub use rules::Rule;
pub use session::*;
pub use time::Timestamp;
pub use transaction::*;
pub use validate::{Checker, Validate, Violation};
