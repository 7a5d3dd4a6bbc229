//! Streaming benchmark of `aip serve` over SSE and WebSocket (spec 11.6, 20.2, 20.3). Run with
//! `cargo bench -p aip-cli --bench stream_load`.
//!
//! 1. Chunks/s delivered to one SSE client and one WebSocket client: a `cap:demo:count` action with
//!    `interval_ms` 0 and `AIP_BENCH_CHUNKS` chunks (default 5000), followed live (bounded by how fast
//!    the handler persists chunks) and replayed from the store once finished (bounded by delivery).
//!    Baseline in the same run: an axum server streaming the same number of same-sized events from
//!    memory over SSE and WebSocket (the transport ceiling, no store).
//! 2. Server memory per idle open stream: `AIP_BENCH_IDLE` (default 200) SSE streams, then as many
//!    WebSocket connections each following one stream, on a long-running action; RSS delta / count.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message as AxumMessage, WebSocketUpgrade};
use axum::response::sse::{Event, Sse};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

fn main() {
    if !common::benchmarking("stream_load") {
        return;
    }
    let chunks: u64 = env_or("AIP_BENCH_CHUNKS", 5000);
    let idle: usize = env_or("AIP_BENCH_IDLE", 200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-stream-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let server = common::start_node(&dir.join("aip"), None, None);
    rt.block_on(async {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let baseline = start_baseline(chunks).await;
        // `cap:demo:count` sends `chunks` data chunks, a progress chunk every tenth, then `done`.
        let events = chunks + chunks / 10 + 1;
        println!("chunks per stream: {events} ({chunks} data + progress + done)");
        println!(
            "| client | aip live chunks/s | aip replay chunks/s | baseline (memory) chunks/s |"
        );
        println!("|---|---:|---:|---:|");

        let action_id = format!("act_bench_sse_{}", std::process::id());
        let started = Instant::now();
        let live = sse_count(sse_submit(&http, &server, &action_id, chunks, 1).await).await;
        let live_rate = live as f64 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        let replay = sse_count(sse_follow(&http, &server, &action_id).await).await;
        let replay_rate = replay as f64 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        let base = sse_count(
            http.get(format!("http://{baseline}/sse"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        let base_rate = base as f64 / started.elapsed().as_secs_f64();
        assert_eq!((live, replay, base), (events, events, events));
        println!("| SSE | {live_rate:.0} | {replay_rate:.0} | {base_rate:.0} |");
        // The same stream from a handler that persists 64 chunks per durable write.
        let action_id = format!("act_bench_sse_batch_{}", std::process::id());
        let started = Instant::now();
        let live = sse_count(sse_submit(&http, &server, &action_id, chunks, 64).await).await;
        let live_rate = live as f64 / started.elapsed().as_secs_f64();
        assert_eq!(live, events);
        println!("| SSE, handler persisting 64 chunks per write | {live_rate:.0} | | |");

        let mut socket = ws_connect(&server).await;
        let action_id = format!("act_bench_ws_{}", std::process::id());
        let started = Instant::now();
        socket
            .send(Message::Text(
                action(&action_id, chunks, 0, "live").to_string().into(),
            ))
            .await
            .unwrap();
        let live = ws_count(&mut socket).await;
        let live_rate = live as f64 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        socket
            .send(Message::Text(follow(&action_id).to_string().into()))
            .await
            .unwrap();
        let replay = ws_count(&mut socket).await;
        let replay_rate = replay as f64 / started.elapsed().as_secs_f64();
        let (mut base_socket, _) =
            tokio_tungstenite::connect_async(format!("ws://{baseline}/ws").as_str())
                .await
                .unwrap();
        let started = Instant::now();
        let base = ws_count(&mut base_socket).await;
        let base_rate = base as f64 / started.elapsed().as_secs_f64();
        assert_eq!((live, replay, base), (events, events, events));
        println!("| WebSocket | {live_rate:.0} | {replay_rate:.0} | {base_rate:.0} |");

        // Idle streams: one action that stays running (two chunks a minute apart) followed many times.
        let long = format!("act_bench_idle_{}", std::process::id());
        let mut first = ws_connect(&server).await;
        first
            .send(Message::Text(
                action(&long, 2, 60_000, "idle").to_string().into(),
            ))
            .await
            .unwrap();
        // The ack: the action exists.
        first.next().await.unwrap().unwrap();
        let pid = server.child.id();
        let before = settle_rss(pid).await;
        let mut sse = Vec::with_capacity(idle);
        for _ in 0..idle {
            sse.push(sse_follow(&http, &server, &long).await);
        }
        let with_sse = settle_rss(pid).await;
        let mut sockets = Vec::with_capacity(idle);
        for _ in 0..idle {
            let mut socket = ws_connect(&server).await;
            socket
                .send(Message::Text(follow(&long).to_string().into()))
                .await
                .unwrap();
            // The event page answering the follow request; the stream then idles.
            socket.next().await.unwrap().unwrap();
            sockets.push(socket);
        }
        let with_ws = settle_rss(pid).await;
        println!();
        println!("| idle open streams | count | server RSS delta KiB | per stream KiB |");
        println!("|---|---:|---:|---:|");
        let per = |delta: u64| delta as f64 / 1024.0 / idle as f64;
        println!(
            "| SSE (`GET /aip/v1/actions/{{id}}/events`) | {idle} | {} | {:.1} |",
            with_sse.saturating_sub(before) / 1024,
            per(with_sse.saturating_sub(before))
        );
        println!(
            "| WebSocket connection following one stream | {idle} | {} | {:.1} |",
            with_ws.saturating_sub(with_sse) / 1024,
            per(with_ws.saturating_sub(with_sse))
        );
        println!("server RSS before the idle streams: {} KiB", before / 1024);
        drop(sse);
        drop(sockets);
    });
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A `cap:demo:count` streaming action persisting one chunk per write.
fn action(action_id: &str, n: u64, interval_ms: u64, correlation: &str) -> Value {
    batched_action(action_id, n, interval_ms, 1, correlation)
}

/// A `cap:demo:count` streaming action persisting up to `batch` chunks per write.
fn batched_action(
    action_id: &str,
    n: u64,
    interval_ms: u64,
    batch: u64,
    correlation: &str,
) -> Value {
    json!({
        "aip_version": "1.0", "message_type": "aip.core.v1.action",
        "message_id": format!("msg_{action_id}"), "sent_at": aip_core::Timestamp::now(),
        "correlation_id": correlation,
        "body": { "action": { "id": action_id, "capability_id": "cap:demo:count", "mode": "streaming",
                              "input": { "n": n, "interval_ms": interval_ms, "batch": batch } } },
    })
}

static NEXT: AtomicU64 = AtomicU64::new(0);

fn follow(action_id: &str) -> Value {
    json!({
        "aip_version": "1.0", "message_type": "aip.lifecycle.v1.action_events_request",
        "message_id": format!("msg_follow_{action_id}_{}", NEXT.fetch_add(1, Ordering::Relaxed)),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "action_events_request": { "action_id": action_id, "follow": true, "limit": 1 } },
    })
}

async fn sse_submit(
    http: &reqwest::Client,
    server: &common::Node,
    action_id: &str,
    n: u64,
    batch: u64,
) -> reqwest::Response {
    http.post(format!("http://{}/aip/v1/actions", server.addr))
        .bearer_auth(&server.token)
        .header("content-type", "application/aip+json")
        .header("accept", "text/event-stream")
        .body(batched_action(action_id, n, 0, batch, "sse").to_string())
        .send()
        .await
        .unwrap()
}

async fn sse_follow(
    http: &reqwest::Client,
    server: &common::Node,
    action_id: &str,
) -> reqwest::Response {
    let response = http
        .get(format!(
            "http://{}/aip/v1/actions/{action_id}/events",
            server.addr
        ))
        .bearer_auth(&server.token)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response
}

/// Counts `chunk` and `done` events until the `result` event (or the end of the stream).
async fn sse_count(mut response: reqwest::Response) -> u64 {
    let mut buffer = String::new();
    let mut count = 0;
    while let Some(bytes) = response.chunk().await.unwrap() {
        buffer.push_str(std::str::from_utf8(&bytes).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if event.starts_with("event: chunk") || event.starts_with("event: done") {
                count += 1;
            } else if event.starts_with("event: result") {
                return count;
            }
        }
    }
    count
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws_connect(server: &common::Node) -> Socket {
    let mut request = format!("ws://{}/aip/v1/ws", server.addr)
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", server.token).parse().unwrap(),
    );
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// Counts stream-chunk envelopes until an action result.
async fn ws_count(socket: &mut Socket) -> u64 {
    let mut count = 0;
    while let Some(message) = socket.next().await {
        if let Message::Text(text) = message.unwrap() {
            let text = text.as_str();
            if text.contains("\"message_type\":\"aip.core.v1.stream_chunk\"") {
                count += 1;
            } else if text.contains("\"message_type\":\"aip.core.v1.action_result\"") {
                return count;
            }
        }
    }
    count
}

/// A server streaming `n + n/10 + 1` events shaped like count chunks from memory, then a result.
async fn start_baseline(n: u64) -> std::net::SocketAddr {
    let total = n + n / 10 + 1;
    let chunk = |i: u64| {
        json!({ "aip_version": "1.0", "message_type": "aip.core.v1.stream_chunk", "message_id": format!("msg_{i:032}"),
                "sent_at": "2026-01-01T00:00:00.000Z",
                "body": { "stream_chunk": { "action_id": "act_baseline", "sequence": i, "kind": "data", "data": { "i": i } } } })
        .to_string()
    };
    let result = r#"{"message_type":"aip.core.v1.action_result"}"#;
    let app = axum::Router::new()
        .route(
            "/sse",
            get(move || async move {
                let events = futures_util::stream::iter((1..=total).map(move |i| {
                    Ok::<_, std::convert::Infallible>(
                        Event::default()
                            .event("chunk")
                            .id(format!("{i}"))
                            .data(chunk(i)),
                    )
                }))
                .chain(futures_util::stream::once(async move {
                    Ok(Event::default().event("result").data(result))
                }));
                Sse::new(events)
            }),
        )
        .route(
            "/ws",
            get(move |ws: WebSocketUpgrade| async move {
                ws.on_upgrade(move |mut socket| async move {
                    for i in 1..=total {
                        if socket
                            .send(AxumMessage::Text(chunk(i).into()))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                    let _ = socket.send(AxumMessage::Text(result.into())).await;
                })
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// RSS once it stopped moving (two equal samples 300 ms apart, at most ~6 s).
async fn settle_rss(pid: u32) -> u64 {
    let mut last = rss_bytes(pid);
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = rss_bytes(pid);
        if now == last {
            break;
        }
        last = now;
    }
    last
}
