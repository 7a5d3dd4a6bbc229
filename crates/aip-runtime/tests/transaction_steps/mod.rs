//! The node and the steps the transaction tests share: a runtime over a SQLite file with the demo
//! capabilities and test variants of the payment, its callers, and one helper per transaction step.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aip_runtime::handler::demo::demo_capabilities;
use aip_runtime::handler::payment::{PaymentHandler, payment_capability};
use aip_runtime::{
    ActionHandler, Caller, HandlerError, HandlerOutput, HandlerSupport, Reconciliation, Registry,
    Runtime, TrustedContext,
};
use serde_json::{Value, json};

use crate::support::{self, envelope, id, send};

pub const TENANT: &str = "t";

/// `cap:t:flaky`: the payment provider behind a link that loses the first `n` commits before they
/// reach the provider (an uncertain outcome that did not commit).
pub struct Flaky {
    inner: PaymentHandler,
    lose: AtomicUsize,
}

#[async_trait::async_trait]
impl ActionHandler for Flaky {
    fn support(&self) -> HandlerSupport {
        self.inner.support()
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let committing = ctx
            .transaction
            .as_ref()
            .is_some_and(|t| t.mode == aip_core::TransactionMode::Commit);
        if committing
            && self
                .lose
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(HandlerError::UncertainOutcome("the link dropped".into()));
        }
        self.inner.invoke(ctx, input).await
    }

    async fn reconcile(
        &self,
        ctx: &TrustedContext,
        operation: &aip_core::ProviderOperationRef,
    ) -> Result<Reconciliation, HandlerError> {
        self.inner.reconcile(ctx, operation).await
    }
}

/// A node over the SQLite file at `path`: the demo capabilities, `cap:t:payment-b` (a second
/// payment capability), `cap:t:short` (plans live 300 ms), `cap:t:flaky`, `cap:t:final` (payments
/// that declare they cannot roll back), `cap:t:restricted` (a payment whose data is restricted) and the demo approvers in the directory.
pub async fn node(path: &Path) -> Arc<Runtime> {
    node_reconciling(path, 0).await
}

/// [`node`] that reconciles unknown outcomes by itself `reconcile_after_ms` after a commit.
pub async fn node_reconciling(path: &Path, reconcile_after_ms: u64) -> Arc<Runtime> {
    let store: Arc<dyn aip_store::Store> =
        Arc::new(aip_store::SqliteStore::open(path).await.unwrap());
    let mut entries = demo_capabilities(Arc::clone(&store));
    let variant = |id: &str| {
        let mut c = payment_capability();
        c["id"] = json!(id);
        serde_json::from_value::<aip_core::Capability>(c).unwrap()
    };
    entries.push(support::entry(
        variant("cap:t:payment-b"),
        Arc::new(PaymentHandler::new(Arc::clone(&store))),
    ));
    entries.push(support::entry(
        variant("cap:t:short"),
        Arc::new(PaymentHandler::with_plan_ttl(Arc::clone(&store), 300)),
    ));
    entries.push(support::entry(
        variant("cap:t:flaky"),
        Arc::new(Flaky {
            inner: PaymentHandler::new(Arc::clone(&store)),
            lose: AtomicUsize::new(1),
        }),
    ));
    let mut restricted = payment_capability();
    restricted["id"] = json!("cap:t:restricted");
    restricted["contract"]["data"]["sensitivity"] = json!("restricted");
    entries.push(support::entry(
        serde_json::from_value(restricted).unwrap(),
        Arc::new(PaymentHandler::new(Arc::clone(&store))),
    ));
    let mut fin = payment_capability();
    fin["id"] = json!("cap:t:final");
    fin["contract"]["compensation"] =
        json!({ "mode": "rollback_not_supported", "requires_approval": false });
    entries.push(support::entry(
        serde_json::from_value(fin).unwrap(),
        Arc::new(PaymentHandler::new(Arc::clone(&store))),
    ));
    let mut config = support::runtime_config(2, 30_000);
    config.reconcile_after_ms = reconcile_after_ms;
    for c in [approver(), alice()] {
        config.directory.insert(c.id.clone(), c.resolver_keys());
    }
    // The test variants pay without approval tiers: an explicit choice (spec 22.5).
    for e in entries
        .iter_mut()
        .filter(|e| e.capability.id.as_str().starts_with("cap:t:"))
    {
        e.allow_without_approval = true;
    }
    let runtime = Runtime::new(store, Registry::admit(entries).unwrap(), config);
    runtime.start().await.unwrap();
    runtime
}

pub fn alice() -> Caller {
    support::caller("svc:alice", TENANT, &["invoke:*"])
}

pub fn bob() -> Caller {
    support::caller("svc:bob", TENANT, &["invoke:*"])
}

pub fn approver() -> Caller {
    let mut c = support::caller("approver-1", TENANT, &["invoke:cap:demo:*"]);
    c.kind = aip_core::PrincipalKind::Human;
    c.roles = vec!["approver".into()];
    c
}

pub fn pay(amount: u64) -> Value {
    json!({ "amount_minor": amount, "to": "acct:shop" })
}

/// A `transaction_request` from `caller` for `capability` in `mode` with `context` members.
pub fn txn(caller: &Caller, capability: &str, input: Value, transaction: Value) -> Value {
    let transaction_id = transaction["transaction_id"].clone();
    let mut body = json!({
        "action": { "id": id("act_"), "capability_id": capability, "input": input, "transaction": transaction },
        "requested_by": { "id": caller.id, "kind": "service" },
    });
    body["transaction_id"] = if transaction_id.is_null() {
        json!(id("txn_"))
    } else {
        transaction_id
    };
    envelope(
        "aip.transaction.v1.request",
        json!({ "transaction_request": body }),
    )
}

pub fn result(reply: &Value) -> &Value {
    &reply["body"]["transaction_result"]
}

pub async fn count(runtime: &Runtime, collection: &str) -> u64 {
    runtime
        .store()
        .count_records(collection, TENANT)
        .await
        .unwrap()
}

pub async fn view(runtime: &Arc<Runtime>, caller: &Caller, selector: Value) -> (u16, Value) {
    send(
        runtime,
        caller,
        &envelope(
            "aip.transaction.v1.query_request",
            json!({ "transaction_query_request": selector }),
        ),
    )
    .await
}

/// Plans `input` on `capability` as `caller`; returns (transaction id, plan id).
pub async fn plan(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    capability: &str,
    input: Value,
) -> (String, String) {
    let (status, reply) = send(
        runtime,
        caller,
        &txn(caller, capability, input, json!({ "mode": "plan" })),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let r = result(&reply);
    assert_eq!(r["status"], "planned", "{reply}");
    (
        r["transaction_id"].as_str().unwrap().to_owned(),
        r["plan"]["plan_id"].as_str().unwrap().to_owned(),
    )
}

pub fn commit(
    caller: &Caller,
    capability: &str,
    input: Value,
    txn_id: &str,
    plan_id: &str,
) -> Value {
    txn(
        caller,
        capability,
        input,
        json!({ "mode": "commit", "transaction_id": txn_id, "plan_id": plan_id }),
    )
}

/// Submits an action envelope.
pub async fn rt_act(rt: &Arc<Runtime>, caller: &Caller, action: Value) -> (u16, Value) {
    send(
        rt,
        caller,
        &envelope("aip.core.v1.action", json!({ "action": action })),
    )
    .await
}

pub async fn support_terminal(rt: &Arc<Runtime>, action_id: &str) -> String {
    let status = rt
        .action_status(&alice(), action_id, false, false, Some(20_000))
        .await
        .unwrap();
    serde_json::to_value(status.state)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// Polls the transaction's view until `status` (bounded).
pub async fn until_status(rt: &Arc<Runtime>, txn_id: &str, status: &str) -> Value {
    for _ in 0..200 {
        let (_, v) = view(
            rt,
            &alice(),
            json!({ "transaction_id": txn_id, "include_result": true }),
        )
        .await;
        if v["body"]["transaction_view"]["status"] == status {
            return v["body"]["transaction_view"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{txn_id} never reached {status}");
}
