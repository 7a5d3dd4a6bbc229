//! Action ids are scoped by tenant (spec 22.6): an id another tenant already used neither conflicts
//! nor reveals anything. Each tenant's action of that id is its own, with its own result, events,
//! receipt chain and stream; an id reused inside one tenant is still a duplicate.
#![allow(clippy::unwrap_used)]

mod support;

use aip_store::{EventQuery, Limit};
use serde_json::json;
use support::{Harness, caller, id};

#[tokio::test]
async fn an_id_used_by_another_tenant_is_a_separate_action_that_neither_conflicts_nor_reveals_anything()
 {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let mallory = caller("svc:mallory", "t2", &["invoke:*"]);
    let shared = id("act_");
    let (status, first) = h
        .act(
            &alice,
            None,
            json!({ "id": shared, "capability_id": "cap:demo:echo", "input": { "secret": 1 } }),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    let before = h
        .runtime
        .store()
        .get_action("t1", &shared)
        .await
        .unwrap()
        .unwrap();

    // Mallory uses the same id in her tenant: a new action of her own, answered like any other.
    let (status, reply) = h
        .act(
            &mallory,
            None,
            json!({ "id": shared, "capability_id": "cap:demo:echo", "input": { "mine": 2 } }),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["extensions"]["ack"]["status"], "accepted",
        "admitted, not a re-send: {reply}"
    );
    assert_eq!(
        reply["body"]["action_result"]["output"],
        json!({ "mine": 2 })
    );
    assert!(
        !reply.to_string().contains("secret"),
        "nothing of the other tenant's action shows: {reply}"
    );

    // Each tenant reads its own action, result, events and receipts under that id.
    let hers = h
        .runtime
        .action_result(&mallory, &shared, None)
        .await
        .unwrap();
    assert_eq!(hers.output, Some(json!({ "mine": 2 })));
    let alices = h
        .runtime
        .action_result(&alice, &shared, None)
        .await
        .unwrap();
    assert_eq!(alices.output, Some(json!({ "secret": 1 })));
    let after = h
        .runtime
        .store()
        .get_action("t1", &shared)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.version, before.version, "alice's action is untouched");
    for (reader, tenant) in [(&alice, "t1"), (&mallory, "t2")] {
        let chain = h.runtime.receipt_chain(reader, &shared).await.unwrap();
        assert!(!chain.receipts.is_empty());
        let records = h
            .runtime
            .store()
            .list_receipts(tenant, &shared, Limit::max())
            .await
            .unwrap();
        assert!(records.iter().all(|r| r.tenant == tenant));
        let events = h
            .runtime
            .store()
            .list_events(
                &EventQuery {
                    tenant: tenant.into(),
                    action_id: Some(shared.clone()),
                    ..Default::default()
                },
                None,
                Limit::max(),
            )
            .await
            .unwrap()
            .items;
        assert!(!events.is_empty() && events.iter().all(|e| e.tenant == tenant));
    }

    // Inside one tenant, a different request under a used id is still refused.
    let (status, reply) = h
        .act(
            &mallory,
            None,
            json!({ "id": shared, "capability_id": "cap:demo:echo", "input": { "other": 3 } }),
        )
        .await;
    assert_eq!(status, 409, "{reply}");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.action.duplicate_id"
    );
}
