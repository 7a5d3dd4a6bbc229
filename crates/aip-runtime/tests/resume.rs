//! Resume tokens (spec 10.5): a token presented on another session than its own is refused without
//! being consumed, so the rightful session can still resume with it.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::json;
use support::{Harness, caller, envelope};

#[tokio::test]
async fn a_resume_token_presented_on_the_wrong_session_is_refused_and_not_consumed() {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let (first, first_token) = handshake(&h, &alice).await;
    let (second, _) = handshake(&h, &alice).await;
    let resume = |session: &str, token: &str| {
        envelope(
            "aip.session.v1.session_resume_request",
            json!({ "session_resume_request": { "session_id": session, "resume_token": token } }),
        )
    };
    let (status, reply) = h.send(&alice, &resume(&second, &first_token)).await;
    assert_eq!(status, 401, "{reply}");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.session.resume_token_invalid"
    );
    let (status, reply) = h.send(&alice, &resume(&first, &first_token)).await;
    assert_eq!(
        status, 200,
        "the token still works on its own session: {reply}"
    );
    assert_eq!(
        reply["body"]["session_resume"]["session"]["session_id"],
        json!(first)
    );
    // Single use: the consumed token is gone.
    let (status, _) = h.send(&alice, &resume(&first, &first_token)).await;
    assert_eq!(status, 401);
}

/// A new session of `who`: its id and resume token.
async fn handshake(h: &Harness, who: &aip_runtime::Caller) -> (String, String) {
    let hello = envelope(
        "aip.core.v1.handshake",
        json!({ "handshake": { "client": { "id": who.id, "kind": "service" }, "purpose": "resume", "profiles": [] } }),
    );
    let (status, reply) = h.send(who, &hello).await;
    assert_eq!(status, 200, "{reply}");
    let response = &reply["body"]["handshake_response"];
    (
        response["session_id"].as_str().unwrap().to_owned(),
        response["resume_token"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn an_expired_session_is_neither_resumed_nor_given_actions() {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // A session whose lifetime ended a minute ago, with a token that is itself still valid.
    let session_id = support::id("sess_");
    h.runtime
        .store()
        .create_session(
            aip_store::NewSession {
                session_id: session_id.clone(),
                tenant: "t1".into(),
                principal: alice.id.clone(),
                peer: None,
                state: aip_store::SessionState::Active,
                created_at_ms: now - 120_000,
                expires_at_ms: Some(now - 60_000),
                data: json!({ "principal_kind": "service" }),
            },
            Vec::new(),
        )
        .await
        .unwrap();
    h.runtime
        .store()
        .issue_resume_token(&session_id, "rt_still_valid", now + 60_000, now)
        .await
        .unwrap();
    let resume = envelope(
        "aip.session.v1.session_resume_request",
        json!({ "session_resume_request": { "session_id": session_id, "resume_token": "rt_still_valid" } }),
    );
    let (status, reply) = h.send(&alice, &resume).await;
    assert_eq!(
        (status, reply["body"]["error"]["error"]["code"].as_str()),
        (400, Some("aip.session.expired")),
        "{reply}"
    );
    let act = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": support::id("act_"), "capability_id": "cap:demo:echo", "input": {} } }),
    );
    let mut act = act;
    act["session_id"] = json!(session_id);
    let (status, reply) = h.send(&alice, &act).await;
    assert_eq!(
        reply["body"]["error"]["error"]["code"], "aip.session.expired",
        "{status}: {reply}"
    );
}
