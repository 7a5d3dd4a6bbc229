//! Load benchmark of the A2A profile (spec 21.2): blocking `SendMessage` of `cap:demo:echo` over
//! JSON-RPC at `/a2a` (each a fresh `messageId`, so each a new durable action with its receipts)
//! against the same capability as a native HTTP sync action, on one `aip serve` node with its
//! embedded SQLite store, in the same run.
//!
//! Run with `cargo bench -p aip-cli --bench a2a_load`; `AIP_BENCH_REQUESTS` overrides the operations
//! per level (default 3000), `AIP_BENCH_LEVELS` the concurrency levels (default 1,16).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use serde_json::{Value, json};

async fn send_message(http: &reqwest::Client, url: &str, token: &str, i: usize) {
    let body = json!({ "jsonrpc": "2.0", "id": i.to_string(), "method": "SendMessage", "params": {
        "message": { "messageId": common::fresh("msg-"), "role": "ROLE_USER",
                     "parts": [{ "data": { "i": i } }], "metadata": { "aip.capability_id": "cap:demo:echo" } } } });
    let answer: Value = common::call(
        http.post(url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(body.to_string()),
    )
    .await;
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer}"
    );
}

fn main() {
    if !common::benchmarking("a2a_load") {
        return;
    }
    let requests = common::requests(3000);
    let levels = common::levels("1,16");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-bench-a2a-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let node = common::start_node(&dir, None, None);
    let http = common::http_client();
    let base = format!("http://{}", node.addr);
    let url = format!("{base}/a2a");
    let native = {
        let (http, base, token) = (http.clone(), base.clone(), node.token.clone());
        move |_| {
            let (http, base, token) = (http.clone(), base.clone(), token.clone());
            async move { common::sync_echo(&http, &base, &token).await }
        }
    };
    let a2a = {
        let (http, token) = (http.clone(), node.token.clone());
        move |i| {
            let (http, url, token) = (http.clone(), url.clone(), token.clone());
            async move { send_message(&http, &url, &token, i).await }
        }
    };
    common::compare(
        &rt,
        (requests, levels),
        ("native sync action", "A2A SendMessage"),
        native,
        a2a,
    );
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}
