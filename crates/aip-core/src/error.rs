//! The wire form of a protocol error (spec 19.1).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{Checker, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Machine-readable protocol or action error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProtocolError {
    /// Stable machine code.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// Error category.
    pub category: ErrorCategory,
    /// Whether retry is safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Suggested retry delay.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub retry_after_ms: Option<u64>,
    /// Structured details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Connector/profile/source metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Value>,
}

impl Validate for ProtocolError {
    fn validate(&self, v: &mut Checker) {
        crate::rules::protocol_error(self, v);
    }
}

/// Protocol error category.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// Temporary failure.
    Temporary,
    /// Permanent failure.
    Permanent,
    /// Authentication or authorization failure.
    Auth,
    /// Policy failure.
    Policy,
    /// Economic/settlement failure.
    Economic,
    /// Connector failure.
    Connector,
    /// Transport failure.
    Transport,
}

crate::wire_enum!(ErrorCategory { Temporary => "temporary", Permanent => "permanent", Auth => "auth", Policy => "policy", Economic => "economic", Connector => "connector", Transport => "transport" });

/// Error message body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    /// Error details.
    pub error: ProtocolError,
}

impl Validate for ErrorBody {
    fn validate(&self, v: &mut Checker) {
        v.field("error", |v| self.error.validate(v));
    }
}
