//! Sync actions are leased work (spec 13.4): a node booting on a database that another live node
//! uses leaves that node's running sync action alone, and takes a sync action over only once its
//! lease has lapsed, settling an interrupted mutation as an uncertain outcome instead of running it
//! again.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aip_runtime::handler::{HandlerError, HandlerOutput, HandlerSupport, Mode, TrustedContext};
use aip_runtime::{Accept, ActionHandler, Caller, Registry, Runtime};
use async_trait::async_trait;
use serde_json::{Value, json};

const CAP: &str = "cap:t:slow_write";
const LEASE_MS: u64 = 1_000;

/// A mutation that takes `{"ms": n}` milliseconds and counts its dispatches.
#[derive(Default)]
struct SlowWrite {
    calls: AtomicUsize,
}

#[async_trait]
impl ActionHandler for SlowWrite {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: false,
            mutation: true,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        _ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let ms = input.get("ms").and_then(Value::as_u64).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(HandlerOutput {
            output: json!({ "written": true }),
            message: Vec::new(),
        })
    }
}

/// One node: a runtime with its own worker id over the shared store.
fn node(store: &Arc<dyn aip_store::Store>, handler: &Arc<SlowWrite>) -> Arc<Runtime> {
    let capability = serde_json::from_value(json!({
        "id": CAP, "name": "slow write", "kind": "tool", "input_schema": { "type": "object" },
        "contract": {
            "side_effects": ["write"],
            "idempotency": { "requirement": "optional", "collision_behavior": "reject_conflict", "key_scope": "tenant" },
            "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": false, "expected_completion": "any", "retry_safety": "unknown" },
            "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
        }
    }))
    .unwrap();
    let handler: Arc<dyn ActionHandler> = handler.clone();
    let registry = Registry::admit(vec![(capability, handler)]).unwrap();
    let config = support::runtime_config(2, LEASE_MS);
    Runtime::new(Arc::clone(store), registry, config)
}

fn admin() -> Caller {
    support::caller("admin", "t", &["*"])
}

fn sync_action(action_id: &str, ms: u64) -> Vec<u8> {
    support::envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": action_id, "capability_id": CAP, "mode": "sync", "input": { "ms": ms } } }),
    )
    .to_string()
    .into_bytes()
}

async fn shared_store() -> (tempfile::TempDir, Arc<dyn aip_store::Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = aip_store::SqliteStore::open(dir.path().join("shared.sqlite"))
        .await
        .unwrap();
    (dir, Arc::new(store))
}

/// Waits until the handler has been dispatched once.
async fn dispatched(handler: &SlowWrite) {
    while handler.calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn state_of(store: &Arc<dyn aip_store::Store>, action_id: &str) -> aip_store::ActionRecord {
    store.get_action("t", action_id).await.unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_booting_beside_a_live_node_leaves_its_running_sync_mutation_alone() {
    let (_dir, store) = shared_store().await;
    let handler = Arc::new(SlowWrite::default());
    let first = node(&store, &handler);
    first.start().await.unwrap();
    // The mutation outlives several lease lengths, so only renewal keeps it.
    let running = tokio::spawn({
        let first = Arc::clone(&first);
        async move {
            first
                .handle(
                    &admin(),
                    &sync_action("act_live", 3 * LEASE_MS),
                    Accept::ActionsOnly,
                )
                .await
        }
    });
    dispatched(&handler).await;
    // A second node boots (recovery, then workers) while the first runs the action.
    let second = node(&store, &handler);
    second.start().await.unwrap();
    let reply = running.await.unwrap();
    assert_eq!(
        reply.outcome,
        aip_runtime::Outcome::Done,
        "{:?}",
        reply.envelope
    );
    let record = state_of(&store, "act_live").await;
    assert_eq!(record.state, aip_store::ActionState::Completed);
    assert_eq!(record.result.unwrap()["output"], json!({ "written": true }));
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1, "dispatched once");
    first.shutdown();
    second.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_mutation_whose_node_died_is_taken_over_after_its_lease_lapses_and_settled_uncertain()
 {
    let (_dir, store) = shared_store().await;
    let handler = Arc::new(SlowWrite::default());
    // The first node runs on a tokio runtime of its own, which is shut down mid-mutation: like a
    // killed process, its handler and lease renewal stop. (Dropping the caller's future is not
    // enough: a sync action runs on even when its caller goes away.)
    let dead = std::thread::spawn({
        let (store, handler) = (Arc::clone(&store), Arc::clone(&handler));
        move || {
            let process = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            process.block_on(async {
                let first = node(&store, &handler);
                tokio::spawn(async move {
                    first
                        .handle(
                            &admin(),
                            &sync_action("act_dead", 60_000),
                            Accept::ActionsOnly,
                        )
                        .await
                });
                dispatched(&handler).await;
            });
            process.shutdown_background();
        }
    });
    tokio::task::spawn_blocking(move || dead.join().unwrap())
        .await
        .unwrap();
    let second = node(&store, &handler);
    second.start().await.unwrap();
    // While the dead node's lease lives, nobody touches the action.
    assert_eq!(
        state_of(&store, "act_dead").await.state,
        aip_store::ActionState::Running
    );
    let mut record = state_of(&store, "act_dead").await;
    for _ in 0..100 {
        if record.state.is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        record = state_of(&store, "act_dead").await;
    }
    assert_eq!(record.state, aip_store::ActionState::Failed);
    let result = record.result.unwrap();
    assert_eq!(
        result["error"]["code"], "aip.connector.uncertain_outcome",
        "{result}"
    );
    assert_eq!(
        handler.calls.load(Ordering::SeqCst),
        1,
        "never dispatched twice"
    );
    second.shutdown();
}
