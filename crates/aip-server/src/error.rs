//! JSON error bodies of the HTTP binding, with the HTTP status of spec 19.1.

use aip_core::{Envelope, ErrorBody, ErrorCategory, MessageBody, ProtocolError};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered on a read endpoint or before an envelope could be decoded: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status (spec 19.1 mapping of the category, or a more specific one in the same class).
    pub status: StatusCode,
    /// Stable namespaced code.
    pub code: String,
    /// Protocol category.
    pub category: ErrorCategory,
    /// Human text; not an API.
    pub message: String,
}

impl ApiError {
    /// Missing or unknown credentials (category `auth`, 401).
    pub fn unauthenticated() -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            code: "aip.auth.unauthenticated".into(),
            category: ErrorCategory::Auth,
            message: "a valid bearer token is required".into(),
        }
    }

    /// A request refused by policy (category `policy`, 403).
    pub fn forbidden(code: &str, message: &str) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            code: code.into(),
            category: ErrorCategory::Policy,
            message: message.into(),
        }
    }

    /// Nothing visible here (category `permanent`, 404); used for hidden objects too (spec 16.3).
    pub fn not_found(message: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            code: "aip.core.not_found".into(),
            category: ErrorCategory::Permanent,
            message: message.into(),
        }
    }
}

impl ApiError {
    /// The same error as an `aip.core.v1.error` envelope, for the envelope endpoints (spec 19.1).
    pub fn into_envelope_response(self) -> Response {
        let error = ProtocolError {
            code: self.code,
            message: self.message,
            category: self.category,
            retryable: Some(false),
            retry_after_ms: None,
            details: None,
            source: None,
        };
        let envelope = Envelope::new(MessageBody::Error(ErrorBody { error }));
        let mut response = (self.status, envelope.to_json_vec()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/aip+json"),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"aip\""),
            );
        }
        response
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code, "message": self.message, "category": self.category } });
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"aip\""),
            );
        }
        response
    }
}
