//! Load benchmark of the approval-gated flow (spec 12) against plain sync actions in the same run,
//! both through the real `aip serve` binary on its embedded SQLite store:
//! - `sync`: one sync `cap:demo:echo` action per operation (admission, dispatch, result; the
//!   baseline);
//! - `approval`: one operation is the whole gated flow of `cap:demo:transfer` below its quorum
//!   tier: the async action is admitted and waits (approval request, policy hash, timer), the demo
//!   approver `approver-1` decides it over REST (12.4 checks, compare-and-set decision, resume),
//!   and the client waits for the terminal state (`wait_ms`), so the dispatch after re-validation
//!   is inside the measured time.
//!
//! Run with `cargo bench -p aip-cli --bench approval_load`; `AIP_BENCH_REQUESTS` overrides the
//! operations per level (default 600), `AIP_BENCH_LEVELS` the concurrency levels (default 1,16).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;

use serde_json::{Value, json};

fn main() {
    if !common::benchmarking("approval_load") {
        return;
    }
    let requests = common::requests(600);
    let levels = common::levels("1,16");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-bench-approval-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let node = common::start_node(&dir.join("aip"), None, None);
    let approver = std::fs::read_to_string(dir.join("aip/data/approver-1.token"))
        .unwrap()
        .trim()
        .to_owned();
    let base = Arc::new(format!("http://{}", node.addr));
    let http = common::http_client();
    println!(
        "operations per level: {requests} (after {} warm-up operations)",
        common::WARMUP
    );
    println!("load average (1 min) before: {}", common::load_average());
    println!(
        "| concurrency | sync actions/s | sync p50 ms | sync p99 ms | approval flows/s | flow p50 ms | flow p99 ms | flow/sync |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for concurrency in levels {
        let sync = {
            let (http, base, token) = (http.clone(), base.clone(), node.token.clone());
            rt.block_on(common::measure(requests, concurrency, move |_| {
                let (http, base, token) = (http.clone(), base.clone(), token.clone());
                async move { common::sync_echo(&http, &base, &token).await }
            }))
        };
        let flow = {
            let (http, base, token, approver) = (
                http.clone(),
                base.clone(),
                node.token.clone(),
                approver.clone(),
            );
            rt.block_on(common::measure(requests, concurrency, move |_| {
                let (http, base, token, approver) =
                    (http.clone(), base.clone(), token.clone(), approver.clone());
                async move { approval_flow(&http, &base, &token, &approver).await }
            }))
        };
        println!(
            "| {concurrency} | {:.0} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2}x |",
            sync.rate,
            sync.p50_ms,
            sync.p99_ms,
            flow.rate,
            flow.p50_ms,
            flow.p99_ms,
            flow.rate / sync.rate
        );
    }
    println!("load average (1 min) after: {}", common::load_average());
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}

fn action(capability: &str, mode: &str, input: Value) -> Value {
    json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": common::fresh("msg_"),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "action": { "id": common::fresh("act_"), "capability_id": capability, "mode": mode, "input": input } },
    })
}

async fn approval_flow(http: &reqwest::Client, base: &str, token: &str, approver: &str) {
    let envelope = action(
        "cap:demo:transfer",
        "async",
        json!({ "amount_minor": 500, "to": "acct:bob" }),
    );
    let action_id = envelope["body"]["action"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ack = common::call(
        http.post(format!("{base}/aip/v1/actions"))
            .bearer_auth(token)
            .header("content-type", "application/aip+json")
            .body(envelope.to_string()),
    )
    .await;
    let approval_id = ack["extensions"]["approval"]["approval_id"]
        .as_str()
        .expect("the ack names its approval")
        .to_owned();
    let decided = common::call(
        http.post(format!("{base}/aip/v1/approvals/{approval_id}/decision"))
            .bearer_auth(approver)
            .json(&json!({ "decision": "approved" })),
    )
    .await;
    assert_eq!(decided["status"], "approved", "{decided}");
    loop {
        let view = common::call(
            http.get(format!("{base}/aip/v1/actions/{action_id}?wait_ms=10000"))
                .bearer_auth(token),
        )
        .await;
        match view["state"].as_str() {
            Some("completed") => break,
            Some("queued" | "running") => continue,
            other => panic!("transfer ended {other:?}: {view}"),
        }
    }
}
