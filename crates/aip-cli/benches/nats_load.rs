//! Load benchmark of the NATS binding (issue 6): sync `cap:demo:echo` actions over NATS request/reply
//! with 32 in flight against HTTP actions at the same concurrency on the same `aip serve` node and store
//! (SQLite by default; `AIP_BENCH_DATABASE=postgres://…` for PostgreSQL). Needs `AIP_TEST_NATS_URL`.
//! Run with `cargo bench -p aip-cli --bench nats_load`; `AIP_BENCH_REQUESTS` sets the count (default 3000).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::{Value, json};

const IN_FLIGHT: usize = 32;
const WARMUP: usize = 200;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        if !args.iter().any(|a| a == "--list") {
            println!(
                "nats_load is a benchmark: run it with `cargo bench -p aip-cli --bench nats_load`"
            );
        }
        return;
    }
    let Ok(nats_url) = std::env::var("AIP_TEST_NATS_URL") else {
        println!("SKIP: AIP_TEST_NATS_URL is not set");
        return;
    };
    let requests: usize = std::env::var("AIP_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let database = std::env::var("AIP_BENCH_DATABASE").ok();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-nats-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let domain = format!("bench{}", std::process::id());
    let (mut child, addr, token) = start(&dir, &nats_url, &domain, database.as_deref());

    let nats = rt.block_on(async_nats::connect(&nats_url)).unwrap();
    let subject = format!("aip.v1.{domain}.aip.v1.aip_core_v1_action");
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(128)
        .build()
        .unwrap();
    let url = format!("http://{addr}/aip/v1/actions");

    let nats_rate = rt.block_on(run(requests, {
        let (nats, subject) = (nats.clone(), subject.clone());
        move |i| {
            let (nats, subject) = (nats.clone(), subject.clone());
            async move {
                let payload = json!({ "envelope": action(i) }).to_string();
                let reply = nats.request(subject, payload.into()).await.unwrap();
                let v: Value = serde_json::from_slice(&reply.payload).unwrap();
                assert_eq!(
                    v["envelope"]["message_type"], "aip.core.v1.action_result",
                    "{v}"
                );
            }
        }
    }));
    let http_rate = rt.block_on(run(requests, {
        let (http, url, token) = (http.clone(), url.clone(), token.clone());
        move |i| {
            let (http, url, token) = (http.clone(), url.clone(), token.clone());
            async move {
                let r = http
                    .post(url)
                    .bearer_auth(token)
                    .header("content-type", "application/aip+json")
                    .body(action(i).to_string())
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success(), "{}", r.status());
            }
        }
    }));
    println!(
        "store: {}; {requests} sync echo actions, {IN_FLIGHT} in flight (after {WARMUP} warm-up)",
        if database.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
    );
    println!("| binding | actions/s |\n|---|---:|");
    println!("| NATS request/reply | {nats_rate:.0} |");
    println!("| HTTP POST /aip/v1/actions | {http_rate:.0} |");
    println!("NATS / HTTP = {:.2}x", nats_rate / http_rate);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

fn action(i: usize) -> Value {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": format!("msg_bench_{}_{n}", std::process::id()),
        "sent_at": "2026-01-01T00:00:00Z",
        "body": { "action": { "id": format!("act_bench_{}_{n}", std::process::id()), "capability_id": "cap:demo:echo", "mode": "sync", "input": { "i": i } } },
    })
}

/// Runs `WARMUP` sequential calls, then `requests` calls with `IN_FLIGHT` workers; returns calls/s.
async fn run<F, Fut>(requests: usize, call: F) -> f64
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    for i in 0..WARMUP {
        call(i).await;
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..IN_FLIGHT {
        let (call, next) = (call.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    break;
                }
                call(i).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    requests as f64 / started.elapsed().as_secs_f64()
}

fn start(
    dir: &std::path::Path,
    nats_url: &str,
    domain: &str,
    database: Option<&str>,
) -> (Child, String, String) {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let config = dir.join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "[nats]\nurl = \"{nats_url}\"\ntrust_domain = \"{domain}\"\nprincipal = \"admin\"\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aip"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data);
    if let Some(db) = database {
        cmd.args(["--database", db]);
    }
    let mut child = cmd
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("aip serve exited").unwrap();
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let token = std::fs::read_to_string(data.join("admin.token"))
        .unwrap()
        .trim()
        .to_owned();
    (child, addr, token)
}
