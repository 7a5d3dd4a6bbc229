//! Bounded memory under a stalled consumer (spec 22.8), against the real `aip serve` binary: a
//! client opens a streaming action over SSE or WebSocket and stops reading while the server
//! produces far more chunk data than the configured per-connection bounds. The server's resident
//! memory (VmRSS) must stay under a bound derived from those limits, and the consumer must be cut
//! off with the typed error.
//! Not a timed test: it bounds memory, the waits only give the server time to work.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use support::{Client, Server, envelope, id};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Chunks produced: ~`CHUNKS * PAD` bytes of chunk data (~64 MiB), far beyond every bound below.
const CHUNKS: u64 = 4000;
const PAD: u64 = 16_000;
/// Events (SSE) or frames (WebSocket) queued per connection.
const BUFFER_EVENTS: u64 = 8;
/// Chunks a follower reads from the store at once (`aip_runtime::stream`).
const FOLLOWER_PAGE: u64 = 256;
/// Allowance for what does not depend on the stream: store page cache, allocator arenas, runtime.
const FIXED_ALLOWANCE: u64 = 24 * 1024 * 1024;

/// The growth the server may show: every queued event and one follower page, each event counted four
/// times (JSON value, envelope, encoded frame, transport copy), plus the fixed allowance.
fn bound_bytes() -> u64 {
    (BUFFER_EVENTS + FOLLOWER_PAGE) * (PAD + 1024) * 4 + FIXED_ALLOWANCE
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

fn start() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let buffer = BUFFER_EVENTS.to_string();
    let env = [
        ("AIP_LIMITS__STREAM_BUFFER_EVENTS", buffer.as_str()),
        ("AIP_LIMITS__STREAM_SEND_TIMEOUT_MS", "1000"),
    ];
    let server = Server::start(&dir.path().join("data"), None, &env);
    (dir, server)
}

fn action(action_id: &str) -> Value {
    envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": action_id, "capability_id": "cap:demo:count", "mode": "streaming",
                            "input": { "n": CHUNKS, "pad": PAD } } }),
    )
}

/// Samples the server's RSS until the action is terminal; returns the peak.
async fn peak_rss_until_terminal(server: &Server, client: &Client, action_id: &str) -> u64 {
    let pid = server.child.id();
    let mut peak = 0;
    let mut unseen = 0;
    loop {
        peak = peak.max(rss_bytes(pid));
        let (status, view) = client.get(&format!("/aip/v1/actions/{action_id}")).await;
        // A WebSocket submission is admitted asynchronously to the client's send.
        if status == 404 && unseen < 100 {
            unseen += 1;
            support::pause(50).await;
            continue;
        }
        assert_eq!(status, 200, "{view}");
        if view["state"] == "completed" {
            return peak;
        }
        assert_ne!(view["state"], "failed", "{view}");
        support::pause(100).await;
    }
}

/// Waits until the server has counted a slow consumer (it cut the stalled one off); returns the peak
/// RSS sampled meanwhile.
async fn until_slow_consumer_counted(server: &Server, client: &Client) -> u64 {
    let mut peak = 0;
    for _ in 0..400 {
        peak = peak.max(rss_bytes(server.child.id()));
        let metrics = client
            .http
            .get(format!("http://{}/metrics", client.base))
            .bearer_auth(client.token.clone().unwrap())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metrics.contains("aip_stream_slow_consumer_total") {
            return peak;
        }
        support::pause(50).await;
    }
    panic!("the stalled consumer was never cut off");
}

fn assert_bounded(what: &str, baseline: u64, peak: u64) {
    let growth = peak.saturating_sub(baseline);
    let data = CHUNKS * PAD;
    eprintln!(
        "{what}: RSS baseline {} KiB, peak {} KiB, growth {} KiB; bound {} KiB; chunk data {} KiB",
        baseline / 1024,
        peak / 1024,
        growth / 1024,
        bound_bytes() / 1024,
        data / 1024
    );
    assert!(
        growth < bound_bytes(),
        "{what}: RSS grew by {growth} bytes, bound {}",
        bound_bytes()
    );
}

#[tokio::test]
async fn a_stalled_sse_consumer_costs_bounded_memory_and_is_cut_off_with_the_typed_error() {
    let (_dir, server) = start();
    let admin = server.admin();
    let baseline = rss_bytes(server.child.id());
    let action_id = id("act_");
    let mut response = admin
        .http
        .post(format!("http://{}/aip/v1/actions", admin.base))
        .bearer_auth(admin.token.clone().unwrap())
        .header("content-type", "application/aip+json")
        .header("accept", "text/event-stream")
        .body(action(&action_id).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // Stall: read nothing while the server produces every chunk.
    let peak = peak_rss_until_terminal(&server, &admin, &action_id).await;
    until_slow_consumer_counted(&server, &admin).await;
    assert_bounded("SSE", baseline, peak);
    // Reading again: what was in flight, then the typed error, then the end; never the result.
    let mut body = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), response.chunk())
        .await
        .expect("the cut-off stream did not end")
        .unwrap()
    {
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body).unwrap();
    let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
    let last = events.last().unwrap();
    assert!(last.contains("event: error"), "{last:.300}");
    assert!(last.contains("aip.transport.slow_consumer"), "{last:.300}");
    assert!(!text.contains("event: result"));
    assert!(
        (events.len() as u64) < CHUNKS / 2,
        "{} events reached a stalled consumer",
        events.len()
    );
}

#[tokio::test]
async fn a_stalled_websocket_consumer_costs_bounded_memory_and_is_closed_with_the_typed_code() {
    let (_dir, server) = start();
    let admin = server.admin();
    let baseline = rss_bytes(server.child.id());
    let mut request = format!("ws://{}/aip/v1/ws", server.base)
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", server.admin_token).parse().unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let action_id = id("act_");
    futures_util::SinkExt::send(
        &mut socket,
        Message::Text(action(&action_id).to_string().into()),
    )
    .await
    .unwrap();
    // Stall until the server cuts the consumer off, then read at once: what was in flight, then the
    // typed close frame. The server keeps producing chunks meanwhile; RSS is sampled throughout.
    let early_peak = until_slow_consumer_counted(&server, &admin).await;
    let mut frames = 0_u64;
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("the cut-off connection did not end")
        {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(Message::Text(text))) => {
                frames += 1;
                assert!(!text.as_str().contains("\"aip.core.v1.action_result\""));
            }
            Some(Ok(_)) => {}
            other => panic!("expected a close frame, got {other:?}"),
        }
    };
    let close = close.expect("a typed close frame");
    assert_eq!(u16::from(close.code), 1008);
    assert_eq!(close.reason.as_str(), "aip.transport.slow_consumer");
    assert!(
        frames < CHUNKS / 2,
        "{frames} frames reached a stalled consumer"
    );
    let peak = peak_rss_until_terminal(&server, &admin, &action_id).await;
    assert_bounded("WebSocket", baseline, peak.max(early_peak));
}
