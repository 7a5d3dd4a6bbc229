//! Workers survive their work (spec 11.5, 19.3): a panicking handler fails its action with a typed
//! error (an uncertain outcome for a mutation) and the worker goes on serving; a job that runs out of
//! attempts settles its action `dead_lettered` on the live node, not at some later boot.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aip_runtime::{
    Accept, ActionHandler, HandlerError, HandlerOutput, HandlerSupport, Mode, Registry, Runtime,
    TrustedContext,
};
use async_trait::async_trait;
use serde_json::{Value, json};
use support::{caller, envelope, id, status_of};

/// Panics on `{"panic": true}`, hangs on `{"hang": true}`, fails with `{"fail": code}`, echoes
/// otherwise; counts calls.
struct Wild {
    mutation: bool,
    calls: AtomicUsize,
}

#[async_trait]
impl ActionHandler for Wild {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: false,
            mutation: self.mutation,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        _ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if input["panic"] == true {
            panic!("the handler panics on purpose");
        }
        if let Some(code) = input["fail"].as_str() {
            return Err(HandlerError::Failed {
                code: code.to_owned(),
                message: "it failed".into(),
                retryable: false,
            });
        }
        if input["hang"] == true {
            std::future::pending::<()>().await;
        }
        Ok(HandlerOutput {
            output: input.clone(),
            message: Vec::new(),
        })
    }
}

fn capability(id: &str, mutation: bool) -> aip_core::Capability {
    serde_json::from_value(json!({
        "id": id, "name": id, "kind": "tool", "input_schema": { "type": "object" },
        "contract": {
            "side_effects": [if mutation { "write" } else { "read" }],
            "idempotency": { "requirement": "unsupported", "collision_behavior": "reject_conflict", "key_scope": "principal" },
            "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": true, "expected_completion": "any", "retry_safety": "safe" },
            "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
        }
    }))
    .unwrap()
}

fn node(
    store: &Arc<dyn aip_store::Store>,
    handlers: (&Arc<Wild>, &Arc<Wild>),
    workers: u32,
    max_attempts: u32,
) -> Arc<Runtime> {
    let (read, write): (Arc<dyn ActionHandler>, Arc<dyn ActionHandler>) =
        (handlers.0.clone(), handlers.1.clone());
    let registry = Registry::admit(vec![
        (capability("cap:t:wild", false), read),
        (capability("cap:t:wild_write", true), write),
    ])
    .unwrap();
    let mut config = support::runtime_config(workers, 1_000);
    config.max_attempts = max_attempts;
    Runtime::new(Arc::clone(store), registry, config)
}

fn handlers() -> (Arc<Wild>, Arc<Wild>) {
    let wild = |mutation| {
        Arc::new(Wild {
            mutation,
            calls: AtomicUsize::new(0),
        })
    };
    (wild(false), wild(true))
}

async fn store(dir: &tempfile::TempDir) -> Arc<dyn aip_store::Store> {
    Arc::new(
        aip_store::SqliteStore::open(dir.path().join("w.sqlite"))
            .await
            .unwrap(),
    )
}

async fn submit(runtime: &Arc<Runtime>, action: Value) -> (u16, Value) {
    let env = envelope("aip.core.v1.action", json!({ "action": action }));
    let reply = runtime
        .handle(
            &caller("admin", "t", &["*"]),
            env.to_string().as_bytes(),
            Accept::AnyMessage,
        )
        .await;
    let body = serde_json::from_slice(&reply.envelope.to_json_vec()).unwrap();
    (status_of(&reply), body)
}

async fn settled(runtime: &Arc<Runtime>, action_id: &str) -> aip_core::ActionStatus {
    runtime
        .action_status(
            &caller("admin", "t", &["*"]),
            action_id,
            true,
            false,
            Some(20_000),
        )
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_fails_its_action_and_the_single_worker_goes_on_serving() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (read, write) = handlers();
    let runtime = node(&store, (&read, &write), 1, 5);
    runtime.start().await.unwrap();

    let (status, reply) = submit(
        &runtime,
        json!({ "id": id("act_"), "capability_id": "cap:t:wild", "input": { "panic": true } }),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let result = &reply["body"]["action_result"];
    assert_eq!(result["status"], "failed", "{reply}");
    assert_eq!(result["error"]["code"], "aip.runtime.handler_panicked");

    // The one async worker runs a panicking handler, then the next action.
    let boom = id("act_");
    let (status, _) = submit(&runtime, json!({ "id": boom, "capability_id": "cap:t:wild", "mode": "async", "input": { "panic": true } })).await;
    assert_eq!(status, 202);
    let after = id("act_");
    submit(&runtime, json!({ "id": after, "capability_id": "cap:t:wild", "mode": "async", "input": { "ok": 1 } })).await;
    let boom = settled(&runtime, &boom).await;
    assert_eq!(serde_json::to_value(boom.state).unwrap(), "failed");
    assert_eq!(
        boom.result.unwrap().error.unwrap().code,
        "aip.runtime.handler_panicked"
    );
    let after = settled(&runtime, &after).await;
    assert_eq!(serde_json::to_value(after.state).unwrap(), "completed");

    // A panicking mutation may have committed: its outcome is uncertain, and it is never re-run.
    let (_, reply) = submit(&runtime, json!({ "id": id("act_"), "capability_id": "cap:t:wild_write", "input": { "panic": true } })).await;
    assert_eq!(
        reply["body"]["action_result"]["error"]["code"], "aip.connector.uncertain_outcome",
        "{reply}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(write.calls.load(Ordering::SeqCst), 1);
    runtime.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_out_of_attempts_is_dead_lettered_by_the_live_node() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (read, write) = handlers();
    let action_id = id("act_");
    // A second node claims the action's only attempt and dies mid-run (its tokio runtime is shut
    // down, like a killed process): the job is out of attempts with its lease lapsing.
    let dying = std::thread::spawn({
        let (store, read, write, action_id) = (
            Arc::clone(&store),
            Arc::clone(&read),
            Arc::clone(&write),
            action_id.clone(),
        );
        move || {
            let process = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            process.block_on(async {
                let doomed = node(&store, (&read, &write), 1, 1);
                doomed.start().await.unwrap();
                live_submit(&doomed, &action_id).await;
                while read.calls.load(Ordering::SeqCst) == 0 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            });
            process.shutdown_background();
        }
    });
    tokio::task::spawn_blocking(move || dying.join().unwrap())
        .await
        .unwrap();
    // The live node boots while the dead node's lease still lives, so boot recovery leaves the
    // action alone; it can never claim it (no attempt left), but its sweep settles it within
    // seconds of the lease lapsing.
    let live = node(&store, (&read, &write), 1, 1);
    live.start().await.unwrap();
    let status = live
        .action_status(
            &caller("admin", "t", &["*"]),
            &action_id,
            false,
            false,
            None,
        )
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(status.state).unwrap(), "running");
    let mut state = String::new();
    for _ in 0..150 {
        let status = live
            .action_status(&caller("admin", "t", &["*"]), &action_id, true, false, None)
            .await
            .unwrap();
        state = serde_json::to_value(status.state)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned();
        if state == "dead_lettered" {
            let error = status.result.unwrap().error.unwrap();
            assert_eq!(error.code, "aip.action.dead_lettered");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state, "dead_lettered");
    assert_eq!(read.calls.load(Ordering::SeqCst), 1, "never re-run");
    live.shutdown();
}

/// Queues a hanging async action on `runtime`; its own workers claim it at once.
async fn live_submit(runtime: &Arc<Runtime>, action_id: &str) {
    let (status, reply) = submit(runtime, json!({ "id": action_id, "capability_id": "cap:t:wild", "mode": "async", "input": { "hang": true } })).await;
    assert_eq!(status, 202, "{reply}");
}

#[tokio::test]
async fn a_handlers_error_code_is_kept_only_when_namespaced_and_never_reaches_a_result_bare() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (read, write) = handlers();
    let runtime = node(&store, (&read, &write), 1, 5);
    runtime.start().await.unwrap();
    for (reported, expected) in [
        ("stripe.card_declined", "stripe.card_declined"),
        ("timeout", "aip.connector.invalid_code"),
        ("", "aip.connector.invalid_code"),
        ("aip.made_up.code", "aip.connector.invalid_code"),
    ] {
        let (_, reply) = submit(&runtime, json!({ "id": id("act_"), "capability_id": "cap:t:wild", "input": { "fail": reported } })).await;
        let error = &reply["body"]["action_result"]["error"];
        assert_eq!(error["code"], expected, "{reported:?}: {reply}");
        if expected != reported {
            assert_eq!(error["details"]["reported_code"], reported);
        }
    }
    runtime.shutdown();
}
