//! Transactions (spec 13, 24.3's transaction line) through the runtime's binding-independent entry
//! point, with `cap:demo:payment`'s simulated provider observed in the store: dry runs commit
//! nothing, plans bind their commit, one commit owns a plan, uncertain outcomes are never retried
//! and are reconciled to both definitive outcomes, compensation is a governed action of its own,
//! and an approval for one plan never authorizes another.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
mod transaction_steps;

use std::collections::BTreeSet;
use std::sync::Arc;

use aip_runtime::ActionHandler;
use aip_runtime::handler::payment::{PAYMENTS, PaymentHandler, REFUNDS};
use serde_json::json;
use support::{code, envelope, id, send};
use transaction_steps::*;

#[tokio::test]
async fn a_dry_run_at_full_simulation_answers_what_would_happen_and_pays_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    let (status, reply) = send(
        &rt,
        &alice(),
        &txn(
            &alice(),
            "cap:demo:payment",
            pay(5_000),
            json!({ "mode": "dry_run" }),
        ),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let r = result(&reply);
    assert_eq!(r["status"], "dry_run_completed");
    assert_eq!(r["result"]["output"]["fidelity"], "full_simulation");
    assert_eq!(r["result"]["output"]["committed"], false);
    assert_eq!(
        r["result"]["output"]["simulation"]["would_charge_minor"],
        5_050
    );
    assert_eq!(count(&rt, PAYMENTS).await, 0, "a dry run pays nothing");
    // A dry run of a payment the account cannot cover fails as the commit would, and pays nothing.
    let (_, reply) = send(
        &rt,
        &alice(),
        &txn(
            &alice(),
            "cap:demo:payment",
            pay(9_999_999),
            json!({ "mode": "dry_run" }),
        ),
    )
    .await;
    assert_eq!(result(&reply)["status"], "failed", "{reply}");
    assert_eq!(
        result(&reply)["error"]["code"],
        "aip.demo.insufficient_funds"
    );
    let txn_id = result(&reply)["transaction_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, v) = view(&rt, &alice(), json!({ "transaction_id": txn_id })).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["body"]["transaction_view"]["status"], "failed");
    assert_eq!(count(&rt, PAYMENTS).await, 0);
    // A mode the contract does not list is refused with its own code; a capability without a
    // transaction contract refuses the context.
    let (status, reply) = send(
        &rt,
        &alice(),
        &txn(
            &alice(),
            "cap:demo:payment",
            pay(1),
            json!({ "mode": "rollback_not_supported" }),
        ),
    )
    .await;
    assert_eq!(
        (status, code(&reply)),
        (400, "aip.transaction.mode_unsupported"),
        "{reply}"
    );
    let (_, reply) = send(
        &rt,
        &alice(),
        &txn(
            &alice(),
            "cap:demo:echo",
            json!({}),
            json!({ "mode": "dry_run" }),
        ),
    )
    .await;
    assert_eq!(code(&reply), "aip.action.unsupported_context", "{reply}");
}

#[tokio::test]
async fn a_plan_binds_the_commit_and_the_commit_pays_once_under_the_plans_operation() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    let (status, reply) = send(
        &rt,
        &alice(),
        &txn(
            &alice(),
            "cap:demo:payment",
            pay(2_500),
            json!({ "mode": "plan" }),
        ),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let r = result(&reply);
    let plan = &r["plan"];
    // Spec 13.3: every binding, and ids that match the result's.
    assert_eq!(plan["transaction_id"], r["transaction_id"]);
    assert_eq!(plan["action_id"], r["action_id"]);
    assert_eq!(plan["capability_id"], "cap:demo:payment");
    assert_eq!(plan["planned_by"]["id"], "svc:alice");
    assert_eq!(plan["approval_required"], false);
    assert_eq!(plan["dry_run_fidelity"], "full_simulation");
    assert_eq!(
        plan["compensation"]["compensation_capability_id"],
        "cap:demo:refund"
    );
    assert_eq!(
        plan["predicted_side_effects"],
        json!(["write", "financial"])
    );
    assert_eq!(plan["identity"]["tenant"]["id"], TENANT);
    assert_eq!(plan["input_snapshot"], pay(2_500));
    assert!(plan["input_hash"].as_str().unwrap().len() >= 64);
    assert!(plan["expires_at"].is_string() && plan["created_at"].is_string());
    assert_eq!(r["result"]["output"]["quote"]["total_minor"], 2_525);
    assert_eq!(count(&rt, PAYMENTS).await, 0, "planning pays nothing");
    let (txn_id, plan_id) = (
        r["transaction_id"].as_str().unwrap(),
        plan["plan_id"].as_str().unwrap(),
    );
    let (status, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:demo:payment", pay(2_500), txn_id, plan_id),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let c = result(&reply);
    assert_eq!(c["status"], "committed", "{reply}");
    let operation = c["provider_operation"]["operation_id"].as_str().unwrap();
    assert_eq!(c["result"]["output"]["payment_id"], operation);
    // The provider's own reference (reported by the handler) replaces the runtime's.
    assert_eq!(
        c["provider_operation"]["provider"], "demo-ledger",
        "{reply}"
    );
    assert!(
        c["provider_operation"]["request_id"]
            .as_str()
            .unwrap()
            .starts_with("req_")
    );
    assert_eq!(c["result"]["output"]["plan_id"], plan_id);
    assert_eq!(count(&rt, PAYMENTS).await, 1);
    // Each step's receipts name what it did to the transaction, in a chain that verifies.
    let types = |action: &str| {
        let rt = Arc::clone(&rt);
        let action = action.to_owned();
        async move {
            let chain = rt
                .store()
                .list_receipts(TENANT, &action, aip_store::Limit::max())
                .await
                .unwrap();
            chain
                .iter()
                .map(|r| r.receipt_type.clone())
                .collect::<Vec<_>>()
        }
    };
    let planned = types(r["action_id"].as_str().unwrap()).await;
    assert!(
        planned.contains(&"transaction_planned".to_owned()),
        "{planned:?}"
    );
    let commit_types = types(c["action_id"].as_str().unwrap()).await;
    for t in ["transaction_commit_started", "transaction_committed"] {
        assert!(commit_types.contains(&t.to_owned()), "{commit_types:?}");
    }
    let (_, chain) = send(
        &rt,
        &alice(),
        &envelope(
            "aip.audit.v1.receipt_query_request",
            json!({ "receipt_query_request": { "chain_id": c["action_id"] } }),
        ),
    )
    .await;
    let chain: aip_core::ReceiptChain =
        serde_json::from_value(chain["body"]["receipt_chain"].clone()).unwrap();
    assert!(aip_core::chain::verify_chain(&chain).is_ok(), "{chain:?}");
    // The action list filters by transaction, and each action's status names its transaction.
    let (_, list) = send(
        &rt,
        &alice(),
        &envelope(
            "aip.lifecycle.v1.action_list_request",
            json!({ "action_list_request": { "transaction_id": txn_id } }),
        ),
    )
    .await;
    let listed: Vec<&str> = list["body"]["action_list"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            r["action_id"].as_str().unwrap(),
            c["action_id"].as_str().unwrap()
        ],
        "{list}"
    );
    assert!(
        list["body"]["action_list"]["actions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["transaction_id"] == txn_id)
    );
    let (_, list) = send(
        &rt,
        &bob(),
        &envelope(
            "aip.lifecycle.v1.action_list_request",
            json!({ "action_list_request": { "transaction_id": txn_id } }),
        ),
    )
    .await;
    assert_eq!(
        list["body"]["action_list"]["actions"],
        json!([]),
        "another principal lists nothing: {list}"
    );
    // The plan is now owned: committing it again is refused and pays nothing.
    let (status, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:demo:payment", pay(2_500), txn_id, plan_id),
    )
    .await;
    assert_eq!(
        (status, code(&reply)),
        (409, "aip.transaction.plan_claimed"),
        "{reply}"
    );
    assert_eq!(count(&rt, PAYMENTS).await, 1);
    // The view, by transaction, plan and action; another principal sees nothing of it.
    for selector in [
        json!({ "transaction_id": txn_id }),
        json!({ "plan_id": plan_id }),
        json!({ "action_id": c["action_id"] }),
    ] {
        let mut query = selector.clone();
        query["include_result"] = json!(true);
        query["include_receipts"] = json!(true);
        let (status, v) = view(&rt, &alice(), query).await;
        assert_eq!(status, 200, "{v}");
        let v = &v["body"]["transaction_view"];
        assert_eq!(v["status"], "committed");
        assert_eq!(v["plan"]["plan_id"], plan_id);
        assert_eq!(v["result"]["output"]["payment_id"], operation);
        assert!(v["receipt_chain"]["receipts"].as_array().unwrap().len() >= 4);
        let (status, hidden) = view(&rt, &bob(), selector.clone()).await;
        assert_eq!(
            (status, code(&hidden)),
            (404, "aip.core.not_found"),
            "{hidden}"
        );
        // A tenant-wide reader sees the transaction, but not the planned input.
        let auditor = support::caller("svc:auditor", TENANT, &["read:tenant"]);
        let (status, seen) = view(&rt, &auditor, selector).await;
        assert_eq!(status, 200, "{seen}");
        let plan = &seen["body"]["transaction_view"]["plan"];
        assert!(
            plan["input_hash"].is_string() && plan.get("input_snapshot").is_none(),
            "{plan}"
        );
    }
}

#[tokio::test]
async fn a_commit_that_no_longer_matches_its_plan_is_refused_and_pays_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    let (txn_id, plan_id) = plan(&rt, &alice(), "cap:demo:payment", pay(700)).await;
    // Changed input.
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:demo:payment", pay(701), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(code(&reply), "aip.transaction.plan_mismatch", "{reply}");
    // Another capability.
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:t:payment-b", pay(700), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(code(&reply), "aip.transaction.plan_mismatch", "{reply}");
    // Another transaction context.
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(
            &alice(),
            "cap:demo:payment",
            pay(700),
            "txn_other",
            &plan_id,
        ),
    )
    .await;
    assert_eq!(code(&reply), "aip.transaction.plan_mismatch", "{reply}");
    // The same principal under another identity (its scopes changed since the plan).
    let narrower = support::caller("svc:alice", TENANT, &["invoke:cap:demo:payment"]);
    let (_, reply) = send(
        &rt,
        &narrower,
        &commit(&narrower, "cap:demo:payment", pay(700), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(code(&reply), "aip.transaction.plan_mismatch", "{reply}");
    // Another principal: the plan does not exist for it.
    let (status, reply) = send(
        &rt,
        &bob(),
        &commit(&bob(), "cap:demo:payment", pay(700), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(
        (status, code(&reply)),
        (404, "aip.core.not_found"),
        "{reply}"
    );
    // An unknown plan.
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:demo:payment", pay(700), &txn_id, "plan_nope"),
    )
    .await;
    assert_eq!(code(&reply), "aip.core.not_found", "{reply}");
    assert_eq!(count(&rt, PAYMENTS).await, 0, "no refused commit paid");
    // The untouched plan still commits.
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:demo:payment", pay(700), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(result(&reply)["status"], "committed", "{reply}");
    assert_eq!(count(&rt, PAYMENTS).await, 1);
}

#[tokio::test]
async fn an_expired_plan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    let (txn_id, plan_id) = plan(&rt, &alice(), "cap:t:short", pay(300)).await;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:t:short", pay(300), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(code(&reply), "aip.transaction.plan_expired", "{reply}");
    assert_eq!(count(&rt, PAYMENTS).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commits_of_one_plan_pay_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    let (txn_id, plan_id) = plan(&rt, &alice(), "cap:demo:payment", pay(900)).await;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (rt, env) = (
                Arc::clone(&rt),
                commit(&alice(), "cap:demo:payment", pay(900), &txn_id, &plan_id),
            );
            tokio::spawn(async move { send(&rt, &alice(), &env).await })
        })
        .collect();
    let mut committed = 0;
    for t in tasks {
        let (status, reply) = t.await.unwrap();
        if status == 200 {
            assert_eq!(result(&reply)["status"], "committed", "{reply}");
            committed += 1;
        } else {
            assert_eq!(
                (status, code(&reply)),
                (409, "aip.transaction.plan_claimed"),
                "{reply}"
            );
        }
    }
    assert_eq!(committed, 1);
    assert_eq!(count(&rt, PAYMENTS).await, 1, "exactly one provider commit");
}

#[tokio::test]
async fn an_uncertain_commit_is_never_retried_even_after_a_restart_and_reconciles_to_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sqlite");
    let rt = node(&path).await;
    let input =
        json!({ "amount_minor": 1_200, "to": "acct:shop", "test_outcome": "commit_then_timeout" });
    let (txn_id, plan_id) = plan(&rt, &alice(), "cap:demo:payment", input.clone()).await;
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(
            &alice(),
            "cap:demo:payment",
            input.clone(),
            &txn_id,
            &plan_id,
        ),
    )
    .await;
    let c = result(&reply);
    assert_eq!(c["status"], "outcome_unknown", "{reply}");
    assert_eq!(c["error"]["code"], "aip.connector.uncertain_outcome");
    // The provider named the operation before it stopped answering: that reference is kept, on the
    // transaction and in the error (spec 19.3).
    assert_eq!(
        c["provider_operation"]["provider"], "demo-ledger",
        "{reply}"
    );
    assert_eq!(
        c["error"]["details"]["provider_operation"],
        c["provider_operation"]
    );
    assert_eq!(count(&rt, PAYMENTS).await, 1, "the provider did pay");
    // Restart: nothing retries the commit.
    rt.shutdown();
    drop(rt);
    let rt = node(&path).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(count(&rt, PAYMENTS).await, 1, "never retried");
    let (_, v) = view(&rt, &alice(), json!({ "transaction_id": txn_id })).await;
    assert_eq!(v["body"]["transaction_view"]["status"], "outcome_unknown");
    // Neither a second commit nor a compensation may act on an unknown outcome.
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(
            &alice(),
            "cap:demo:payment",
            input.clone(),
            &txn_id,
            &plan_id,
        ),
    )
    .await;
    assert_eq!(code(&reply), "aip.transaction.plan_claimed", "{reply}");
    let compensate = txn(
        &alice(),
        "cap:demo:refund",
        json!({}),
        json!({ "mode": "compensate", "transaction_id": txn_id, "compensation_for": c["action_id"] }),
    );
    let mut compensate = compensate;
    compensate["body"]["transaction_request"]["action"]["idempotency_key"] = json!(id("key_"));
    let (_, reply) = send(&rt, &alice(), &compensate).await;
    assert_eq!(code(&reply), "aip.transaction.not_compensable", "{reply}");
    // Reconciliation queries the provider with the recorded operation: it committed.
    let (status, reply) = send(
        &rt,
        &alice(),
        &txn(
            &alice(),
            "cap:demo:payment",
            json!({}),
            json!({ "mode": "reconcile", "transaction_id": txn_id }),
        ),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let r = result(&reply);
    assert_eq!(r["status"], "reconciled", "{reply}");
    assert_eq!(r["result"]["output"]["outcome"], "committed");
    assert_eq!(r["provider_operation"], c["provider_operation"]);
    // The reconciliation's own chain records the provider's answer (spec 18.1's closed types: a
    // reconciled commit is `transaction_committed` with mode `reconcile`).
    let answer = reconcile_receipt(&rt, r["action_id"].as_str().unwrap()).await;
    assert_eq!(answer.0, "transaction_committed");
    assert_eq!(answer.1["mode"], "reconcile");
    assert_eq!(answer.1["transaction_id"], json!(txn_id));
    assert_eq!(answer.1["provider_answer"]["outcome"], "committed");
    let (_, v) = view(&rt, &alice(), json!({ "transaction_id": txn_id })).await;
    assert_eq!(v["body"]["transaction_view"]["status"], "reconciled");
    // Nothing is left to reconcile; the committed payment may now be compensated.
    let (_, reply) = send(
        &rt,
        &alice(),
        &txn(
            &alice(),
            "cap:demo:payment",
            json!({}),
            json!({ "mode": "reconcile", "transaction_id": txn_id }),
        ),
    )
    .await;
    assert_eq!(code(&reply), "aip.transaction.not_reconcilable", "{reply}");
    let mut compensate = txn(
        &alice(),
        "cap:demo:refund",
        json!({ "reason": "duplicate" }),
        json!({ "mode": "compensate", "transaction_id": txn_id, "compensation_for": c["action_id"] }),
    );
    compensate["body"]["transaction_request"]["action"]["idempotency_key"] = json!(id("key_"));
    let (_, reply) = send(&rt, &alice(), &compensate).await;
    assert_eq!(result(&reply)["status"], "compensated", "{reply}");
    assert_eq!(count(&rt, REFUNDS).await, 1);
}

#[tokio::test]
async fn a_commit_reconciled_as_not_committed_may_be_committed_again_and_pays_once() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    let (txn_id, plan_id) = plan(&rt, &alice(), "cap:t:flaky", pay(400)).await;
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:t:flaky", pay(400), &txn_id, &plan_id),
    )
    .await;
    let first = result(&reply).clone();
    assert_eq!(first["status"], "outcome_unknown", "{reply}");
    // Nothing reached the provider: the runtime's own operation is the one to reconcile.
    assert_eq!(
        first["provider_operation"]["provider"], "cap:t:flaky",
        "{reply}"
    );
    assert_eq!(
        first["error"]["details"]["provider_operation"],
        first["provider_operation"]
    );
    assert_eq!(count(&rt, PAYMENTS).await, 0);
    // Before reconciliation the plan stays claimed.
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:t:flaky", pay(400), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(code(&reply), "aip.transaction.plan_claimed", "{reply}");
    let (_, reply) = send(
        &rt,
        &alice(),
        &txn(
            &alice(),
            "cap:t:flaky",
            json!({}),
            json!({ "mode": "reconcile", "transaction_id": txn_id, "plan_id": plan_id }),
        ),
    )
    .await;
    let r = result(&reply);
    assert_eq!(
        (
            r["status"].as_str(),
            r["result"]["output"]["outcome"].as_str()
        ),
        (Some("reconciled"), Some("not_committed")),
        "{reply}"
    );
    let answer = reconcile_receipt(&rt, r["action_id"].as_str().unwrap()).await;
    assert_eq!(answer.0, "transaction_failed");
    assert_eq!(answer.1["mode"], "reconcile");
    assert_eq!(answer.1["provider_answer"]["outcome"], "not_committed");
    assert_eq!(answer.1["uncertain_outcome"], false);
    // A reconciliation carries no business input.
    let (_, reply) = send(
        &rt,
        &alice(),
        &txn(
            &alice(),
            "cap:t:flaky",
            pay(1),
            json!({ "mode": "reconcile", "transaction_id": txn_id, "plan_id": plan_id }),
        ),
    )
    .await;
    assert_eq!(code(&reply), "aip.action.invalid_input", "{reply}");
    // The definitive "not committed" frees the plan for one new commit, under a new operation.
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:t:flaky", pay(400), &txn_id, &plan_id),
    )
    .await;
    let second = result(&reply);
    assert_eq!(second["status"], "committed", "{reply}");
    assert_ne!(second["provider_operation"], first["provider_operation"]);
    assert_eq!(count(&rt, PAYMENTS).await, 1);
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:t:flaky", pay(400), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(code(&reply), "aip.transaction.plan_claimed", "{reply}");
}

#[tokio::test]
async fn a_compensation_is_a_governed_action_with_its_own_idempotency_result_and_receipts() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    // A plain call executes directly, recorded as a transaction.
    let (status, reply) = rt_act(
        &rt,
        &alice(),
        json!({ "id": id("act_"), "capability_id": "cap:demo:payment", "input": pay(800) }),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let paid = reply["body"]["action_result"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(count(&rt, PAYMENTS).await, 1);
    let (_, v) = view(&rt, &alice(), json!({ "action_id": paid })).await;
    assert_eq!(v["body"]["transaction_view"]["status"], "committed", "{v}");
    assert_eq!(
        v["body"]["transaction_view"]["transaction"]["mode"],
        "execute"
    );
    let refund = |key: Option<&str>, target: &str| {
        let mut a = json!({ "id": id("act_"), "capability_id": "cap:demo:refund", "input": { "reason": "returned" },
                            "transaction": { "mode": "compensate", "compensation_for": target } });
        if let Some(k) = key {
            a["idempotency_key"] = json!(k);
        }
        a
    };
    // The refund's own contract requires an idempotency key.
    let (_, reply) = rt_act(&rt, &alice(), refund(None, &paid)).await;
    assert_eq!(code(&reply), "aip.idempotency.key_required", "{reply}");
    // Only the payment's principal may compensate it; others do not see it.
    let (_, reply) = rt_act(&rt, &bob(), refund(Some("k-bob"), &paid)).await;
    assert_eq!(code(&reply), "aip.core.not_found", "{reply}");
    let first = refund(Some("k1"), &paid);
    let (status, reply) = rt_act(&rt, &alice(), first.clone()).await;
    assert_eq!(status, 200, "{reply}");
    let out = &reply["body"]["action_result"];
    assert_eq!(out["status"], "completed", "{reply}");
    assert_eq!(out["output"]["compensates"], paid);
    assert_eq!(count(&rt, REFUNDS).await, 1);
    // Re-sent: the original outcome, nothing refunded twice.
    let (status, again) = rt_act(&rt, &alice(), first.clone()).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["extensions"]["ack"]["status"], "cached");
    // A second compensation of the same payment is refused.
    let (_, reply) = rt_act(&rt, &alice(), refund(Some("k2"), &paid)).await;
    assert_eq!(code(&reply), "aip.transaction.conflict", "{reply}");
    assert_eq!(count(&rt, REFUNDS).await, 1);
    let (_, v) = view(&rt, &alice(), json!({ "action_id": paid })).await;
    assert_eq!(
        v["body"]["transaction_view"]["status"], "compensated",
        "{v}"
    );
    // The compensation has a receipt chain of its own.
    let chain = rt
        .store()
        .list_receipts(
            TENANT,
            first["id"].as_str().unwrap(),
            aip_store::Limit::max(),
        )
        .await
        .unwrap();
    assert!(chain.len() >= 4, "{chain:?}");
    // A refund outside a compensation, or of something that is not a commit, is refused.
    let (_, reply) = rt_act(&rt, &alice(), json!({ "id": id("act_"), "capability_id": "cap:demo:refund", "input": {}, "idempotency_key": "k3" })).await;
    assert_eq!(
        reply["body"]["action_result"]["error"]["code"], "aip.transaction.not_compensable",
        "{reply}"
    );
    let (_, reply) = rt_act(&rt, &alice(), refund(Some("k4"), "act_nope")).await;
    assert_eq!(code(&reply), "aip.core.not_found", "{reply}");
    // The provider's ledger, as a user reads it: one payment of 800, refunded once.
    let (status, reply) = rt_act(
        &rt,
        &alice(),
        json!({ "id": id("act_"), "capability_id": "cap:demo:ledger", "input": {} }),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let ledger = &reply["body"]["action_result"]["output"];
    assert_eq!(
        (&ledger["payments_count"], &ledger["paid_minor"]),
        (&json!(1), &json!(800)),
        "{ledger}"
    );
    assert_eq!(
        (&ledger["refunds_count"], &ledger["refunded_minor"]),
        (&json!(1), &json!(800)),
        "{ledger}"
    );
    assert_eq!(
        ledger["refunds"][0]["payment_id"],
        ledger["payments"][0]["payment_id"]
    );
    // Another tenant's ledger is empty.
    let other = support::caller("svc:zed", "elsewhere", &["invoke:*"]);
    let (_, reply) = rt_act(
        &rt,
        &other,
        json!({ "id": id("act_"), "capability_id": "cap:demo:ledger", "input": {} }),
    )
    .await;
    assert_eq!(
        reply["body"]["action_result"]["output"]["payments_count"], 0,
        "{reply}"
    );
}

#[tokio::test]
async fn compensating_an_operation_that_cannot_roll_back_is_reported_as_rollback_not_supported() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    let (_, reply) = rt_act(
        &rt,
        &alice(),
        json!({ "id": id("act_"), "capability_id": "cap:t:final", "input": pay(100) }),
    )
    .await;
    let paid = reply["body"]["action_result"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, reply) = rt_act(&rt, &alice(), json!({ "id": id("act_"), "capability_id": "cap:demo:refund", "input": {}, "idempotency_key": "k",
        "transaction": { "mode": "compensate", "compensation_for": paid } })).await;
    assert_eq!(
        (status, code(&reply)),
        (400, "aip.transaction.rollback_not_supported"),
        "{reply}"
    );
    assert_eq!(count(&rt, REFUNDS).await, 0);
}

#[tokio::test]
async fn an_approval_gated_commit_waits_for_an_approval_bound_to_its_plan_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    let big = pay(150_000);
    let (txn_a, plan_a) = plan(&rt, &alice(), "cap:demo:payment", big.clone()).await;
    let (txn_b, plan_b) = plan(&rt, &alice(), "cap:demo:payment", big.clone()).await;
    let (_, v) = view(&rt, &alice(), json!({ "plan_id": plan_a })).await;
    assert_eq!(
        v["body"]["transaction_view"]["plan"]["approval_required"], true,
        "{v}"
    );
    // Commit A waits for its approval; nothing is paid.
    let mut env = commit(&alice(), "cap:demo:payment", big.clone(), &txn_a, &plan_a);
    env["body"]["transaction_request"]["action"]["mode"] = json!("async");
    let (status, reply) = send(&rt, &alice(), &env).await;
    assert_eq!(status, 202, "{reply}");
    let approval_a = reply["extensions"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, v) = view(&rt, &alice(), json!({ "transaction_id": txn_a })).await;
    assert_eq!(v["body"]["transaction_view"]["status"], "requires_human");
    let mut env = commit(&alice(), "cap:demo:payment", big.clone(), &txn_b, &plan_b);
    env["body"]["transaction_request"]["action"]["mode"] = json!("async");
    let (_, reply) = send(&rt, &alice(), &env).await;
    let approval_b = reply["extensions"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let hash = |approval: &str| {
        let rt = Arc::clone(&rt);
        let approval = approval.to_owned();
        async move {
            rt.store()
                .get_approval(TENANT, &approval)
                .await
                .unwrap()
                .unwrap()
                .policy_hash
        }
    };
    let (hash_a, hash_b) = (hash(&approval_a).await, hash(&approval_b).await);
    assert_ne!(hash_a, hash_b, "each approval is bound to its own plan");
    // Approving A with B's policy hash is refused; A's own hash commits A only.
    let decide = |approval: &str, policy_hash: &str| {
        envelope(
            "aip.policy.v1.approval_decision",
            json!({ "approval_decision": {
            "approval_id": approval, "decision": "approved", "approver": { "id": "approver-1", "kind": "human" },
            "decided_at": aip_core::Timestamp::now(), "policy_hash": policy_hash, "decision_id": id("dec_"),
            "reason": "ok" } }),
        )
    };
    let (_, reply) = send(&rt, &approver(), &decide(&approval_a, &hash_b)).await;
    assert_eq!(code(&reply), "aip.policy.policy_hash_mismatch", "{reply}");
    let (status, reply) = send(&rt, &approver(), &decide(&approval_a, &hash_a)).await;
    assert_eq!(status, 200, "{reply}");
    let commit_a = rt
        .store()
        .get_approval(TENANT, &approval_a)
        .await
        .unwrap()
        .unwrap()
        .action_id;
    assert_eq!(support_terminal(&rt, &commit_a).await, "completed");
    let (_, v) = view(&rt, &alice(), json!({ "transaction_id": txn_a })).await;
    assert_eq!(v["body"]["transaction_view"]["status"], "committed");
    let (_, v) = view(&rt, &alice(), json!({ "transaction_id": txn_b })).await;
    assert_eq!(
        v["body"]["transaction_view"]["status"], "requires_human",
        "B still waits for its own approval"
    );
    assert_eq!(count(&rt, PAYMENTS).await, 1);
}

#[test]
fn the_payment_handler_declares_no_transaction_mode_beyond_what_it_executes() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store: Arc<dyn aip_store::Store> = rt.block_on(async {
        Arc::new(
            aip_store::SqliteStore::open(dir.path().join("x.sqlite"))
                .await
                .unwrap(),
        )
    });
    let support = PaymentHandler::new(store).support().transactions.unwrap();
    let modes: BTreeSet<&str> = support.modes.iter().map(|m| m.as_str()).collect();
    assert_eq!(
        modes,
        BTreeSet::from(["commit", "dry_run", "execute", "plan", "reconcile"])
    );
}

#[tokio::test]
async fn an_unknown_outcome_is_reconciled_by_the_runtime_itself_and_the_commit_is_never_retried() {
    let dir = tempfile::tempdir().unwrap();
    let rt = node_reconciling(&dir.path().join("a.sqlite"), 200).await;
    let input =
        json!({ "amount_minor": 1_300, "to": "acct:shop", "test_outcome": "commit_then_timeout" });
    let (txn_id, plan_id) = plan(&rt, &alice(), "cap:demo:payment", input.clone()).await;
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:demo:payment", input, &txn_id, &plan_id),
    )
    .await;
    assert_eq!(result(&reply)["status"], "outcome_unknown", "{reply}");
    // The runtime reconciles as the commit's principal: the provider did pay.
    let v = until_status(&rt, &txn_id, "reconciled").await;
    assert_eq!(v["result"]["output"]["outcome"], "committed", "{v}");
    assert_eq!(v["transaction"]["mode"], "reconcile");
    let reconcile = v["action_id"].as_str().unwrap();
    let status = rt
        .action_status(&alice(), reconcile, false, false, None)
        .await
        .unwrap();
    assert_eq!(
        status.transaction_id.as_ref().map(|t| t.as_str()),
        Some(txn_id.as_str())
    );
    assert_eq!(
        count(&rt, PAYMENTS).await,
        1,
        "the commit itself never runs again"
    );
    // A link that lost the commit before the provider: reconciled as not committed, plan free.
    let (txn_id, plan_id) = plan(&rt, &alice(), "cap:t:flaky", pay(500)).await;
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:t:flaky", pay(500), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(result(&reply)["status"], "outcome_unknown", "{reply}");
    let v = until_status(&rt, &txn_id, "reconciled").await;
    assert_eq!(v["result"]["output"]["outcome"], "not_committed", "{v}");
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:t:flaky", pay(500), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(result(&reply)["status"], "committed", "{reply}");
    // A commit that completed leaves its timer nothing to do.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let v = until_status(&rt, &txn_id, "committed").await;
    assert_eq!(v["transaction"]["mode"], "commit");
    assert_eq!(count(&rt, PAYMENTS).await, 2);
}

/// The one transaction receipt of a reconciliation action's chain: its type and data.
async fn reconcile_receipt(
    rt: &Arc<aip_runtime::Runtime>,
    action: &str,
) -> (String, serde_json::Value) {
    let chain = rt
        .store()
        .list_receipts(TENANT, action, aip_store::Limit::max())
        .await
        .unwrap();
    let found: Vec<_> = chain
        .iter()
        .filter(|r| r.receipt_type.starts_with("transaction_"))
        .collect();
    assert_eq!(found.len(), 1, "{chain:?}");
    (found[0].receipt_type.clone(), found[0].body["data"].clone())
}

#[tokio::test]
async fn a_restricted_transactions_result_is_withheld_from_a_tenant_reader_without_data_sensitive()
{
    let dir = tempfile::tempdir().unwrap();
    let rt = node(&dir.path().join("a.sqlite")).await;
    let (txn_id, plan_id) = plan(&rt, &alice(), "cap:t:restricted", pay(700)).await;
    let (_, reply) = send(
        &rt,
        &alice(),
        &commit(&alice(), "cap:t:restricted", pay(700), &txn_id, &plan_id),
    )
    .await;
    assert_eq!(result(&reply)["status"], "committed", "{reply}");
    let selector = json!({ "transaction_id": txn_id, "include_result": true });
    let ops = support::caller("ops", TENANT, &["read:tenant"]);
    let dpo = support::caller("dpo", TENANT, &["read:tenant", "data:sensitive"]);
    for (reader, shown) in [(&alice(), true), (&dpo, true), (&ops, false)] {
        let (status, v) = view(&rt, reader, selector.clone()).await;
        assert_eq!(status, 200, "{v}");
        let view = &v["body"]["transaction_view"];
        assert_eq!(view["status"], "committed", "{v}");
        assert_eq!(
            view["result"]["output"]["amount_minor"].as_u64(),
            shown.then_some(700),
            "{}: {v}",
            reader.id
        );
        assert_eq!(view["result"]["status"], "completed", "{v}");
    }
}
