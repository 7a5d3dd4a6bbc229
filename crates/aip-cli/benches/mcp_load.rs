//! Load benchmark of the MCP profile (spec 21.1): `tools/call` of `demo_echo` over Streamable HTTP
//! (one MCP session per worker, opened before timing) against the same capability as a native
//! HTTP sync action, on one `aip serve` node with its embedded SQLite store, in the same run. Each
//! tool call is a durable native action with its receipts, like the native one.
//!
//! Run with `cargo bench -p aip-cli --bench mcp_load`; `AIP_BENCH_REQUESTS` overrides the operations
//! per level (default 3000), `AIP_BENCH_LEVELS` the concurrency levels (default 1,16). Native and
//! MCP each run in two halves, native, MCP, MCP, native, so both meet the same store sizes.
//!
//! A third column is a minimal MCP server built with the official Rust SDK `rmcp` (`rmcp_echo`):
//! the same `tools/call` over Streamable HTTP, answered after one SQLite insert.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;
mod rmcp_echo;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

/// One MCP session: its id, and the next request id.
struct Session {
    id: String,
    next: AtomicU64,
}

async fn open(http: &reqwest::Client, url: &str, token: &str) -> Session {
    let response = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}).to_string())
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let note = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-06-18")
        .body(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(note.status().as_u16(), 202);
    Session {
        id,
        next: AtomicU64::new(1),
    }
}

async fn tool_call(http: &reqwest::Client, url: &str, token: &str, session: &Session, i: usize) {
    let id = session.next.fetch_add(1, Ordering::Relaxed);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "demo_echo", "arguments": {"i": i}}});
    let response = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", &session.id)
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "HTTP {status}: {text}");
    // A JSON answer, or an SSE stream whose last `data:` line is the answer.
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .rfind(|d| !d.is_empty())
        .unwrap_or(&text);
    let answer: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}

fn main() {
    if !common::benchmarking("mcp_load") {
        return;
    }
    let requests = common::requests(3000);
    let levels = common::levels("1,16");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-bench-mcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let node = common::start_node(&dir, None, None);
    let http = common::http_client();
    let base = format!("http://{}", node.addr);
    let url = format!("{base}/mcp");
    println!(
        "operations per level: {requests} (after {} warm-up operations)",
        common::WARMUP
    );
    println!("load average (1 min) before: {}", common::load_average());
    println!(
        "| concurrency | native sync actions/s | native p50 ms | MCP tools/call/s | MCP p50 ms | MCP p99 ms | MCP/native | rmcp tools/call/s | rmcp p50 ms | MCP/rmcp |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let rmcp_url = rt.block_on(rmcp_echo::start(&dir));
    let pid = node.child.id();
    let mut footnotes = Vec::new();
    for level in levels {
        // One session per worker slot, opened before timing (as a client keeps its session).
        let sessions: Arc<Vec<Session>> = Arc::new(rt.block_on(async {
            let mut all = Vec::new();
            for _ in 0..level {
                all.push(open(&http, &url, &node.token).await);
            }
            all
        }));
        let native_op = {
            let (http, base, token) = (http.clone(), base.clone(), node.token.clone());
            move |_| {
                let (http, base, token) = (http.clone(), base.clone(), token.clone());
                async move { common::sync_echo(&http, &base, &token).await }
            }
        };
        let mcp_op = {
            let (http, url, token, sessions) = (
                http.clone(),
                url.clone(),
                node.token.clone(),
                sessions.clone(),
            );
            move |i| {
                let (http, url, token, sessions) =
                    (http.clone(), url.clone(), token.clone(), sessions.clone());
                async move {
                    let session = &sessions[i % sessions.len()];
                    tool_call(&http, &url, &token, session, i).await;
                }
            }
        };
        // Two halves each, in the order native, MCP, MCP, native: the store grows through the
        // run, and this way both sides meet the same database sizes on average.
        let half = requests / 2;
        let (mut native_cpu, mut mcp_cpu) =
            (common::CpuSpent::default(), common::CpuSpent::default());
        let mark = common::CpuMark::take(pid);
        let native_first = rt.block_on(common::sample(half, level, native_op.clone()));
        native_cpu.add(mark.spent());
        let mark = common::CpuMark::take(pid);
        let mcp_first = rt.block_on(common::sample(half, level, mcp_op.clone()));
        let mcp_second = rt.block_on(common::sample(requests - half, level, mcp_op));
        mcp_cpu.add(mark.spent());
        let mark = common::CpuMark::take(pid);
        let native_second = rt.block_on(common::sample(requests - half, level, native_op));
        native_cpu.add(mark.spent());
        let native = native_first.merge(native_second).figures();
        let mcp = mcp_first.merge(mcp_second).figures();
        let ops = requests + 2 * common::WARMUP;
        footnotes.push(format!("c={level} native: {}", native_cpu.per_op(ops)));
        footnotes.push(format!("c={level} MCP: {}", mcp_cpu.per_op(ops)));
        let rmcp_sessions: Arc<Vec<Session>> = Arc::new(rt.block_on(async {
            let mut all = Vec::new();
            for _ in 0..level {
                all.push(open(&http, &rmcp_url, "unused").await);
            }
            all
        }));
        let rmcp = rt.block_on(common::measure(requests, level, {
            let (http, url, sessions) = (http.clone(), rmcp_url.clone(), rmcp_sessions.clone());
            move |i| {
                let (http, url, sessions) = (http.clone(), url.clone(), sessions.clone());
                async move {
                    let session = &sessions[i % sessions.len()];
                    tool_call(&http, &url, "unused", session, i).await;
                }
            }
        }));
        println!(
            "| {level} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2}x | {:.0} | {:.2} | {:.2}x |",
            native.rate,
            native.p50_ms,
            mcp.rate,
            mcp.p50_ms,
            mcp.p99_ms,
            mcp.rate / native.rate,
            rmcp.rate,
            rmcp.p50_ms,
            mcp.rate / rmcp.rate
        );
    }
    println!("load average (1 min) after: {}", common::load_average());
    println!("CPU per operation (warm-up included), by thread:");
    for line in footnotes {
        println!("- {line}");
    }
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}
