//! Rate limits through the binary (spec 22.8): a principal past its bucket gets 429
//! `aip.limit.rate_limited` with `Retry-After` over native HTTP and a JSON-RPC error naming the
//! code over MCP; another principal keeps its own bucket.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::json;
use support::mcp::{ALICE, BOB, Mcp};
use support::{Server, id, token_file};

#[tokio::test]
async fn a_principal_past_its_rate_gets_429_with_retry_after_and_a_typed_mcp_error() {
    let dir = tempfile::tempdir().unwrap();
    let alice = token_file(dir.path(), "alice.token", ALICE);
    let bob = token_file(dir.path(), "bob.token", BOB);
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[limits.principal_rates]
alice = {{ per_second = 1, burst = 2 }}

[[principals]]
id = "alice"
kind = "agent"
scopes = ["invoke:cap:demo:*"]
token_file = "{alice}"

[[principals]]
id = "bob"
kind = "agent"
scopes = ["invoke:cap:demo:*"]
token_file = "{bob}"
"#,
            alice = alice.display(),
            bob = bob.display()
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    let echo = || {
        support::envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} } }),
        )
        .to_string()
    };
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let send = |token: &'static str| {
        http.post(format!("http://{}/aip/v1/actions", server.base))
            .bearer_auth(token)
            .header("content-type", "application/aip+json")
            .body(echo())
            .send()
    };
    for _ in 0..2 {
        assert_eq!(send(ALICE).await.unwrap().status(), 200);
    }
    let refused = send(ALICE).await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: serde_json::Value = refused.json().await.unwrap();
    let error = &body["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.limit.rate_limited", "{body}");
    assert_eq!(error["retryable"], true, "{body}");
    // Over MCP the same bucket refuses with a JSON-RPC error that names the code.
    let answer = mcp
        .call(
            "tools/call",
            json!({ "name": "demo_echo", "arguments": {} }),
        )
        .await;
    let message = answer.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("aip.limit.rate_limited"),
        "{}",
        answer.body
    );
    // Bob has no named rate and no default: unlimited.
    for _ in 0..5 {
        assert_eq!(send(BOB).await.unwrap().status(), 200);
    }
}
