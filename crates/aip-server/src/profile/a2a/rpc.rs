//! JSON-RPC 2.0 framing and the A2A error codes (A2A 1.0): errors travel in HTTP 200 responses
//! (the SDK clients read the body's `error`), each with a `google.rpc.ErrorInfo` in `data`.

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

/// Invalid JSON.
const PARSE_ERROR: i64 = -32700;
/// Not a JSON-RPC request object.
const INVALID_REQUEST: i64 = -32600;
/// Unknown method (0.3 method names included).
const METHOD_NOT_FOUND: i64 = -32601;
/// Bad parameters.
const INVALID_PARAMS: i64 = -32602;
/// The runtime failed (storage, internal).
const INTERNAL_ERROR: i64 = -32603;
/// A2A: no such task (or not the caller's).
const TASK_NOT_FOUND: i64 = -32001;
/// A2A: the task cannot be cancelled.
const TASK_NOT_CANCELABLE: i64 = -32002;
/// A2A: push notifications are not supported.
const PUSH_NOT_SUPPORTED: i64 = -32003;
/// A2A: the operation is not supported.
const UNSUPPORTED_OPERATION: i64 = -32004;
/// A2A: a part's content type is not supported.
const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
/// A2A: the `A2A-Version` is missing or not served.
const VERSION_NOT_SUPPORTED: i64 = -32009;

/// Longest accepted JSON-RPC request id (a string or number).
const MAX_ID_LEN: usize = 128;

/// An A2A JSON-RPC error: its code, the `ErrorInfo` reason, a message, and string metadata (the
/// native error code, the action id) for the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aError {
    code: i64,
    reason: &'static str,
    message: String,
    metadata: Map<String, Value>,
}

impl A2aError {
    fn new(code: i64, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            metadata: Map::new(),
        }
    }

    /// Adds one metadata entry (values are strings, as `ErrorInfo.metadata` requires).
    pub fn with(mut self, key: &str, value: &str) -> Self {
        self.metadata.insert(key.to_owned(), json!(value));
        self
    }

    /// `-32600`.
    pub fn invalid_request(message: &str) -> Self {
        Self::new(INVALID_REQUEST, "INVALID_REQUEST", message)
    }

    /// `-32601`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            METHOD_NOT_FOUND,
            "METHOD_NOT_FOUND",
            format!("method not found: {method} (A2A 1.0 methods only)"),
        )
    }

    /// `-32602`.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, "INVALID_PARAMS", message)
    }

    /// `-32603`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, "INTERNAL_ERROR", message)
    }

    /// `-32001`: the same for a missing task and another principal's.
    pub fn task_not_found() -> Self {
        Self::new(TASK_NOT_FOUND, "TASK_NOT_FOUND", "task not found")
    }

    /// `-32002`.
    pub fn not_cancelable(message: impl Into<String>) -> Self {
        Self::new(TASK_NOT_CANCELABLE, "TASK_NOT_CANCELABLE", message)
    }

    /// `-32003`.
    pub fn push_not_supported() -> Self {
        Self::new(
            PUSH_NOT_SUPPORTED,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "push notification configs are not supported by this agent",
        )
    }

    /// `-32004`.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(UNSUPPORTED_OPERATION, "UNSUPPORTED_OPERATION", message)
    }

    /// `-32005`.
    pub fn content_type(message: impl Into<String>) -> Self {
        Self::new(
            CONTENT_TYPE_NOT_SUPPORTED,
            "CONTENT_TYPE_NOT_SUPPORTED",
            message,
        )
    }

    fn to_json(&self) -> Value {
        let mut info = json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason,
            "domain": "a2a-protocol.org",
        });
        if !self.metadata.is_empty() {
            info["metadata"] = Value::Object(self.metadata.clone());
        }
        json!({ "code": self.code, "message": self.message, "data": [info] })
    }
}

/// A native refusal as an A2A error: authorization, policy and input refusals are invalid
/// parameters, temporary failures internal errors; the native code is in the metadata.
pub fn native(error: &aip_runtime::RuntimeError) -> A2aError {
    let protocol = error.to_protocol_error();
    let code = protocol.code.as_str();
    let base = match error {
        aip_runtime::RuntimeError::NotFound(_) => A2aError::task_not_found(),
        // Nothing was done and the same request may succeed later (a drain, an overloaded store):
        // the client reads that from the metadata, as a native client reads `retryable`.
        _ if protocol.category == aip_core::ErrorCategory::Temporary => {
            A2aError::internal(protocol.message.clone()).with("aip.retryable", "true")
        }
        _ => A2aError::invalid_params(format!("{code}: {}", protocol.message)),
    };
    base.with("aip.code", code)
}

/// The `error` body of a JSON-RPC response.
pub fn error_body(id: &Value, error: &A2aError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })
}

/// The `result` body of a JSON-RPC response (also one SSE frame of a stream).
pub fn result_body(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// What a call answers: a JSON-RPC response, or an SSE stream of them.
pub enum Reply {
    /// A result.
    Result(Value, Value),
    /// An error.
    Error(Value, A2aError),
    /// A stream already built.
    Stream(Response),
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        match self {
            Reply::Result(id, result) => axum::Json(result_body(&id, result)).into_response(),
            Reply::Error(id, error) => axum::Json(error_body(&id, &error)).into_response(),
            Reply::Stream(response) => response,
        }
    }
}

/// A decoded request: its id, method and params.
pub type Request = (Value, String, Map<String, Value>);

/// Parses one JSON-RPC request: its id, method and params object. Batches and notifications are
/// not part of A2A and are refused.
pub fn decode(body: &[u8]) -> Result<Request, (Value, A2aError)> {
    let value: Value = serde_json::from_slice(body).map_err(|_| {
        (
            Value::Null,
            A2aError::new(PARSE_ERROR, "PARSE_ERROR", "the body is not JSON"),
        )
    })?;
    let Value::Object(mut request) = value else {
        return Err((
            Value::Null,
            A2aError::invalid_request("a request is one JSON-RPC object (no batches)"),
        ));
    };
    let id = match request.remove("id") {
        Some(id @ Value::String(_)) if id.as_str().is_some_and(|s| s.len() <= MAX_ID_LEN) => id,
        Some(id @ Value::Number(_)) => id,
        _ => {
            return Err((
                Value::Null,
                A2aError::invalid_request("a request needs a string or number id"),
            ));
        }
    };
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, A2aError::invalid_request("jsonrpc must be \"2.0\"")));
    }
    let Some(Value::String(method)) = request.remove("method") else {
        return Err((id, A2aError::invalid_request("a request needs a method")));
    };
    let params = match request.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return Err((id, A2aError::invalid_params("params must be an object"))),
    };
    Ok((id, method, params))
}

/// `A2A-Version` must name 1.0 (a missing header means 0.3, which is not served).
pub fn check_version(headers: &HeaderMap) -> Result<(), A2aError> {
    let version = headers.get("a2a-version").and_then(|v| v.to_str().ok());
    match version.map(str::trim) {
        Some(v) if v == super::PROTOCOL_VERSION || v.starts_with("1.0.") => Ok(()),
        Some(other) => Err(A2aError::new(
            VERSION_NOT_SUPPORTED,
            "VERSION_NOT_SUPPORTED",
            format!("A2A version {other:.32} is not supported; this agent speaks 1.0"),
        )),
        None => Err(A2aError::new(
            VERSION_NOT_SUPPORTED,
            "VERSION_NOT_SUPPORTED",
            "no A2A-Version header (A2A 0.3) : this agent speaks 1.0 only",
        )),
    }
}

/// A required string parameter.
pub fn string<'a>(params: &'a Map<String, Value>, name: &str) -> Result<&'a str, A2aError> {
    params
        .get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| A2aError::invalid_params(format!("{name} is required")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_single_requests_with_an_id_and_a_method_decode() {
        let ok = decode(br#"{"jsonrpc":"2.0","id":"1","method":"GetTask","params":{"id":"t"}}"#);
        assert_eq!(ok.unwrap().1, "GetTask");
        for bad in [
            &b"nope"[..],
            br#"[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]"#,
            br#"{"jsonrpc":"2.0","method":"GetTask"}"#,
            br#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}"#,
        ] {
            assert!(decode(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_version_header_must_say_1_0() {
        let with = |v: Option<&str>| {
            let mut headers = HeaderMap::new();
            if let Some(v) = v {
                headers.insert("a2a-version", v.parse().unwrap());
            }
            check_version(&headers).map_err(|e| e.code)
        };
        assert_eq!(with(Some("1.0")), Ok(()));
        assert_eq!(with(None), Err(VERSION_NOT_SUPPORTED));
        assert_eq!(with(Some("0.3")), Err(VERSION_NOT_SUPPORTED));
        assert_eq!(with(Some("9.9")), Err(VERSION_NOT_SUPPORTED));
    }
}
