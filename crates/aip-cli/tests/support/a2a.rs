//! The A2A SDK client of the A2A profile tests: `tests/interop/a2a_probe.py` on the official
//! `a2a-sdk` 1.3.0 (installed by `.ci/run`), driven by JSON steps.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Server;

/// The interop venv's python with the SDK, or a skip (a failure under `CI=true`).
pub fn python() -> Option<PathBuf> {
    super::interop_python("a2a-sdk", "1.3.0")
        .map_err(|why| super::skip_or_fail(&format!("A2A interop test: {why}")))
        .ok()
}

/// Runs `steps` with the SDK client as `token`; one result per step.
pub fn probe(
    python: &Path,
    server: &Server,
    token: &str,
    streaming: bool,
    steps: &[Value],
) -> Vec<Value> {
    let base = format!("http://{}", server.base);
    let mut args = vec![base.as_str(), "--token", token];
    if !streaming {
        args.push("--no-streaming");
    }
    let out = super::run_script(
        python,
        "tests/interop/a2a_probe.py",
        &args,
        &Value::from(steps.to_vec()),
    );
    let results: Vec<Value> = serde_json::from_value(out.clone()).unwrap();
    assert_eq!(results.len(), steps.len(), "{out}");
    results
}

/// A step's value; a failed step fails the test.
pub fn ok(result: &Value) -> &Value {
    assert!(result.get("ok").is_some(), "step failed: {result}");
    &result["ok"]
}

/// An A2A `SendMessage` (not streamed) as `token`: the JSON-RPC response.
pub async fn a2a_send(base: &str, token: &str) -> serde_json::Value {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    http.post(format!("http://{base}/a2a"))
        .bearer_auth(token)
        .header("A2A-Version", "1.0")
        .json(&serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                       "params": { "message": { "messageId": super::id("msg-"), "role": "ROLE_USER", "parts": [{ "text": "hello" }] } } }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// An A2A answer is the task rejected before anything was recorded, naming `code` as retryable.
pub fn assert_a2a_refused(answer: &serde_json::Value, code: &str) {
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED", "{answer}");
    assert_eq!(task["metadata"]["aip.recorded"], false, "{answer}");
    let error = &task["status"]["message"]["metadata"]["aip.error"];
    assert_eq!(error["code"], code, "{answer}");
    assert_eq!(error["retryable"], true, "{answer}");
}
