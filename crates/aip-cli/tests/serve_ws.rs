//! The WebSocket binding `aip.websocket.stream.v1` (spec 20.3) against the real `aip serve` binary,
//! with an independent client (tokio-tungstenite): envelopes over text frames, multiplexed streams,
//! frame rules, authentication, cancellation from another connection, resume by cursor.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;

use futures_util::SinkExt;
use serde_json::{Value, json};
use support::ws::{Socket, connect, next_envelope, next_frame, send};
use support::{Server, envelope, id, token_file};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Bytes, Message};

fn streaming_action(action_id: &str, input: Value, correlation_id: &str) -> Value {
    let mut env = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": action_id, "capability_id": "cap:demo:count", "mode": "streaming", "input": input } }),
    );
    env["correlation_id"] = json!(correlation_id);
    env
}

fn event_name(envelope: &Value) -> &str {
    envelope["extensions"]["aip.websocket.stream.v1"]["event"]
        .as_str()
        .unwrap_or_default()
}

fn chunk_sequences(envelopes: &[Value]) -> Vec<u64> {
    envelopes
        .iter()
        .filter_map(|e| e["body"]["stream_chunk"]["sequence"].as_u64())
        .collect()
}

/// Envelopes of one correlation stream until its final result (inclusive).
async fn until_result(socket: &mut Socket) -> Vec<Value> {
    let mut all = Vec::new();
    loop {
        let envelope = next_envelope(socket).await;
        let done = envelope["message_type"] == "aip.core.v1.action_result";
        all.push(envelope);
        if done {
            return all;
        }
    }
}

#[tokio::test]
async fn a_sync_echo_over_websocket_is_answered_on_the_same_connection_and_correlated() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let mut socket = connect(&server, &server.admin_token).await;
    let request = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": { "hello": "ws" } } }),
    );
    send(&mut socket, &request).await;
    let reply = next_envelope(&mut socket).await;
    assert_eq!(
        reply["message_type"], "aip.core.v1.action_result",
        "{reply}"
    );
    assert_eq!(reply["body"]["action_result"]["status"], "completed");
    assert_eq!(
        reply["body"]["action_result"]["output"],
        json!({ "hello": "ws" })
    );
    assert_eq!(reply["in_response_to"], request["message_id"]);
    // Any native envelope: a heartbeat is answered with its ack.
    let beat = envelope(
        "aip.core.v1.heartbeat",
        json!({ "heartbeat": { "sequence": 7 } }),
    );
    send(&mut socket, &beat).await;
    let ack = next_envelope(&mut socket).await;
    assert_eq!(ack["message_type"], "aip.core.v1.heartbeat_ack", "{ack}");
    assert_eq!(ack["in_response_to"], beat["message_id"]);
    socket.close(None).await.unwrap();
}

#[tokio::test]
async fn two_streams_multiplexed_on_one_connection_each_arrive_complete_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let mut socket = connect(&server, &server.admin_token).await;
    let (a, b) = (id("act_"), id("act_"));
    send(
        &mut socket,
        &streaming_action(&a, json!({ "n": 300, "interval_ms": 1 }), "corr-a"),
    )
    .await;
    send(
        &mut socket,
        &streaming_action(&b, json!({ "n": 200, "interval_ms": 1 }), "corr-b"),
    )
    .await;
    let mut streams: HashMap<String, Vec<Value>> = HashMap::new();
    let mut finished = 0;
    while finished < 2 {
        let envelope = next_envelope(&mut socket).await;
        let key = envelope["correlation_id"].as_str().unwrap().to_owned();
        assert_eq!(envelope["in_response_to"], json!(key));
        if envelope["message_type"] == "aip.core.v1.action_result" {
            finished += 1;
        }
        streams.entry(key).or_default().push(envelope);
    }
    for (key, action_id, n) in [("corr-a", &a, 300_u64), ("corr-b", &b, 200)] {
        let stream = &streams[key];
        assert_eq!(stream[0]["message_type"], "aip.core.v1.ack", "{key}");
        assert_eq!(stream[0]["body"]["ack"]["action_id"], json!(action_id));
        let total = n + n / 10 + 1;
        assert_eq!(chunk_sequences(stream), (1..=total).collect::<Vec<u64>>());
        let data: Vec<u64> = stream
            .iter()
            .filter(|e| e["body"]["stream_chunk"]["kind"] == "data")
            .map(|e| e["body"]["stream_chunk"]["data"]["i"].as_u64().unwrap())
            .collect();
        assert_eq!(data, (1..=n).collect::<Vec<u64>>());
        let done = &stream[stream.len() - 2];
        assert_eq!(event_name(done), "done");
        let last = stream.last().unwrap();
        assert_eq!(event_name(last), "result");
        assert_eq!(last["body"]["action_result"]["status"], "completed");
        assert_eq!(last["body"]["action_result"]["output"]["count"], n);
        // Every streamed envelope carries an opaque resume cursor.
        for envelope in &stream[1..] {
            let cursor = envelope["extensions"]["aip.websocket.stream.v1"]["cursor"]
                .as_str()
                .unwrap();
            assert!(!cursor.is_empty() && !cursor.contains(action_id.as_str()));
        }
    }
}

#[tokio::test]
async fn a_binary_frame_is_rejected_with_a_typed_error_and_the_connection_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let mut socket = connect(&server, &server.admin_token).await;
    socket
        .send(Message::Binary(Bytes::from_static(b"\x00\x01binary")))
        .await
        .unwrap();
    let error = next_envelope(&mut socket).await;
    assert_eq!(error["message_type"], "aip.core.v1.error");
    assert_eq!(
        error["body"]["error"]["error"]["code"],
        "aip.transport.unsupported_frame"
    );
    // A text frame that is not an envelope gets the decoder's typed error, also without closing.
    socket.send(Message::Text("not json".into())).await.unwrap();
    let error = next_envelope(&mut socket).await;
    assert_eq!(error["message_type"], "aip.core.v1.error");
    let beat = envelope(
        "aip.core.v1.heartbeat",
        json!({ "heartbeat": { "sequence": 1 } }),
    );
    send(&mut socket, &beat).await;
    assert_eq!(
        next_envelope(&mut socket).await["message_type"],
        "aip.core.v1.heartbeat_ack"
    );
}

#[tokio::test]
async fn a_ping_is_answered_with_a_pong_and_a_close_frame_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let mut socket = connect(&server, &server.admin_token).await;
    socket
        .send(Message::Ping(Bytes::from_static(b"are you there")))
        .await
        .unwrap();
    loop {
        match next_frame(&mut socket).await.unwrap() {
            Message::Pong(payload) => {
                assert_eq!(&payload[..], b"are you there");
                break;
            }
            Message::Ping(_) => {}
            other => panic!("expected a pong, got {other:?}"),
        }
    }
    socket.send(Message::Close(None)).await.unwrap();
    loop {
        match next_frame(&mut socket).await {
            Some(Message::Close(_)) | None => break,
            Some(_) => {}
        }
    }
}

#[tokio::test]
async fn the_server_pings_an_idle_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        None,
        &[("AIP_LIMITS__STREAM_HEARTBEAT_MS", "200")],
    );
    let mut socket = connect(&server, &server.admin_token).await;
    assert!(matches!(
        next_frame(&mut socket).await,
        Some(Message::Ping(_))
    ));
}

#[tokio::test]
async fn an_unauthenticated_or_cross_origin_upgrade_is_refused_before_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let request = format!("ws://{}/aip/v1/ws", server.base)
        .into_client_request()
        .unwrap();
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401);
        }
        other => panic!("expected 401, got {other:?}"),
    }
    let mut request = format!("ws://{}/aip/v1/ws", server.base)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", "Bearer not-a-token".parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401);
        }
        other => panic!("expected 401, got {other:?}"),
    }
    let mut request = format!("ws://{}/aip/v1/ws", server.base)
        .into_client_request()
        .unwrap();
    let headers = request.headers_mut();
    headers.insert(
        "authorization",
        format!("Bearer {}", server.admin_token).parse().unwrap(),
    );
    headers.insert("origin", "https://evil.example".parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 403);
        }
        other => panic!("expected 403, got {other:?}"),
    }
}

#[tokio::test]
async fn cancelling_over_http_ends_the_websocket_stream_with_an_error_chunk_and_a_cancelled_result()
{
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let mut socket = connect(&server, &server.admin_token).await;
    let action_id = id("act_");
    send(
        &mut socket,
        &streaming_action(&action_id, json!({ "n": 10000, "interval_ms": 10 }), "c1"),
    )
    .await;
    let mut stream = Vec::new();
    let mut cancelled = false;
    loop {
        let envelope = next_envelope(&mut socket).await;
        let is_result = envelope["message_type"] == "aip.core.v1.action_result";
        if !cancelled && envelope["body"]["stream_chunk"]["sequence"] == 5 {
            cancelled = true;
            let (status, _) = server
                .admin()
                .post(&format!("/aip/v1/actions/{action_id}/cancel"), &json!({}))
                .await;
            assert_eq!(status, 202);
        }
        stream.push(envelope);
        if is_result {
            break;
        }
    }
    let last = stream.last().unwrap();
    assert_eq!(last["body"]["action_result"]["status"], "cancelled");
    let closing = &stream[stream.len() - 2];
    assert_eq!(closing["body"]["stream_chunk"]["kind"], "error");
    assert_eq!(
        closing["body"]["stream_chunk"]["data"]["code"],
        "aip.action.cancelled"
    );
    let seqs = chunk_sequences(&stream);
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<u64>>());
    assert!(seqs.len() < 1000);
}

#[tokio::test]
async fn an_existing_action_is_followed_from_the_start_or_resumed_after_a_cursor_of_the_same_reader()
 {
    let dir = tempfile::tempdir().unwrap();
    let a = token_file(dir.path(), "a.token", "token-of-reader-a");
    let b = token_file(dir.path(), "b.token", "token-of-reader-b");
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "[[principals]]\nid = \"svc:a\"\ntenant = \"t\"\nscopes = [\"invoke:cap:demo:*\"]\ntoken_file = \"{}\"\n\n\
             [[principals]]\nid = \"svc:b\"\ntenant = \"t\"\nscopes = [\"invoke:cap:demo:*\", \"read:tenant\"]\ntoken_file = \"{}\"\n",
            a.display(),
            b.display()
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let mut socket = connect(&server, "token-of-reader-a").await;
    let action_id = id("act_");
    send(
        &mut socket,
        &streaming_action(&action_id, json!({ "n": 30 }), "first"),
    )
    .await;
    let first = until_result(&mut socket).await;
    assert_eq!(chunk_sequences(&first), (1..=34).collect::<Vec<u64>>());
    let cursor_at_12 = first
        .iter()
        .find(|e| e["body"]["stream_chunk"]["sequence"] == 12)
        .map(|e| e["extensions"]["aip.websocket.stream.v1"]["cursor"].clone())
        .unwrap();
    let follow = |after: Option<&Value>, correlation: &str| {
        let mut env = envelope(
            "aip.lifecycle.v1.action_events_request",
            json!({ "action_events_request": { "action_id": action_id, "follow": true } }),
        );
        env["correlation_id"] = json!(correlation);
        if let Some(after) = after {
            env["extensions"] = json!({ "aip.websocket.stream.v1": { "after": after } });
        }
        env
    };
    // From the start: the page of events, then the whole stream again.
    send(&mut socket, &follow(None, "again")).await;
    let again = until_result(&mut socket).await;
    assert_eq!(again[0]["message_type"], "aip.lifecycle.v1.action_events");
    assert_eq!(chunk_sequences(&again), (1..=34).collect::<Vec<u64>>());
    assert!(again.iter().all(|e| e["correlation_id"] == "again"));
    // After a cursor: exactly the rest.
    send(&mut socket, &follow(Some(&cursor_at_12), "rest")).await;
    let rest = until_result(&mut socket).await;
    assert_eq!(chunk_sequences(&rest), (13..=34).collect::<Vec<u64>>());
    // Another reader of the same tenant may follow the action, but not with reader a's cursor.
    let mut other = connect(&server, "token-of-reader-b").await;
    send(&mut other, &follow(Some(&cursor_at_12), "stolen")).await;
    let page = next_envelope(&mut other).await;
    assert_eq!(page["message_type"], "aip.lifecycle.v1.action_events");
    let refused = next_envelope(&mut other).await;
    assert_eq!(refused["message_type"], "aip.core.v1.error", "{refused}");
    assert_eq!(
        refused["body"]["error"]["error"]["code"],
        "aip.read.invalid_cursor"
    );
    // A forged cursor is refused too.
    let mut forged = cursor_at_12.as_str().unwrap().to_owned();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    send(&mut socket, &follow(Some(&json!(forged)), "forged")).await;
    assert_eq!(
        next_envelope(&mut socket).await["message_type"],
        "aip.lifecycle.v1.action_events"
    );
    let refused = next_envelope(&mut socket).await;
    assert_eq!(
        refused["body"]["error"]["error"]["code"],
        "aip.read.invalid_cursor"
    );
    // Per-message authorization: reader a (no `read:tenant`) cannot follow reader b's action.
    let b_action = id("act_");
    send(
        &mut other,
        &streaming_action(&b_action, json!({ "n": 2 }), "b-own"),
    )
    .await;
    until_result(&mut other).await;
    let mut env = envelope(
        "aip.lifecycle.v1.action_events_request",
        json!({ "action_events_request": { "action_id": b_action, "follow": true } }),
    );
    env["correlation_id"] = json!("peek");
    send(&mut socket, &env).await;
    let refused = next_envelope(&mut socket).await;
    assert_eq!(refused["message_type"], "aip.core.v1.error", "{refused}");
    assert_eq!(refused["in_response_to"], "peek");
    // Nothing follows the refusal: the next frame answers the next request.
    let beat = envelope(
        "aip.core.v1.heartbeat",
        json!({ "heartbeat": { "sequence": 2 } }),
    );
    send(&mut socket, &beat).await;
    assert_eq!(
        next_envelope(&mut socket).await["message_type"],
        "aip.core.v1.heartbeat_ack"
    );
}
