//! Sessions report their activity with the states of spec 10.3: `queued`, `processing`,
//! `streaming` and `waiting_for_human` while their actions are, `active` once none is live.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::{caller, envelope, id};

async fn status(h: &support::Harness, who: &aip_runtime::Caller, session: &str) -> Value {
    let (code, reply) = h
        .send(
            who,
            &envelope(
                "aip.session.v1.session_request",
                json!({ "session_request": { "session_id": session } }),
            ),
        )
        .await;
    assert_eq!(code, 200, "{reply}");
    reply["body"]["session_view"]["status"].clone()
}

#[tokio::test]
async fn a_session_reports_processing_waiting_for_human_and_active_as_its_actions_run_wait_and_end()
{
    let h = support::Harness::start().await;
    let alice = caller("alice", "t", &["invoke:*"]);
    let session = h.handshake(&alice).await;
    // A first action activates the session; it is active with nothing live.
    let (code, reply) = h
        .act(&alice, Some(&session), json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": {} }))
        .await;
    assert_eq!(code, 200, "{reply}");
    assert_eq!(status(&h, &alice, &session).await, "active");
    // A running action: processing.
    let stuck = id("act_");
    let (code, reply) = h
        .act(
            &alice,
            Some(&session),
            json!({ "id": stuck, "capability_id": "cap:t:stubborn", "mode": "async", "input": {} }),
        )
        .await;
    assert_eq!(code, 202, "{reply}");
    h.reach(&alice, &stuck, "running").await;
    assert_eq!(status(&h, &alice, &session).await, "processing");
    // One waiting for an approver as well: waiting_for_human comes first.
    let gated = id("act_");
    let (code, reply) = h
        .act(
            &alice,
            Some(&session),
            json!({ "id": gated, "capability_id": "cap:demo:transfer", "mode": "async",
                                             "input": { "amount_minor": 500, "to": "acct:bob" } }),
        )
        .await;
    assert_eq!(code, 202, "{reply}");
    assert_eq!(status(&h, &alice, &session).await, "waiting_for_human");
    // Both end: active again, still taking actions.
    let (code, reply) = h
        .send(
            &alice,
            &envelope(
                "aip.core.v1.cancel",
                json!({ "cancel": { "target": { "action": gated } } }),
            ),
        )
        .await;
    assert_eq!(code, 202, "{reply}");
    h.release.notify_one();
    h.terminal(&alice, &stuck).await;
    h.terminal(&alice, &gated).await;
    assert_eq!(status(&h, &alice, &session).await, "active");
}
