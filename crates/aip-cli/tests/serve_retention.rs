//! Retention through the binary (`[retention]`, spec 16.2, issue 20): the housekeeping job on the
//! generic worker purges events and the chunks of ended actions past their retention; a cursor that
//! points into purged history is refused with `aip.read.cursor_expired` (410) rather than silently
//! skipping it; the action record, its receipts and the audit log stay.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::json;
use support::Server;

#[tokio::test]
async fn history_past_retention_is_purged_and_cursors_into_it_are_refused_while_receipts_and_audit_stay()
 {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        "[retention]\nevents_secs = 1\nchunks_secs = 1\npurge_interval_secs = 1\n",
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let admin = server.admin();
    let action_id = support::id("act_");
    let (status, reply) = admin
        .act(
            json!({ "id": action_id, "capability_id": "cap:demo:count", "mode": "async",
                     "input": { "n": 3, "interval_ms": 1 } }),
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    let done = admin.wait_terminal(&action_id).await;
    assert_eq!(done["state"], "completed", "{done}");

    // A reader holds cursors into the events feed and into the action's chunks.
    let (status, events) = admin.get("/aip/v1/events?limit=1").await;
    assert_eq!(status, 200, "{events}");
    let event_cursor = events["next_cursor"]
        .as_str()
        .unwrap_or_else(|| panic!("{events}"))
        .to_owned();
    let (status, chunks) = admin
        .get(&format!("/aip/v1/actions/{action_id}/chunks?limit=1"))
        .await;
    assert_eq!(status, 200, "{chunks}");
    let chunk_cursor = chunks["cursor"].as_str().unwrap().to_owned();

    // Within a few purge periods both are refused, typed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let expired = loop {
        let (status, reply) = admin
            .get(&format!("/aip/v1/events?cursor={event_cursor}"))
            .await;
        if status == 410 {
            break reply;
        }
        assert_eq!(status, 200, "{reply}");
        assert!(
            std::time::Instant::now() < deadline,
            "events were not purged: {reply}"
        );
        support::pause(200).await;
    };
    assert_eq!(
        expired["error"]["code"], "aip.read.cursor_expired",
        "{expired}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, reply) = admin
            .get(&format!(
                "/aip/v1/actions/{action_id}/chunks?cursor={chunk_cursor}"
            ))
            .await;
        if status == 410 {
            assert_eq!(reply["error"]["code"], "aip.read.cursor_expired", "{reply}");
            break;
        }
        assert_eq!(status, 200, "{reply}");
        assert!(
            std::time::Instant::now() < deadline,
            "chunks were not purged: {reply}"
        );
        support::pause(200).await;
    }
    // Read again from the start: what is retained, nothing of the purged action's history.
    let (status, fresh) = admin.get("/aip/v1/events").await;
    assert_eq!(status, 200, "{fresh}");
    assert!(
        !fresh.to_string().contains(&action_id),
        "purged events are gone: {fresh}"
    );
    // The action, its receipt chain and its audit event stay.
    let (status, action) = admin.get(&format!("/aip/v1/actions/{action_id}")).await;
    assert_eq!(
        (status, action["state"].as_str()),
        (200, Some("completed")),
        "{action}"
    );
    let (status, chain) = admin.get(&format!("/aip/v1/receipts/{action_id}")).await;
    assert_eq!(status, 200, "{chain}");
    assert!(chain["receipts"].as_array().unwrap().len() >= 3, "{chain}");
    let (status, audit) = admin
        .get(&format!("/aip/v1/audit/events?action_id={action_id}"))
        .await;
    assert_eq!(status, 200, "{audit}");
    assert_eq!(audit["events"][0]["action"], "action.admitted", "{audit}");
}
