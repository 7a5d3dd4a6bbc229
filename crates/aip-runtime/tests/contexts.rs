//! Contexts the runtime does not implement are refused, never ignored (spec 22.1): an action carrying
//! one gets a typed error naming it, and nothing is written or dispatched. A dry run of
//! `cap:demo:book` must not book a table.
#![allow(clippy::unwrap_used)]

mod support;

use aip_runtime::handler::demo::BOOKINGS;
use serde_json::{Value, json};
use support::{Harness, caller, id};

fn principal(id: &str) -> Value {
    json!({ "id": id, "kind": "service" })
}

/// One action body per context this runtime refuses, with the member its error names.
fn refused_contexts() -> Vec<(&'static str, Value)> {
    let now = aip_core::Timestamp::now();
    vec![
        ("transaction", json!({ "mode": "dry_run" })),
        ("federation", json!({ "trust_domain": "other.example" })),
        (
            "approval",
            json!({ "approval_id": "apr_1", "decision": "approved", "approver": principal("svc:boss"), "decided_at": now }),
        ),
        ("compliance", json!({ "regimes": ["gdpr"] })),
        ("memory_context", json!({ "notes": "remember me" })),
        (
            "identity",
            json!({ "acted_on_behalf_of": principal("human:someone") }),
        ),
    ]
}

#[tokio::test]
async fn an_action_with_a_context_the_runtime_does_not_implement_is_refused_and_nothing_is_booked()
{
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    for (member, context) in refused_contexts() {
        let action_id = id("act_");
        let mut action = json!({
            "id": action_id, "capability_id": "cap:demo:book", "idempotency_key": id("key_"),
            "input": { "name": "Ada", "party_size": 2, "time": "19:00" },
        });
        action[member] = context;
        let (status, reply) = h.act(&alice, None, action).await;
        let error = &reply["body"]["error"]["error"];
        assert_eq!(status, 400, "{member}: {reply}");
        assert_eq!(
            error["code"], "aip.action.unsupported_context",
            "{member}: {reply}"
        );
        assert!(
            error["message"].as_str().unwrap().contains(member),
            "the error names {member}: {error}"
        );
        assert!(
            h.runtime
                .store()
                .get_action("t1", &action_id)
                .await
                .unwrap()
                .is_none(),
            "{member}: nothing is admitted"
        );
    }
    let booked = h
        .runtime
        .store()
        .count_records(BOOKINGS, "t1")
        .await
        .unwrap();
    assert_eq!(booked, 0, "no refused action booked a table");
}

#[tokio::test]
async fn a_conversation_context_must_name_a_conversation_the_caller_can_read() {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let action_id = id("act_");
    let (status, reply) = h
        .act(&alice, None, json!({ "id": action_id, "capability_id": "cap:demo:echo", "input": {},
            "conversation": { "id": "conv_unknown", "channel": { "kind": "email" }, "status": "open" } }))
        .await;
    assert_eq!(status, 404, "{reply}");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.core.not_found"
    );
    assert!(
        h.runtime
            .store()
            .get_action("t1", &action_id)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_identity_context_may_name_only_the_callers_own_tenant() {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let (status, reply) = h
        .act(&alice, None, json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": {}, "identity": { "tenant": { "id": "t2" } } }))
        .await;
    assert_eq!(status, 403, "{reply}");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.policy.scope_denied"
    );
    let (status, reply) = h
        .act(&alice, None, json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": { "x": 1 }, "identity": { "tenant": { "id": "t1" } }, "observability": { "trace_id": "abc" } }))
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["body"]["action_result"]["output"], json!({ "x": 1 }));
}

#[tokio::test]
async fn capabilities_are_advertised_with_exactly_the_contracts_the_runtime_honours() {
    use std::sync::Arc;
    let contract = |extra: Value| {
        let mut c = json!({
            "side_effects": ["read"],
            "idempotency": { "requirement": "optional", "collision_behavior": "reject_conflict", "key_scope": "tenant" },
            "execution": { "supports_sync": true, "supports_async": false, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": false, "expected_completion": "sync", "retry_safety": "safe" },
            "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
        });
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    let capability = |id: &str, contract: Value| -> aip_core::Capability {
        serde_json::from_value(json!({ "id": id, "name": id, "kind": "tool", "input_schema": { "type": "object" }, "contract": contract })).unwrap()
    };
    let echo: Arc<dyn aip_runtime::ActionHandler> =
        Arc::new(aip_runtime::handler::demo::EchoHandler);
    let registry = aip_runtime::Registry::admit(vec![
        (
            capability(
                "cap:t:gated",
                contract(json!({ "approval": { "required": true, "reason": "money", "approver_selector": { "type": "principal", "id": "human:boss" } } })),
            ),
            Arc::clone(&echo),
        ),
        (
            capability(
                "cap:t:tx",
                contract(json!({ "transaction": { "supported_modes": ["dry_run", "commit"], "requires_plan_before_commit": false, "dry_run_fidelity": "schema_only" } })),
            ),
            Arc::clone(&echo),
        ),
        (capability("cap:t:plain", contract(json!({}))), echo),
    ])
    .unwrap();
    let admin = caller("admin", "t1", &["*"]);
    let agent = aip_runtime::registry::agent_principal("agent:x", "x");
    let manifest = registry.manifest(&agent, &admin, json!({}), None, (&[], &[]));
    let ids: Vec<&str> = manifest
        .capabilities
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["cap:t:gated", "cap:t:plain", "cap:t:tx"]);
    // Approvals are executed (spec 12): the gated capability says it needs one.
    let gated = &manifest.capabilities[0];
    assert_eq!(gated.requires_human_approval, Some(true));
    assert!(gated.contract.as_ref().unwrap().approval.is_some());
    assert_eq!(manifest.capabilities[1].requires_human_approval, None);
    let tx = &manifest.capabilities[2];
    assert!(
        tx.contract.as_ref().unwrap().transaction.is_none(),
        "a transaction contract the runtime cannot execute is not advertised"
    );
}
