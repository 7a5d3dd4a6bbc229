//! The five idempotency key scopes of spec 9.5, each inside the caller's tenant (22.6); the
//! `external_account` scope comes from the trusted binding of the caller and fails closed without one.
#![allow(clippy::unwrap_used)]

mod support;

use aip_runtime::Caller;
use aip_runtime::caller::ExternalAccount;
use serde_json::json;
use support::{Harness, caller, id};

/// Submits `cap:t:scope:<scope>` with idempotency `key`; returns the HTTP status and the error code.
async fn submit(h: &Harness, who: &Caller, capability: &str, key: &str) -> (u16, String) {
    let (status, reply) = h
        .act(
            who,
            None,
            json!({ "id": id("act_"), "capability_id": capability, "input": { "n": 1 }, "idempotency_key": key }),
        )
        .await;
    let code = reply["body"]["error"]["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (status, code)
}

const CONFLICT: (u16, &str) = (409, "aip.idempotency.conflict");

fn is(outcome: (u16, String), expected: (u16, &str)) -> bool {
    outcome.0 == expected.0 && outcome.1 == expected.1
}

fn with_account(mut c: Caller, system: &str, account: &str) -> Caller {
    c.external_account = Some(ExternalAccount {
        system: system.into(),
        id: account.into(),
    });
    c
}

#[tokio::test]
async fn an_action_scoped_key_never_collides_across_actions() {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let cap = "cap:t:scope:action";
    assert!(is(submit(&h, &alice, cap, "k").await, (200, "")));
    assert!(is(submit(&h, &alice, cap, "k").await, (200, "")));
}

#[tokio::test]
async fn a_capability_scoped_key_collides_across_principals_of_a_tenant_but_not_across_capabilities_or_tenants()
 {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let bob = caller("svc:bob", "t1", &["invoke:*"]);
    let other = caller("svc:alice", "t2", &["invoke:*"]);
    let cap = "cap:t:scope:capability";
    assert!(is(submit(&h, &alice, cap, "k").await, (200, "")));
    assert!(is(submit(&h, &bob, cap, "k").await, CONFLICT));
    assert!(is(
        submit(&h, &bob, "cap:t:scope:capability:b", "k").await,
        (200, "")
    ));
    assert!(is(submit(&h, &other, cap, "k").await, (200, "")));
}

#[tokio::test]
async fn a_principal_scoped_key_collides_only_for_the_same_principal() {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let bob = caller("svc:bob", "t1", &["invoke:*"]);
    let cap = "cap:t:scope:principal";
    assert!(is(submit(&h, &alice, cap, "k").await, (200, "")));
    assert!(is(submit(&h, &alice, cap, "k").await, CONFLICT));
    assert!(is(submit(&h, &bob, cap, "k").await, (200, "")));
}

#[tokio::test]
async fn a_tenant_scoped_key_collides_across_principals_of_one_tenant_only() {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let bob = caller("svc:bob", "t1", &["invoke:*"]);
    let other = caller("svc:carol", "t2", &["invoke:*"]);
    let cap = "cap:t:scope:tenant";
    assert!(is(submit(&h, &alice, cap, "k").await, (200, "")));
    assert!(is(submit(&h, &bob, cap, "k").await, CONFLICT));
    assert!(is(submit(&h, &other, cap, "k").await, (200, "")));
}

#[tokio::test]
async fn an_external_account_scoped_key_follows_the_trusted_account_binding_and_fails_closed_without_one()
 {
    let h = Harness::start().await;
    let cap = "cap:t:scope:external_account";
    let alice = with_account(caller("svc:alice", "t1", &["invoke:*"]), "stripe", "acct_1");
    let bob = with_account(caller("svc:bob", "t1", &["invoke:*"]), "stripe", "acct_1");
    let carol = with_account(caller("svc:carol", "t1", &["invoke:*"]), "stripe", "acct_2");
    let elsewhere = with_account(caller("svc:alice", "t2", &["invoke:*"]), "stripe", "acct_1");
    let unbound = caller("svc:dave", "t1", &["invoke:*"]);
    assert!(is(submit(&h, &alice, cap, "k").await, (200, "")));
    assert!(
        is(submit(&h, &bob, cap, "k").await, CONFLICT),
        "two principals acting for one account share its keys"
    );
    assert!(is(submit(&h, &carol, cap, "k").await, (200, "")));
    assert!(
        is(submit(&h, &elsewhere, cap, "k").await, (200, "")),
        "an account binding never reaches across tenants"
    );
    assert!(
        is(
            submit(&h, &unbound, cap, "k").await,
            (403, "aip.idempotency.external_account_unbound")
        ),
        "no binding: refused, never widened to the tenant"
    );
    // The same caller without a key is admitted: the binding is needed only to scope a key.
    let (status, _) = h
        .act(
            &unbound,
            None,
            json!({ "id": id("act_"), "capability_id": cap, "input": {} }),
        )
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn the_external_account_is_frozen_with_the_admitted_request_for_the_trusted_context() {
    let h = Harness::start().await;
    let alice = with_account(caller("svc:alice", "t1", &["invoke:*"]), "stripe", "acct_1");
    let action_id = id("act_");
    let (status, _) = h
        .act(
            &alice,
            None,
            json!({ "id": action_id, "capability_id": "cap:demo:echo", "input": {} }),
        )
        .await;
    assert_eq!(status, 200);
    let record = h
        .runtime
        .store()
        .get_action("t1", &action_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        record.request["caller"]["external_account"],
        json!({ "system": "stripe", "id": "acct_1" })
    );
}
