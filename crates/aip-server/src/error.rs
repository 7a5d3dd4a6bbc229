//! JSON error bodies of the HTTP binding, with the HTTP status of spec 19.1.

use aip_core::{Envelope, ErrorBody, ErrorCode, MessageBody};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered on a read endpoint or before an envelope could be decoded: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status (spec 19.1 mapping of the category, or a more specific one in the same class).
    pub status: StatusCode,
    /// The wire code (its category comes with it).
    pub code: ErrorCode,
    /// Human text; not an API.
    pub message: String,
    /// The runtime's whole wire error (retryable, details) when it refused: the body carries it.
    pub wire: Option<Box<aip_core::ProtocolError>>,
}

impl ApiError {
    /// An error with the binding's status for `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::with_status(crate::status::of_code(code), code, message)
    }

    /// An error with an explicit status (of the code's class, e.g. axum's 413 for a body refused
    /// for its size).
    pub fn with_status(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            wire: None,
        }
    }

    /// A runtime refusal in the binding's JSON form, its wire error whole (spec 19.1: a rate
    /// limit says it is retryable and which bucket, with details, as on the envelope endpoints).
    pub fn from_protocol(error: aip_core::ProtocolError) -> Self {
        let code = ErrorCode::parse(&error.code).unwrap_or(ErrorCode::Internal);
        let mut refused = Self::new(code, error.message.clone());
        refused.wire = Some(Box::new(error));
        refused
    }

    /// Missing or unknown credentials (category `auth`, 401).
    pub fn unauthenticated() -> Self {
        Self::new(
            ErrorCode::Unauthenticated,
            "a valid bearer token is required",
        )
    }

    /// The same error as an `aip.core.v1.error` envelope, for the envelope endpoints (spec 19.1);
    /// retryable exactly when its category is `temporary`.
    pub fn into_envelope_response(self) -> Response {
        let error = match self.wire {
            Some(wire) => *wire,
            None => {
                let mut error = self.code.error(self.message);
                error.retryable = Some(self.code.category() == aip_core::ErrorCategory::Temporary);
                error
            }
        };
        let envelope = Envelope::new(MessageBody::Error(ErrorBody { error }));
        let mut response = (self.status, envelope.to_json_vec()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/aip+json"),
        );
        challenge(self.status, response)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match self.wire {
            Some(wire) => json!({ "error": wire }),
            None => {
                json!({ "error": { "code": self.code.as_str(), "message": self.message, "category": self.code.category() } })
            }
        };
        challenge(self.status, (self.status, axum::Json(body)).into_response())
    }
}

/// A 401 names the scheme to authenticate with.
fn challenge(status: StatusCode, mut response: Response) -> Response {
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"aip\""),
        );
    }
    response
}
