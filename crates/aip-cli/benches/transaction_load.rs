//! Load benchmark of transactions (spec 13) against plain sync actions in the same run, through the
//! real `aip serve` binary, on its embedded SQLite store and (when `AIP_TEST_POSTGRES_URL` is set)
//! on PostgreSQL:
//! - `sync`: one sync `cap:demo:echo` action per operation (the baseline);
//! - `plan+commit`: one operation is a `cap:demo:payment` plan (`aip.transaction.v1.request`,
//!   mode `plan`: the durable plan written with its action) followed by the commit of that plan
//!   (the plan's checks, the compare-and-set claim, the fenced provider write, the result).
//!
//! Run with `cargo bench -p aip-cli --bench transaction_load`; `AIP_BENCH_REQUESTS` overrides the
//! operations per level (default 600), `AIP_BENCH_LEVELS` the concurrency levels (default 1,16).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/cluster/mod.rs"]
mod cluster;
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use serde_json::{Value, json};

fn main() {
    if !common::benchmarking("transaction_load") {
        return;
    }
    let requests = common::requests(600);
    let levels = common::levels("1,16");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-bench-transaction-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "operations per level: {requests} (after {} warm-up operations)",
        common::WARMUP
    );
    println!("load average (1 min) before: {}", common::load_average());
    println!(
        "| store | concurrency | sync actions/s | sync p50 ms | sync p99 ms | plan+commit pairs/s | pair p50 ms | pair p99 ms | pair/sync |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    run_store(&rt, "sqlite", &dir.join("sqlite"), None, requests, &levels);
    match rt.block_on(cluster::TestDb::create("transaction_load")) {
        Some(db) => run_store(
            &rt,
            "postgres",
            &dir.join("pg"),
            Some(&db.url),
            requests,
            &levels,
        ),
        None => println!("(PostgreSQL skipped: AIP_TEST_POSTGRES_URL is not set)"),
    }
    println!("load average (1 min) after: {}", common::load_average());
    let _ = std::fs::remove_dir_all(&dir);
}

fn run_store(
    rt: &tokio::runtime::Runtime,
    store: &str,
    dir: &std::path::Path,
    database: Option<&str>,
    requests: usize,
    levels: &[usize],
) {
    let node = common::start_node(dir, None, database);
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
        let pair = {
            let (http, base, token) = (http.clone(), base.clone(), node.token.clone());
            rt.block_on(common::measure(requests, concurrency, move |_| {
                let (http, base, token) = (http.clone(), base.clone(), token.clone());
                async move { plan_and_commit(&http, &base, &token).await }
            }))
        };
        println!(
            "| {store} | {concurrency} | {:.0} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2}x |",
            sync.rate,
            sync.p50_ms,
            sync.p99_ms,
            pair.rate,
            pair.p50_ms,
            pair.p99_ms,
            pair.rate / sync.rate
        );
    }
    drop(node);
}

fn transaction(transaction_id: &str, context: Value) -> Value {
    json!({
        "aip_version": "1.0",
        "message_type": "aip.transaction.v1.request",
        "message_id": common::fresh("msg_"),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "transaction_request": {
            "transaction_id": transaction_id,
            "action": { "id": common::fresh("act_"), "capability_id": "cap:demo:payment", "mode": "sync",
                        "input": { "amount_minor": 500, "to": "acct:bench" }, "transaction": context },
            "requested_by": { "id": "admin", "kind": "human" },
        } },
    })
}

async fn plan_and_commit(http: &reqwest::Client, base: &str, token: &str) {
    let transaction_id = common::fresh("txn_");
    let post = |envelope: Value| {
        common::call(
            http.post(format!("{base}/aip/v1/messages"))
                .bearer_auth(token)
                .header("content-type", "application/aip+json")
                .body(envelope.to_string()),
        )
    };
    let planned = post(transaction(&transaction_id, json!({ "mode": "plan" }))).await;
    let plan_id = planned["body"]["transaction_result"]["plan"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no plan: {planned}"))
        .to_owned();
    let committed = post(transaction(
        &transaction_id,
        json!({ "mode": "commit", "transaction_id": transaction_id, "plan_id": plan_id }),
    ))
    .await;
    assert_eq!(
        committed["body"]["transaction_result"]["status"], "committed",
        "{committed}"
    );
}
