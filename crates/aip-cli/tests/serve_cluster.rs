//! Several `aip serve` nodes on one PostgreSQL database (spec 13.4 and 17.3): a node killed
//! mid-action has its work re-leased and finished by another node; a paused worker that wakes after its
//! lease was taken cannot write its result; event cursors work on any node. Needs
//! `AIP_TEST_POSTGRES_URL` (SKIP notice otherwise; a failure under `CI=true`).
#![allow(clippy::unwrap_used)]

mod cluster;
mod support;

use cluster::{TestDb, signal, start_node};
use serde_json::{Value, json};
use support::{Client, id, pause};

/// Short leases keep the tests fast; 6 workers per node make the split between nodes predictable.
const ENV: [(&str, &str); 2] = [
    ("AIP_LIMITS__LEASE_MS", "1500"),
    ("AIP_LIMITS__ASYNC_WORKERS", "6"),
];

async fn event_kinds(client: &Client, action_id: &str) -> Vec<String> {
    client.event_kinds(action_id).await
}

/// Events are listed once their commit-ordered position is assigned, which may trail the state change
/// by a moment when another node committed it: wait (bounded) for the terminal event.
async fn settled_event_kinds(client: &Client, action_id: &str) -> Vec<String> {
    let terminal = |k: &String| {
        [
            "completed",
            "failed",
            "cancelled",
            "expired",
            "dead_lettered",
        ]
        .iter()
        .any(|s| *k == format!("aip.action.{s}"))
    };
    for _ in 0..100 {
        let kinds = event_kinds(client, action_id).await;
        if kinds.iter().any(terminal) {
            return kinds;
        }
        pause(50).await;
    }
    event_kinds(client, action_id).await
}

async fn state(client: &Client, action_id: &str) -> Value {
    let (status, view) = client.get(&format!("/aip/v1/actions/{action_id}")).await;
    assert_eq!(status, 200, "{view}");
    view["state"].clone()
}

#[tokio::test]
async fn work_of_a_node_killed_mid_action_is_re_leased_and_finished_by_the_other_node() {
    let Some(db) = TestDb::create("serve_cluster").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut a = start_node(&dir.path().join("a"), &db.url, &ENV, None);
    let b = start_node(&dir.path().join("b"), &db.url, &ENV, None);
    let (on_a, on_b) = (a.admin(), b.admin());

    // Ten sleeps on twelve workers: all run at once, so node A holds at least four of them.
    let mut sleeps = Vec::new();
    for _ in 0..10 {
        let action_id = id("act_");
        let (status, _) = on_a.act(json!({ "id": action_id, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 2500 } })).await;
        assert_eq!(status, 202);
        sleeps.push(action_id);
    }
    let mut books = Vec::new();
    for n in 0..3 {
        let action_id = id("act_");
        let booking = json!({ "name": format!("guest {n}"), "party_size": 2, "time": "20:00" });
        let (status, _) = on_a.act(json!({ "id": action_id, "capability_id": "cap:demo:book", "mode": "async", "input": booking, "idempotency_key": format!("cluster-{n}") })).await;
        assert_eq!(status, 202);
        books.push(action_id);
    }
    for _ in 0..200 {
        let mut running = 0;
        for action_id in &sleeps {
            if state(&on_b, action_id).await == "running" {
                running += 1;
            }
        }
        if running == sleeps.len() {
            break;
        }
        pause(20).await;
    }
    // A cursor issued by node A, before it dies.
    let (status, first_page) = on_a.get("/aip/v1/events?limit=5").await;
    assert_eq!(status, 200, "{first_page}");
    let cursor = first_page["next_cursor"].as_str().unwrap().to_owned();
    a.kill();

    for action_id in &sleeps {
        let view = on_b.wait_terminal(action_id).await;
        assert_eq!(view["state"], "completed", "{action_id}: {view}");
        assert_eq!(view["result"]["output"], json!({ "slept_ms": 2500 }));
        let kinds = settled_event_kinds(&on_b, action_id).await;
        let finished = kinds
            .iter()
            .filter(|k| *k == "aip.action.completed")
            .count();
        assert_eq!(
            finished, 1,
            "{action_id} finished more than once: {kinds:?}"
        );
    }
    let mut completed_books = 0;
    for action_id in &books {
        let view = on_b.wait_terminal(action_id).await;
        if view["state"] == "completed" {
            completed_books += 1;
        }
        let code = view["result"]["error"]["code"].as_str().unwrap_or_default();
        assert_ne!(code, "aip.demo.duplicate_booking", "{view}");
        assert!(
            view["state"] == "completed" || code == "aip.connector.uncertain_outcome",
            "{view}"
        );
    }
    // A retry of a booking on the surviving node never books again.
    let (_, retry) = on_b.act(json!({ "id": id("act_"), "capability_id": "cap:demo:book", "mode": "sync", "input": { "name": "guest 0", "party_size": 2, "time": "20:00" }, "idempotency_key": "cluster-0" })).await;
    assert_ne!(
        retry["body"]["action_result"]["status"], "completed",
        "{retry}"
    );
    let (_, list) = on_b
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:bookings", "input": {} }))
        .await;
    let count = list["body"]["action_result"]["output"]["count"]
        .as_u64()
        .unwrap();
    assert!((completed_books..=3).contains(&count), "{list}");
    // The cursor node A issued reads on node B, and continues where A's page ended.
    let (status, second_page) = on_b
        .get(&format!("/aip/v1/events?limit=5&cursor={cursor}"))
        .await;
    assert_eq!(status, 200, "{second_page}");
    let first_ids: Vec<&Value> = first_page["events"].as_array().unwrap().iter().collect();
    let second = second_page["events"].as_array().unwrap();
    assert_eq!(second.len(), 5);
    for event in second {
        assert!(
            !first_ids.contains(&event),
            "event repeated after the cursor"
        );
    }
}

#[tokio::test]
async fn a_worker_paused_past_its_lease_cannot_write_its_late_result() {
    let Some(db) = TestDb::create("serve_cluster").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log_a = dir.path().join("a.log");
    let a = start_node(&dir.path().join("a"), &db.url, &ENV, Some(&log_a));
    let on_a = a.admin();
    let action_id = id("act_");
    let (status, _) = on_a.act(json!({ "id": action_id, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 3000 } })).await;
    assert_eq!(status, 202);
    for _ in 0..200 {
        if state(&on_a, &action_id).await == "running" {
            break;
        }
        pause(10).await;
    }
    assert_eq!(state(&on_a, &action_id).await, "running");
    // Node A (the only node so far) holds the lease; freeze it past the lease's expiry.
    signal(&a, "STOP");
    let b = start_node(&dir.path().join("b"), &db.url, &ENV, None);
    let on_b = b.admin();
    let view = on_b.wait_terminal(&action_id).await;
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["result"]["output"], json!({ "slept_ms": 3000 }));
    // A wakes up: its handler finishes at once and it tries to settle the action with its old fence.
    signal(&a, "CONT");
    let mut log = String::new();
    for _ in 0..100 {
        log = std::fs::read_to_string(&log_a).unwrap();
        if log.contains("store.stale_lease") {
            break;
        }
        pause(50).await;
    }
    assert!(
        log.contains("job run failed") && log.contains("store.stale_lease"),
        "node A's late write was not refused by the store: {log}"
    );
    // One final result, the one node B wrote, on both nodes.
    let kinds = settled_event_kinds(&on_b, &action_id).await;
    let finished: Vec<&String> = kinds
        .iter()
        .filter(|k| {
            ["completed", "failed", "cancelled", "expired"]
                .iter()
                .any(|s| **k == format!("aip.action.{s}"))
        })
        .collect();
    assert_eq!(finished, ["aip.action.completed"], "{kinds:?}");
    let (_, on_a_view) = on_a
        .get(&format!("/aip/v1/actions/{action_id}?include_result=true"))
        .await;
    assert_eq!(on_a_view["result"], view["result"]);
}

#[tokio::test]
async fn after_a_kill_9_on_postgres_the_same_node_takes_back_its_leases_at_once_while_another_node_waits_for_them()
 {
    let Some(db) = TestDb::create("serve_cluster").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));
    // Leases of a minute: a node that does not take them back waits that long.
    let env = [
        ("AIP_LIMITS__LEASE_MS", "60000"),
        ("AIP_LIMITS__ASYNC_WORKERS", "6"),
    ];
    let mut a = start_node(&data_a, &db.url, &env, None);
    let sleeps = support::running_sleeps(&a, 4, 3000).await;
    // Node b starts once a holds every lease, then a dies without a word.
    let b = start_node(&data_b, &db.url, &env, None);
    a.kill();
    // b leaves the work alone: the leases are a's, alive for a minute as far as b knows.
    pause(4000).await;
    for action_id in &sleeps {
        let (_, view) = b.admin().get(&format!("/aip/v1/actions/{action_id}")).await;
        assert_eq!(view["state"], "running", "b took a live lease: {view}");
    }
    // a restarts on its own data directory (its node id) and takes its leases back at once.
    let restarted = std::time::Instant::now();
    let a = start_node(&data_a, &db.url, &env, None);
    for action_id in &sleeps {
        let view = a.admin().wait_terminal(action_id).await;
        assert_eq!(view["state"], "completed", "{view}");
    }
    let elapsed = restarted.elapsed();
    println!(
        "4 interrupted 3 s sleeps completed {} ms after a's restart began (b waited)",
        elapsed.as_millis()
    );
    assert!(elapsed < std::time::Duration::from_secs(15), "{elapsed:?}");
    drop(b);
}
