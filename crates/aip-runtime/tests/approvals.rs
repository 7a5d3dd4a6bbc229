//! Approvals (spec 12, 24.3's approval line) through the runtime's binding-independent entry point:
//! spoofing, eligibility, separation of duties, quorum, expiry, revocation, policy hash, replay,
//! the crash between the deciding commit and the dispatch, cancellation, reads and export.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aip_runtime::handler::demo::{TRANSFERS, TransferHandler, demo_capabilities};
use aip_runtime::{Caller, Registry, Runtime};
use serde_json::{Value, json};
use support::{code, envelope, id, send};

const TENANT: &str = "t";

/// A node over the SQLite file at `path`: the demo capabilities plus `cap:t:gated` (a transfer
/// whose approval lives `ttl_ms`). Workers run only when `start` is set.
async fn node(path: &Path, ttl_ms: u64, start: bool) -> Arc<Runtime> {
    node_with(path, ttl_ms, start, |_| {}).await
}

/// [`node`] with its runtime configuration edited (a restart under a changed configuration).
async fn node_with(
    path: &Path,
    ttl_ms: u64,
    start: bool,
    edit: impl FnOnce(&mut aip_runtime::RuntimeConfig),
) -> Arc<Runtime> {
    let store: Arc<dyn aip_store::Store> =
        Arc::new(aip_store::SqliteStore::open(path).await.unwrap());
    let mut entries = demo_capabilities(Arc::clone(&store));
    let mut gated = aip_runtime::handler::demo::transfer_capability();
    gated["id"] = json!("cap:t:gated");
    gated["contract"]["approval"]["ttl_ms"] = json!(ttl_ms);
    gated["contract"]["approval"]["evidence_requirements"] = json!(["reason"]);
    entries.push(support::entry(
        serde_json::from_value(gated).unwrap(),
        Arc::new(TransferHandler::new(Arc::clone(&store))),
    ));
    // `cap:t:finance`: approved by members of the tenant policy `finance` only.
    let mut finance = aip_runtime::handler::demo::transfer_capability();
    finance["id"] = json!("cap:t:finance");
    finance["contract"]["approval"]["approver_selector"] = json!({ "type": "tenant_policy" });
    finance["contract"]["approval"]["rule"] =
        json!({ "operator": "tenant_policy", "policy_id": "finance" });
    entries.push(support::entry(
        serde_json::from_value(finance).unwrap(),
        Arc::new(TransferHandler::new(Arc::clone(&store))),
    ));
    // `cap:t:strict`: approvers who are also interns may not approve it.
    let mut strict = aip_runtime::handler::demo::transfer_capability();
    strict["id"] = json!("cap:t:strict");
    let mut strict = support::entry(
        serde_json::from_value(strict).unwrap(),
        Arc::new(TransferHandler::new(Arc::clone(&store))),
    );
    strict.approval_excluded_roles = vec!["intern".into()];
    entries.push(strict);
    let mut config = support::runtime_config(2, 30_000);
    for c in [
        approver(1),
        approver(2),
        requester(),
        reader(),
        outsider(),
        intern(),
        treasurer(),
    ] {
        config.directory.insert(c.id.clone(), c.resolver_keys());
    }
    edit(&mut config);
    let runtime = Runtime::new(store, Registry::admit(entries).unwrap(), config);
    if start {
        runtime.start().await.unwrap();
    }
    runtime
}

fn approver(n: u32) -> Caller {
    let mut c = support::caller(&format!("approver-{n}"), TENANT, &["invoke:cap:demo:*"]);
    c.kind = aip_core::PrincipalKind::Human;
    c.roles = vec!["approver".into()];
    c
}

/// An approver who is also an intern.
fn intern() -> Caller {
    let mut c = approver(3);
    c.roles.push("intern".into());
    c
}

/// In the tenant policy `finance` (by the directory), holds no approver role.
fn treasurer() -> Caller {
    let mut c = support::caller("treasurer", TENANT, &["invoke:cap:demo:*"]);
    c.kind = aip_core::PrincipalKind::Human;
    c.approval_policies = vec!["finance".into()];
    c
}

fn requester() -> Caller {
    support::caller("alice", TENANT, &["invoke:*"])
}

/// Sees the whole tenant but holds no approval authority.
fn reader() -> Caller {
    support::caller("auditor", TENANT, &["read:tenant", "audit:read"])
}

/// May invoke, holds no role, sees only its own objects.
fn outsider() -> Caller {
    support::caller("mallory", TENANT, &["invoke:*"])
}

/// Submits an async transfer of `amount` on `capability`; returns (action id, approval id).
async fn transfer(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    capability: &str,
    amount: u64,
) -> (String, String) {
    let action_id = id("act_");
    let env = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": action_id, "capability_id": capability, "mode": "async",
                            "input": { "amount_minor": amount, "to": "acct:bob" } } }),
    );
    let (status, reply) = send(runtime, caller, &env).await;
    assert_eq!(status, 202, "{reply}");
    assert_eq!(reply["body"]["ack"]["status"], "accepted", "{reply}");
    let approval_id = reply["extensions"]["approval"]["approval_id"]
        .as_str()
        .expect("the ack names the approval")
        .to_owned();
    assert_eq!(reply["body"]["ack"]["queue"]["approval_id"], approval_id);
    (action_id, approval_id)
}

fn decision(approval_id: &str, kind: &str, approver: &Caller, decision_id: Option<&str>) -> Value {
    let mut body = json!({
        "approval_id": approval_id, "decision": kind,
        "approver": { "id": approver.id, "kind": "human" },
        "decided_at": aip_core::Timestamp::now(),
        "reason": "checked the beneficiary",
    });
    if let Some(d) = decision_id {
        body["decision_id"] = json!(d);
    }
    envelope(
        "aip.policy.v1.approval_decision",
        json!({ "approval_decision": body }),
    )
}

/// Sends `approver`'s decision; returns (status, reply).
async fn decide(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    approval_id: &str,
    kind: &str,
) -> (u16, Value) {
    send(runtime, caller, &decision(approval_id, kind, caller, None)).await
}

async fn approval_status(runtime: &Arc<Runtime>, caller: &Caller, approval_id: &str) -> Value {
    let env = envelope(
        "aip.policy.v1.approval_query_request",
        json!({ "approval_query_request": { "approval_id": approval_id, "include_action_status": true, "include_receipts": true } }),
    );
    let (status, reply) = send(runtime, caller, &env).await;
    assert_eq!(status, 200, "{reply}");
    reply["body"]["approval_record_view"].clone()
}

async fn transfers(runtime: &Arc<Runtime>) -> u64 {
    runtime
        .store()
        .count_records(TRANSFERS, TENANT)
        .await
        .unwrap()
}

async fn terminal(runtime: &Arc<Runtime>, action_id: &str) -> aip_core::ActionStatus {
    for _ in 0..400 {
        let status = runtime
            .action_status(&requester(), action_id, true, true, None)
            .await
            .unwrap();
        let state = serde_json::to_value(status.state).unwrap();
        if [
            "completed",
            "failed",
            "expired",
            "cancelled",
            "dead_lettered",
        ]
        .contains(&state.as_str().unwrap())
        {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{action_id} never finished");
}

fn state_of(status: &aip_core::ActionStatus) -> String {
    serde_json::to_value(status.state)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

fn error_code(status: &aip_core::ActionStatus) -> String {
    status
        .result
        .as_ref()
        .and_then(|r| r.error.as_ref())
        .map(|e| e.code.to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_approved_transfer_runs_exactly_once_after_the_approvers_decision() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (action_id, approval_id) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    let view = approval_status(&runtime, &approver(1), &approval_id).await;
    assert_eq!(view["status"], "pending");
    assert_eq!(view["action_status"]["state"], "pending_approval");
    assert_eq!(view["action_status"]["approval_id"], approval_id);
    assert_eq!(view["request"]["capability_id"], "cap:demo:transfer");
    assert!(
        view["request"]["policy_hash"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    );
    // Nothing dispatched while it waits.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(transfers(&runtime).await, 0);

    let (status, reply) = decide(&runtime, &approver(1), &approval_id, "approved").await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["body"]["approval_record_view"]["status"], "approved");
    let done = terminal(&runtime, &action_id).await;
    assert_eq!(state_of(&done), "completed", "{done:?}");
    assert_eq!(transfers(&runtime).await, 1);

    // The receipts tell the story, with no raw governed input in them.
    let chain = serde_json::to_value(done.receipt_chain.unwrap()).unwrap();
    let types: Vec<&str> = chain["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["receipt_type"].as_str().unwrap())
        .collect();
    for wanted in [
        "policy_decision",
        "approval_requested",
        "approval_granted",
        "tool_executed",
    ] {
        assert!(types.contains(&wanted), "{wanted} missing from {types:?}");
    }
    let chain_text = chain.to_string();
    assert!(
        !chain_text.contains("acct:bob"),
        "raw input in receipts: {chain_text}"
    );
}

#[tokio::test]
async fn a_decision_claiming_another_approver_is_refused_as_spoofing() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (_, approval_id) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    // approver-1 authenticates but claims to be approver-2.
    let spoofed = decision(&approval_id, "approved", &approver(2), None);
    let (status, reply) = send(&runtime, &approver(1), &spoofed).await;
    assert_eq!(code(&reply), "aip.policy.approver_mismatch", "{reply}");
    assert_eq!(status / 100, 4);
    let view = approval_status(&runtime, &approver(2), &approval_id).await;
    assert_eq!(view["status"], "pending");
    assert!(view.get("decision").is_none(), "{view}");
}

#[tokio::test]
async fn principals_without_the_role_cannot_decide_and_outsiders_cannot_even_see_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (_, approval_id) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    // A tenant-wide reader sees the approval but holds no authority.
    let (_, reply) = decide(&runtime, &reader(), &approval_id, "approved").await;
    assert_eq!(code(&reply), "aip.policy.approver_not_eligible", "{reply}");
    // Someone who is neither requester, approver nor tenant reader: not found, as if absent.
    let (status, reply) = decide(&runtime, &outsider(), &approval_id, "approved").await;
    assert_eq!(
        (status, code(&reply)),
        (404, "aip.core.not_found"),
        "{reply}"
    );
    // A role asserted in the decision payload counts for nothing.
    let mut env = decision(&approval_id, "approved", &outsider(), None);
    env["body"]["approval_decision"]["authority_path"] = json!(["role:approver"]);
    let (_, reply) = send(&runtime, &outsider(), &env).await;
    assert_eq!(code(&reply), "aip.core.not_found", "{reply}");
    // Another tenant's approver does not see it either.
    let mut foreign = approver(1);
    foreign.tenant = "other".into();
    let (status, _) = decide(&runtime, &foreign, &approval_id, "approved").await;
    assert_eq!(status, 404);
    assert_eq!(
        approval_status(&runtime, &approver(1), &approval_id).await["status"],
        "pending"
    );
}

#[tokio::test]
async fn the_requester_may_not_approve_its_own_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (_, approval_id) = transfer(&runtime, &approver(1), "cap:demo:transfer", 500).await;
    let (_, reply) = decide(&runtime, &approver(1), &approval_id, "approved").await;
    assert_eq!(code(&reply), "aip.policy.separation_of_duties", "{reply}");
    let (status, _) = decide(&runtime, &approver(2), &approval_id, "approved").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_large_transfer_needs_two_distinct_approvers_and_the_same_one_twice_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (action_id, approval_id) =
        transfer(&runtime, &requester(), "cap:demo:transfer", 250_000).await;
    let (status, reply) = send(
        &runtime,
        &approver(1),
        &decision(&approval_id, "approved", &approver(1), Some("d1")),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["body"]["approval_record_view"]["status"], "pending");
    // The same principal again, under another decision id: still one vote.
    let (status, reply) = send(
        &runtime,
        &approver(1),
        &decision(&approval_id, "approved", &approver(1), Some("d2")),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["body"]["approval_record_view"]["status"], "pending");
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(transfers(&runtime).await, 0);
    // Every recorded decision is readable by who may see the approval (quorum progress), and by
    // nobody else.
    let recorded = runtime
        .read_decisions(&approver(2), &approval_id)
        .await
        .unwrap();
    assert_eq!(recorded.len(), 2);
    assert!(
        recorded
            .iter()
            .all(|d| d.approver.id.as_str() == "approver-1")
    );
    let hidden = runtime
        .read_decisions(&outsider(), &approval_id)
        .await
        .unwrap_err();
    assert_eq!(hidden.code().as_str(), "aip.core.not_found");
    let (_, reply) = decide(&runtime, &approver(2), &approval_id, "approved").await;
    assert_eq!(
        reply["body"]["approval_record_view"]["status"], "approved",
        "{reply}"
    );
    assert_eq!(state_of(&terminal(&runtime, &action_id).await), "completed");
    assert_eq!(transfers(&runtime).await, 1);
    // The manifest says so (spec 9.4).
    let manifest = serde_json::to_value(runtime.manifest(&requester(), None, &[])).unwrap();
    let tiers = &manifest["governance"]["approval_tiers"]["cap:demo:transfer"];
    assert_eq!(tiers[0]["when"], "amount_minor >= 100000", "{manifest}");
    assert_eq!(tiers[0]["policy"]["minimum_distinct_principals"], 2);
    let served = manifest["governance"]["approval_messages"].to_string();
    assert!(
        served.contains("aip.policy.v1.approval_decision"),
        "{served}"
    );
    assert_eq!(
        manifest["governance"]["escalation_messages"],
        json!([
            "aip.core.v1.escalation",
            "aip.core.v1.escalation_resolution"
        ])
    );
}

#[tokio::test]
async fn an_approval_that_expires_ends_its_action_without_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 300, true).await;
    let (action_id, approval_id) = transfer(&runtime, &requester(), "cap:t:gated", 500).await;
    let done = terminal(&runtime, &action_id).await;
    assert_eq!(state_of(&done), "expired", "{done:?}");
    assert_eq!(error_code(&done), "aip.policy.approval_expired");
    let view = approval_status(&runtime, &approver(1), &approval_id).await;
    assert_eq!(view["status"], "expired");
    let (_, reply) = decide(&runtime, &approver(1), &approval_id, "approved").await;
    assert_eq!(code(&reply), "aip.policy.approval_closed", "{reply}");
    assert_eq!(transfers(&runtime).await, 0);
}

#[tokio::test]
async fn a_denied_approval_fails_its_action_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (action_id, approval_id) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    let (status, reply) = decide(&runtime, &approver(2), &approval_id, "denied").await;
    assert_eq!(status, 200, "{reply}");
    let done = terminal(&runtime, &action_id).await;
    assert_eq!(state_of(&done), "failed");
    assert_eq!(error_code(&done), "aip.policy.approval_denied");
    assert_eq!(transfers(&runtime).await, 0);
}

#[tokio::test]
async fn an_approval_revoked_before_dispatch_prevents_the_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sqlite");
    let (action_id, approval_id) = {
        // No workers: the granted action stays queued.
        let runtime = node(&path, 60_000, false).await;
        let (action_id, approval_id) =
            transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
        let (_, reply) = decide(&runtime, &approver(1), &approval_id, "approved").await;
        assert_eq!(reply["body"]["approval_record_view"]["status"], "approved");
        let (status, reply) = decide(&runtime, &approver(2), &approval_id, "revoked").await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["body"]["approval_record_view"]["status"], "revoked");
        runtime.shutdown();
        (action_id, approval_id)
    };
    let runtime = node(&path, 60_000, true).await;
    let done = terminal(&runtime, &action_id).await;
    assert_eq!(state_of(&done), "failed");
    assert_eq!(error_code(&done), "aip.policy.approval_revoked");
    assert_eq!(transfers(&runtime).await, 0);
    let chain = serde_json::to_value(done.receipt_chain.unwrap()).unwrap();
    assert!(chain.to_string().contains("approval_revoked"), "{chain}");
    let _ = approval_id;
}

/// Rewrites the stored input of `action_id` behind the runtime's back (a substituted subject).
fn tamper(path: &Path, action_id: &str) {
    let db = rusqlite::Connection::open(path).unwrap();
    let n = db
        .execute(
            "UPDATE aip_actions SET request = json_set(request, '$.action.input.amount_minor', 999999) WHERE action_id = ?1",
            [action_id],
        )
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_substituted_governed_input_is_refused_at_decision_and_before_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sqlite");
    let runtime = node(&path, 60_000, false).await;
    // A decision that evaluated another policy hash is refused.
    let (_, first) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    let mut env = decision(&first, "approved", &approver(1), None);
    env["body"]["approval_decision"]["policy_hash"] = json!("0".repeat(64));
    let (_, reply) = send(&runtime, &approver(1), &env).await;
    assert_eq!(code(&reply), "aip.policy.policy_hash_mismatch", "{reply}");

    // The stored input changed before the decision.
    let (second_action, second) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    tamper(&path, &second_action);
    let (_, reply) = decide(&runtime, &approver(1), &second, "approved").await;
    assert_eq!(code(&reply), "aip.policy.policy_hash_mismatch", "{reply}");

    // The stored input changed after the grant, before dispatch.
    let (third_action, third) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    let (_, reply) = decide(&runtime, &approver(1), &third, "approved").await;
    assert_eq!(
        reply["body"]["approval_record_view"]["status"], "approved",
        "{reply}"
    );
    tamper(&path, &third_action);
    runtime.shutdown();
    let runtime = node(&path, 60_000, true).await;
    let done = terminal(&runtime, &third_action).await;
    assert_eq!(state_of(&done), "failed");
    assert_eq!(error_code(&done), "aip.policy.policy_hash_mismatch");
    assert_eq!(transfers(&runtime).await, 0);
}

#[tokio::test]
async fn a_replayed_decision_is_answered_with_the_approval_and_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (action_id, approval_id) =
        transfer(&runtime, &requester(), "cap:demo:transfer", 250_000).await;
    let first = decision(&approval_id, "approved", &approver(1), Some("dec-1"));
    let (s1, r1) = send(&runtime, &approver(1), &first).await;
    // The same decision again (a new envelope, the same decision id): a replay.
    let mut again = first.clone();
    again["message_id"] = json!(aip_core::MessageId::generate());
    let (s2, r2) = send(&runtime, &approver(1), &again).await;
    assert_eq!((s1, s2), (200, 200), "{r1} {r2}");
    assert_eq!(
        r1["body"]["approval_record_view"]["status"],
        r2["body"]["approval_record_view"]["status"]
    );
    // The id reused for a different decision is a conflict.
    let mut other = decision(&approval_id, "denied", &approver(1), Some("dec-1"));
    other["message_id"] = json!(aip_core::MessageId::generate());
    let (status, reply) = send(&runtime, &approver(1), &other).await;
    assert_eq!(
        (status, code(&reply)),
        (409, "aip.policy.decision_conflict"),
        "{reply}"
    );
    let decisions = runtime
        .store()
        .list_decisions(TENANT, &approval_id)
        .await
        .unwrap();
    assert_eq!(decisions.len(), 1);
    assert_eq!(
        state_of(
            &runtime
                .action_status(&requester(), &action_id, false, false, None)
                .await
                .unwrap()
        ),
        "pending_approval"
    );
}

#[tokio::test]
async fn a_crash_between_the_deciding_commit_and_the_dispatch_resumes_once_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sqlite");
    let mut actions = Vec::new();
    {
        // The deciding node commits the grant and dies before any worker dispatches.
        let runtime = node(&path, 60_000, false).await;
        for _ in 0..5 {
            let (action_id, approval_id) =
                transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
            let (_, reply) = decide(&runtime, &approver(1), &approval_id, "approved").await;
            assert_eq!(reply["body"]["approval_record_view"]["status"], "approved");
            actions.push(action_id);
        }
        assert_eq!(transfers(&runtime).await, 0);
        drop(runtime);
    }
    let runtime = node(&path, 60_000, true).await;
    for action_id in &actions {
        assert_eq!(state_of(&terminal(&runtime, action_id).await), "completed");
    }
    assert_eq!(transfers(&runtime).await, 5);
    // A second restart dispatches nothing again.
    runtime.shutdown();
    drop(runtime);
    let runtime = node(&path, 60_000, true).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(transfers(&runtime).await, 5);
}

#[tokio::test]
async fn a_waiting_action_can_be_cancelled_and_its_approval_closes() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (action_id, approval_id) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    let status = runtime
        .cancel(&requester(), &action_id, Some("changed my mind"))
        .await
        .unwrap();
    assert_eq!(state_of(&status), "cancelled");
    assert_eq!(
        approval_status(&runtime, &approver(1), &approval_id).await["status"],
        "cancelled"
    );
    let (_, reply) = decide(&runtime, &approver(1), &approval_id, "approved").await;
    assert_eq!(code(&reply), "aip.policy.approval_closed", "{reply}");
    assert_eq!(transfers(&runtime).await, 0);
}

#[tokio::test]
async fn the_inbox_lists_only_what_the_reader_may_see_or_decide() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    for _ in 0..3 {
        transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    }
    let list = |caller: Caller, body: Value| {
        let runtime = Arc::clone(&runtime);
        async move {
            let env = envelope(
                "aip.policy.v1.approval_list_request",
                json!({ "approval_list_request": body }),
            );
            let (status, reply) = send(&runtime, &caller, &env).await;
            assert_eq!(status, 200, "{reply}");
            reply["body"]["approval_list"]["approvals"]
                .as_array()
                .unwrap()
                .clone()
        }
    };
    let inbox = list(
        approver(1),
        json!({ "approver": "approver-1", "status": "pending" }),
    )
    .await;
    assert_eq!(inbox.len(), 3);
    // Ordinary reads carry no governed input.
    assert!(!Value::Array(inbox.clone()).to_string().contains("acct:bob"));
    assert_eq!(list(requester(), json!({})).await.len(), 3);
    assert_eq!(list(reader(), json!({})).await.len(), 3);
    // Neither requester nor approver: nothing, not even a count.
    assert!(list(outsider(), json!({})).await.is_empty());
    assert!(
        list(outsider(), json!({ "approver": "approver-1" }))
            .await
            .is_empty()
    );
    // The tenant reader may look at another principal's inbox.
    assert_eq!(
        list(reader(), json!({ "approver": "approver-2" }))
            .await
            .len(),
        3
    );
    assert!(
        list(reader(), json!({ "approver": "mallory" }))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn the_governed_input_is_exported_only_with_the_export_scopes_and_the_export_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (_, approval_id) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    let export = envelope(
        "aip.policy.v1.approval_query_request",
        json!({ "approval_query_request": { "approval_id": approval_id, "include_evidence_payload": true } }),
    );
    let (status, reply) = send(&runtime, &approver(1), &export).await;
    assert_eq!(status, 403, "{reply}");
    let mut exporter = reader();
    exporter.scopes.extend([
        "approval:export".to_owned(),
        "approval:sensitive".to_owned(),
    ]);
    let (status, reply) = send(&runtime, &exporter, &export).await;
    assert_eq!(status, 200, "{reply}");
    let evidence = &reply["body"]["approval_record_view"]["evidence_payload"];
    assert_eq!(evidence["input"]["to"], "acct:bob", "{reply}");
    let audit = envelope(
        "aip.audit.v1.audit_query_request",
        json!({ "audit_query_request": {} }),
    );
    let (_, reply) = send(&runtime, &reader(), &audit).await;
    assert!(
        reply.to_string().contains("approval.evidence_exported"),
        "{reply}"
    );
}

#[tokio::test]
async fn a_role_the_capability_excludes_may_not_approve_and_the_exclusion_is_bound_by_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sqlite");
    let runtime = node(&path, 60_000, true).await;
    let manifest = serde_json::to_value(runtime.manifest(&requester(), None, &[])).unwrap();
    assert_eq!(
        manifest["governance"]["approval_excluded_roles"]["cap:t:strict"],
        json!(["intern"]),
        "{manifest}"
    );
    let (action_id, approval_id) = transfer(&runtime, &requester(), "cap:t:strict", 500).await;
    // The intern holds the approver role, and is still refused.
    let (status, reply) = decide(&runtime, &intern(), &approval_id, "approved").await;
    assert_eq!(
        (status, code(&reply)),
        (403, "aip.policy.separation_of_duties"),
        "{reply}"
    );
    // The same intern approves the unrestricted transfer.
    let (_, other) = transfer(&runtime, &requester(), "cap:demo:transfer", 500).await;
    let (status, reply) = decide(&runtime, &intern(), &other, "approved").await;
    assert_eq!(status, 200, "{reply}");

    // Dropping the exclusion from the stored request does not widen who may approve: the policy
    // hash covers it.
    let db = rusqlite::Connection::open(&path).unwrap();
    let n = db
        .execute(
            "UPDATE aip_approvals SET request = json_remove(request, '$.excluded_approver_roles') WHERE approval_id = ?1",
            [&approval_id],
        )
        .unwrap();
    assert_eq!(n, 1);
    let (_, reply) = decide(&runtime, &intern(), &approval_id, "approved").await;
    assert_eq!(code(&reply), "aip.policy.policy_hash_mismatch", "{reply}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let view = approval_status(&runtime, &requester(), &approval_id).await;
    assert_eq!(view["status"], "pending");
    let _ = action_id;
}

#[tokio::test]
async fn a_tenant_policy_rule_is_satisfied_only_by_the_directorys_members() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("a.sqlite"), 60_000, true).await;
    let (action_id, approval_id) = transfer(&runtime, &requester(), "cap:t:finance", 500).await;
    // An approver by role is not in the policy: it cannot even see the approval.
    let (status, reply) = decide(&runtime, &approver(1), &approval_id, "approved").await;
    assert_eq!(
        (status, code(&reply)),
        (404, "aip.core.not_found"),
        "{reply}"
    );
    // Claiming the membership in the decision payload counts for nothing.
    let mut claimed = decision(&approval_id, "approved", &approver(2), None);
    claimed["body"]["approval_decision"]["authority_path"] = json!(["tenant_policy:finance"]);
    let (_, reply) = send(&runtime, &approver(2), &claimed).await;
    assert_eq!(code(&reply), "aip.core.not_found", "{reply}");
    // A tenant-wide reader sees it but holds no membership: not eligible.
    let mut auditor = reader();
    auditor.scopes.push("invoke:cap:t:*".into());
    let (_, reply) = decide(&runtime, &auditor, &approval_id, "approved").await;
    assert_eq!(code(&reply), "aip.policy.approver_not_eligible", "{reply}");
    // The treasurer sees it in its inbox and approves it.
    let inbox = runtime
        .read_approvals(
            &treasurer(),
            &serde_json::from_value(json!({ "approver": "treasurer" })).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(inbox.approvals.len(), 1);
    let (status, reply) = decide(&runtime, &treasurer(), &approval_id, "approved").await;
    assert_eq!(status, 200, "{reply}");
    let done = terminal(&runtime, &action_id).await;
    assert_eq!(state_of(&done), "completed", "{done:?}");
    assert_eq!(transfers(&runtime).await, 1);
}

#[tokio::test]
async fn an_approved_action_is_revalidated_against_the_current_policy_standing_and_scopes_before_dispatch()
 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sqlite");
    // A transfer granted on a node that stops before dispatching it, dispatched by a node that
    // restarts under `edit` (and an approval lifetime of `ttl_ms`): its end state and error code.
    let granted_then = |edit: Box<dyn FnOnce(&mut aip_runtime::RuntimeConfig)>, ttl_ms: u64| {
        let path = path.clone();
        async move {
            let runtime = node(&path, 60_000, false).await;
            let (action_id, approval_id) =
                transfer(&runtime, &requester(), "cap:t:gated", 500).await;
            let (_, reply) = decide(&runtime, &approver(1), &approval_id, "approved").await;
            assert_eq!(
                reply["body"]["approval_record_view"]["status"], "approved",
                "{reply}"
            );
            drop(runtime);
            let runtime = node_with(&path, ttl_ms, true, edit).await;
            let status = terminal(&runtime, &action_id).await;
            let ran = transfers(&runtime).await;
            runtime.shutdown();
            (state_of(&status), error_code(&status), ran)
        }
    };
    let failed = |code: &str| ("failed".to_owned(), code.to_owned(), 0);
    // The capability's policy changed (another approval lifetime): it is not the approved one.
    assert_eq!(
        granted_then(Box::new(|_| {}), 120_000).await,
        failed("aip.policy.policy_hash_mismatch")
    );
    // The approver lost the role the policy needs.
    let demoted = |c: &mut aip_runtime::RuntimeConfig| {
        c.directory
            .insert("approver-1".into(), vec!["principal:approver-1".into()]);
    };
    assert_eq!(
        granted_then(Box::new(demoted), 60_000).await,
        failed("aip.policy.approver_not_eligible")
    );
    // The requester no longer holds an invoke scope, or is no longer configured at all.
    let narrowed = |c: &mut aip_runtime::RuntimeConfig| {
        let mut alice = requester();
        alice.scopes = vec!["read:tenant".into()];
        c.principals.insert(alice.id.clone(), alice);
    };
    assert_eq!(
        granted_then(Box::new(narrowed), 60_000).await,
        failed("aip.policy.scope_denied")
    );
    let removed = |c: &mut aip_runtime::RuntimeConfig| {
        c.principals.insert(reader().id.clone(), reader());
    };
    assert_eq!(
        granted_then(Box::new(removed), 60_000).await,
        failed("aip.policy.scope_denied")
    );
    // Nothing changed: it runs, once.
    let same = |c: &mut aip_runtime::RuntimeConfig| {
        c.principals.insert(requester().id.clone(), requester());
    };
    assert_eq!(
        granted_then(Box::new(same), 60_000).await,
        ("completed".to_owned(), String::new(), 1)
    );
}
