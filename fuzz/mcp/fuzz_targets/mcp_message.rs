//! The MCP profile's JSON-RPC decoder (`aip_server::profile::mcp::rpc::decode`) over arbitrary
//! bytes: it never panics; a decoded request or notification re-encodes to a message that decodes
//! to the same thing; an error names a JSON-RPC code the transport answers with.
#![no_main]

use aip_server::profile::mcp::rpc::{self, Body, Message};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    match rpc::decode(data) {
        Ok(Body::Single(message)) => round_trip(&message),
        Ok(Body::Batch(items)) => items.iter().flatten().for_each(round_trip),
        Err((code, _)) => assert!(code == rpc::PARSE_ERROR || code == rpc::INVALID_REQUEST),
    }
});

fn round_trip(message: &Message) {
    let encoded = match message {
        Message::Request { id, method, params } => {
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
        }
        Message::Notification { method, params } => {
            json!({ "jsonrpc": "2.0", "method": method, "params": params })
        }
        Message::Response => return,
    };
    let again = rpc::decode(encoded.to_string().as_bytes()).expect("a re-encoded message decodes");
    assert_eq!(again, Body::Single(message.clone()));
}
