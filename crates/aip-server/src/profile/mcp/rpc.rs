//! JSON-RPC 2.0 framing of MCP messages: classify what arrived, build replies. Parsing turns a
//! JSON value into a [`Message`] once; nothing downstream looks at raw members again.

use serde_json::{Map, Value, json};

/// JSON-RPC: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object (or not allowed here).
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method (or not at the negotiated version).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: bad parameters (also: an unknown tool).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the server failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP: unsupported protocol version (the answer to a newer client's `server/discover` probe).
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// MCP: the session does not exist (for this principal).
pub const SESSION_NOT_FOUND: i64 = -32001;

/// One JSON-RPC message from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: it gets exactly one response.
    Request {
        /// The request id (a string or a number).
        id: Value,
        /// Method name.
        method: String,
        /// Parameters (an object; absent is an empty object).
        params: Map<String, Value>,
    },
    /// A notification: never answered.
    Notification {
        /// Method name.
        method: String,
        /// Parameters.
        params: Map<String, Value>,
    },
    /// A response to a request of ours (sampling, elicitation: see `relay`).
    Response {
        /// The id of our request.
        id: Value,
        /// Its result, or its error as (code, message).
        outcome: Result<Value, (i64, String)>,
    },
}

/// Why a value is not a JSON-RPC message: the error to answer, with the id when one was readable.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    /// The request id, when the message had a valid one.
    pub id: Value,
    /// What is wrong.
    pub message: &'static str,
}

impl Message {
    /// Classify one JSON value.
    pub fn parse(value: &Value) -> Result<Self, Invalid> {
        let invalid = |id: Value, message| Invalid { id, message };
        let Value::Object(object) = value else {
            return Err(invalid(Value::Null, "a JSON-RPC message is an object"));
        };
        let id = object.get("id").cloned();
        let valid_id = match &id {
            Some(Value::String(_)) => true,
            Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
            _ => false,
        };
        let echo = if valid_id {
            id.clone().unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid(echo, "jsonrpc must be \"2.0\""));
        }
        let params = match object.get("params") {
            None => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err(invalid(echo, "params must be an object")),
        };
        match object.get("method") {
            Some(Value::String(method)) => match id {
                None => Ok(Self::Notification {
                    method: method.clone(),
                    params,
                }),
                Some(_) if valid_id => Ok(Self::Request {
                    id: echo,
                    method: method.clone(),
                    params,
                }),
                Some(_) => Err(invalid(
                    Value::Null,
                    "a request id is a string or an integer",
                )),
            },
            Some(_) => Err(invalid(echo, "method must be a string")),
            None if valid_id && (object.contains_key("result") || object.contains_key("error")) => {
                let outcome = match (object.get("result"), object.get("error")) {
                    (Some(result), None) => Ok(result.clone()),
                    (_, Some(error)) => Err(error_parts(error, INTERNAL_ERROR)),
                    (None, None) => Ok(Value::Null),
                };
                Ok(Self::Response { id: echo, outcome })
            }
            None => Err(invalid(
                echo,
                "neither a request, a notification nor a response",
            )),
        }
    }
}

/// A JSON-RPC error object's code (`default` when it has none) and message (at most 1024
/// characters): how a peer's error is read, from a client or an upstream server.
pub fn error_parts(error: &Value, default: i64) -> (i64, String) {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(default);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(1024)
        .collect();
    (code, message)
}

/// A POST body: one message, or a batch of them (each classified on its own).
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// One message.
    Single(Message),
    /// A JSON array of messages.
    Batch(Vec<Result<Message, Invalid>>),
}

/// Decodes a POST body: JSON first (serde_json's recursion limit bounds the depth; the transport
/// has bounded the size), then each message's shape. `Err` is the error to answer: a parse error
/// (-32700) or an invalid request (-32600), with the request id when one was readable.
pub fn decode(bytes: &[u8]) -> Result<Body, (i64, Invalid)> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| {
        (
            PARSE_ERROR,
            Invalid {
                id: Value::Null,
                message: "the body is not JSON",
            },
        )
    })?;
    match value {
        Value::Array(items) => Ok(Body::Batch(items.iter().map(Message::parse).collect())),
        other => Message::parse(&other)
            .map(Body::Single)
            .map_err(|invalid| (INVALID_REQUEST, invalid)),
    }
}

/// A success response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        let request = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
        assert!(
            matches!(Message::parse(&request), Ok(Message::Request { id, .. }) if id == json!(7))
        );
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert!(matches!(
            Message::parse(&note),
            Ok(Message::Notification { .. })
        ));
        let response = json!({"jsonrpc": "2.0", "id": "a", "result": {}});
        assert_eq!(
            Message::parse(&response),
            Ok(Message::Response {
                id: json!("a"),
                outcome: Ok(json!({}))
            })
        );
    }

    #[test]
    fn a_body_decodes_as_one_message_or_a_batch_and_bad_json_is_a_parse_error() {
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Body::Single(_))
        ));
        assert!(
            matches!(decode(br#"[{"jsonrpc":"2.0","method":"x"}, 3]"#), Ok(Body::Batch(b)) if b.len() == 2 && b[1].is_err())
        );
        assert_eq!(decode(b"{nope").unwrap_err().0, PARSE_ERROR);
        assert_eq!(decode(b"17").unwrap_err().0, INVALID_REQUEST);
        let deep = format!("{}{}", "[".repeat(500), "]".repeat(500));
        assert_eq!(decode(deep.as_bytes()).unwrap_err().0, PARSE_ERROR);
    }

    #[test]
    fn malformed_messages_are_refused_with_the_id_when_it_is_valid() {
        let no_version = json!({"id": 1, "method": "ping"});
        assert_eq!(Message::parse(&no_version).unwrap_err().id, json!(1));
        let null_id = json!({"jsonrpc": "2.0", "id": null, "method": "ping"});
        assert_eq!(Message::parse(&null_id).unwrap_err().id, Value::Null);
        let float_id = json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"});
        assert!(Message::parse(&float_id).is_err());
        let array_params = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": []});
        assert!(Message::parse(&array_params).is_err());
        assert!(Message::parse(&json!([1])).is_err());
    }
}
