//! Transactions through the binary (spec 13): `cap:demo:payment` over HTTP and NATS with no
//! configuration of its own (dry run, plan, commit, the REST views, compensation by
//! `cap:demo:refund`), an uncertain commit that no kill -9 and restart ever retries and that is
//! reconciled, and, on PostgreSQL, a worker stopped past its lease whose payment is refused by the
//! fence while another node settles its commit as unknown.
#![allow(clippy::unwrap_used)]

mod cluster;
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::nats::{nats_url, request};
use support::{Client, Server, envelope, id, pause};

fn pay(amount: u64) -> Value {
    json!({ "amount_minor": amount, "to": "acct:shop" })
}

/// A `transaction_request` envelope for `capability` in `context` as `principal`.
fn txn(principal: &str, capability: &str, input: Value, context: Value) -> Value {
    let transaction_id = context["transaction_id"]
        .as_str()
        .map_or_else(|| id("txn_"), str::to_owned);
    envelope(
        "aip.transaction.v1.request",
        json!({ "transaction_request": {
            "transaction_id": transaction_id,
            "action": { "id": id("act_"), "capability_id": capability, "input": input, "transaction": context },
            "requested_by": { "id": principal, "kind": "human" },
        } }),
    )
}

async fn send(client: &Client, env: &Value) -> (u16, Value) {
    client.post("/aip/v1/messages", env).await
}

/// Plans a `cap:demo:payment` of `input` as `admin`; returns (transaction id, plan id).
async fn plan_payment(client: &Client, input: Value) -> (String, String) {
    let (_, reply) = send(
        client,
        &txn(
            "admin",
            "cap:demo:payment",
            input,
            json!({ "mode": "plan" }),
        ),
    )
    .await;
    let planned = result(&reply);
    assert_eq!(planned["status"], "planned", "{reply}");
    (
        planned["transaction_id"].as_str().unwrap().to_owned(),
        planned["plan"]["plan_id"].as_str().unwrap().to_owned(),
    )
}

fn result(reply: &Value) -> &Value {
    &reply["body"]["transaction_result"]
}

fn count_sqlite(data: &Path, collection: &str) -> i64 {
    let db = rusqlite::Connection::open(data.join("aip.sqlite")).unwrap();
    db.query_row(
        "SELECT COUNT(*) FROM aip_records WHERE collection = ?1",
        [collection],
        |row| row.get(0),
    )
    .unwrap()
}

#[tokio::test]
async fn the_demo_payment_plans_commits_reconciles_and_refunds_over_http_and_survives_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Reconciliation is the test's to ask for here (the runtime's own timer is tested below).
    let manual = [("AIP_LIMITS__RECONCILE_AFTER_MS", "0")];
    let mut server = Server::start(&data, None, &manual);
    let admin = server.admin();
    // The manifest advertises the transaction contract the runtime executes.
    let (_, manifest) = admin.get("/aip/v1/manifest").await;
    let payment = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cap:demo:payment")
        .unwrap()
        .clone();
    assert_eq!(
        payment["contract"]["transaction"]["dry_run_fidelity"],
        "full_simulation"
    );
    assert_eq!(
        payment["contract"]["compensation"]["compensation_capability_id"],
        "cap:demo:refund"
    );
    assert_eq!(
        manifest["governance"]["transaction_messages"],
        json!([
            "aip.transaction.v1.request",
            "aip.transaction.v1.query_request"
        ])
    );
    // The discovery filter finds exactly the transactional capabilities.
    let filter = envelope(
        "aip.discovery.v1.manifest_request",
        json!({ "manifest_request": { "filter": { "supports_transactions": true } } }),
    );
    let (status, filtered) = send(&admin, &filter).await;
    assert_eq!(status, 200, "{filtered}");
    let ids: Vec<&str> = filtered["body"]["manifest"]["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["cap:demo:payment"]);
    // Dry run: nothing paid.
    let (status, reply) = send(
        &admin,
        &txn(
            "admin",
            "cap:demo:payment",
            pay(3_000),
            json!({ "mode": "dry_run" }),
        ),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(result(&reply)["status"], "dry_run_completed");
    assert_eq!(count_sqlite(&data, "demo.payments"), 0);
    // Plan, then commit.
    let (_, reply) = send(
        &admin,
        &txn(
            "admin",
            "cap:demo:payment",
            pay(3_000),
            json!({ "mode": "plan" }),
        ),
    )
    .await;
    let planned = result(&reply).clone();
    assert_eq!(planned["status"], "planned", "{reply}");
    let (txn_id, plan_id) = (
        planned["transaction_id"].as_str().unwrap().to_owned(),
        planned["plan"]["plan_id"].as_str().unwrap().to_owned(),
    );
    let (status, reply) = send(
        &admin,
        &txn(
            "admin",
            "cap:demo:payment",
            pay(3_000),
            json!({ "mode": "commit", "transaction_id": txn_id, "plan_id": plan_id }),
        ),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let committed = result(&reply).clone();
    assert_eq!(committed["status"], "committed", "{reply}");
    assert_eq!(count_sqlite(&data, "demo.payments"), 1);
    // The REST views.
    for path in [
        format!("/aip/v1/transactions/{txn_id}?include_result=true"),
        format!("/aip/v1/transactions/by-plan/{plan_id}?include_result=true"),
        format!(
            "/aip/v1/transactions/by-action/{}?include_result=true",
            committed["action_id"].as_str().unwrap()
        ),
    ] {
        let (status, v) = admin.get(&path).await;
        assert_eq!(status, 200, "{path}: {v}");
        assert_eq!(v["status"], "committed", "{v}");
        assert_eq!(v["plan"]["plan_id"], plan_id.as_str());
        assert_eq!(
            v["result"]["output"]["payment_id"],
            committed["provider_operation"]["operation_id"]
        );
    }
    let (status, v) = admin.get("/aip/v1/transactions/txn_missing").await;
    assert_eq!(status, 404, "{v}");
    let (status, v) = admin
        .get(&format!("/aip/v1/transactions/{txn_id}?bogus=1"))
        .await;
    assert_eq!(status, 400, "unknown parameters are refused: {v}");

    // An uncertain commit: the provider pays, then never answers.
    let odd =
        json!({ "amount_minor": 4_000, "to": "acct:shop", "test_outcome": "commit_then_timeout" });
    let (odd_txn, odd_plan) = plan_payment(&admin, odd.clone()).await;
    let (_, reply) = send(
        &admin,
        &txn(
            "admin",
            "cap:demo:payment",
            odd.clone(),
            json!({ "mode": "commit", "transaction_id": odd_txn, "plan_id": odd_plan }),
        ),
    )
    .await;
    let unknown = result(&reply).clone();
    assert_eq!(unknown["status"], "outcome_unknown", "{reply}");
    assert_eq!(count_sqlite(&data, "demo.payments"), 2);
    // kill -9 and restart: the commit is never retried.
    server.kill();
    let server = Server::start(&data, None, &manual);
    let admin = server.admin();
    pause(1_500).await;
    assert_eq!(count_sqlite(&data, "demo.payments"), 2, "never retried");
    let (_, v) = admin.get(&format!("/aip/v1/transactions/{odd_txn}")).await;
    assert_eq!(v["status"], "outcome_unknown", "{v}");
    // Reconciliation with the recorded operation: committed; then the refund compensates it.
    let (_, reply) = send(
        &admin,
        &txn(
            "admin",
            "cap:demo:payment",
            json!({}),
            json!({ "mode": "reconcile", "transaction_id": odd_txn }),
        ),
    )
    .await;
    assert_eq!(result(&reply)["status"], "reconciled", "{reply}");
    assert_eq!(result(&reply)["result"]["output"]["outcome"], "committed");
    let mut refund = txn(
        "admin",
        "cap:demo:refund",
        json!({ "reason": "customer returned it" }),
        json!({ "mode": "compensate", "transaction_id": odd_txn, "compensation_for": unknown["action_id"] }),
    );
    refund["body"]["transaction_request"]["action"]["idempotency_key"] = json!(id("refund-"));
    let (_, reply) = send(&admin, &refund).await;
    assert_eq!(result(&reply)["status"], "compensated", "{reply}");
    assert_eq!(count_sqlite(&data, "demo.refunds"), 1);
    let (_, v) = admin.get(&format!("/aip/v1/transactions/{odd_txn}")).await;
    assert_eq!(v["status"], "compensated", "{v}");
}

/// A node whose NATS messages act as `svc:nats`, allowed to pay and refund.
fn nats_node(dir: &Path, url: &str, domain: &str) -> (Server, PathBuf) {
    let scopes = ["cap:demo:payment", "cap:demo:refund"];
    let config = support::nats::node_config_invoking(dir, url, domain, "", &scopes);
    let data = dir.join("data");
    (Server::start(&data, Some(&config), &[]), data)
}

#[tokio::test]
async fn the_demo_payment_plans_and_commits_over_nats_and_its_transaction_reads_the_same_over_http()
{
    let Some(url) = nats_url("serve_transactions") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let domain = format!("t{}.example", id(""));
    let (server, data) = nats_node(dir.path(), &url, &domain);
    let client = async_nats::connect(&url).await.unwrap();
    let prefix = format!("aip.v1.{}.aip.v1", domain.replace('.', "_"));
    let subject = format!("{prefix}.aip_transaction_v1_request");
    let (_, reply) = request(
        &client,
        subject.clone(),
        &txn(
            "svc:nats",
            "cap:demo:payment",
            pay(1_500),
            json!({ "mode": "plan" }),
        ),
        true,
    )
    .await;
    let planned = result(&reply["envelope"]).clone();
    assert_eq!(planned["status"], "planned", "{reply}");
    let (txn_id, plan_id) = (
        planned["transaction_id"].as_str().unwrap().to_owned(),
        planned["plan"]["plan_id"].as_str().unwrap().to_owned(),
    );
    let commit = txn(
        "svc:nats",
        "cap:demo:payment",
        pay(1_500),
        json!({ "mode": "commit", "transaction_id": txn_id, "plan_id": plan_id }),
    );
    let (_, reply) = request(&client, subject.clone(), &commit, true).await;
    assert_eq!(result(&reply["envelope"])["status"], "committed", "{reply}");
    assert_eq!(count_sqlite(&data, "demo.payments"), 1);
    // The same commit re-sent over NATS is delivery: the original outcome, nothing paid again.
    let (_, again) = request(&client, subject.clone(), &commit, true).await;
    assert_ne!(
        again["envelope"]["message_type"], "aip.core.v1.error",
        "{again}"
    );
    assert_eq!(count_sqlite(&data, "demo.payments"), 1);
    // The query over NATS equals the REST read (as the owner: svc:nats over HTTP with its token).
    let query = envelope(
        "aip.transaction.v1.query_request",
        json!({ "transaction_query_request": { "transaction_id": txn_id } }),
    );
    let (_, viewed) = request(
        &client,
        format!("{prefix}.aip_transaction_v1_query_request"),
        &query,
        true,
    )
    .await;
    let over_nats = &viewed["envelope"]["body"]["transaction_view"];
    assert_eq!(over_nats["status"], "committed", "{viewed}");
    let owner = server.client(
        std::fs::read_to_string(dir.path().join("nats.token"))
            .unwrap()
            .trim(),
    );
    let (status, over_http) = owner.get(&format!("/aip/v1/transactions/{txn_id}")).await;
    assert_eq!(status, 200, "{over_http}");
    assert_eq!(&over_http, over_nats);
}

#[tokio::test]
async fn a_worker_stopped_past_its_lease_cannot_pay_and_its_commit_is_settled_unknown_by_another_node()
 {
    let Some(db) = cluster::TestDb::create("the stale commit").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));
    let env = [
        ("AIP_LIMITS__LEASE_MS", "1000"),
        ("AIP_LIMITS__RECONCILE_AFTER_MS", "0"),
    ];
    let node_a = cluster::start_node(&data_a, &db.url, &env, None);
    std::fs::create_dir_all(&data_b).unwrap();
    let target = data_b.join("admin.token");
    std::fs::copy(data_a.join("admin.token"), &target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let node_b = cluster::start_node(&data_b, &db.url, &env, None);
    let (a, b) = (node_a.admin(), node_b.admin());
    let held = json!({ "amount_minor": 2_000, "to": "acct:shop", "hold_ms": 2_500 });
    let (txn_id, plan_id) = plan_payment(&a, held.clone()).await;
    // A sync commit runs on node A under A's lease; stop A while the provider call is held.
    let commit = txn(
        "admin",
        "cap:demo:payment",
        held.clone(),
        json!({ "mode": "commit", "transaction_id": txn_id, "plan_id": plan_id }),
    );
    let commit_id = commit["body"]["transaction_request"]["action"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stalled = {
        let a = Client {
            base: a.base.clone(),
            token: a.token.clone(),
            http: a.http.clone(),
        };
        tokio::spawn(async move { send(&a, &commit).await })
    };
    for _ in 0..100 {
        let (_, v) = b.get(&format!("/aip/v1/actions/{commit_id}")).await;
        if v["state"] == "running" {
            break;
        }
        pause(20).await;
    }
    cluster::signal(&node_a, "STOP");
    // Node B takes the lapsed lease over and settles the interrupted mutation as unknown.
    let settled = b.wait_terminal(&commit_id).await;
    assert_eq!(settled["state"], "failed", "{settled}");
    let (_, v) = b.get(&format!("/aip/v1/transactions/{txn_id}")).await;
    assert_eq!(v["status"], "outcome_unknown", "{v}");
    // Node A wakes past its hold: its fenced payment is refused, its result is not recorded.
    cluster::signal(&node_a, "CONT");
    let _ = tokio::time::timeout(std::time::Duration::from_secs(20), stalled).await;
    pause(500).await;
    assert_eq!(
        db.exec("SELECT 1 FROM aip_records WHERE collection = 'demo.payments'")
            .await,
        0,
        "the stale worker paid nothing"
    );
    let (_, v) = b
        .get(&format!("/aip/v1/actions/{commit_id}?include_result=true"))
        .await;
    assert_eq!(
        v["result"]["error"]["code"], "aip.connector.uncertain_outcome",
        "{v}"
    );
    // Reconciliation finds nothing paid; the plan is committed once, by node B.
    let (_, reply) = send(
        &b,
        &txn(
            "admin",
            "cap:demo:payment",
            json!({}),
            json!({ "mode": "reconcile", "transaction_id": txn_id }),
        ),
    )
    .await;
    assert_eq!(
        result(&reply)["result"]["output"]["outcome"],
        "not_committed",
        "{reply}"
    );
    let quick = json!({ "amount_minor": 2_000, "to": "acct:shop", "hold_ms": 2_500 });
    let (_, reply) = send(
        &b,
        &txn(
            "admin",
            "cap:demo:payment",
            quick,
            json!({ "mode": "commit", "transaction_id": txn_id, "plan_id": plan_id }),
        ),
    )
    .await;
    assert_eq!(result(&reply)["status"], "committed", "{reply}");
    assert_eq!(
        db.exec("SELECT 1 FROM aip_records WHERE collection = 'demo.payments'")
            .await,
        1
    );
    drop((node_a, node_b));
}

#[tokio::test]
async fn the_transactions_cli_plans_commits_reconciles_and_compensates_a_payment() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, None, &[("AIP_LIMITS__RECONCILE_AFTER_MS", "0")]);
    let token = data.join("admin.token");
    let cli = |args: &[&str]| {
        let mut all = vec!["transactions"];
        all.extend_from_slice(args);
        support::run_cli(&server.base, &token, &all)
    };
    let (code, out, err) = cli(&[
        "dry-run",
        "cap:demo:payment",
        "--input",
        r#"{"amount_minor": 900, "to": "acct:cli"}"#,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("dry_run_completed"), "{out}");
    let input = r#"{"amount_minor": 900, "to": "acct:cli", "test_outcome": "commit_then_timeout"}"#;
    let (code, out, err) = cli(&["plan", "cap:demo:payment", "--input", input, "--json"]);
    assert_eq!(code, 0, "{err}");
    let planned: Value = serde_json::from_str(&out).unwrap();
    let result = &planned["body"]["transaction_result"];
    let (txn, plan) = (
        result["transaction_id"].as_str().unwrap(),
        result["plan"]["plan_id"].as_str().unwrap(),
    );
    // The commit needs only the plan; its unknown outcome exits 1 with the typed code.
    let (code, out, err) = cli(&["commit", plan]);
    assert_eq!(code, 1, "{out} {err}");
    assert!(out.contains("outcome_unknown"), "{out}");
    assert!(err.contains("aip.connector.uncertain_outcome"), "{err}");
    let (code, out, err) = cli(&["reconcile", txn]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("reconciled"), "{out}");
    let (code, out, _) = cli(&["show", plan, "--plan", "--json"]);
    assert_eq!(code, 0);
    let view: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(view["status"], "reconciled");
    let (code, out, _) = cli(&["show", txn, "--result"]);
    assert_eq!(code, 0);
    assert!(out.contains("reconciled") && out.contains(plan), "{out}");
    // The committed action, then its refund.
    let db = rusqlite::Connection::open(data.join("aip.sqlite")).unwrap();
    let committed: String = db
        .query_row(
            "SELECT commit_action_id FROM aip_transactions WHERE transaction_id = ?1",
            [txn],
            |row| row.get(0),
        )
        .unwrap();
    let (code, out, err) = cli(&[
        "compensate",
        &committed,
        "--transaction",
        txn,
        "--capability",
        "cap:demo:refund",
        "--idempotency-key",
        "cli-refund",
    ]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("compensated"), "{out}");
    // A refused step prints its code and exits 1.
    let (code, _, err) = cli(&["commit", plan]);
    assert_eq!(code, 1);
    assert!(err.contains("aip.transaction.plan_claimed"), "{err}");
    assert_eq!(count_sqlite(&data, "demo.refunds"), 1);
}

#[tokio::test]
async fn an_unknown_outcome_is_reconciled_by_the_runtime_after_a_kill_9_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let env = [("AIP_LIMITS__RECONCILE_AFTER_MS", "1500")];
    let mut server = Server::start(&data, None, &env);
    let admin = server.admin();
    let odd =
        json!({ "amount_minor": 700, "to": "acct:shop", "test_outcome": "commit_then_timeout" });
    let (txn_id, plan_id) = plan_payment(&admin, odd.clone()).await;
    let (_, reply) = send(
        &admin,
        &txn(
            "admin",
            "cap:demo:payment",
            odd,
            json!({ "mode": "commit", "transaction_id": txn_id, "plan_id": plan_id }),
        ),
    )
    .await;
    assert_eq!(result(&reply)["status"], "outcome_unknown", "{reply}");
    // The timer was admitted with the commit: it survives the kill and fires after the restart.
    server.kill();
    let server = Server::start(&data, None, &env);
    let admin = server.admin();
    let mut status = Value::Null;
    for _ in 0..100 {
        let (_, v) = admin
            .get(&format!(
                "/aip/v1/transactions/{txn_id}?include_result=true"
            ))
            .await;
        status = v;
        if status["status"] == "reconciled" {
            break;
        }
        pause(100).await;
    }
    assert_eq!(status["status"], "reconciled", "{status}");
    assert_eq!(status["result"]["output"]["outcome"], "committed");
    assert_eq!(
        count_sqlite(&data, "demo.payments"),
        1,
        "the commit never ran again"
    );
}
