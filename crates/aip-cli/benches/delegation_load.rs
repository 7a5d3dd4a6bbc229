//! Load benchmark of delegation round trips (spec 14) between two `aip serve` nodes on their
//! embedded SQLite stores, against plain sync actions on the delegating node in the same run:
//! - `sync`: one sync `cap:demo:echo` action on node A (the baseline);
//! - `delegated`: one sync `cap:b:echo` action on A, served by node B: A admits the parent, sends a
//!   signed `delegation_request`, B verifies it, admits and runs the child, answers a signed
//!   `delegation_result`, A verifies it and settles the parent.
//!
//! Run with `cargo bench -p aip-cli --bench delegation_load`; `AIP_BENCH_REQUESTS` overrides the
//! operations per level (default 600), `AIP_BENCH_LEVELS` the concurrency levels (default 1,16).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::peers::{key_file, routed};

fn main() {
    if !common::benchmarking("delegation_load") {
        return;
    }
    let requests = common::requests(600);
    let levels = common::levels("1,16");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-bench-delegation-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::create_dir_all(dir.join("b")).unwrap();
    let a_key = aip_core::signing::generate_signing_key();
    let b_key = aip_core::signing::generate_signing_key();
    let a_did = key_file(&dir.join("a/node.key"), &a_key);
    let b_did = key_file(&dir.join("b/node.key"), &b_key);
    let b_config = format!(
        "node_key_file = \"{}\"\n[delegation]\ntrust_domain = \"b.example\"\n\n\
         [[peers]]\nname = \"a\"\ndid = \"{a_did}\"\ntrust_domain = \"a.example\"\nscopes = [\"invoke:cap:demo:echo\"]\n",
        dir.join("b/node.key").display()
    );
    let b = common::start_node(&dir.join("b"), Some(&b_config), None);
    let http = common::http_client();
    let manifest: Value = rt.block_on(common::call(
        http.get(format!("http://{}/aip/v1/manifest", b.addr))
            .bearer_auth(&b.token),
    ));
    let echo = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cap:demo:echo")
        .unwrap()
        .clone();
    let a_config = format!(
        "node_key_file = \"{}\"\n[delegation]\ntrust_domain = \"a.example\"\n\n\
         [[peers]]\nname = \"b\"\ndid = \"{b_did}\"\ntrust_domain = \"b.example\"\nurl = \"http://{}\"\n\n{}",
        dir.join("a/node.key").display(),
        b.addr,
        routed(
            "cap:b:echo",
            &echo["contract"],
            &echo["input_schema"],
            "b",
            "cap:demo:echo",
            None
        ),
    );
    let a = common::start_node(&dir.join("a"), Some(&a_config), None);
    println!(
        "operations per level: {requests} (after {} warm-up operations)",
        common::WARMUP
    );
    println!("load average (1 min) before: {}", common::load_average());
    println!(
        "| concurrency | sync actions/s | sync p50 ms | delegated round trips/s | p50 ms | p99 ms | delegated/sync |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let base = Arc::new(format!("http://{}", a.addr));
    for &concurrency in &levels {
        let sync = {
            let (http, base, token) = (http.clone(), base.clone(), a.token.clone());
            rt.block_on(common::measure(requests, concurrency, move |_| {
                let (http, base, token) = (http.clone(), base.clone(), token.clone());
                async move { common::sync_echo(&http, &base, &token).await }
            }))
        };
        let delegated = {
            let (http, base, token) = (http.clone(), base.clone(), a.token.clone());
            rt.block_on(common::measure(requests, concurrency, move |_| {
                let (http, base, token) = (http.clone(), base.clone(), token.clone());
                async move { delegated_echo(&http, &base, &token).await }
            }))
        };
        println!(
            "| {concurrency} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2}x |",
            sync.rate,
            sync.p50_ms,
            delegated.rate,
            delegated.p50_ms,
            delegated.p99_ms,
            delegated.rate / sync.rate
        );
    }
    println!("load average (1 min) after: {}", common::load_average());
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}

async fn delegated_echo(http: &reqwest::Client, base: &str, token: &str) {
    let envelope = json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": common::fresh("msg_"),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "action": { "id": common::fresh("act_"), "capability_id": "cap:b:echo", "mode": "sync", "input": { "n": 1 } } },
    });
    let answer = common::call(
        http.post(format!("{base}/aip/v1/actions"))
            .bearer_auth(token)
            .header("content-type", "application/aip+json")
            .body(envelope.to_string()),
    )
    .await;
    assert_eq!(
        answer["body"]["action_result"]["status"], "completed",
        "{answer}"
    );
}
