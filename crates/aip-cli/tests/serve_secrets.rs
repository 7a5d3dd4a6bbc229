//! Planted secrets (spec 22.7): a password inside an action input and bearer tokens never
//! appear in the server's log (at debug level), in events, receipts, audit records or error
//! messages. Results may carry what a handler returns; nothing else may.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::{Server, envelope, id};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_password_and_tokens_never_reach_logs_events_receipts_audit_or_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = dir.path().join("server.log");
    let child = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let server = Server::from_child(child, &data);
    let admin = server.admin();
    let password = format!("pw-{}", id("secret"));

    // Accepted work carrying the password.
    let echo = id("act_");
    let (status, reply) = admin
        .act(json!({ "id": echo, "capability_id": "cap:demo:echo", "input": { "user": "ann", "password": password } }))
        .await;
    assert_eq!(status, 200, "{reply}");
    let slow = id("act_");
    let (status, reply) = admin
        .act(json!({ "id": slow, "capability_id": "cap:demo:echo", "mode": "async", "input": { "password": password } }))
        .await;
    assert_eq!(status, 202, "{reply}");
    admin.wait_terminal(&slow).await;
    // Refused work carrying it: the errors name the problem, not the value.
    let mut errors = Vec::new();
    for input in [
        json!({ "ms": password }),
        json!({ "ms": 1, "extra": password }),
    ] {
        let (status, reply) = admin
            .act(json!({ "id": id("act_"), "capability_id": "cap:demo:sleep", "mode": "async", "input": input }))
            .await;
        assert_eq!(status / 100, 4, "{reply}");
        errors.push(reply);
    }
    let (status, reply) = admin
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:nope", "input": { "password": password } }))
        .await;
    assert_eq!(status / 100, 4);
    errors.push(reply);
    // A wrong bearer token is refused, and neither it nor a valid one is ever logged.
    let wrong = format!("tok-{}", id("wrong"));
    let (status, reply) = server.client(&wrong).get("/aip/v1/manifest").await;
    assert_eq!(status, 401);
    errors.push(reply);
    let env = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": { "password": password } } }),
    );
    let (_, reply) = server.client(&wrong).post("/aip/v1/messages", &env).await;
    errors.push(reply);

    // Everything the server recorded or answered besides the echo's own result.
    let mut recorded: Vec<Value> = errors;
    for action in [&echo, &slow] {
        recorded.push(
            admin
                .get(&format!("/aip/v1/actions/{action}/events?limit=1000"))
                .await
                .1,
        );
        recorded.push(admin.get(&format!("/aip/v1/receipts/{action}")).await.1);
    }
    recorded.push(admin.get("/aip/v1/events?limit=1000").await.1);
    recorded.push(
        admin
            .get("/aip/v1/audit/events?export=true&limit=1000")
            .await
            .1,
    );
    recorded.push(admin.get(&format!("/aip/v1/actions/{slow}")).await.1);
    for value in &recorded {
        let text = value.to_string();
        assert!(!text.contains(&password), "the password leaked: {text}");
        assert!(!text.contains(&wrong), "a token leaked: {text}");
    }
    drop(server);
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.len() > 100,
        "the debug log is empty: the check proves nothing"
    );
    for secret in [password.as_str(), wrong.as_str()] {
        assert!(!log_text.contains(secret), "{secret} leaked into the log");
    }
    let admin_token = std::fs::read_to_string(data.join("admin.token")).unwrap();
    assert!(
        !log_text.contains(admin_token.trim()),
        "the admin token leaked into the log"
    );
}
