//! Typed decode failures (spec 6.4, 19.1, 22.8): each variant has one stable wire code, a category
//! and the JSON pointer of the offending member, and converts into a wire [`ProtocolError`].

use serde_json::{Value, json};

use crate::rules::Rule;
use crate::validate::Violation;
use crate::{ErrorCategory, ErrorCode, ProtocolError};

/// Which bound of [`crate::Limits`] an input exceeded (spec 22.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    /// Total encoded size.
    EnvelopeBytes,
    /// Nesting depth of arrays and objects.
    Depth,
    /// Encoded length of one string (member names included).
    StringLength,
    /// Items of one array or members of one object.
    CollectionSize,
    /// A number outside the implementation's integer range (spec 5.1).
    NumberRange,
}

impl LimitKind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [LimitKind] = &[
        LimitKind::EnvelopeBytes,
        LimitKind::Depth,
        LimitKind::StringLength,
        LimitKind::CollectionSize,
        LimitKind::NumberRange,
    ];

    /// The wire code of exceeding this bound (spec 22.8).
    pub fn code(self) -> &'static str {
        match self {
            LimitKind::EnvelopeBytes => "aip.limit.envelope_bytes",
            LimitKind::Depth => "aip.limit.depth",
            LimitKind::StringLength => "aip.limit.string_length",
            LimitKind::CollectionSize => "aip.limit.collection_size",
            LimitKind::NumberRange => "aip.limit.number_range",
        }
    }

    /// Stable name used in codes and details.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::EnvelopeBytes => "envelope_bytes",
            LimitKind::Depth => "depth",
            LimitKind::StringLength => "string_length",
            LimitKind::CollectionSize => "collection_size",
            LimitKind::NumberRange => "number_range",
        }
    }
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an envelope or body was rejected, in spec 6.4 order.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A configured bound was exceeded before or while decoding (22.8).
    #[error("{kind} limit of {limit} exceeded at byte {offset}")]
    Limit {
        /// The bound.
        kind: LimitKind,
        /// The configured maximum.
        limit: u64,
        /// Byte offset in the input where the bound was crossed (0 for whole-input bounds).
        offset: usize,
        /// JSON pointer, when known.
        pointer: String,
    },
    /// The bytes are not one UTF-8 JSON value (5.1).
    #[error("malformed JSON: {message}")]
    MalformedJson {
        /// Parser message.
        message: String,
    },
    /// `aip_version` is present but not `1.0` (6.4).
    #[error("unsupported aip_version {found}")]
    UnsupportedVersion {
        /// The value found, as JSON text.
        found: String,
    },
    /// `message_type` is not registered (7.3: unsupported-message error).
    #[error("unsupported message type `{found}`")]
    UnsupportedMessageType {
        /// The type found.
        found: String,
    },
    /// `message_type` does not match the body key (6.1, 6.4).
    #[error("message_type `{message_type}` does not match body key `{body_key}`")]
    TypeMismatch {
        /// The declared type.
        message_type: String,
        /// The body key found.
        body_key: String,
    },
    /// `message_id` is empty (6.4).
    #[error("message_id is empty")]
    EmptyMessageId,
    /// `idempotency_key` is present but empty (6.4).
    #[error("idempotency_key is present but empty")]
    EmptyIdempotencyKey,
    /// The value does not satisfy the message's JSON Schema (6.4).
    #[error("schema violation at `{pointer}`: {message}")]
    Schema {
        /// JSON pointer of the offending member.
        pointer: String,
        /// What was wrong.
        message: String,
    },
    /// Schema-valid, but a semantic rule of the spec text fails (6.4).
    #[error("{} at `{}`: {}", first.rule, first.pointer, first.message)]
    Semantic {
        /// The first violation, in document order.
        first: Violation,
        /// Any further violations.
        more: Vec<Violation>,
    },
}

impl DecodeError {
    /// The stable namespaced wire code (19.1).
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::Limit { kind, .. } => ErrorCode::Limit(*kind),
            DecodeError::MalformedJson { .. } => ErrorCode::MalformedJson,
            DecodeError::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
            DecodeError::UnsupportedMessageType { .. } => ErrorCode::UnknownMessageType,
            DecodeError::TypeMismatch { .. } => ErrorCode::Semantic(Rule::TypeMismatch),
            DecodeError::EmptyMessageId => ErrorCode::Semantic(Rule::EmptyMessageId),
            DecodeError::EmptyIdempotencyKey => ErrorCode::Semantic(Rule::EmptyIdempotencyKey),
            DecodeError::Schema { .. } => ErrorCode::SchemaViolation,
            DecodeError::Semantic { first, .. } => ErrorCode::Semantic(first.rule),
        }
    }

    /// Every decode failure means "the request cannot succeed unchanged" (19.1 `permanent`).
    pub fn category(&self) -> ErrorCategory {
        self.code().category()
    }

    /// Decode failures are never retryable unchanged.
    pub fn retryable(&self) -> bool {
        false
    }

    /// JSON pointer of the offending member (empty for the whole input).
    pub fn pointer(&self) -> &str {
        match self {
            DecodeError::Limit { pointer, .. } | DecodeError::Schema { pointer, .. } => pointer,
            DecodeError::MalformedJson { .. } => "",
            DecodeError::UnsupportedVersion { .. } => "/aip_version",
            DecodeError::UnsupportedMessageType { .. } => "/message_type",
            DecodeError::TypeMismatch { .. } => "/body",
            DecodeError::EmptyMessageId => "/message_id",
            DecodeError::EmptyIdempotencyKey => "/idempotency_key",
            DecodeError::Semantic { first, .. } => &first.pointer,
        }
    }

    /// Whether this failure is one a JSON Schema also reports: malformed JSON, a version or message
    /// type outside the schema's constants, or a schema violation. Type/body mismatch, empty ids,
    /// limits and semantic rules are checks beyond the schemas (6.4, 22.8).
    pub fn is_schema_layer(&self) -> bool {
        matches!(
            self,
            DecodeError::MalformedJson { .. }
                | DecodeError::UnsupportedVersion { .. }
                | DecodeError::UnsupportedMessageType { .. }
                | DecodeError::Schema { .. }
        )
    }

    /// Every violation for semantic failures, in order; empty otherwise.
    pub fn violations(&self) -> Vec<&Violation> {
        match self {
            DecodeError::Semantic { first, more } => {
                std::iter::once(first).chain(more.iter()).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The wire error: code, category, retryable, and `details.pointer` (plus limits or rule details).
    pub fn to_protocol_error(&self) -> ProtocolError {
        let mut details = json!({ "pointer": self.pointer() });
        match self {
            DecodeError::Limit {
                kind,
                limit,
                offset,
                ..
            } => {
                details["limit"] = json!(kind.as_str());
                details["max"] = json!(limit);
                details["offset"] = json!(offset);
            }
            DecodeError::Semantic { first, more } => {
                details["rule"] = json!(first.rule.section());
                if !more.is_empty() {
                    let all: Vec<Value> = std::iter::once(first)
                        .chain(more.iter())
                        .map(|v| json!({"code": v.rule.code(), "pointer": v.pointer, "section": v.rule.section()}))
                        .collect();
                    details["violations"] = Value::Array(all);
                }
            }
            _ => {}
        }
        ProtocolError {
            code: self.code().as_str().to_owned(),
            message: self.to_string(),
            category: self.category(),
            retryable: Some(false),
            retry_after_ms: None,
            details: Some(details),
            source: None,
        }
    }
}

impl From<DecodeError> for ProtocolError {
    fn from(e: DecodeError) -> Self {
        e.to_protocol_error()
    }
}

impl From<&DecodeError> for ProtocolError {
    fn from(e: &DecodeError) -> Self {
        e.to_protocol_error()
    }
}
