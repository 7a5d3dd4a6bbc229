//! Audit export (spec 16.7) through the runtime's entry point: dedicated authority, the exported
//! events' receipt chains, and the export itself recorded as an audit event.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::{code, envelope, send};

fn audit(body: Value) -> Value {
    envelope(
        "aip.audit.v1.audit_query_request",
        json!({ "audit_query_request": body }),
    )
}

#[tokio::test]
async fn an_export_needs_its_own_scope_carries_the_receipts_and_is_itself_audited() {
    let h = support::Harness::start().await;
    let runtime = &h.runtime;
    let owner = support::caller("svc:owner", "t", &["invoke:*"]);
    // An action cancelled while queued leaves audit records about it.
    let action_id = support::id("act_");
    let (status, reply) = send(
        runtime,
        &owner,
        &envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": action_id, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 60000 } } }),
        ),
    )
    .await;
    assert_eq!(status, 202, "{reply}");
    let (status, reply) = send(
        runtime,
        &owner,
        &envelope(
            "aip.core.v1.cancel",
            json!({ "cancel": { "target": { "action": action_id }, "reason": "test" } }),
        ),
    )
    .await;
    assert!(status < 300, "{reply}");

    // Browsing is not exporting: audit:read alone cannot export.
    let browser = support::caller("svc:auditor", "t", &["audit:read"]);
    let (status, reply) = send(runtime, &browser, &audit(json!({ "export": true }))).await;
    assert_eq!(
        (status, code(&reply)),
        (403, "aip.policy.scope_denied"),
        "{reply}"
    );
    let (status, browsed) = send(runtime, &browser, &audit(json!({}))).await;
    assert_eq!(status, 200, "{browsed}");
    let browsed_events = browsed["body"]["audit_query_result"]["events"]
        .as_array()
        .unwrap()
        .len();
    assert!(browsed_events >= 1, "{browsed}");
    // Without read:tenant the browser does not get the owner's chains.
    let (_, with_receipts) = send(
        runtime,
        &browser,
        &audit(json!({ "include_receipts": true })),
    )
    .await;
    assert!(
        with_receipts["body"]["audit_query_result"]["receipt_chains"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{with_receipts}"
    );

    // The exporter gets the events with the receipt chains of their actions.
    let exporter = support::caller("svc:exporter", "t", &["audit:export"]);
    let (status, exported) = send(
        runtime,
        &exporter,
        &audit(json!({ "export": true, "action_id": action_id })),
    )
    .await;
    assert_eq!(status, 200, "{exported}");
    let result = &exported["body"]["audit_query_result"];
    assert!(
        !result["events"].as_array().unwrap().is_empty(),
        "{exported}"
    );
    let chains = result["receipt_chains"].as_array().unwrap();
    assert_eq!(chains.len(), 1, "{exported}");
    assert_eq!(chains[0]["chain_id"], action_id.as_str());
    aip_core::chain::verify_chain_value(&chains[0], aip_core::chain::HashForm::Omit).unwrap();
    // Another tenant's exporter exports nothing of this tenant.
    let foreign = support::caller("svc:exporter", "u", &["audit:export"]);
    let (_, other) = send(runtime, &foreign, &audit(json!({ "export": true }))).await;
    assert!(
        other["body"]["audit_query_result"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["action"] == "audit.exported"),
        "{other}"
    );

    // The export is on the record.
    let (_, after) = send(
        runtime,
        &browser,
        &audit(json!({ "principal_id": "svc:exporter" })),
    )
    .await;
    let labels: Vec<&str> = after["body"]["audit_query_result"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert!(labels.contains(&"audit.exported"), "{after}");
}

/// The tenant's audit labels, oldest first, as an `audit:read` reader browses them.
async fn labels(h: &support::Harness, tenant: &str) -> Vec<(String, String)> {
    let auditor = support::caller("svc:auditor", tenant, &["audit:read"]);
    let (status, reply) = send(&h.runtime, &auditor, &audit(json!({ "limit": 1000 }))).await;
    assert_eq!(status, 200, "{reply}");
    reply["body"]["audit_query_result"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["data"]["code"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_scripted_session_of_actions_denials_and_an_export_leaves_exactly_its_audit_events() {
    let h = support::Harness::start().await;
    let runtime = &h.runtime;
    let tenant = "t-audit";
    let owner = support::caller(
        "svc:owner",
        tenant,
        &["invoke:cap:demo:echo", "invoke:cap:demo:sleep"],
    );
    // A session, an admitted action, an action outside the caller's scopes.
    let session = h.handshake(&owner).await;
    let (status, reply) = h
        .act(
            &owner,
            Some(&session),
            json!({ "id": support::id("act_"), "capability_id": "cap:demo:echo", "input": {} }),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = h
        .act(&owner, None, json!({ "id": support::id("act_"), "capability_id": "cap:demo:book", "idempotency_key": support::id("k"),
            "input": { "name": "Ada", "party_size": 2, "time": "19:00" } }))
        .await;
    // Not invokable by this caller: answered as unknown (its existence is not revealed), audited.
    assert_eq!(
        (status, code(&reply)),
        (400, "aip.discovery.capability_not_found"),
        "{reply}"
    );
    // A queued action, then its cancellation.
    let action_id = support::id("act_");
    let (status, reply) = h
        .act(&owner, None, json!({ "id": action_id, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 60000 } }))
        .await;
    assert_eq!(status, 202, "{reply}");
    let (status, reply) = send(
        runtime,
        &owner,
        &envelope(
            "aip.core.v1.cancel",
            json!({ "cancel": { "target": { "action": action_id }, "reason": "test" } }),
        ),
    )
    .await;
    assert!(status < 300, "{reply}");
    // Another tenant named in an identity context; an envelope outside the skew window; an export
    // without its scope.
    let (status, reply) = h
        .act(
            &owner,
            None,
            json!({ "id": support::id("act_"), "capability_id": "cap:demo:echo", "input": {},
            "identity": { "tenant": { "id": "someone-else" } } }),
        )
        .await;
    assert_eq!(status, 403, "{reply}");
    let mut stale = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": support::id("act_"), "capability_id": "cap:demo:echo", "input": {} } }),
    );
    let now = aip_core::Timestamp::now().unix_millis().unwrap();
    stale["sent_at"] = json!(aip_core::Timestamp::from_unix_millis(now - 3_600_000).unwrap());
    let (status, reply) = send(runtime, &owner, &stale).await;
    assert_eq!(
        (status, code(&reply)),
        (401, "aip.security.clock_skew"),
        "{reply}"
    );
    let browser = support::caller("svc:browser", tenant, &["audit:read"]);
    let (status, reply) = send(runtime, &browser, &audit(json!({ "export": true }))).await;
    assert_eq!(
        (status, code(&reply)),
        (403, "aip.policy.scope_denied"),
        "{reply}"
    );
    // Malformed input is not a security event: nothing is audited for it.
    let (status, _) = h
        .act(&owner, None, json!({ "id": support::id("act_"), "capability_id": "cap:demo:sleep", "input": { "ms": "soon" } }))
        .await;
    assert_eq!(status, 400);
    // The export, itself audited.
    let exporter = support::caller("svc:exporter", tenant, &["audit:export"]);
    let (status, reply) = send(runtime, &exporter, &audit(json!({ "export": true }))).await;
    assert_eq!(status, 200, "{reply}");

    let expected = [
        ("session.created", ""),
        ("action.admitted", ""),
        ("action.denied", "aip.discovery.capability_not_found"),
        ("action.admitted", ""),
        ("action.cancel_requested", ""),
        ("action.denied", "aip.policy.scope_denied"),
        ("envelope.rejected", "aip.security.clock_skew"),
        ("request.denied", "aip.policy.scope_denied"),
        ("audit.exported", ""),
    ];
    let got = labels(&h, tenant).await;
    let got: Vec<(&str, &str)> = got.iter().map(|(l, c)| (l.as_str(), c.as_str())).collect();
    assert_eq!(got, expected);
}

#[tokio::test]
async fn an_audit_event_names_its_actor_with_the_actors_own_kind() {
    let h = support::Harness::start().await;
    let mut human = support::caller("ann", "t", &["invoke:*"]);
    human.kind = aip_core::PrincipalKind::Human;
    let service = support::caller("svc:bot", "t", &["invoke:*"]);
    for caller in [&human, &service] {
        let (status, reply) = send(
            &h.runtime,
            caller,
            &envelope(
                "aip.core.v1.action",
                json!({ "action": { "id": support::id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": {} } }),
            ),
        )
        .await;
        assert_eq!(status, 200, "{reply}");
    }
    let auditor = support::caller("svc:auditor", "t", &["audit:read"]);
    let (status, reply) = send(&h.runtime, &auditor, &audit(json!({ "limit": 1000 }))).await;
    assert_eq!(status, 200, "{reply}");
    let events = reply["body"]["audit_query_result"]["events"]
        .as_array()
        .unwrap();
    let kind_of = |id: &str| {
        let e = events.iter().find(|e| e["actor"]["id"] == id).unwrap();
        // The kind is the actor's, not a copy in the event's data.
        assert!(e["data"].get("actor_kind").is_none(), "{e}");
        e["actor"]["kind"].as_str().unwrap().to_owned()
    };
    assert_eq!(kind_of("ann"), "human");
    assert_eq!(kind_of("svc:bot"), "service");
}
