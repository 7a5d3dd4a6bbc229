//! An identical re-send is delivery, not a collision (spec 9.5, 11.4, 20.1): a client that lost a
//! reply re-sends the same action and gets the original's outcome (`cached`), whatever the key's
//! collision behaviour, before and after a restart, and the handler never runs twice. A different
//! action reusing a key follows the capability's collision behaviour. The table is
//! `docs/idempotency.md`.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aip_runtime::{
    Accept, ActionHandler, Caller, HandlerError, HandlerOutput, HandlerSupport, Mode, Registry,
    Runtime, TrustedContext,
};
use async_trait::async_trait;
use serde_json::{Value, json};
use support::{caller, envelope, id, status_of};

/// Echoes its input and counts its dispatches.
#[derive(Default)]
struct Counted(AtomicUsize);

#[async_trait]
impl ActionHandler for Counted {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: false,
            mutation: false,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        _ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(HandlerOutput {
            output: input.clone(),
            message: Vec::new(),
        })
    }
}

/// The capability of each collision behaviour (`unsupported`: no key accepted).
const BEHAVIOURS: [(&str, &str); 4] = [
    ("cap:t:return", "return_original_result"),
    ("cap:t:revalidate", "revalidate_input_hash"),
    ("cap:t:reject", "reject_conflict"),
    ("cap:t:nokey", "unsupported"),
];

fn capability(id: &str, behaviour: &str) -> aip_core::Capability {
    let (requirement, collision) = if behaviour == "unsupported" {
        ("unsupported", "reject_conflict")
    } else {
        ("optional", behaviour)
    };
    serde_json::from_value(json!({
        "id": id, "name": id, "kind": "tool", "input_schema": { "type": "object" },
        "contract": {
            "side_effects": ["read"],
            "idempotency": { "requirement": requirement, "collision_behavior": collision, "key_scope": "principal" },
            "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": true, "expected_completion": "any", "retry_safety": "safe" },
            "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
        }
    }))
    .unwrap()
}

async fn node(path: &Path, handler: &Arc<Counted>) -> Arc<Runtime> {
    let store: Arc<dyn aip_store::Store> =
        Arc::new(aip_store::SqliteStore::open(path).await.unwrap());
    let entries = BEHAVIOURS
        .iter()
        .map(|(id, behaviour)| {
            let handler: Arc<dyn ActionHandler> = handler.clone();
            (capability(id, behaviour), handler)
        })
        .collect::<Vec<_>>();
    let runtime = Runtime::new(
        store,
        Registry::admit(entries).unwrap(),
        support::runtime_config(2, 30_000),
    );
    runtime.start().await.unwrap();
    runtime
}

/// Sends `action` as a fresh envelope (a new message id: a re-send is a new message carrying the
/// same action); returns (status, reply).
async fn send(runtime: &Arc<Runtime>, who: &Caller, action: &Value) -> (u16, Value) {
    let env = envelope("aip.core.v1.action", json!({ "action": action }));
    let reply = runtime
        .handle(who, env.to_string().as_bytes(), Accept::AnyMessage)
        .await;
    let body = serde_json::from_slice(&reply.envelope.to_json_vec()).unwrap();
    (status_of(&reply), body)
}

fn ack_status(reply: &Value) -> &str {
    reply["extensions"]["ack"]["status"]
        .as_str()
        .or_else(|| reply["body"]["ack"]["status"].as_str())
        .unwrap_or_default()
}

fn error_code(reply: &Value) -> &str {
    reply["body"]["error"]["error"]["code"]
        .as_str()
        .unwrap_or_default()
}

fn action(cap: &str, action_id: &str, key: Option<&str>, input: Value) -> Value {
    let mut action = json!({ "id": action_id, "capability_id": cap, "input": input });
    if let Some(key) = key {
        action["idempotency_key"] = json!(key);
    }
    action
}

#[tokio::test]
async fn an_identical_resend_returns_the_original_outcome_for_every_collision_behaviour_before_and_after_a_restart()
 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resend.sqlite");
    let handler = Arc::new(Counted::default());
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let mut sent = Vec::new();
    let runtime = node(&path, &handler).await;
    for (cap, behaviour) in BEHAVIOURS {
        let key = (behaviour != "unsupported").then(|| id("key_"));
        let act = action(cap, &id("act_"), key.as_deref(), json!({ "n": 1 }));
        let (status, first) = send(&runtime, &alice, &act).await;
        assert_eq!(status, 200, "{cap}: {first}");
        assert_eq!(ack_status(&first), "accepted", "{cap}: {first}");
        let (status, again) = send(&runtime, &alice, &act).await;
        assert_eq!(status, 200, "{cap}: a re-send is delivery: {again}");
        assert_eq!(ack_status(&again), "cached", "{cap}: {again}");
        assert_eq!(
            again["body"]["action_result"], first["body"]["action_result"],
            "{cap}: the original result"
        );
        sent.push((cap, act, first));
    }
    // An async re-send is acknowledged `cached` (200), not queued again.
    let queued = json!({ "id": id("act_"), "capability_id": "cap:t:reject", "mode": "async", "idempotency_key": id("key_"), "input": {} });
    let (status, first) = send(&runtime, &alice, &queued).await;
    assert_eq!((status, ack_status(&first)), (202, "queued"), "{first}");
    let (status, again) = send(&runtime, &alice, &queued).await;
    assert_eq!((status, ack_status(&again)), (200, "cached"), "{again}");
    runtime.shutdown();
    drop(runtime);

    // After a restart the same re-sends are still delivery.
    let runtime = node(&path, &handler).await;
    for (cap, act, first) in &sent {
        let (status, again) = send(&runtime, &alice, act).await;
        assert_eq!(status, 200, "{cap} after restart: {again}");
        assert_eq!(ack_status(&again), "cached", "{cap} after restart");
        assert_eq!(
            again["body"]["action_result"],
            first["body"]["action_result"]
        );
    }
    assert_eq!(
        handler.0.load(Ordering::SeqCst),
        BEHAVIOURS.len() + 1,
        "every action ran exactly once"
    );
    runtime.shutdown();
}

#[tokio::test]
async fn another_action_reusing_a_key_follows_the_capabilitys_collision_behaviour_before_and_after_a_restart()
 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.sqlite");
    let handler = Arc::new(Counted::default());
    let mut runtime = node(&path, &handler).await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    // (capability, same input answer, other input answer): `cached` replays, or the conflict code.
    let table = [
        ("cap:t:return", "cached", "cached"),
        ("cap:t:revalidate", "cached", "aip.idempotency.conflict"),
        (
            "cap:t:reject",
            "aip.idempotency.conflict",
            "aip.idempotency.conflict",
        ),
    ];
    let mut originals = Vec::new();
    for (cap, _, _) in table {
        let key = id("key_");
        let original = action(cap, &id("act_"), Some(&key), json!({ "n": 1 }));
        let (status, first) = send(&runtime, &alice, &original).await;
        assert_eq!(status, 200, "{first}");
        originals.push((key, first));
    }
    for restarted in [false, true] {
        if restarted {
            runtime.shutdown();
            drop(runtime);
            runtime = node(&path, &handler).await;
        }
        for ((cap, same_input, other_input), (key, first)) in table.iter().zip(&originals) {
            for (input, expected) in [
                (json!({ "n": 1 }), same_input),
                (json!({ "n": 2 }), other_input),
            ] {
                let other = action(cap, &id("act_"), Some(key), input.clone());
                let (status, reply) = send(&runtime, &alice, &other).await;
                let at = format!("{cap} {input} (restarted: {restarted})");
                if *expected == "cached" {
                    assert_eq!(
                        (status, ack_status(&reply)),
                        (200, "cached"),
                        "{at}: {reply}"
                    );
                    assert_eq!(
                        reply["body"]["action_result"], first["body"]["action_result"],
                        "{at}: the original's result, never the new input's"
                    );
                } else {
                    assert_eq!(
                        (status, error_code(&reply)),
                        (409, *expected),
                        "{at}: {reply}"
                    );
                }
            }
        }
    }
    assert_eq!(
        handler.0.load(Ordering::SeqCst),
        table.len(),
        "only the originals ran"
    );
    runtime.shutdown();
}

#[tokio::test]
async fn reusing_an_action_id_for_a_different_request_or_principal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let handler = Arc::new(Counted::default());
    let runtime = node(&dir.path().join("ids.sqlite"), &handler).await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let bob = caller("svc:bob", "t1", &["invoke:*"]);
    let action_id = id("act_");
    let (status, _) = send(
        &runtime,
        &alice,
        &action("cap:t:nokey", &action_id, None, json!({ "n": 1 })),
    )
    .await;
    assert_eq!(status, 200);
    // The same id with another input is not a re-send.
    let (status, reply) = send(
        &runtime,
        &alice,
        &action("cap:t:nokey", &action_id, None, json!({ "n": 2 })),
    )
    .await;
    assert_eq!(
        (status, error_code(&reply)),
        (409, "aip.action.duplicate_id"),
        "{reply}"
    );
    // Nor is the identical action sent by another principal of the tenant.
    let (status, reply) = send(
        &runtime,
        &bob,
        &action("cap:t:nokey", &action_id, None, json!({ "n": 1 })),
    )
    .await;
    assert_eq!(
        (status, error_code(&reply)),
        (409, "aip.action.duplicate_id"),
        "{reply}"
    );
    // The same id and key with another input under reject_conflict is a key conflict.
    let keyed = id("act_");
    let key = id("key_");
    send(
        &runtime,
        &alice,
        &action("cap:t:reject", &keyed, Some(&key), json!({ "n": 1 })),
    )
    .await;
    let (status, reply) = send(
        &runtime,
        &alice,
        &action("cap:t:reject", &keyed, Some(&key), json!({ "n": 2 })),
    )
    .await;
    assert_eq!(
        (status, error_code(&reply)),
        (409, "aip.idempotency.conflict"),
        "{reply}"
    );
    assert_eq!(handler.0.load(Ordering::SeqCst), 2);
    runtime.shutdown();
}
