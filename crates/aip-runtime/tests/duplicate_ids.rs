//! A duplicate action id (spec 16.3, 22.6): an id another tenant (or another principal) already used is
//! refused exactly like an id the caller used itself, by the same admission path, and the refusal
//! writes nothing and reveals nothing about the other action.
#![allow(clippy::unwrap_used)]

mod support;

use aip_store::{EventQuery, Limit};
use serde_json::{Value, json};
use support::{Harness, caller, id};

/// The parts of a reply that could tell one refusal from another (ids and clocks removed).
fn shape(reply: &Value) -> Value {
    json!({
        "message_type": reply["message_type"],
        "error": reply["body"]["error"]["error"],
        "extensions": reply["extensions"],
    })
}

#[tokio::test]
async fn an_id_used_by_another_tenant_is_refused_exactly_like_the_callers_own_duplicate_and_writes_nothing()
 {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let mallory = caller("svc:mallory", "t2", &["invoke:*"]);
    let theirs = id("act_");
    let (status, _) = h
        .act(
            &alice,
            None,
            json!({ "id": theirs, "capability_id": "cap:demo:echo", "input": { "secret": 1 } }),
        )
        .await;
    assert_eq!(status, 200);
    let before = h
        .runtime
        .store()
        .get_action(&theirs)
        .await
        .unwrap()
        .unwrap();

    // Mallory's own duplicate: the reference answer.
    let mine = id("act_");
    let (status, _) = h
        .act(
            &mallory,
            None,
            json!({ "id": mine, "capability_id": "cap:t:scope:tenant", "input": {} }),
        )
        .await;
    assert_eq!(status, 200);
    let (own_status, own) = h
        .act(&mallory, None, json!({ "id": mine, "capability_id": "cap:t:scope:tenant", "input": {}, "idempotency_key": "k-own" }))
        .await;
    let (foreign_status, foreign) = h
        .act(&mallory, None, json!({ "id": theirs, "capability_id": "cap:t:scope:tenant", "input": {}, "idempotency_key": "k-foreign" }))
        .await;
    assert_eq!(own_status, 409, "{own}");
    assert_eq!(foreign_status, own_status);
    assert_eq!(
        shape(&foreign),
        shape(&own),
        "a foreign id and an own duplicate must be indistinguishable"
    );
    assert_eq!(
        foreign["body"]["error"]["error"]["code"],
        "aip.action.duplicate_id"
    );
    assert!(
        !foreign.to_string().contains("t1") && !foreign.to_string().contains("svc:alice"),
        "the refusal names neither the owner nor its tenant: {foreign}"
    );

    // Nothing was written for the refused admission: no events for mallory beyond its own action, the
    // idempotency key was not reserved (the transaction rolled back), the other action is unchanged.
    let events = h
        .runtime
        .store()
        .list_events(
            &EventQuery {
                tenant: "t2".into(),
                principal: None,
                action_id: None,
                session_id: None,
            },
            None,
            Limit::max(),
        )
        .await
        .unwrap()
        .items;
    assert!(
        events
            .iter()
            .all(|e| e.action_id.as_deref() == Some(mine.as_str())),
        "{events:?}"
    );
    let (status, reply) = h
        .act(&mallory, None, json!({ "id": id("act_"), "capability_id": "cap:t:scope:tenant", "input": {}, "idempotency_key": "k-foreign" }))
        .await;
    assert_eq!(
        status, 200,
        "the refused admission held no reservation: {reply}"
    );
    let after = h
        .runtime
        .store()
        .get_action(&theirs)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.version, before.version);
    assert_eq!(after.tenant, "t1");
    assert!(
        h.runtime
            .action_status(&mallory, &theirs, false, false, None)
            .await
            .is_err(),
        "and the other tenant's action stays invisible"
    );
}
