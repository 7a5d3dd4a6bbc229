//! Overload and soak benchmark of `aip serve` (spec 22.8), against the real binary:
//! 1. capacity: sync `cap:demo:echo` actions, closed loop with the node's in-flight bound of
//!    requests in flight; its rate is the node's capacity and its p99 the loaded baseline, and
//!    one request at a time gives the unloaded p99;
//! 2. overload: an open loop offering twice that capacity for `AIP_BENCH_SECS` (default 60 s);
//!    each answer is either admitted (2xx: its latency counted from its scheduled send time) or
//!    refused typed (503 `aip.runtime.overloaded`); anything else is an error. The server's RSS
//!    is sampled every second, and every admitted action is then read back by id (nothing lost);
//! 3. soak: an open loop at half capacity for `AIP_BENCH_SOAK_SECS` (default 600 s; 0 skips it),
//!    RSS sampled every 10 s, every answer must be admitted.
//!
//! Run with `cargo bench -p aip-cli --bench overload_load`; `AIP_BENCH_BOUND` sets the node's
//! `limits.max_in_flight_requests` (default 32).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Most requests the client itself keeps open at once (its own bound, far above the node's).
const CLIENT_CAP: usize = 4096;

fn env_secs(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What an open-loop phase saw.
#[derive(Default)]
struct Outcome {
    admitted: Vec<Duration>,
    admitted_ids: Vec<String>,
    refused: BTreeMap<String, usize>,
    errors: BTreeMap<String, usize>,
    /// Sends skipped because the client already had `CLIENT_CAP` open.
    client_saturated: usize,
}

/// The server's resident set size in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// Offers `rate` actions/s for `secs`, sampling the server's RSS every `rss_every`.
async fn open_loop(
    node: &common::Node,
    rate: f64,
    secs: u64,
    rss_every: Duration,
) -> (Outcome, Vec<u64>) {
    let http = common::http_client();
    let url = format!("http://{}/aip/v1/actions", node.addr);
    let outcome = Arc::new(Mutex::new(Outcome::default()));
    let open = Arc::new(tokio::sync::Semaphore::new(CLIENT_CAP));
    let pid = node.child.id();
    let mut rss = vec![rss_kib(pid)];
    let started = Instant::now();
    let end = started + Duration::from_secs(secs);
    let interval = Duration::from_secs_f64(1.0 / rate);
    let mut next_rss = started + rss_every;
    let mut sent = 0u64;
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if now >= next_rss {
            rss.push(rss_kib(pid));
            next_rss += rss_every;
        }
        // Every send that is due by now (a timer tick can be late: catch up, never drop).
        let due = ((now - started).as_secs_f64() * rate) as u64;
        while sent < due {
            let scheduled = started + interval.mul_f64(sent as f64);
            sent += 1;
            let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
                outcome.lock().unwrap().client_saturated += 1;
                continue;
            };
            let (http, url, token, outcome) = (
                http.clone(),
                url.clone(),
                node.token.clone(),
                Arc::clone(&outcome),
            );
            tasks.spawn(async move {
                let action = common::action(0);
                let action_id = action["body"]["action"]["id"].as_str().unwrap().to_owned();
                let answer = http
                    .post(&url)
                    .bearer_auth(&token)
                    .header("content-type", "application/aip+json")
                    .body(action.to_string())
                    .send()
                    .await;
                let took = scheduled.elapsed();
                let verdict = match answer {
                    Ok(response) => {
                        let status = response.status();
                        let body: Value = response.json().await.unwrap_or(Value::Null);
                        let code = body["body"]["error"]["error"]["code"]
                            .as_str()
                            .unwrap_or("")
                            .to_owned();
                        (status.as_u16(), code)
                    }
                    Err(e) => (0, format!("client: {e}")),
                };
                let mut seen = outcome.lock().unwrap();
                match verdict {
                    (200..=299, _) => {
                        seen.admitted.push(took);
                        seen.admitted_ids.push(action_id);
                    }
                    (503 | 429, code) if !code.is_empty() => {
                        *seen.refused.entry(code).or_default() += 1;
                    }
                    (status, code) => {
                        *seen.errors.entry(format!("{status} {code}")).or_default() += 1;
                    }
                }
                drop(permit);
            });
        }
        while tasks.try_join_next().is_some() {}
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    while tasks.join_next().await.is_some() {}
    rss.push(rss_kib(pid));
    let outcome = std::mem::take(&mut *outcome.lock().unwrap());
    (outcome, rss)
}

/// Reads every admitted action back by id: each must exist and be completed.
async fn lost(node: &common::Node, ids: &[String], bound: usize) -> usize {
    let http = common::http_client();
    let base = format!("http://{}", node.addr);
    let missing = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // No more readers than the node's in-flight bound, and a read it refuses as overloaded is
    // asked again: only an action the node does not hold completed counts as lost.
    let readers = bound.clamp(1, 16);
    let chunks: Vec<Vec<String>> = ids
        .chunks(ids.len().div_ceil(readers).max(1))
        .map(<[String]>::to_vec)
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in chunks {
        let (http, base, token, missing) = (
            http.clone(),
            base.clone(),
            node.token.clone(),
            Arc::clone(&missing),
        );
        tasks.spawn(async move {
            for id in chunk {
                let mut view = Value::Null;
                for _ in 0..100 {
                    let response = http
                        .get(format!("{base}/aip/v1/actions/{id}"))
                        .bearer_auth(&token)
                        .send()
                        .await
                        .unwrap();
                    if response.status() == 503 {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    view = response.json().await.unwrap_or(Value::Null);
                    break;
                }
                if view["state"] != "completed" {
                    missing.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    missing.load(std::sync::atomic::Ordering::Relaxed)
}

fn report(name: &str, offered: f64, secs: u64, outcome: &mut Outcome, rss: &[u64]) {
    outcome.admitted.sort();
    let refused: usize = outcome.refused.values().sum();
    let (min, max) = (
        rss.iter().copied().min().unwrap_or(0),
        rss.iter().copied().max().unwrap_or(0),
    );
    println!(
        "{name}: offered {offered:.0}/s for {secs} s: admitted {} ({:.0}/s, p50 {:.2} ms, p99 {:.2} ms), refused typed {refused} {:?}, errors {:?}, client saturated {}; server RSS {} .. {} KiB ({:+.1}% from first to last sample, {} samples)",
        outcome.admitted.len(),
        outcome.admitted.len() as f64 / secs as f64,
        percentile(&outcome.admitted, 0.50),
        percentile(&outcome.admitted, 0.99),
        outcome.refused,
        outcome.errors,
        outcome.client_saturated,
        min,
        max,
        (*rss.last().unwrap_or(&0) as f64 - rss[0] as f64) / rss[0].max(1) as f64 * 100.0,
        rss.len()
    );
}

fn main() {
    if !common::benchmarking("overload_load") {
        return;
    }
    let secs = env_secs("AIP_BENCH_SECS", 60);
    let soak_secs = env_secs("AIP_BENCH_SOAK_SECS", 600);
    let bound = usize::try_from(env_secs("AIP_BENCH_BOUND", 32)).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-bench-overload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let node = common::start_node(
        &dir.join("aip"),
        Some(&format!("[limits]\nmax_in_flight_requests = {bound}\n")),
        None,
    );
    println!("load average (1 min) before: {}", common::load_average());
    let http = common::http_client();
    let url = format!("http://{}/aip/v1/actions", node.addr);
    let post = |http: reqwest::Client, url: String, token: String| {
        move |i| {
            let (http, url, token) = (http.clone(), url.clone(), token.clone());
            async move { common::post_action(&http, &url, &token, i).await }
        }
    };
    let unloaded = rt.block_on(common::measure(
        2000,
        1,
        post(http.clone(), url.clone(), node.token.clone()),
    ));
    let capacity = rt.block_on(common::measure(
        10_000,
        bound,
        post(http.clone(), url.clone(), node.token.clone()),
    ));
    println!(
        "unloaded (1 in flight): {unloaded} (rate/s | p50 ms | p99 ms); capacity ({bound} in flight, the node's bound): {capacity}"
    );
    let (mut overload, rss) = rt.block_on(open_loop(
        &node,
        capacity.rate * 2.0,
        secs,
        Duration::from_secs(1),
    ));
    report(
        "overload (2x capacity)",
        capacity.rate * 2.0,
        secs,
        &mut overload,
        &rss,
    );
    let missing = rt.block_on(lost(&node, &overload.admitted_ids, bound));
    println!(
        "overload: p99 of admitted / p99 at capacity = {:.2}x, / unloaded p99 = {:.2}x; admitted actions not found completed afterwards: {missing} of {}",
        percentile(&overload.admitted, 0.99) / capacity.p99_ms,
        percentile(&overload.admitted, 0.99) / unloaded.p99_ms,
        overload.admitted_ids.len()
    );
    if soak_secs > 0 {
        let (mut soak, rss) = rt.block_on(open_loop(
            &node,
            capacity.rate / 2.0,
            soak_secs,
            Duration::from_secs(10),
        ));
        report(
            "soak (half capacity)",
            capacity.rate / 2.0,
            soak_secs,
            &mut soak,
            &rss,
        );
        let missing = rt.block_on(lost(&node, &soak.admitted_ids, bound));
        // The first sample is taken before the soak warmed anything up.
        let steady = &rss[1.min(rss.len())..];
        let (min, max) = (
            steady.iter().copied().min().unwrap_or(0),
            steady.iter().copied().max().unwrap_or(0),
        );
        println!(
            "soak: RSS after the first sample varies {:.1}% (max/min - 1); admitted actions not found completed afterwards: {missing}; RSS samples (KiB): {rss:?}",
            (max as f64 / min.max(1) as f64 - 1.0) * 100.0
        );
    }
    println!("load average (1 min) after: {}", common::load_average());
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}
