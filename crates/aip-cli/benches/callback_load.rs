//! Load benchmark of callback deliveries (spec 17) against plain sync actions in the same run,
//! through the real `aip serve` binary, on its embedded SQLite store and (when
//! `AIP_TEST_POSTGRES_URL` is set) on PostgreSQL:
//! - `sync`: one sync `cap:demo:echo` action per operation (the baseline);
//! - `with callback`: the same action carrying an HTTP callback to a local receiver; its rate is
//!   admissions per second, and `deliveries/s` is how fast the outbox drains: the deliveries
//!   acknowledged by the receiver over the time from the first submission until the last one
//!   arrived (each a signed envelope, an attempt recorded before and after, receipts, a lease).
//!
//! Run with `cargo bench -p aip-cli --bench callback_load`; `AIP_BENCH_REQUESTS` overrides the
//! operations per level (default 600), `AIP_BENCH_LEVELS` the concurrency levels (default 1,16).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/cluster/mod.rs"]
mod cluster;
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

const CONFIG: &str =
    "[callbacks]\nallow_internal_hosts = [\"127.0.0.1\"]\nallow_http_hosts = [\"127.0.0.1\"]\n";

fn main() {
    if !common::benchmarking("callback_load") {
        return;
    }
    let requests = common::requests(600);
    let levels = common::levels("1,16");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-bench-callback-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (hook, received) = rt.block_on(receiver());
    println!(
        "operations per level: {requests} (after {} warm-up operations)",
        common::WARMUP
    );
    println!("load average (1 min) before: {}", common::load_average());
    println!(
        "| store | concurrency | sync actions/s | sync p50 ms | with callback actions/s | p50 ms | p99 ms | deliveries/s | deliveries/sync |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let target = Target { hook, received };
    run_store(
        &rt,
        "sqlite",
        &dir.join("sqlite"),
        None,
        requests,
        &levels,
        &target,
    );
    match rt.block_on(cluster::TestDb::create("callback_load")) {
        Some(db) => run_store(
            &rt,
            "postgres",
            &dir.join("pg"),
            Some(&db.url),
            requests,
            &levels,
            &target,
        ),
        None => println!("(PostgreSQL skipped: AIP_TEST_POSTGRES_URL is not set)"),
    }
    println!("load average (1 min) after: {}", common::load_average());
    let _ = std::fs::remove_dir_all(&dir);
}

struct Target {
    hook: String,
    received: Arc<AtomicUsize>,
}

/// A receiver that acknowledges every delivery and counts them.
async fn receiver() -> (String, Arc<AtomicUsize>) {
    let received = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&received);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::Relaxed);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://127.0.0.1:{port}/hook"), received)
}

fn run_store(
    rt: &tokio::runtime::Runtime,
    store: &str,
    dir: &std::path::Path,
    database: Option<&str>,
    requests: usize,
    levels: &[usize],
    target: &Target,
) {
    let node = common::start_node(dir, Some(CONFIG), database);
    let base = Arc::new(format!("http://{}", node.addr));
    let http = common::http_client();
    for &concurrency in levels {
        let sync = {
            let (http, base, token) = (http.clone(), base.clone(), node.token.clone());
            rt.block_on(common::measure(requests, concurrency, move |_| {
                let (http, base, token) = (http.clone(), base.clone(), token.clone());
                async move { common::sync_echo(&http, &base, &token).await }
            }))
        };
        // Let the warm-up's deliveries drain before counting this level's.
        let before = target.received.load(Ordering::Relaxed);
        let started = Instant::now();
        let with = {
            let (http, base, token) = (http.clone(), base.clone(), node.token.clone());
            let hook = Arc::new(target.hook.clone());
            rt.block_on(common::measure(requests, concurrency, move |_| {
                let (http, base, token, hook) =
                    (http.clone(), base.clone(), token.clone(), hook.clone());
                async move { echo_with_callback(&http, &base, &token, &hook).await }
            }))
        };
        let expected = before + requests + common::WARMUP;
        let deadline = Instant::now() + Duration::from_secs(300);
        while target.received.load(Ordering::Relaxed) < expected {
            assert!(Instant::now() < deadline, "deliveries did not drain");
            std::thread::sleep(Duration::from_millis(5));
        }
        let deliveries = (requests + common::WARMUP) as f64 / started.elapsed().as_secs_f64();
        println!(
            "| {store} | {concurrency} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {deliveries:.0} | {:.2}x |",
            sync.rate,
            sync.p50_ms,
            with.rate,
            with.p50_ms,
            with.p99_ms,
            deliveries / sync.rate
        );
    }
    drop(node);
}

async fn echo_with_callback(http: &reqwest::Client, base: &str, token: &str, hook: &str) {
    let envelope = json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": common::fresh("msg_"),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "action": { "id": common::fresh("act_"), "capability_id": "cap:demo:echo", "mode": "sync",
                              "input": { "n": 1 }, "callback": { "profile": "aip.native.http.v1", "target": hook } } },
    });
    common::call(
        http.post(format!("{base}/aip/v1/actions"))
            .bearer_auth(token)
            .header("content-type", "application/aip+json")
            .body(envelope.to_string()),
    )
    .await;
}
