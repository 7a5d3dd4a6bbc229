//! `aip serve --database postgres://…`: the runtime on PostgreSQL, and a changed migration
//! that stops the server with a clear error. Needs `AIP_TEST_POSTGRES_URL` (SKIP notice otherwise; a
//! failure under `CI=true`).
#![allow(clippy::unwrap_used)]

mod cluster;
mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cluster::{TestDb, start_node};
use serde_json::json;
use support::id;

/// `/ready` once it answers `status`, or its answer after a second and a half.
async fn ready_within(server: &support::Server, status: u16) -> (u16, serde_json::Value) {
    let mut probed = server.anonymous().get("/ready").await;
    for _ in 0..30 {
        if probed.0 == status {
            break;
        }
        support::pause(50).await;
        probed = server.anonymous().get("/ready").await;
    }
    probed
}

#[tokio::test]
async fn a_node_on_postgres_runs_sync_and_async_actions_and_reports_its_backend() {
    let Some(db) = TestDb::create("serve_postgres").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = start_node(&dir.path().join("data"), &db.url, &[], None);
    let admin = server.admin();
    let (status, ready) = admin.get("/ready").await;
    assert_eq!(status, 200, "{ready}");
    // A schema that is no longer exactly this build's (here: another process rewrote a migration
    // row) takes the node out of rotation; the probe says only that, and recovers with the schema.
    // (Probes share one store check per 500 ms, so the change shows within a second.)
    db.exec("UPDATE aip_migrations SET version = -version WHERE version = 3")
        .await;
    let probed = ready_within(&server, 503).await;
    assert_eq!(probed, (503, json!({ "status": "not_ready" })));
    db.exec("UPDATE aip_migrations SET version = 3 WHERE version = -3")
        .await;
    let probed = ready_within(&server, 200).await;
    assert_eq!(probed, (200, json!({ "status": "ready" })));
    let metrics = admin.get_text("/metrics").await;
    assert!(
        metrics.contains("aip_node_info{backend=\"postgres\""),
        "{metrics}"
    );
    let (status, reply) = admin
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": { "on": "postgres" } }))
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["action_result"]["output"],
        json!({ "on": "postgres" })
    );
    let action_id = id("act_");
    let (status, _) = admin
        .act(json!({ "id": action_id, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 50 } }))
        .await;
    assert_eq!(status, 202);
    let view = admin.wait_terminal(&action_id).await;
    assert_eq!(view["state"], "completed", "{view}");
    // Nothing went to a SQLite file: the data directory holds only the admin token.
    assert!(!dir.path().join("data").join("aip.sqlite").exists());
}

#[tokio::test]
async fn a_changed_migration_stops_the_server_with_a_clear_error() {
    let Some(db) = TestDb::create("serve_postgres").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = start_node(&data, &db.url, &[], None);
    server.kill();
    assert_eq!(
        db.exec("UPDATE aip_migrations SET checksum = 'tampered' WHERE version = 1")
            .await,
        1
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .args(["--database", &db.url])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("aip serve kept running on a changed migration");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("migration 1") && stderr.contains("changed after it was applied"),
        "unclear error: {stderr}"
    );
}
