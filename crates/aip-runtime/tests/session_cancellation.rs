//! Session-wide cancellation (spec 11.8, `Cancel.target = {"session": id}`) and the session's
//! `active_action_count` (spec 10.4), through the runtime's binding-independent entry point.
#![allow(clippy::unwrap_used)]

mod support;

use aip_store::EventQuery;
use serde_json::json;
use support::{Harness, caller, envelope, id};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_a_session_requests_cancellation_of_each_open_cancellable_action_and_reports_it()
{
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let bob = caller("svc:bob", "t1", &["invoke:*"]);
    let session = h.handshake(&alice).await;

    let running = id("act_");
    let (status, reply) = h
        .act(&alice, Some(&session), json!({ "id": running, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 60000 } }))
        .await;
    assert_eq!(status, 202, "{reply}");
    h.reach(&alice, &running, "running").await;
    let stubborn = id("act_");
    let (status, _) = h
        .act(&alice, Some(&session), json!({ "id": stubborn, "capability_id": "cap:t:stubborn", "mode": "async", "input": {} }))
        .await;
    assert_eq!(status, 202);
    h.reach(&alice, &stubborn, "running").await;
    let done = id("act_");
    let (status, _) = h
        .act(
            &alice,
            Some(&session),
            json!({ "id": done, "capability_id": "cap:demo:echo", "input": {} }),
        )
        .await;
    assert_eq!(status, 200);
    let elsewhere = id("act_");
    let (status, _) = h
        .act(&alice, None, json!({ "id": elsewhere, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 60000 } }))
        .await;
    assert_eq!(status, 202);

    let view = h.runtime.session(&alice, &session).await.unwrap();
    assert_eq!(
        view.active_action_count, 2,
        "the running sleep and the stubborn action"
    );

    // Another principal of the tenant cannot see the session, so it cannot cancel it either.
    let cancel = envelope(
        "aip.core.v1.cancel",
        json!({ "cancel": { "target": { "session": session }, "reason": "done" } }),
    );
    let (status, reply) = h.send(&bob, &cancel).await;
    assert_eq!(status, 404, "{reply}");
    assert_eq!(h.state(&alice, &running).await, "running");

    let (status, reply) = h.send(&alice, &cancel).await;
    assert_eq!(status, 202, "{reply}");
    assert_eq!(reply["message_type"], "aip.lifecycle.v1.action_list");
    let listed = reply["body"]["action_list"]["actions"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{reply}");
    assert_eq!(listed[0]["action_id"], json!(running));
    let reported = listed[0]["state"].as_str().unwrap();
    assert!(
        reported == "cancelling" || reported == "cancelled",
        "a cancel request reports the recorded intent, never another state: {reported}"
    );
    let summary = &reply["extensions"]["cancel"];
    assert_eq!(summary["target"], json!({ "session": session }));
    assert_eq!(summary["requested"], json!([running]));
    assert_eq!(summary["not_cancellable"], json!([stubborn]));

    assert_eq!(h.terminal(&alice, &running).await, "cancelled");
    assert_eq!(
        h.state(&alice, &stubborn).await,
        "running",
        "an action that cannot be cancelled runs on"
    );
    assert_eq!(
        h.state(&alice, &elsewhere).await,
        "running",
        "actions outside the session are untouched"
    );
    let view = h.runtime.session(&alice, &session).await.unwrap();
    assert_eq!(view.active_action_count, 1);
    assert_eq!(
        serde_json::to_value(view.status).unwrap(),
        "processing",
        "cancelling a session's actions does not close it: it is processing the one running on"
    );

    // The intent is durable: one cancel_requested event per requested action, one for the session.
    let events = h
        .runtime
        .store()
        .list_events(
            &EventQuery {
                tenant: "t1".into(),
                principal: Some("svc:alice".into()),
                action_id: None,
                session_id: Some(session.clone()),
                kinds: Vec::new(),
            },
            None,
            aip_store::Limit::max(),
        )
        .await
        .unwrap()
        .items;
    let requested: Vec<_> = events
        .iter()
        .filter(|e| e.kind == "aip.action.cancel_requested")
        .map(|e| e.action_id.clone().unwrap())
        .collect();
    assert_eq!(requested, std::slice::from_ref(&running));
    assert!(
        events
            .iter()
            .any(|e| e.kind == "aip.session.cancel_requested")
    );

    // Cancelling again is harmless: nothing open and cancellable is left.
    let (status, reply) = h.send(&alice, &cancel).await;
    assert_eq!(status, 202, "{reply}");
    assert_eq!(reply["extensions"]["cancel"]["requested"], json!([]));

    h.release.notify_waiters();
    assert_eq!(h.terminal(&alice, &stubborn).await, "completed");
    assert_eq!(
        h.runtime
            .session(&alice, &session)
            .await
            .unwrap()
            .active_action_count,
        0
    );
    h.runtime.cancel(&alice, &elsewhere, None).await.unwrap();
    assert_eq!(h.terminal(&alice, &elsewhere).await, "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queued_action_is_cancelled_by_the_runtime_as_owner_when_its_session_is_cancelled() {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let session = h.handshake(&alice).await;
    // Occupy the four workers so the fifth action stays queued.
    let mut blockers = Vec::new();
    for _ in 0..4 {
        let a = id("act_");
        let (status, _) = h
            .act(
                &alice,
                None,
                json!({ "id": a, "capability_id": "cap:t:stubborn", "mode": "async", "input": {} }),
            )
            .await;
        assert_eq!(status, 202);
        h.reach(&alice, &a, "running").await;
        blockers.push(a);
    }
    let queued = id("act_");
    let (status, _) = h
        .act(&alice, Some(&session), json!({ "id": queued, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 60000 } }))
        .await;
    assert_eq!(status, 202);
    assert_eq!(h.state(&alice, &queued).await, "queued");
    let outcome = h
        .runtime
        .cancel_session(&alice, &session, Some("stop"))
        .await
        .unwrap();
    assert_eq!(outcome.requested.len(), 1);
    assert_eq!(
        serde_json::to_value(outcome.requested[0].state).unwrap(),
        "cancelling",
        "no worker has confirmed yet: the reply must not say cancelled"
    );
    h.release.notify_waiters();
    assert_eq!(h.terminal(&alice, &queued).await, "cancelled");
    for a in blockers {
        assert_eq!(h.terminal(&alice, &a).await, "completed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tenant_wide_reader_sees_the_active_count_but_only_the_owner_or_an_all_scope_caller_may_cancel()
 {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let ops = caller("svc:ops", "t1", &["read:tenant"]);
    let admin = caller("admin", "t1", &["*"]);
    let mallory = caller("svc:alice", "t2", &["*"]);
    let session = h.handshake(&alice).await;
    let a = id("act_");
    let (status, _) = h
        .act(&alice, Some(&session), json!({ "id": a, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 60000 } }))
        .await;
    assert_eq!(status, 202);
    h.reach(&alice, &a, "running").await;
    assert!(
        h.runtime.session(&mallory, &session).await.is_err(),
        "same principal id in another tenant is another principal"
    );
    assert!(
        h.runtime
            .cancel_session(&mallory, &session, None)
            .await
            .is_err()
    );
    let listed = h
        .runtime
        .read_sessions(&ops, &aip_core::SessionListRequest::default())
        .await
        .unwrap();
    assert_eq!(listed.sessions.len(), 1);
    assert_eq!(listed.sessions[0].active_action_count, 1);
    let denied = h
        .runtime
        .cancel_session(&ops, &session, None)
        .await
        .unwrap_err();
    assert_eq!(denied.code(), "aip.policy.scope_denied");
    assert_eq!(denied.category(), aip_core::ErrorCategory::Policy);
    assert_eq!(
        h.state(&alice, &a).await,
        "running",
        "reading the whole tenant does not grant cancelling"
    );
    let outcome = h
        .runtime
        .cancel_session(&admin, &session, None)
        .await
        .unwrap();
    assert_eq!(outcome.requested.len(), 1);
    assert_eq!(h.terminal(&alice, &a).await, "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_cancel_answers_at_most_the_list_bound_and_a_cursor_to_the_rest_while_cancelling_every_action()
 {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let session = h.handshake(&alice).await;
    // One more open action than a list page holds (spec 16.4: at most 1000 records a response).
    let ids: Vec<String> = (0..1001).map(|_| id("act_")).collect();
    for chunk in ids.chunks(50) {
        let admitted = futures_util::future::join_all(chunk.iter().map(|a| {
            h.act(&alice, Some(&session), json!({ "id": a, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 60000 } }))
        }))
        .await;
        assert!(admitted.iter().all(|(status, _)| *status == 202));
    }
    let cancel = envelope(
        "aip.core.v1.cancel",
        json!({ "cancel": { "target": { "session": session } } }),
    );
    let (status, reply) = h.send(&alice, &cancel).await;
    assert_eq!(status, 202);
    let list = &reply["body"]["action_list"];
    assert_eq!(list["actions"].as_array().unwrap().len(), 1000);
    let summary = &reply["extensions"]["cancel"];
    assert_eq!(summary["requested"].as_array().unwrap().len(), 1000);
    assert_eq!(summary["requested_total"], 1001);
    assert_eq!(summary["not_cancellable_total"], 0);
    // The cursor continues the session's action list, where the last one is read.
    let cursor = list["cursor"].as_str().expect("a cursor to the rest");
    let (status, rest) = h
        .send(
            &alice,
            &envelope(
                "aip.lifecycle.v1.action_list_request",
                json!({ "action_list_request": { "session_id": session, "cursor": cursor } }),
            ),
        )
        .await;
    assert_eq!(status, 200, "{rest}");
    let rest = rest["body"]["action_list"]["actions"].as_array().unwrap();
    assert_eq!(rest.len(), 1);
    let mut answered: Vec<String> = list["actions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest)
        .map(|a| a["action_id"].as_str().unwrap().to_owned())
        .collect();
    answered.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(answered, expected);
    // Every one of them was cancelled, the one past the first page too.
    let last = rest[0]["action_id"].as_str().unwrap();
    assert_eq!(h.terminal(&alice, last).await, "cancelled");
    for a in ids.iter().step_by(100) {
        assert_eq!(h.terminal(&alice, a).await, "cancelled");
    }
    // A session with fewer actions than a page gets no cursor.
    let small = h.handshake(&alice).await;
    let (_, reply) = h
        .send(
            &alice,
            &envelope(
                "aip.core.v1.cancel",
                json!({ "cancel": { "target": { "session": small } } }),
            ),
        )
        .await;
    assert!(reply["body"]["action_list"]["cursor"].is_null(), "{reply}");
}
