//! The approval flow through the binary (spec 12): the no-config start's demo approvers, the
//! approval-gated `cap:demo:transfer`, the approver's CLI (`aip approvals`), a kill -9 between
//! the deciding commit and the dispatch on SQLite, two nodes on PostgreSQL racing the resume, and
//! escalations resolved with `aip escalations` (never counted as approvals).
#![allow(clippy::unwrap_used)]

mod cluster;
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};
use support::{Client, Server, id, pause};

/// Runs `aip approvals <args>` against `server` as the holder of `token_file`.
fn cli(server: &Server, token_file: &Path, args: &[&str]) -> (i32, String, String) {
    client_cli(server, token_file, "approvals", args)
}

/// Runs `aip <command> <args>` against `server` as the holder of `token_file`.
fn client_cli(
    server: &Server,
    token_file: &Path,
    command: &str,
    args: &[&str],
) -> (i32, String, String) {
    let mut all = vec![command];
    all.extend_from_slice(args);
    support::run_cli(&server.base, token_file, &all)
}

fn token(data: &Path, who: &str) -> String {
    std::fs::read_to_string(data.join(format!("{who}.token")))
        .unwrap()
        .trim()
        .to_owned()
}

/// Submits a transfer as `client`; returns (action id, approval id).
async fn transfer(client: &Client, amount: u64) -> (String, String) {
    let action_id = id("act_");
    let (status, reply) = client
        .act(
            json!({ "id": action_id, "capability_id": "cap:demo:transfer", "mode": "async",
                     "input": { "amount_minor": amount, "to": "acct:bob" } }),
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    let approval_id = reply["extensions"]["approval"]["approval_id"]
        .as_str()
        .expect("the ack names its approval")
        .to_owned();
    (action_id, approval_id)
}

async fn count_transfers(data: &Path) -> i64 {
    let db = rusqlite::Connection::open(data.join("aip.sqlite")).unwrap();
    db.query_row(
        "SELECT COUNT(*) FROM aip_records WHERE collection = 'demo.transfers'",
        [],
        |row| row.get(0),
    )
    .unwrap()
}

#[tokio::test]
async fn the_demo_transfer_is_approved_by_two_distinct_approvers_with_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, None, &[]);
    let (one, two) = (data.join("approver-1.token"), data.join("approver-2.token"));
    for file in [&one, &two] {
        assert_eq!(
            std::fs::metadata(file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let admin = server.admin();
    // The manifest says the transfer needs approval, and when it needs two.
    let (_, manifest) = admin.get("/aip/v1/manifest").await;
    let transfer_cap = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cap:demo:transfer")
        .unwrap()
        .clone();
    assert_eq!(transfer_cap["requires_human_approval"], true);
    assert_eq!(
        manifest["governance"]["approval_tiers"]["cap:demo:transfer"][0]["when"],
        "amount_minor >= 100000"
    );

    let (action_id, approval_id) = transfer(&admin, 250_000).await;
    // The approver's inbox.
    let (code, out, err) = cli(&server, &one, &["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&approval_id) && out.contains("pending"),
        "{out}"
    );
    let (code, out, _) = cli(&server, &one, &["list", "--json"]);
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["approvals"].as_array().unwrap().len(), 1);
    assert!(
        !out.contains("acct:bob"),
        "ordinary reads carry no governed input: {out}"
    );
    let (code, out, _) = cli(&server, &two, &["show", &approval_id]);
    assert_eq!(code, 0);
    assert!(out.contains("pending_approval"), "{out}");

    // The admin may see it but holds no approver role.
    let admin_token = dir.path().join("admin-copy.token");
    support::token_file(dir.path(), "admin-copy.token", &server.admin_token);
    let (code, _, err) = cli(&server, &admin_token, &["approve", &approval_id]);
    assert_eq!(code, 1);
    assert!(err.contains("aip.policy.approver_not_eligible"), "{err}");

    // One approver, twice: one vote.
    for _ in 0..2 {
        let (code, out, err) = cli(&server, &one, &["approve", &approval_id, "--reason", "ok"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("pending"), "{out}");
    }
    let (_, view) = admin.get(&format!("/aip/v1/actions/{action_id}")).await;
    assert_eq!(view["state"], "pending_approval");
    let (code, out, err) = cli(&server, &two, &["approve", &approval_id, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["status"],
        "approved"
    );
    let done = admin.wait_terminal(&action_id).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["result"]["output"]["amount_minor"], 250_000);

    // Self-approval: approver-1 asks, approver-1 may not decide.
    let mine = server.client(&token(&data, "approver-1"));
    let (own_action, own) = transfer(&mine, 500).await;
    let (code, _, err) = cli(&server, &one, &["approve", &own]);
    assert_eq!(code, 1);
    assert!(err.contains("aip.policy.separation_of_duties"), "{err}");
    // Denied: the action fails with the typed error and never runs.
    let (code, _, err) = cli(&server, &two, &["deny", &own, "--reason", "no"]);
    assert_eq!(code, 0, "{err}");
    let done = mine.wait_terminal(&own_action).await;
    assert_eq!(done["state"], "failed");
    assert_eq!(
        done["result"]["error"]["code"],
        "aip.policy.approval_denied"
    );

    // REST: spoofing another approver is refused.
    let first = server.client(&token(&data, "approver-1"));
    let (_, third) = transfer(&admin, 500).await;
    let (status, reply) = first
        .post(
            &format!("/aip/v1/approvals/{third}/decision"),
            &json!({ "decision": "approved", "approver": { "id": "approver-2", "kind": "human" } }),
        )
        .await;
    assert_eq!(status, 403, "{reply}");
    assert_eq!(reply["error"]["code"], "aip.policy.approver_mismatch");
    let (code, _, err) = cli(&server, &one, &["show", "apr_does_not_exist"]);
    assert_eq!(code, 1);
    assert!(err.contains("aip.core.not_found"), "{err}");
    drop(server);
    assert_eq!(count_transfers(&data).await, 1);
}

#[tokio::test]
async fn a_kill_9_between_the_grant_and_the_dispatch_resumes_the_transfer_once_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // One worker, kept busy, so the granted transfer is committed but cannot be dispatched yet.
    let env = [
        ("AIP_LIMITS__ASYNC_WORKERS", "1"),
        ("AIP_LIMITS__LEASE_MS", "1500"),
    ];
    let mut server = Server::start(&data, None, &env);
    let admin = server.admin();
    let sleeper = id("act_");
    let (status, _) = admin
        .act(json!({ "id": sleeper, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 20000 } }))
        .await;
    assert_eq!(status, 202);
    for _ in 0..200 {
        let (_, view) = admin.get(&format!("/aip/v1/actions/{sleeper}")).await;
        if view["state"] == "running" {
            break;
        }
        pause(20).await;
    }
    let (action_id, approval_id) = transfer(&admin, 500).await;
    let approver = server.client(&token(&data, "approver-1"));
    let (status, reply) = approver
        .post(
            &format!("/aip/v1/approvals/{approval_id}/decision"),
            &json!({ "decision": "approved", "decision_id": "grant-1" }),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["status"], "approved");
    let (_, view) = admin.get(&format!("/aip/v1/actions/{action_id}")).await;
    assert_eq!(view["state"], "queued", "{view}");
    server.kill();
    assert_eq!(count_transfers(&data).await, 0);

    let server = Server::start(&data, None, &env);
    let admin = server.admin();
    let done = admin.wait_terminal(&action_id).await;
    assert_eq!(done["state"], "completed", "{done}");
    // The decision replayed after the restart changes nothing.
    let approver = server.client(&token(&data, "approver-1"));
    let (status, reply) = approver
        .post(
            &format!("/aip/v1/approvals/{approval_id}/decision"),
            &json!({ "decision": "approved", "decision_id": "grant-1" }),
        )
        .await;
    assert_eq!(
        (status, &reply["status"]),
        (200, &json!("approved")),
        "{reply}"
    );
    let (_, cancel) = admin
        .post(&format!("/aip/v1/actions/{sleeper}/cancel"), &json!({}))
        .await;
    let _ = cancel;
    drop(server);
    assert_eq!(count_transfers(&data).await, 1);
}

#[tokio::test]
async fn two_postgres_nodes_racing_the_decisions_and_the_resume_dispatch_each_transfer_once() {
    let Some(db) = cluster::TestDb::create("the approval race").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));
    let env = [("AIP_LIMITS__LEASE_MS", "1500")];
    // Node B reuses node A's tokens: both nodes must know the same principals.
    let node_a = cluster::start_node(&data_a, &db.url, &env, None);
    std::fs::create_dir_all(&data_b).unwrap();
    for file in ["admin.token", "approver-1.token", "approver-2.token"] {
        let target = data_b.join(file);
        std::fs::copy(data_a.join(file), &target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let node_b = cluster::start_node(&data_b, &db.url, &env, None);
    let admin = node_a.admin();
    let one = node_a.client(&token(&data_a, "approver-1"));
    let two = node_b.client(&token(&data_a, "approver-2"));
    let mut actions = Vec::new();
    for _ in 0..12 {
        actions.push(transfer(&admin, 150_000).await);
    }
    // The two approvers of each transfer decide at the same time, on different nodes: one of the
    // two writes settles the quorum, and one worker of the two nodes dispatches.
    let mut races = Vec::new();
    for (_, approval_id) in &actions {
        let path = format!("/aip/v1/approvals/{approval_id}/decision");
        let (one, two) = (
            Client {
                base: one.base.clone(),
                token: one.token.clone(),
                http: one.http.clone(),
            },
            Client {
                base: two.base.clone(),
                token: two.token.clone(),
                http: two.http.clone(),
            },
        );
        races.push(tokio::spawn(async move {
            let body = json!({ "decision": "approved" });
            let (a, b) = tokio::join!(one.post(&path, &body), two.post(&path, &body));
            (a, b)
        }));
    }
    for race in races {
        let ((sa, ra), (sb, rb)) = race.await.unwrap();
        assert_eq!((sa, sb), (200, 200), "{ra} {rb}");
    }
    for (action_id, _) in &actions {
        let done = admin.wait_terminal(action_id).await;
        assert_eq!(done["state"], "completed", "{done}");
    }
    let transfers = db
        .exec("SELECT 1 FROM aip_records WHERE collection = 'demo.transfers'")
        .await;
    assert_eq!(transfers, 12, "each granted transfer ran exactly once");
    drop((node_a, node_b));
}

#[tokio::test]
async fn an_escalation_raised_over_http_is_resolved_with_the_cli_and_approves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, None, &[]);
    let admin = server.admin();
    let one = data.join("approver-1.token");
    let (action_id, approval_id) = transfer(&admin, 500).await;
    let escalation = support::envelope(
        "aip.core.v1.escalation",
        json!({ "escalation": {
            "kind": "approval",
            "reason": "please look at this transfer",
            "requested_by": { "id": "admin", "kind": "service" },
            "allowed_decisions": ["approve", "reject", "modify"],
            "form": { "approval_id": approval_id },
        } }),
    );
    let escalation_id = escalation["message_id"].as_str().unwrap().to_owned();
    let (status, reply) = admin.post("/aip/v1/messages", &escalation).await;
    assert_eq!(status, 202, "{reply}");

    let (code, out, err) = client_cli(&server, &one, "escalations", &["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&escalation_id) && out.contains("open"),
        "{out}"
    );
    let (code, out, err) = client_cli(&server, &one, "escalations", &["show", &escalation_id]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("approve, reject, modify"), "{out}");
    // Not an allowed decision: refused with the typed code.
    let (code, _, err) = client_cli(
        &server,
        &one,
        "escalations",
        &["resolve", &escalation_id, "--decision", "handoff"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("aip.policy.resolution_not_allowed"), "{err}");
    let (code, out, err) = client_cli(
        &server,
        &one,
        "escalations",
        &["resolve", &escalation_id, "--decision", "approve", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let view: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(view["status"], "approved");
    assert_eq!(view["resolution"]["resolved_by"]["id"], "approver-1");
    let (code, _, err) = client_cli(
        &server,
        &one,
        "escalations",
        &["resolve", &escalation_id, "--decision", "reject"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("aip.policy.escalation_closed"), "{err}");

    // The escalation's "approve" decided nothing: the transfer still waits for its approval.
    pause(200).await;
    let (_, view) = admin.get(&format!("/aip/v1/actions/{action_id}")).await;
    assert_eq!(view["state"], "pending_approval", "{view}");
    let (_, approval) = admin.get(&format!("/aip/v1/approvals/{approval_id}")).await;
    assert_eq!(approval["status"], "pending", "{approval}");
    assert_eq!(count_transfers(&data).await, 0);
}
