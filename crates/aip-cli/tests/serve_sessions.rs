//! End-to-end tests of handshake, sessions, heartbeats and signed envelopes against `aip serve`.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::{Value, json};
use support::{Server, envelope, id, token_file};

fn now() -> String {
    aip_core::Timestamp::now().as_str().to_owned()
}

#[tokio::test]
async fn a_handshake_opens_a_session_that_can_be_resumed_once_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let admin = server.admin();
    let hello = envelope(
        "aip.core.v1.handshake",
        json!({ "handshake": { "client": { "id": "admin", "kind": "human" }, "purpose": "e2e", "profiles": ["aip.native.http.v1"], "requested_capabilities": ["cap:demo:echo", "cap:nope"] } }),
    );
    let (status, reply) = admin.post("/aip/v1/messages", &hello).await;
    assert_eq!(status, 200, "{reply}");
    let response = &reply["body"]["handshake_response"];
    assert_eq!(response["status"], "accepted");
    assert_eq!(response["agreed_capabilities"], json!(["cap:demo:echo"]));
    let session_id = response["session_id"].as_str().unwrap().to_owned();
    let token = response["resume_token"].as_str().unwrap().to_owned();

    let mut action = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} } }),
    );
    action["session_id"] = json!(session_id);
    let (status, _) = admin.post("/aip/v1/actions", &action).await;
    assert_eq!(status, 200);

    let (status, view) = admin.get(&format!("/aip/v1/sessions/{session_id}")).await;
    assert_eq!(status, 200);
    assert_eq!(view["status"], "active");
    let (_, list) = admin.get("/aip/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);

    let path = format!("/aip/v1/sessions/{session_id}/resume");
    let (status, resumed) = admin.post(&path, &json!({ "resume_token": token })).await;
    assert_eq!(status, 200, "{resumed}");
    let kinds: Vec<&str> = resumed["replayed_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"aip.session.created") && kinds.contains(&"aip.action.completed"),
        "{kinds:?}"
    );
    let replacement = resumed["resume_token"].as_str().unwrap().to_owned();
    assert_ne!(replacement, token);
    let (status, again) = admin.post(&path, &json!({ "resume_token": token })).await;
    assert_eq!(status, 401, "a resume token is single-use: {again}");
    assert_eq!(again["error"]["code"], "aip.session.resume_token_invalid");

    let (status, closed) = admin
        .post(&format!("/aip/v1/sessions/{session_id}/close"), &json!({}))
        .await;
    assert_eq!(status, 200, "{closed}");
    assert_eq!(closed["status"], "settled");
    let (status, again) = admin
        .post(&format!("/aip/v1/sessions/{session_id}/close"), &json!({}))
        .await;
    assert_eq!(
        status, 200,
        "closing a settled session is idempotent: {again}"
    );
    let (status, rejected) = admin.post("/aip/v1/actions", &{
        let mut a = envelope("aip.core.v1.action", json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} } }));
        a["session_id"] = json!(session_id);
        a
    })
    .await;
    assert_eq!(status, 400, "{rejected}");
    assert_eq!(
        rejected["body"]["error"]["error"]["code"],
        "aip.session.invalid_state"
    );
}

#[tokio::test]
async fn a_handshake_claiming_another_principal_is_rejected_and_heartbeats_are_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let admin = server.admin();
    let spoof = envelope(
        "aip.core.v1.handshake",
        json!({ "handshake": { "client": { "id": "someone-else", "kind": "human" }, "purpose": "spoof", "profiles": [] } }),
    );
    let (status, reply) = admin.post("/aip/v1/messages", &spoof).await;
    assert_eq!(status, 200);
    assert_eq!(reply["body"]["handshake_response"]["status"], "rejected");
    assert!(
        reply["body"]["handshake_response"]
            .get("session_id")
            .is_none()
    );
    let beat = envelope(
        "aip.core.v1.heartbeat",
        json!({ "heartbeat": { "sequence": 7, "status": "alive" } }),
    );
    let (status, ack) = admin.post("/aip/v1/messages", &beat).await;
    assert_eq!(status, 200);
    assert_eq!(ack["message_type"], "aip.core.v1.heartbeat_ack");
    assert_eq!(ack["body"]["heartbeat_ack"]["sequence"], 7);
}

fn signed(mut env: Value, key: &ed25519_dalek::SigningKey) -> Value {
    env["security"] = json!({ "did": aip_core::signing::did_key(&key.verifying_key()) });
    aip_core::signing::sign_value(&mut env, key).unwrap();
    env
}

#[tokio::test]
async fn signed_envelopes_are_verified_skew_checked_and_replays_stay_rejected_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let key = aip_core::signing::generate_signing_key();
    let did = aip_core::signing::did_key(&key.verifying_key());
    let tok = token_file(dir.path(), "svc.token", "svc-token");
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "[[principals]]\nid = \"svc:signer\"\ntenant = \"t\"\nscopes = [\"invoke:*\"]\ntoken_file = \"{}\"\n\n\
             [security]\nrequire_signed_envelopes = true\nmax_clock_skew_ms = 60000\n\n\
             [[security.trusted_signers]]\ndid = \"{did}\"\nprincipal = \"svc:signer\"\n",
            tok.display()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(&data, Some(&config), &[]);
    let client = server.client("svc-token");
    let action = |sent_at: &str| {
        let mut e = envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": { "signed": true } } }),
        );
        e["sent_at"] = json!(sent_at);
        e
    };
    let unsigned = action(&now());
    let (status, reply) = client.post("/aip/v1/actions", &unsigned).await;
    assert_eq!(status, 401, "{reply}");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.security.signature_invalid"
    );

    let good = signed(action(&now()), &key);
    let (status, reply) = client.post("/aip/v1/actions", &good).await;
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = client.post("/aip/v1/actions", &good).await;
    assert_eq!(status, 401);
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.security.replay"
    );

    let mut tampered = signed(action(&now()), &key);
    tampered["body"]["action"]["input"]["signed"] = json!(false);
    let (status, reply) = client.post("/aip/v1/actions", &tampered).await;
    assert_eq!(status, 401);
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.security.signature_invalid"
    );

    let stale = signed(action("2020-01-01T00:00:00Z"), &key);
    let (status, reply) = client.post("/aip/v1/actions", &stale).await;
    assert_eq!(status, 401);
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.security.clock_skew"
    );

    let stranger = aip_core::signing::generate_signing_key();
    let (status, _) = client
        .post("/aip/v1/actions", &signed(action(&now()), &stranger))
        .await;
    assert_eq!(status, 401);

    server.kill();
    let server = Server::start(&data, Some(&config), &[]);
    let (status, reply) = server
        .client("svc-token")
        .post("/aip/v1/actions", &good)
        .await;
    assert_eq!(status, 401, "replay claims are persisted: {reply}");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.security.replay"
    );
}

#[tokio::test]
async fn cancelling_a_session_cancels_its_running_actions_and_reports_what_it_requested() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let admin = server.admin();
    let hello = envelope(
        "aip.core.v1.handshake",
        json!({ "handshake": { "client": { "id": "admin", "kind": "human" }, "purpose": "e2e cancel", "profiles": [] } }),
    );
    let (_, reply) = admin.post("/aip/v1/messages", &hello).await;
    let session_id = reply["body"]["handshake_response"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let in_session = |input: Value, mode: &str, action_id: &str| {
        let mut e = envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": action_id, "capability_id": "cap:demo:sleep", "mode": mode, "input": input } }),
        );
        e["session_id"] = json!(session_id);
        e
    };
    let first = id("act_");
    let second = id("act_");
    for a in [&first, &second] {
        let (status, reply) = admin
            .post(
                "/aip/v1/actions",
                &in_session(json!({ "ms": 60000 }), "async", a),
            )
            .await;
        assert_eq!(status, 202, "{reply}");
    }
    let (status, view) = admin.get(&format!("/aip/v1/sessions/{session_id}")).await;
    assert_eq!(status, 200);
    assert_eq!(view["active_action_count"], 2, "{view}");

    let cancel = envelope(
        "aip.core.v1.cancel",
        json!({ "cancel": { "target": { "session": session_id }, "reason": "user left" } }),
    );
    let (status, reply) = admin.post("/aip/v1/messages", &cancel).await;
    assert_eq!(status, 202, "{reply}");
    let mut requested: Vec<String> = reply["extensions"]["cancel"]["requested"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    requested.sort();
    let mut expected = vec![first.clone(), second.clone()];
    expected.sort();
    assert_eq!(requested, expected);
    for listed in reply["body"]["action_list"]["actions"].as_array().unwrap() {
        assert!(
            ["cancelling", "cancelled"].contains(&listed["state"].as_str().unwrap()),
            "{listed}"
        );
    }
    for a in [&first, &second] {
        let view = admin.wait_terminal(a).await;
        assert_eq!(view["state"], "cancelled", "{view}");
        assert_eq!(view["result"]["status"], "cancelled");
    }
    let (_, view) = admin.get(&format!("/aip/v1/sessions/{session_id}")).await;
    assert_eq!(view["active_action_count"], 0, "{view}");
    assert_eq!(view["status"], "active");

    // The plain route does the same; with nothing open it requests nothing.
    let (status, outcome) = admin
        .post(
            &format!("/aip/v1/sessions/{session_id}/cancel"),
            &json!({ "reason": "again" }),
        )
        .await;
    assert_eq!(status, 202, "{outcome}");
    assert_eq!(outcome["requested"], json!([]));
    assert_eq!(outcome["session_id"], json!(session_id));

    let (status, reply) = admin.get("/aip/v1/sessions?bogus=1").await;
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["error"]["code"], "aip.read.invalid_query");
}
