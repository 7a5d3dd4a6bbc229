//! Settlement batches through the binary (spec 18.4): a capability whose manifest `cost`
//! states a per-call price accrues it for each completed action per tenant and external account;
//! `aip settlement close` produces a batch signed by the node key (`aip envelope verify`) with its
//! own receipt chain (`aip receipts verify`), each action linked by its receipt chain's root hash
//! and settled once; a malformed price stops startup.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use axum::Json;
use axum::routing::post;
use serde_json::{Value, json};
use support::{Server, token_file};

const BILLING: &str = "billing-token-0123456789abcdef";
const ALICE: &str = "alice-token-0123456789abcdef-x";
const BOB: &str = "bob-token-0123456789abcdef-xyz";

const CONTRACT: &str = r#"side_effects = ["read"]
idempotency = { requirement = "optional", collision_behavior = "return_original_result", key_scope = "principal" }
execution = { supports_sync = true, supports_async = false, supports_streaming = false, supports_cancel = false, supports_retry = true, expected_completion = "sync", retry_safety = "safe" }
data = { sensitivity = "internal", contains_pii = false, redaction_required = false }"#;

async fn start_provider() -> String {
    let app = axum::Router::new().route(
        "/echo",
        post(|Json(body): Json<Value>| async move {
            Json(json!({ "output": { "echo": body["action"]["input"] } }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn config(dir: &Path, base: &str, cost: &str) -> std::path::PathBuf {
    let billing = token_file(dir, "billing.token", BILLING);
    let alice = token_file(dir, "alice.token", ALICE);
    let bob = token_file(dir, "bob.token", BOB);
    let path = dir.join("aip.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[[principals]]
id = "svc:billing"
scopes = ["settlement:close"]
token_file = "{billing}"

[[principals]]
id = "svc:alice"
scopes = ["invoke:cap:ext:*"]
token_file = "{alice}"
external_account = {{ system = "stripe", id = "acct_1" }}

[[principals]]
id = "svc:bob"
scopes = ["invoke:cap:ext:*"]
token_file = "{bob}"

[[capabilities]]
id = "cap:ext:priced"
name = "Priced"
kind = "tool"
input_schema = {{ type = "object" }}
cost = {cost}
handler = {{ type = "http", url = "{base}/echo", timeout_ms = 2000 }}
[capabilities.contract]
{CONTRACT}

[[capabilities]]
id = "cap:ext:free"
name = "Free"
kind = "tool"
input_schema = {{ type = "object" }}
handler = {{ type = "http", url = "{base}/echo", timeout_ms = 2000 }}
[capabilities.contract]
{CONTRACT}
"#,
            billing = billing.display(),
            alice = alice.display(),
            bob = bob.display(),
        ),
    )
    .unwrap();
    path
}

async fn call(server: &Server, token: &str, capability: &str) {
    let (status, reply) = server
        .client(token)
        .act(json!({ "id": support::id("act_"), "capability_id": capability, "input": { "n": 1 } }))
        .await;
    assert_eq!(status, 200, "{reply}");
}

fn close(server: &Server, dir: &Path, id: &str) -> Value {
    let billing = dir.join("billing.token");
    let (code, out, err) = support::run_cli(
        &server.base,
        &billing,
        &["settlement", "close", "--id", id, "--json"],
    );
    assert_eq!(code, 0, "{out}{err}");
    serde_json::from_str(&out).unwrap()
}

fn verify(dir: &Path, what: &str, value: &Value) -> String {
    let file = dir.join(format!("{what}.json"));
    std::fs::write(&file, value.to_string()).unwrap();
    let args: &[&str] = match what {
        "chain" => &["receipts", "verify"],
        _ => &["envelope", "verify"],
    };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(args)
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{what}: {text}");
    text
}

#[tokio::test]
async fn completed_priced_actions_are_settled_once_in_a_signed_receipt_linked_batch() {
    let dir = tempfile::tempdir().unwrap();
    let base = start_provider().await;
    let config = config(
        dir.path(),
        &base,
        r#"{ per_call = { amount_minor = 25, currency = "USD" } }"#,
    );
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    call(&server, ALICE, "cap:ext:priced").await;
    call(&server, ALICE, "cap:ext:priced").await;
    call(&server, BOB, "cap:ext:priced").await;
    call(&server, BOB, "cap:ext:free").await;

    // Closing needs its own scope.
    let (status, reply) = server
        .client(ALICE)
        .post("/aip/v1/settlements", &json!({ "id": "b1" }))
        .await;
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (403, Some("aip.policy.scope_denied")),
        "{reply}"
    );

    let view = close(&server, dir.path(), "b1");
    let batch = &view["envelope"]["body"]["batch_settlement"];
    let records = batch["records"].as_array().unwrap();
    assert_eq!(records.len(), 3, "{view}");
    assert!(
        records
            .iter()
            .all(|r| r["capability_id"] == "cap:ext:priced")
    );
    let receipt = &view["receipt_chain"]["receipts"][0];
    assert_eq!(receipt["receipt_type"], "settlement_recorded", "{view}");
    let totals = &receipt["data"]["totals"];
    assert_eq!(
        totals,
        &json!([
            { "account": "principal:svc:bob", "currency": "USD", "amount_minor": 25 },
            { "account": "stripe:acct_1", "currency": "USD", "amount_minor": 50 },
        ]),
        "{view}"
    );
    // Each record is linked to its action's receipt chain, as its owner reads it.
    for record in records {
        let owner = match record["principal"].as_str().unwrap() {
            "svc:alice" => ALICE,
            _ => BOB,
        };
        let (status, chain) = server
            .client(owner)
            .get(&format!(
                "/aip/v1/receipts/{}",
                record["action_id"].as_str().unwrap()
            ))
            .await;
        assert_eq!(status, 200, "{chain}");
        assert_eq!(chain["root_hash"], record["receipt_root_hash"], "{chain}");
    }
    // The batch verifies offline: its envelope's signature and its receipt chain.
    let signer = verify(dir.path(), "envelope", &view["envelope"]);
    let (_, manifest) = server.client(BILLING).get("/aip/v1/manifest").await;
    assert!(
        signer.contains(manifest["agent"]["did"].as_str().unwrap()),
        "{signer}"
    );
    let ok = verify(dir.path(), "chain", &view["receipt_chain"]);
    assert!(ok.starts_with("ok "), "{ok}");
    // A tampered record no longer verifies against the signature.
    let mut forged = view["envelope"].clone();
    forged["body"]["batch_settlement"]["records"][0]["amount_minor"] = json!(1);
    let file = dir.path().join("forged.json");
    std::fs::write(&file, forged.to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["envelope", "verify"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());

    // Settled once: the same id shows the same batch; a new batch has nothing until new work.
    let again = close(&server, dir.path(), "b1");
    assert_eq!(again["envelope"], view["envelope"]);
    let empty = close(&server, dir.path(), "b2");
    assert!(
        empty["envelope"]["body"]["batch_settlement"]["records"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{empty}"
    );
    call(&server, BOB, "cap:ext:priced").await;
    let next = close(&server, dir.path(), "b3");
    assert_eq!(
        next["envelope"]["body"]["batch_settlement"]["records"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Over the envelope endpoint too; a request that brings its own records is refused.
    let (status, reply) = server
        .client(BILLING)
        .post(
            "/aip/v1/messages",
            &support::envelope(
                "aip.economic.v1.batch_settlement",
                json!({ "batch_settlement": { "id": "b4", "model": "per_call", "records": [{ "amount_minor": 1 }] } }),
            ),
        )
        .await;
    assert_eq!(status, 400, "{reply}");
    let (status, reply) = server
        .client(BILLING)
        .post(
            "/aip/v1/messages",
            &support::envelope(
                "aip.economic.v1.batch_settlement",
                json!({ "batch_settlement": { "id": "b1", "model": "per_call" } }),
            ),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["batch_settlement"]["records"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // Closing is audited.
    let (_, audit) = server.admin().get("/aip/v1/audit/events?limit=1000").await;
    let closes = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "settlement.closed")
        .count();
    assert_eq!(closes, 3, "{audit}");
}

#[tokio::test]
async fn a_price_the_settlement_cannot_charge_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(
        dir.path(),
        "http://127.0.0.1:9",
        r#"{ per_call = { amount_minor = -5, currency = "usd" } }"#,
    );
    let stderr = support::serve_refused(&dir.path().join("data"), &config);
    assert!(stderr.contains("cost.per_call"), "{stderr}");
}
