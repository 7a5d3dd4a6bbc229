//! The native envelope (spec 6).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::rules::Rule;
use crate::*;

/// The protocol version; AIP 1.0 accepts exactly `1.0` (spec 6, 23.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
pub enum AipVersion {
    /// `1.0`
    #[default]
    #[serde(rename = "1.0")]
    V1_0,
}

/// Every native message (spec 6): routing metadata plus exactly one externally tagged body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Envelope", description = "Native AIP envelope.")]
pub struct Envelope {
    /// Protocol version. Must be `1.0`.
    pub aip_version: AipVersion,
    /// Fully qualified message type; equals the type implied by the body key (6.1).
    pub message_type: MessageType,
    /// Unique, non-empty message id.
    pub message_id: MessageId,
    /// Send timestamp (RFC 3339).
    pub sent_at: Timestamp,
    /// Message payload.
    pub body: MessageBody,
    /// Active session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// Request correlation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
    /// Referenced message or correlation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_response_to: Option<MessageReference>,
    /// Envelope-level delivery deduplication key; non-empty when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Claimed sender; never authentication by itself (6.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Principal>,
    /// Intended recipient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Principal>,
    /// Trace metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Value>,
    /// Signature/auth metadata (22.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Value>,
    /// Vendor/profile extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Value>,
}

impl Envelope {
    /// A new envelope for `body`: version 1.0, the matching message type, a fresh `msg_` id and the
    /// current UTC time.
    pub fn new(body: impl Into<MessageBody>) -> Self {
        let body = body.into();
        Self {
            aip_version: AipVersion::V1_0,
            message_type: body.message_type(),
            message_id: MessageId::generate(),
            sent_at: Timestamp::now(),
            body,
            session_id: None,
            correlation_id: None,
            in_response_to: None,
            idempotency_key: None,
            from: None,
            to: None,
            trace: None,
            security: None,
            extensions: None,
        }
    }

    /// A response to `request` (6.2): copies its correlation id and session, and sets
    /// `in_response_to` to the request's correlation id or, failing that, its message id.
    pub fn reply_to(request: &Envelope, body: impl Into<MessageBody>) -> Self {
        let mut e = Self::new(body);
        e.session_id.clone_from(&request.session_id);
        e.correlation_id.clone_from(&request.correlation_id);
        e.in_response_to = Some(match &request.correlation_id {
            Some(c) => MessageReference::new(c.as_str()),
            None => MessageReference::new(request.message_id.as_str()),
        });
        e
    }

    /// Compact wire JSON.
    pub fn to_json_vec(&self) -> Vec<u8> {
        // Serializing these types cannot fail: every map key is a string and no custom Serialize
        // impl returns an error.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Compact wire JSON as a string.
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The envelope as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Checks the spec 6.4 envelope rules and every semantic rule of the body; empty when valid.
    pub fn violations(&self) -> Vec<crate::Violation> {
        crate::Checker::check(self)
    }
}

impl Validate for Envelope {
    fn validate(&self, v: &mut Checker) {
        if self.message_type != self.body.message_type() {
            // Only reachable for envelopes built in code; decoding rejects this earlier (6.4).
            v.report_at(
                "message_type",
                Rule::TypeMismatch,
                "message_type does not match the body",
            );
        }
        if self.message_id.is_empty() {
            v.report_at(
                "message_id",
                Rule::EmptyMessageId,
                "message_id must be non-empty",
            );
        }
        if self.idempotency_key.as_deref() == Some("") {
            v.report_at(
                "idempotency_key",
                Rule::EmptyIdempotencyKey,
                "idempotency_key must be non-empty when present",
            );
        }
        v.field("sent_at", |v| self.sent_at.validate(v));
        if let Some(p) = &self.from {
            v.field("from", |v| p.validate(v));
        }
        if let Some(p) = &self.to {
            v.field("to", |v| p.validate(v));
        }
        v.field("body", |v| self.body.validate(v));
    }
}
