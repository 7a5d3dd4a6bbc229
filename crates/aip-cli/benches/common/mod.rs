//! Shared parts of the load benchmarks that drive the real `aip serve` binary: starting a node,
//! building sync echo actions, and running a fixed number of calls with a fixed number in flight.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Sequential calls before each measured run.
pub const WARMUP: usize = 200;

/// Whether cargo ran this target as a benchmark (`cargo bench`); otherwise print how to run it.
pub fn benchmarking(name: &str) -> bool {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") {
        return true;
    }
    if !args.iter().any(|a| a == "--list") {
        println!("{name} is a benchmark: run it with `cargo bench -p aip-cli --bench {name}`");
    }
    false
}

/// The concurrency levels of `AIP_BENCH_LEVELS` (comma-separated), else `default`.
pub fn levels(default: &str) -> Vec<usize> {
    std::env::var("AIP_BENCH_LEVELS")
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|l| {
            l.trim()
                .parse()
                .expect("AIP_BENCH_LEVELS: comma-separated numbers")
        })
        .collect()
}

/// `AIP_BENCH_REQUESTS`, else `default`.
pub fn requests(default: usize) -> usize {
    std::env::var("AIP_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A running `aip serve`; killed on drop.
pub struct Node {
    pub child: Child,
    pub addr: String,
    pub token: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `aip serve` on a free port with `config` (TOML text, if any) and an optional `--database`.
/// `AIP_BENCH_BIN` names another `aip` binary to serve (to compare two builds under the same load).
pub fn start_node(dir: &Path, config: Option<&str>, database: Option<&str>) -> Node {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let bin = std::env::var("AIP_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_aip").into());
    let mut cmd = Command::new(bin);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data);
    if let Some(config) = config {
        let file = dir.join("aip.toml");
        std::fs::write(&file, config).unwrap();
        cmd.arg("--config").arg(&file);
    }
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
    Node { child, addr, token }
}

/// A sync `cap:demo:echo` action envelope with fresh ids.
pub fn action(i: usize) -> Value {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": format!("msg_bench_{}_{n}", std::process::id()),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "action": { "id": format!("act_bench_{}_{n}", std::process::id()), "capability_id": "cap:demo:echo", "mode": "sync", "input": { "i": i } } },
    })
}

/// An HTTP client that never uses a proxy and keeps enough idle connections.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(128)
        .build()
        .unwrap()
}

/// Submits one action over HTTP and checks it succeeded.
pub async fn post_action(http: &reqwest::Client, url: &str, token: &str, i: usize) {
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

/// Runs `WARMUP` sequential calls, then `requests` calls with `in_flight` workers; returns calls/s.
pub async fn run<F, Fut>(requests: usize, in_flight: usize, call: F) -> f64
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
    for _ in 0..in_flight {
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

/// The 1-minute load average, to print beside the figures.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// Rate and latency of one measured level.
pub struct Figures {
    pub rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Three table cells: rate, p50, p99.
impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.0} | {:.2} | {:.2}",
            self.rate, self.p50_ms, self.p99_ms
        )
    }
}

/// Runs `WARMUP` sequential operations (`op(0..WARMUP)`), then `requests` more (`op(WARMUP + i)`)
/// with `in_flight` workers, recording each one's latency.
pub async fn measure<F, Fut>(requests: usize, in_flight: usize, op: F) -> Figures
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    sample(requests, in_flight, op).await.figures()
}

/// [`measure`], keeping the latencies so phases can be merged ([`Sample::merge`]).
pub async fn sample<F, Fut>(requests: usize, in_flight: usize, op: F) -> Sample
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    for i in 0..WARMUP {
        op(i).await;
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..in_flight {
        let (op, next) = (op.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    break latencies;
                }
                let t = Instant::now();
                op(WARMUP + i).await;
                latencies.push(t.elapsed());
            }
        }));
    }
    let mut latencies: Vec<Duration> = Vec::with_capacity(requests);
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    Sample {
        latencies,
        elapsed: started.elapsed().as_secs_f64(),
    }
}

/// The latencies and wall time of one or more measured phases.
pub struct Sample {
    latencies: Vec<Duration>,
    elapsed: f64,
}

impl Sample {
    /// Both phases as one: their operations over their summed time.
    pub fn merge(mut self, other: Sample) -> Sample {
        self.latencies.extend(other.latencies);
        self.elapsed += other.elapsed;
        self
    }

    /// Rate and percentiles.
    pub fn figures(mut self) -> Figures {
        let all = &mut self.latencies;
        all.sort();
        let pct = |p: f64| {
            all[((all.len() as f64 * p) as usize).min(all.len() - 1)].as_secs_f64() * 1000.0
        };
        Figures {
            rate: all.len() as f64 / self.elapsed,
            p50_ms: pct(0.50),
            p99_ms: pct(0.99),
        }
    }
}

/// A fresh id with `prefix`, unique in this process.
pub fn fresh(prefix: &str) -> String {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}bench_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Sends `request` and returns its JSON answer; any non-success status fails the benchmark.
pub async fn call(request: reqwest::RequestBuilder) -> Value {
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "HTTP {status}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// One sync `cap:demo:echo` action over HTTP, answered after its durable result: the baseline the
/// flow benchmarks measure beside their flows.
pub async fn sync_echo(http: &reqwest::Client, base: &str, token: &str) {
    let envelope = json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": fresh("msg_"),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "action": { "id": fresh("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": { "text": "hello" } } },
    });
    call(
        http.post(format!("{base}/aip/v1/actions"))
            .bearer_auth(token)
            .header("content-type", "application/aip+json")
            .body(envelope.to_string()),
    )
    .await;
}

/// Measures `baseline` then `profile` at each concurrency level, printing one Markdown table row
/// per level (rate, p50 and the ratio; p99 of the profile), between load averages. `labels` name
/// the two columns' operations.
pub fn compare<B, BF, P, PF>(
    rt: &tokio::runtime::Runtime,
    (requests, levels): (usize, Vec<usize>),
    labels: (&str, &str),
    baseline: B,
    profile: P,
) where
    B: Fn(usize) -> BF + Clone + Send + 'static,
    BF: std::future::Future<Output = ()> + Send,
    P: Fn(usize) -> PF + Clone + Send + 'static,
    PF: std::future::Future<Output = ()> + Send,
{
    let (base, prof) = labels;
    println!("operations per level: {requests} (after {WARMUP} warm-up operations)");
    println!("load average (1 min) before: {}", load_average());
    println!(
        "| concurrency | {base}/s | {base} p50 ms | {prof}/s | {prof} p50 ms | {prof} p99 ms | ratio |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for level in levels {
        let b = rt.block_on(measure(requests, level, baseline.clone()));
        let p = rt.block_on(measure(requests, level, profile.clone()));
        println!(
            "| {level} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2}x |",
            b.rate,
            b.p50_ms,
            p.rate,
            p.p50_ms,
            p.p99_ms,
            p.rate / b.rate
        );
    }
    println!("load average (1 min) after: {}", load_average());
}

/// CPU time (user + system, ms) of each thread of process `pid`, summed by thread name (numbered
/// names like `tokio-runtime-w` share one entry): where a server spends its CPU during a phase.
fn cpu_by_thread(pid: u32) -> std::collections::BTreeMap<String, f64> {
    let mut by_name = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return by_name;
    };
    // Linux reports these in clock ticks of 10 ms (USER_HZ = 100 on every supported platform).
    let tick_ms = 10.0;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ..." where comm may hold spaces: split after the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].trim_end_matches(|c: char| c.is_ascii_digit() || c == '-');
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // Fields 14 and 15 (utime, stime) are at 11 and 12 after the comm.
        *by_name.entry(name.to_owned()).or_insert(0.0) += (ticks(11) + ticks(12)) * tick_ms;
    }
    by_name
}

/// CPU readings of a server process and of this one, taken before a phase.
pub struct CpuMark {
    server_pid: u32,
    server: std::collections::BTreeMap<String, f64>,
    client: std::collections::BTreeMap<String, f64>,
}

impl CpuMark {
    /// Reads both processes' CPU by thread now.
    pub fn take(server_pid: u32) -> Self {
        CpuMark {
            server_pid,
            server: cpu_by_thread(server_pid),
            client: cpu_by_thread(std::process::id()),
        }
    }

    /// What the phase since the mark cost per operation (µs), by thread, for a table footnote.
    pub fn since(&self, operations: usize) -> String {
        self.spent().per_op(operations)
    }

    /// The CPU spent by thread since the mark, to add up over phases that are not contiguous.
    pub fn spent(&self) -> CpuSpent {
        let diff = |before: &std::collections::BTreeMap<String, f64>, pid: u32| {
            cpu_by_thread(pid)
                .into_iter()
                .map(|(name, ms)| {
                    let spent = ms - before.get(&name).copied().unwrap_or(0.0);
                    (name, spent)
                })
                .collect()
        };
        CpuSpent {
            server: diff(&self.server, self.server_pid),
            client: diff(&self.client, std::process::id()),
        }
    }
}

/// CPU spent by thread (ms) in both processes over one or more phases.
#[derive(Default)]
pub struct CpuSpent {
    server: std::collections::BTreeMap<String, f64>,
    client: std::collections::BTreeMap<String, f64>,
}

impl CpuSpent {
    /// Adds another phase's CPU.
    pub fn add(&mut self, other: CpuSpent) {
        for (name, ms) in other.server {
            *self.server.entry(name).or_default() += ms;
        }
        for (name, ms) in other.client {
            *self.client.entry(name).or_default() += ms;
        }
    }

    /// Per operation (µs), by thread, for a table footnote.
    pub fn per_op(&self, operations: usize) -> String {
        format!(
            "server {}; bench process {}",
            cpu_per_op(&self.server, operations),
            cpu_per_op(&self.client, operations)
        )
    }
}

/// The CPU a phase cost (`spent`, ms by thread name), per operation (µs).
fn cpu_per_op(spent: &std::collections::BTreeMap<String, f64>, operations: usize) -> String {
    let mut total = 0.0;
    let mut parts = Vec::new();
    for (name, ms) in spent {
        if *ms > 0.0 {
            total += ms;
            parts.push(format!("{name} {:.0}", ms * 1000.0 / operations as f64));
        }
    }
    format!(
        "{:.0} µs/op ({})",
        total * 1000.0 / operations as f64,
        parts.join(", ")
    )
}
