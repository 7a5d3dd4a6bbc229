//! Escalations (spec 12.7) through the runtime's binding-independent entry point: stored under the
//! raising envelope's id, visible to their requester and resolvers only, resolved once with an
//! allowed decision by an authenticated resolver, expired by a durable timer, and never counted as
//! an approval decision.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aip_runtime::handler::demo::{TRANSFERS, demo_capabilities};
use aip_runtime::{Caller, Registry, Runtime};
use serde_json::{Value, json};
use support::{code, envelope, id, send};

const TENANT: &str = "t";

async fn node(path: &Path, start: bool) -> Arc<Runtime> {
    let store: Arc<dyn aip_store::Store> =
        Arc::new(aip_store::SqliteStore::open(path).await.unwrap());
    let mut config = support::runtime_config(2, 30_000);
    for c in [agent(), resolver(), approver()] {
        config.directory.insert(c.id.clone(), c.resolver_keys());
    }
    let runtime = Runtime::new(
        Arc::clone(&store),
        Registry::admit(demo_capabilities(store)).unwrap(),
        config,
    );
    if start {
        runtime.start().await.unwrap();
    }
    runtime
}

/// The agent that raises escalations (and requests transfers).
fn agent() -> Caller {
    support::caller("agent-7", TENANT, &["invoke:*"])
}

/// A human on the escalation desk: resolves, holds no approval role.
fn resolver() -> Caller {
    let mut c = support::caller("rita", TENANT, &["escalation:resolve"]);
    c.kind = aip_core::PrincipalKind::Human;
    c
}

/// An approver who also resolves escalations.
fn approver() -> Caller {
    let mut c = support::caller(
        "approver-1",
        TENANT,
        &["invoke:cap:demo:*", "escalation:resolve"],
    );
    c.kind = aip_core::PrincipalKind::Human;
    c.roles = vec!["approver".into()];
    c
}

/// May invoke, resolves nothing, sees only its own.
fn outsider() -> Caller {
    support::caller("mallory", TENANT, &["invoke:*"])
}

/// An escalation envelope raised by `by` (as `requested_by`), with its message id.
fn escalation(by: &Caller, kind: &str, extra: Value) -> (String, Value) {
    let mut body = json!({
        "kind": kind,
        "reason": "the customer asks for a refund above the agent's limit",
        "requested_by": { "id": by.id, "kind": "service" },
    });
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    let env = envelope("aip.core.v1.escalation", json!({ "escalation": body }));
    (env["message_id"].as_str().unwrap().to_owned(), env)
}

fn resolution(target: &str, by: &Caller, status: &str, result: Option<Value>) -> Value {
    let mut body = json!({
        "status": status,
        "resolved_by": { "id": by.id, "kind": "human" },
        "resolved_at": aip_core::Timestamp::now(),
    });
    if let Some(r) = result {
        body["result"] = r;
    }
    let mut env = envelope(
        "aip.core.v1.escalation_resolution",
        json!({ "escalation_resolution": body }),
    );
    env["in_response_to"] = json!(target);
    env
}

#[tokio::test]
async fn an_escalation_is_stored_listed_and_resolved_once_by_a_resolver() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("e.sqlite"), false).await;
    let (esc_id, env) = escalation(
        &agent(),
        "input",
        json!({ "allowed_decisions": ["approve", "reject"] }),
    );
    let (status, reply) = send(&runtime, &agent(), &env).await;
    assert_eq!(status, 202, "{reply}");
    assert_eq!(reply["message_type"], "aip.core.v1.escalation");
    assert_eq!(reply["in_response_to"], esc_id.as_str());

    let page = runtime
        .read_escalations(&resolver(), &Default::default())
        .await
        .unwrap();
    assert_eq!(page.escalations.len(), 1);
    assert_eq!(page.escalations[0].escalation_id, esc_id);
    assert_eq!(page.escalations[0].status, "open");
    assert_eq!(page.escalations[0].requester, "agent-7");

    let (status, reply) = send(
        &runtime,
        &resolver(),
        &resolution(&esc_id, &resolver(), "approved", None),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let resolved = &reply["body"]["escalation_resolution"];
    assert_eq!(resolved["status"], "approved");
    assert_eq!(resolved["resolved_by"]["id"], "rita");

    // The same resolution again is answered the same; another is refused: resolved once.
    let (status, again) = send(
        &runtime,
        &resolver(),
        &resolution(&esc_id, &resolver(), "approved", None),
    )
    .await;
    assert_eq!(
        (status, &again["body"]["escalation_resolution"]["status"]),
        (200, &json!("approved")),
        "{again}"
    );
    let (status, other) = send(
        &runtime,
        &resolver(),
        &resolution(&esc_id, &resolver(), "rejected", None),
    )
    .await;
    assert_eq!(
        (status, code(&other)),
        (409, "aip.policy.escalation_closed"),
        "{other}"
    );
    let (status, other) = send(
        &runtime,
        &approver(),
        &resolution(&esc_id, &approver(), "approved", None),
    )
    .await;
    assert_eq!(
        (status, code(&other)),
        (409, "aip.policy.escalation_closed"),
        "{other}"
    );

    // The requester re-sending its escalation learns the resolution.
    let (status, replay) = send(&runtime, &agent(), &env).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(
        replay["body"]["escalation_resolution"]["status"],
        "approved"
    );
    let view = runtime.read_escalation(&agent(), &esc_id).await.unwrap();
    assert_eq!(view.status, "approved");
    assert_eq!(view.resolution.unwrap().resolved_by.id.as_str(), "rita");
}

#[tokio::test]
async fn an_escalation_resolution_never_counts_as_an_approval_decision() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("e.sqlite"), true).await;
    // A transfer waits for its approval.
    let action_id = id("act_");
    let (status, ack) = send(
        &runtime,
        &agent(),
        &envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": action_id, "capability_id": "cap:demo:transfer", "mode": "async",
                                "input": { "amount_minor": 500, "to": "acct:bob" } } }),
        ),
    )
    .await;
    assert_eq!(status, 202, "{ack}");
    let approval_id = ack["extensions"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The agent escalates for approval, naming the action, and an approver "approves" the escalation.
    let (esc_id, env) = escalation(
        &agent(),
        "approval",
        json!({ "form": { "action_id": action_id, "approval_id": approval_id } }),
    );
    assert_eq!(send(&runtime, &agent(), &env).await.0, 202);
    let (status, reply) = send(
        &runtime,
        &approver(),
        &resolution(&esc_id, &approver(), "approved", None),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    // A resolution aimed at the approval itself finds no escalation.
    let (status, reply) = send(
        &runtime,
        &approver(),
        &resolution(&approval_id, &approver(), "approved", None),
    )
    .await;
    assert_eq!(
        (status, code(&reply)),
        (404, "aip.core.not_found"),
        "{reply}"
    );
    // And an approval decision cannot target the escalation.
    let (status, reply) = send(
        &runtime,
        &approver(),
        &envelope(
            "aip.policy.v1.approval_decision",
            json!({ "approval_decision": { "approval_id": esc_id, "decision": "approved",
                    "approver": { "id": "approver-1", "kind": "human" }, "decided_at": aip_core::Timestamp::now() } }),
        ),
    )
    .await;
    assert_eq!(
        (status, code(&reply)),
        (404, "aip.core.not_found"),
        "{reply}"
    );

    tokio::time::sleep(Duration::from_millis(300)).await;
    let approval = runtime
        .read_approval(
            &approver(),
            &serde_json::from_value(
                json!({ "approval_id": approval_id, "include_action_status": true }),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let approval = serde_json::to_value(approval).unwrap();
    assert_eq!(approval["status"], "pending", "{approval}");
    assert!(approval.get("decision").is_none(), "{approval}");
    assert_eq!(
        approval["action_status"]["state"], "pending_approval",
        "{approval}"
    );
    assert_eq!(
        runtime
            .store()
            .count_records(TRANSFERS, TENANT)
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn payloads_naming_another_principal_are_refused_as_spoofing() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("e.sqlite"), false).await;
    // The agent raises in the resolver's name.
    let (spoof_id, env) = escalation(&resolver(), "handoff", json!({}));
    let (status, reply) = send(&runtime, &agent(), &env).await;
    assert_eq!(
        (status, code(&reply)),
        (403, "aip.auth.principal_mismatch"),
        "{reply}"
    );
    assert!(
        runtime
            .read_escalation(&resolver(), &spoof_id)
            .await
            .is_err()
    );

    let (esc_id, env) = escalation(&agent(), "handoff", json!({}));
    assert_eq!(send(&runtime, &agent(), &env).await.0, 202);
    // The resolver claims the approver resolved it.
    let (status, reply) = send(
        &runtime,
        &resolver(),
        &resolution(&esc_id, &approver(), "handoff_completed", None),
    )
    .await;
    assert_eq!(
        (status, code(&reply)),
        (403, "aip.auth.principal_mismatch"),
        "{reply}"
    );
    assert_eq!(
        runtime
            .read_escalation(&agent(), &esc_id)
            .await
            .unwrap()
            .status,
        "open"
    );
}

#[tokio::test]
async fn only_resolvers_see_and_resolve_escalations_and_the_requester_may_only_cancel_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("e.sqlite"), false).await;
    let (esc_id, env) = escalation(&agent(), "policy_exception", json!({}));
    assert_eq!(send(&runtime, &agent(), &env).await.0, 202);

    // An outsider neither sees nor resolves it, and its list does not count it.
    let err = runtime
        .read_escalation(&outsider(), &esc_id)
        .await
        .unwrap_err();
    assert_eq!(err.code().as_str(), "aip.core.not_found");
    let (status, reply) = send(
        &runtime,
        &outsider(),
        &resolution(&esc_id, &outsider(), "approved", None),
    )
    .await;
    assert_eq!(
        (status, code(&reply)),
        (404, "aip.core.not_found"),
        "{reply}"
    );
    let page = runtime
        .read_escalations(&outsider(), &Default::default())
        .await
        .unwrap();
    assert!(page.escalations.is_empty());
    // The requester sees its own, may not approve it, may withdraw it.
    assert_eq!(
        runtime
            .read_escalations(&agent(), &Default::default())
            .await
            .unwrap()
            .escalations
            .len(),
        1
    );
    let (status, reply) = send(
        &runtime,
        &agent(),
        &resolution(&esc_id, &agent(), "approved", None),
    )
    .await;
    assert_eq!(
        (status, code(&reply)),
        (403, "aip.policy.resolution_not_allowed"),
        "{reply}"
    );
    let (status, reply) = send(
        &runtime,
        &agent(),
        &resolution(&esc_id, &agent(), "cancelled", None),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        runtime
            .read_escalation(&resolver(), &esc_id)
            .await
            .unwrap()
            .status,
        "cancelled"
    );
}

#[tokio::test]
async fn a_resolution_outside_the_allowed_decisions_is_refused_and_modify_carries_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("e.sqlite"), false).await;
    let (esc_id, env) = escalation(
        &agent(),
        "input",
        json!({ "allowed_decisions": ["modify", "reject"] }),
    );
    assert_eq!(send(&runtime, &agent(), &env).await.0, 202);
    for (status, result) in [("approved", None), ("expired", None), ("modified", None)] {
        let (http, reply) = send(
            &runtime,
            &resolver(),
            &resolution(&esc_id, &resolver(), status, result),
        )
        .await;
        assert_eq!(
            (http, code(&reply)),
            (403, "aip.policy.resolution_not_allowed"),
            "{status}: {reply}"
        );
    }
    let (http, reply) = send(
        &runtime,
        &resolver(),
        &resolution(
            &esc_id,
            &resolver(),
            "modified",
            Some(json!({ "amount_minor": 900 })),
        ),
    )
    .await;
    assert_eq!(http, 200, "{reply}");
    let view = runtime.read_escalation(&agent(), &esc_id).await.unwrap();
    assert_eq!(view.status, "modified");
    assert_eq!(
        view.resolution.unwrap().result,
        Some(json!({ "amount_minor": 900 }))
    );
    // Bounded timeouts.
    let (_, env) = escalation(&agent(), "input", json!({ "timeout_ms": 0 }));
    let (http, reply) = send(&runtime, &agent(), &env).await;
    assert_eq!(
        (http / 100, code(&reply)),
        (4, "aip.action.invalid_timeout"),
        "{reply}"
    );
}

#[tokio::test]
async fn a_reused_escalation_id_for_another_escalation_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(&dir.path().join("e.sqlite"), false).await;
    let (esc_id, env) = escalation(&agent(), "input", json!({}));
    assert_eq!(send(&runtime, &agent(), &env).await.0, 202);
    // The identical re-send is delivery.
    assert_eq!(send(&runtime, &agent(), &env).await.0, 202);
    let mut changed = env.clone();
    changed["body"]["escalation"]["reason"] = json!("something else");
    let (status, reply) = send(&runtime, &agent(), &changed).await;
    assert_eq!(
        (status, code(&reply)),
        (409, "aip.policy.escalation_conflict"),
        "{reply}"
    );
    let mut other = env.clone();
    other["body"]["escalation"]["requested_by"]["id"] = json!("mallory");
    let (status, reply) = send(&runtime, &outsider(), &other).await;
    assert_eq!(
        (status, code(&reply)),
        (409, "aip.policy.escalation_conflict"),
        "{reply}"
    );
    let view = runtime.read_escalation(&agent(), &esc_id).await.unwrap();
    assert_eq!(
        view.escalation.reason,
        "the customer asks for a refund above the agent's limit"
    );
}

#[tokio::test]
async fn an_unresolved_escalation_expires_by_its_durable_timer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.sqlite");
    // Raised on a node without workers, which then stops: the timer is durable.
    let (esc_id, env) = escalation(&agent(), "handoff", json!({ "timeout_ms": 300 }));
    {
        let runtime = node(&path, false).await;
        assert_eq!(send(&runtime, &agent(), &env).await.0, 202);
    }
    let runtime = node(&path, true).await;
    let mut status = String::new();
    for _ in 0..100 {
        status = runtime
            .read_escalation(&agent(), &esc_id)
            .await
            .unwrap()
            .status
            .to_owned();
        if status != "open" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "expired");
    let view = runtime.read_escalation(&agent(), &esc_id).await.unwrap();
    assert!(view.resolution.unwrap().resolved_by.id.as_str() != "agent-7");
    let (http, reply) = send(
        &runtime,
        &resolver(),
        &resolution(&esc_id, &resolver(), "approved", None),
    )
    .await;
    assert_eq!(
        (http, code(&reply)),
        (409, "aip.policy.escalation_closed"),
        "{reply}"
    );
}
