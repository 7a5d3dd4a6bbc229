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
    aip_core::receipts::verify_chain_value(&chains[0], aip_core::receipts::HashForm::Omit).unwrap();
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
