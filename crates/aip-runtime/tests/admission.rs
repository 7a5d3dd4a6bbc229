//! Capability admission (spec 9.2): handlers must match their contracts, and the demo set is complete.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use aip_runtime::handler::demo::{BookHandler, EchoHandler, demo_capabilities};
use aip_runtime::registry::{AdmissionError, Registry};
use aip_runtime::{ActionHandler, Caller};
use serde_json::json;

async fn store() -> (tempfile::TempDir, Arc<dyn aip_store::Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = aip_store::SqliteStore::open(dir.path().join("t.sqlite"))
        .await
        .unwrap();
    (dir, Arc::new(store))
}

fn capability(contract: serde_json::Value) -> aip_core::Capability {
    serde_json::from_value(json!({ "id": "cap:t", "name": "t", "kind": "tool", "input_schema": { "type": "object" }, "contract": contract })).unwrap()
}

fn contract(side_effects: &[&str], streaming: bool, cancel: bool) -> serde_json::Value {
    json!({
        "side_effects": side_effects,
        "idempotency": { "requirement": "optional", "collision_behavior": "reject_conflict", "key_scope": "tenant" },
        "execution": { "supports_sync": true, "supports_async": false, "supports_streaming": streaming, "supports_cancel": cancel,
                       "supports_retry": false, "expected_completion": "sync", "retry_safety": "unknown" },
        "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
    })
}

/// A human holding every scope of tenant `t`.
fn admin() -> Caller {
    Caller {
        id: "admin".into(),
        kind: aip_core::PrincipalKind::Human,
        tenant: "t".into(),
        scopes: vec!["*".into()],
        issuer: "bearer".into(),
        external_account: None,
        roles: Vec::new(),
        groups: Vec::new(),
        approval_policies: Vec::new(),
    }
}

#[tokio::test]
async fn every_demo_capability_is_admitted_and_visible_to_the_admin() {
    let (_dir, store) = store().await;
    let registry = Registry::admit(demo_capabilities(store)).unwrap();
    let admin = admin();
    let agent = aip_runtime::registry::agent_principal("agent:x", "x");
    let manifest = registry.manifest(&agent, &admin, json!({}), None, (&[], &[]));
    let ids: Vec<&str> = manifest
        .capabilities
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "cap:demo:book",
            "cap:demo:bookings",
            "cap:demo:count",
            "cap:demo:echo",
            "cap:demo:ledger",
            "cap:demo:payment",
            "cap:demo:refund",
            "cap:demo:sleep",
            "cap:demo:transfer"
        ]
    );
    let nobody = Caller {
        scopes: Vec::new(),
        ..admin
    };
    assert!(
        registry
            .manifest(&agent, &nobody, json!({}), None, (&[], &[]))
            .capabilities
            .is_empty()
    );
}

#[tokio::test]
async fn a_mutating_handler_under_a_read_only_contract_is_refused() {
    let (_dir, store) = store().await;
    let handler: Arc<dyn ActionHandler> = Arc::new(BookHandler::new(store));
    let err = Registry::admit(vec![(
        capability(contract(&["read"], false, false)),
        handler,
    )])
    .unwrap_err();
    assert!(matches!(err, AdmissionError::Mismatch { .. }), "{err}");
}

#[test]
fn a_contract_promising_streaming_or_cancellation_the_handler_lacks_is_refused() {
    let echo: Arc<dyn ActionHandler> = Arc::new(EchoHandler);
    assert!(
        Registry::admit(vec![(
            capability(contract(&["read"], true, false)),
            Arc::clone(&echo)
        )])
        .is_err()
    );
    assert!(
        Registry::admit(vec![(
            capability(contract(&["read"], false, true)),
            Arc::clone(&echo)
        )])
        .is_err()
    );
    assert!(Registry::admit(vec![(capability(contract(&["read"], false, false)), echo)]).is_ok());
}

#[test]
fn two_capabilities_with_one_id_are_refused() {
    let echo: Arc<dyn ActionHandler> = Arc::new(EchoHandler);
    let c = capability(contract(&["read"], false, false));
    let err = Registry::admit(vec![(c.clone(), Arc::clone(&echo)), (c, echo)]).unwrap_err();
    assert!(matches!(err, AdmissionError::Duplicate(_)));
}

#[test]
fn capability_schemas_beyond_the_schema_bounds_are_refused_with_a_typed_code() {
    let echo: Arc<dyn ActionHandler> = Arc::new(EchoHandler);
    let mut deep = json!({ "type": "object" });
    for _ in 0..40 {
        deep = json!({ "type": "object", "properties": { "a": deep } });
    }
    let mut cap = capability(contract(&["read"], false, false));
    cap.input_schema = deep;
    let err = Registry::admit(vec![(cap, Arc::clone(&echo))]).unwrap_err();
    assert!(
        err.to_string().contains("aip.schema.too_deep"),
        "names the bound: {err}"
    );
    let mut cap = capability(contract(&["read"], false, false));
    cap.output_schema = Some(json!({ "type": "string", "description": "x".repeat(300_000) }));
    let err = Registry::admit(vec![(cap, echo)]).unwrap_err();
    assert!(err.to_string().contains("aip.schema.too_large"), "{err}");
}

#[test]
fn a_high_stakes_capability_without_an_approval_policy_is_refused_unless_the_operator_allows_it() {
    let echo: Arc<dyn ActionHandler> = Arc::new(EchoHandler);
    let mut contract = contract(&["read"], false, false);
    // Spec 22.5: money, identity, health and legal effects, and critical risk, need more than an
    // invoke scope.
    for effect in ["financial", "identity", "medical", "legal"] {
        contract["side_effects"] = json!(["read", effect]);
        let err = Registry::admit(vec![(capability(contract.clone()), Arc::clone(&echo))]);
        assert!(
            matches!(err, Err(AdmissionError::Ungoverned { .. })),
            "{effect}: {err:?}"
        );
    }
    contract["side_effects"] = json!(["read"]);
    let mut critical = capability(contract.clone());
    critical.risk = Some(aip_core::RiskLevel::Critical);
    let err = Registry::admit(vec![(critical.clone(), Arc::clone(&echo))]).unwrap_err();
    assert!(err.to_string().contains("critical"), "{err}");
    // The operator's explicit choice admits it, and the manifest says so.
    let mut entry: aip_runtime::registry::CapabilityEntry = (critical, Arc::clone(&echo)).into();
    entry.allow_without_approval = true;
    let registry = Registry::admit(vec![entry]).unwrap();
    let admin = admin();
    let agent = aip_runtime::registry::agent_principal("agent:x", "x");
    let manifest = registry.manifest(&agent, &admin, json!({}), None, (&[], &[]));
    assert_eq!(
        manifest.governance.unwrap()["allowed_without_approval"],
        json!(["cap:t"])
    );
    // An approval policy governs it without any such choice.
    contract["side_effects"] = json!(["write", "financial"]);
    contract["approval"] = json!({ "required": true, "approver_selector": { "type": "role", "name": "approver" },
        "rule": { "operator": "role", "name": "approver" }, "minimum_distinct_principals": 1 });
    assert!(Registry::admit(vec![(capability(contract), echo)]).is_ok());
}
