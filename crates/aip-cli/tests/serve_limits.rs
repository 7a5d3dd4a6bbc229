//! Rate limits through the binary (spec 22.8): a principal past its bucket gets 429
//! `aip.limit.rate_limited` with `Retry-After` over native HTTP and a JSON-RPC error naming the
//! code over MCP; another principal keeps its own bucket. Concurrency quotas the same way with
//! `aip.limit.quota_exceeded`.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::json;
use support::id;
use support::mcp::{ALICE, BOB, Mcp, two_principals_with};

/// A tool call over MCP is refused with a JSON-RPC error whose message starts with `code`.
async fn refused_over_mcp(mcp: &mut Mcp, code: &str) {
    let answer = mcp
        .call(
            "tools/call",
            json!({ "name": "demo_echo", "arguments": {} }),
        )
        .await;
    let message = answer.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with(code), "{}", answer.body);
}

#[tokio::test]
async fn a_principal_past_its_rate_gets_429_with_retry_after_and_a_typed_mcp_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = two_principals_with(
        dir.path(),
        "[limits.principal_rates]\nalice = { per_second = 1, burst = 2 }\n",
    );
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
    refused_over_mcp(&mut mcp, "aip.limit.rate_limited").await;
    // Bob has no named rate and no default: unlimited.
    for _ in 0..5 {
        assert_eq!(send(BOB).await.unwrap().status(), 200);
    }
}

#[tokio::test]
async fn a_principal_at_its_concurrency_quota_gets_429_until_one_of_its_actions_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let server = two_principals_with(dir.path(), "[limits.principal_running]\nalice = 2\n");
    let (on_alice, on_bob) = (server.client(ALICE), server.client(BOB));
    let sleep = || json!({ "id": id("act_"), "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 3000 } });
    let mut held = Vec::new();
    for _ in 0..2 {
        let action = sleep();
        let (status, reply) = on_alice.act(action.clone()).await;
        assert_eq!(status, 202, "{reply}");
        held.push(action["id"].as_str().unwrap().to_owned());
    }
    let (status, reply) = on_alice.act(sleep()).await;
    assert_eq!(status, 429, "{reply}");
    let error = &reply["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.limit.quota_exceeded", "{reply}");
    assert_eq!(error["retryable"], true, "{reply}");
    assert_eq!(error["details"]["limit"], 2, "{reply}");
    assert_eq!(error["details"]["bucket"], "principal", "{reply}");
    // Over MCP: a JSON-RPC error naming the code.
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    refused_over_mcp(&mut mcp, "aip.limit.quota_exceeded").await;
    // Bob has no quota.
    for _ in 0..3 {
        let (status, reply) = on_bob.act(sleep()).await;
        assert_eq!(status, 202, "{reply}");
    }
    // Once one of Alice's actions finishes, she is admitted again.
    on_alice.wait_terminal(&held[0]).await;
    let (status, reply) = on_alice.act(sleep()).await;
    assert_eq!(status, 202, "{reply}");
}
