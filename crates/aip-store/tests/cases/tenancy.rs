//! Suite cases of tenant isolation (run on both backends by `suite!`): every read by id carries its
//! tenant into the query, so an id of another tenant is not found (spec 22.6). Each case writes in
//! `t1` (the fixtures' tenant) and reads by id as `t1` (found, so the case can fail) and as `t2`.

use std::future::Future;

use super::callback::{deliveries, subscribed, subscription};
use super::channel::{audit_of, conversation, message};
use super::governance::{approval_write, decision, escalation, gated};
use super::retention::archived_chain;
use super::transaction::linked;
use super::*;

/// What a read answered, as far as isolation goes: whether it found anything.
trait Found {
    fn found(&self) -> bool;
}

impl<T> Found for Option<T> {
    fn found(&self) -> bool {
        self.is_some()
    }
}

impl<T> Found for Vec<T> {
    fn found(&self) -> bool {
        !self.is_empty()
    }
}

impl<T> Found for Page<T> {
    fn found(&self) -> bool {
        !self.items.is_empty()
    }
}

/// Asserts that `read(tenant)` finds what `t1` wrote as `t1`, finds nothing as the foreign `t2`,
/// and finds it as `t1` again: an owner's earlier read (one a store may answer from memory) never
/// answers a foreign one, nor the other way round.
async fn only_its_tenant_finds<F, Fut, T>(name: &str, read: F)
where
    F: Fn(&'static str) -> Fut,
    Fut: Future<Output = StoreResult<T>>,
    T: Found,
{
    let read = &read;
    let found = |t| async move { read(t).await.unwrap().found() };
    assert!(found("t1").await, "{name}: its own tenant does not find it");
    assert!(!found("t2").await, "{name}: a foreign tenant finds it");
    assert!(
        found("t1").await,
        "{name}: its own tenant no longer finds it"
    );
}

pub async fn a_foreign_tenants_action_id_and_its_chunks_are_not_found(h: &Harness) {
    let s = &h.store;
    admit_ok(s, admission("a1", None)).await;
    let chunk = data_chunk("a1", 1, json!("chunk"));
    s.append_chunk(chunk, None, T0).await.unwrap();
    only_its_tenant_finds("get_action", |t| s.get_action(t, "a1")).await;
    let chunks = |t| s.list_chunks(t, "a1", None, Limit::max());
    only_its_tenant_finds("list_chunks", chunks).await;
}

pub async fn a_foreign_tenants_receipt_its_chain_and_its_tombstone_are_not_found(h: &Harness) {
    let s = &h.store;
    let r1 = receipt("r1", "c1", "h1", None);
    s.append_receipt(r1).await.unwrap();
    only_its_tenant_finds("get_receipt", |t| s.get_receipt(t, "r1")).await;
    let chain = |t| s.list_receipts(t, "c1", Limit::max());
    only_its_tenant_finds("list_receipts", chain).await;
    // Purged, the chain leaves a tombstone that is as much its tenant's as the chain was.
    let purge = EvidencePurge {
        audit_through: None,
        chains: vec![archived_chain("c1", 1, "h1")],
        archive: None,
        archive_sha256: None,
        purged_at_ms: T0 + 1,
        audit: vec![],
    };
    assert_eq!(s.purge_evidence(purge).await.unwrap().chains, 1);
    only_its_tenant_finds("chain_tombstone", |t| s.chain_tombstone(t, "c1")).await;
}

pub async fn a_foreign_tenants_session_id_is_not_found(h: &Harness) {
    let s = &h.store;
    let session = new_session("s1", "alice");
    s.create_session(session, vec![]).await.unwrap();
    only_its_tenant_finds("get_session", |t| s.get_session(t, "s1")).await;
}

pub async fn a_foreign_tenants_approval_and_its_decisions_are_not_found(h: &Harness) {
    let s = &h.store;
    admit_ok(s, gated("a1", &["role:approver"])).await;
    s.write_approval(ApprovalWrite {
        decision: Some(decision("d1", "bob")),
        ..approval_write("a1", 0)
    })
    .await
    .unwrap();
    only_its_tenant_finds("get_approval", |t| s.get_approval(t, "apr-a1")).await;
    let of_action = |t| s.approval_of_action(t, "a1");
    only_its_tenant_finds("approval_of_action", of_action).await;
    only_its_tenant_finds("list_decisions", |t| s.list_decisions(t, "apr-a1")).await;
}

pub async fn a_foreign_tenants_escalation_id_is_not_found(h: &Harness) {
    let s = &h.store;
    let esc = escalation("t1", "esc-1", "agent", "input");
    s.create_escalation(esc, None).await.unwrap();
    only_its_tenant_finds("get_escalation", |t| s.get_escalation(t, "esc-1")).await;
}

pub async fn a_foreign_tenants_transaction_by_id_plan_and_action_is_not_found(h: &Harness) {
    let s = &h.store;
    admit_ok(s, linked("p1", "txn1", TransactionRole::Plan, None)).await;
    let by_id = |t| s.get_transaction(t, "txn1");
    only_its_tenant_finds("get_transaction", by_id).await;
    let by_plan = |t| s.transaction_by_plan(t, "plan-txn1");
    only_its_tenant_finds("transaction_by_plan", by_plan).await;
    let of_action = |t| s.transaction_of_action(t, "p1");
    only_its_tenant_finds("transaction_of_action", of_action).await;
}

pub async fn a_foreign_tenants_delivery_and_subscriptions_are_not_found(h: &Harness) {
    let s = &h.store;
    admit_ok(s, subscribed("cb1", false, 3)).await;
    let sub = subscription("cb1", "sub-1", false);
    s.add_action_subscription(sub, 2).await.unwrap();
    let running = transition("cb1", &[ActionState::Accepted], ActionState::Running);
    s.transition_action(running).await.unwrap();
    // One delivery for the admission's callback, one for the subscription added later.
    let queued = deliveries(s, Some("cb1")).await;
    assert_eq!(queued.len(), 2);
    for d in &queued {
        let id = d.delivery_id.as_str();
        only_its_tenant_finds("get_delivery", |t| s.get_delivery(t, id)).await;
    }
    let of_action = |t: &'static str| async move {
        let q = DeliveryQuery {
            tenant: t.into(),
            action_id: Some("cb1".into()),
            ..Default::default()
        };
        s.list_deliveries(&q, None, Limit::max()).await
    };
    only_its_tenant_finds("list_deliveries of an action", of_action).await;
    let subs = |t| s.list_action_subscriptions(t, "cb1");
    only_its_tenant_finds("list_action_subscriptions", subs).await;
}

pub async fn a_foreign_tenants_conversation_and_its_messages_are_not_found(h: &Harness) {
    let s = &h.store;
    let c = conversation("t1", "conv_1", "svc:connector", None);
    s.record_channel_message(message(c, "d1", "hello"))
        .await
        .unwrap();
    let get = |t: &'static str| async move {
        let q = ConversationQuery {
            tenant: t.into(),
            ..Default::default()
        };
        s.get_conversation(&q, "conv_1").await
    };
    only_its_tenant_finds("get_conversation", get).await;
    let messages = |t| s.list_channel_messages(t, "conv_1", None, Limit::max());
    only_its_tenant_finds("list_channel_messages", messages).await;
}

pub async fn a_foreign_tenants_settlement_batch_is_not_found(h: &Harness) {
    let s = &h.store;
    admit_ok(s, admission("set-a1", None)).await;
    let done = transition("set-a1", &[ActionState::Accepted], ActionState::Completed);
    s.transition_action(done).await.unwrap();
    let batch = super::settlement::batch("b1", &["set-a1"]);
    s.record_settlement(batch).await.unwrap();
    only_its_tenant_finds("get_settlement", |t| s.get_settlement(t, "b1")).await;
}

pub async fn a_foreign_tenants_audit_events_are_not_found(h: &Harness) {
    let s = &h.store;
    let mut audit = audit_of("t1", "alice", "action.cancel_requested");
    audit.action_id = Some("a1".into());
    audit.session_id = Some("s1".into());
    s.append_audit(audit).await.unwrap();
    // By the action, by the session, and the tenant's whole log.
    let filters: [fn(&mut AuditQuery); 3] = [
        |q| q.action_id = Some("a1".into()),
        |q| q.session_id = Some("s1".into()),
        |_| {},
    ];
    for filter in filters {
        let list = |t: &'static str| async move {
            let mut q = AuditQuery {
                tenant: t.into(),
                ..Default::default()
            };
            filter(&mut q);
            s.list_audit(&q, None, Limit::max()).await
        };
        only_its_tenant_finds("list_audit", list).await;
    }
}

pub async fn a_foreign_tenants_record_id_is_not_found(h: &Harness) {
    let s = &h.store;
    let record = AppRecord {
        collection: "bookings".into(),
        record_id: "b1".into(),
        tenant: "t1".into(),
        created_at_ms: T0,
        body: json!({ "seat": "b1" }),
    };
    s.insert_record(record).await.unwrap();
    let get = |t| s.get_record("bookings", t, "b1");
    only_its_tenant_finds("get_record", get).await;
}
