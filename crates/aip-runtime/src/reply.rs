//! What serving one envelope produced, independent of any transport: bindings map the outcome to
//! their own signalling (an HTTP status, a NATS header, nothing on a WebSocket frame).

use aip_core::{
    CorrelationId, DecodeError, Envelope, ErrorBody, ErrorCode, MessageBody, MessageReference,
    SessionId,
};
use serde_json::Value;

use crate::error::RuntimeError;

/// A binding-independent reply: how the request ended and the envelope to send.
#[derive(Debug, Clone)]
pub struct Reply {
    /// How the request ended.
    pub outcome: Outcome,
    /// The response envelope.
    pub envelope: Envelope,
}

/// How serving a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Served: the envelope is the answer (a result, a view, a cached replay).
    Done,
    /// Accepted for completion later: queued work, or a cancellation requested but not confirmed.
    Accepted,
    /// Refused or failed: the envelope is an `aip.core.v1.error` carrying this code.
    Refused(ErrorCode),
}

impl Reply {
    /// A served reply to `request` with `body`.
    pub fn done(request: &Envelope, body: MessageBody) -> Self {
        Self {
            outcome: Outcome::Done,
            envelope: Envelope::reply_to(request, body),
        }
    }

    /// An accepted (not yet complete) reply to `request` with `body`.
    pub fn accepted(request: &Envelope, body: MessageBody) -> Self {
        Self {
            outcome: Outcome::Accepted,
            envelope: Envelope::reply_to(request, body),
        }
    }

    /// An `aip.core.v1.error` envelope for `err`, in reply to `request` when it decoded.
    pub fn error(request: Option<&Envelope>, err: &RuntimeError) -> Self {
        let body = MessageBody::Error(ErrorBody {
            error: err.to_protocol_error(),
        });
        let envelope = match request {
            Some(request) => Envelope::reply_to(request, body),
            None => Envelope::new(body),
        };
        Self {
            outcome: Outcome::Refused(err.code()),
            envelope,
        }
    }

    /// The error for a request that did not decode. When its JSON was readable (`raw`, within the
    /// decode limits), the reply still names the request it answers (`in_response_to`, correlation
    /// and session ids), so a client can match it.
    pub fn undecodable(raw: Option<&Value>, err: DecodeError) -> Self {
        let mut reply = Self::error(None, &RuntimeError::Decode(err));
        if let Some(raw) = raw {
            let text = |member: &str| {
                raw.get(member)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty() && s.len() <= 256)
            };
            let envelope = &mut reply.envelope;
            envelope.correlation_id = text("correlation_id").map(CorrelationId::new);
            envelope.session_id = text("session_id").map(SessionId::new);
            envelope.in_response_to = text("correlation_id")
                .or_else(|| text("message_id"))
                .map(MessageReference::new);
        }
        reply
    }

    /// The error code when the request was refused.
    pub fn refused(&self) -> Option<ErrorCode> {
        match self.outcome {
            Outcome::Refused(code) => Some(code),
            _ => None,
        }
    }
}
