//! JSON error bodies of the HTTP binding, with the HTTP status of spec 19.1.

use axum::http::StatusCode;
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
    pub category: &'static str,
    /// Human text; not an API.
    pub message: String,
}

impl ApiError {
    /// Missing or unknown credentials (category `auth`, 401).
    pub fn unauthenticated() -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            code: "aip.auth.unauthenticated".into(),
            category: "auth",
            message: "a valid bearer token is required".into(),
        }
    }

    /// A request refused by policy (category `policy`, 403).
    pub fn forbidden(code: &str, message: &str) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            code: code.into(),
            category: "policy",
            message: message.into(),
        }
    }

    /// Nothing visible here (category `permanent`, 404); used for hidden objects too (spec 16.3).
    pub fn not_found(message: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            code: "aip.core.not_found".into(),
            category: "permanent",
            message: message.into(),
        }
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
