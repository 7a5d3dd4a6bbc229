//! Retention through the binary (`[retention]`, spec 16.2): the housekeeping job on the
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
    let expired = gone(&admin, &format!("/aip/v1/events?cursor={event_cursor}")).await;
    assert_eq!(
        expired["error"]["code"], "aip.read.cursor_expired",
        "{expired}"
    );
    let reply = gone(
        &admin,
        &format!("/aip/v1/actions/{action_id}/chunks?cursor={chunk_cursor}"),
    )
    .await;
    assert_eq!(reply["error"]["code"], "aip.read.cursor_expired", "{reply}");
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

const BOB: &str = "bob-retention-token-0123456789abcdef";

#[tokio::test]
async fn receipts_and_audit_past_retention_are_archived_signed_before_they_are_purged() {
    let dir = tempfile::tempdir().unwrap();
    let bob = support::token_file(dir.path(), "bob.token", BOB);
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "[retention]\naudit_secs = 1\nreceipts_secs = 1\npurge_interval_secs = 1\n\
             archive_dir = \"archive\"\narchive_min_records = 1\n\n[[principals]]\nid = \"svc:bob\"\n\
             scopes = [\"invoke:cap:demo:echo\"]\ntoken_file = \"{}\"\n",
            bob.display()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, Some(&config), &[]);
    let admin = server.admin();
    let action_id = support::id("act_");
    let (status, reply) = admin
        .act(json!({ "id": action_id, "capability_id": "cap:demo:echo", "input": { "x": 1 } }))
        .await;
    assert_eq!(status, 200, "{reply}");
    let (status, chain) = admin.get(&format!("/aip/v1/receipts/{action_id}")).await;
    assert_eq!(status, 200, "{chain}");
    let root = chain["root_hash"].as_str().unwrap().to_owned();
    // A second audited admission, so that a cursor after the first event can fall behind the purge.
    let (status, reply) = admin
        .act(json!({ "id": support::id("act_"), "capability_id": "cap:demo:echo", "input": {} }))
        .await;
    assert_eq!(status, 200, "{reply}");
    let (status, page) = admin.get("/aip/v1/audit/events?limit=1").await;
    assert_eq!(status, 200, "{page}");
    let audit_cursor = page["cursor"]
        .as_str()
        .unwrap_or_else(|| panic!("{page}"))
        .to_owned();

    // Within a few purge periods the chain is gone from the store, and its reader is told where.
    let purged = gone(&admin, &format!("/aip/v1/receipts/{action_id}")).await;
    assert_eq!(purged["error"]["code"], "aip.read.purged", "{purged}");
    let message = purged["error"]["message"].as_str().unwrap();
    assert!(message.contains("archived in evidence-"), "{message}");
    // Read through its action, by route and by envelope, the chain is said to be purged and where
    // it is archived: never an empty chain that reads as an action without evidence.
    let (status, view) = admin
        .get(&format!(
            "/aip/v1/actions/{action_id}?include_receipts=true"
        ))
        .await;
    let (_, reply) = admin
        .post(
            "/aip/v1/messages",
            &support::envelope(
                "aip.lifecycle.v1.action_status_request",
                json!({ "action_status_request": { "action_id": action_id, "include_receipts": true } }),
            ),
        )
        .await;
    for view in [&view, &reply["body"]["action_status"]] {
        assert_eq!(status, 200, "{view}");
        assert!(view["receipt_chain"].is_null(), "{view}");
        assert_eq!(
            view["links"]["receipt_chain_purged"], "aip.read.purged",
            "{view}"
        );
        let archive = view["links"]["receipt_archive"]
            .as_str()
            .unwrap_or_default();
        assert!(
            archive.starts_with("evidence-") && message.contains(archive),
            "{view}"
        );
    }
    // Someone who could not read the chain learns nothing: 404 as for any unknown chain.
    let (status, hidden) = server
        .client(BOB)
        .get(&format!("/aip/v1/receipts/{action_id}"))
        .await;
    assert_eq!(status, 404, "{hidden}");
    // The audit cursor expires once the event after it is purged too.
    let reply = gone(
        &admin,
        &format!("/aip/v1/audit/events?cursor={audit_cursor}"),
    )
    .await;
    assert_eq!(reply["error"]["code"], "aip.read.cursor_expired", "{reply}");

    // The archives hold what was purged, signed by the node; `aip retention verify` checks them.
    let archives: Vec<_> = std::fs::read_dir(data.join("archive"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    let (_, manifest) = admin.get("/aip/v1/manifest").await;
    let node = manifest["agent"]["did"].as_str().unwrap().to_owned();
    let mut found_chain = None;
    let mut found_admitted = false;
    for path in &archives {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
            .args(["retention", "verify", "--signer", &node])
            .arg(path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}: {stdout}", path.display());
        assert!(
            stdout.starts_with("ok ") && stdout.contains(&node),
            "{stdout}"
        );
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        for c in doc["receipt_chains"].as_array().unwrap() {
            if c["chain"]["chain_id"] == action_id.as_str() {
                found_chain = Some((path.clone(), c["chain"]["root_hash"].clone()));
            }
        }
        found_admitted |= doc["audit"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["action"] == "action.admitted" && a["action_id"] == action_id.as_str());
    }
    let (archive, archived_root) = found_chain.expect("the chain is in an archive");
    assert_eq!(
        archived_root,
        root.as_str(),
        "the archived chain is the one served"
    );
    assert!(found_admitted, "the admission's audit event is archived");
    assert!(
        message.contains(archive.file_name().unwrap().to_str().unwrap()),
        "{message}"
    );

    // A tampered archive does not verify.
    let text = std::fs::read_to_string(&archive).unwrap();
    let tampered = dir.path().join("tampered.json");
    let forged = "0".repeat(root.len());
    assert!(text.contains(&root));
    std::fs::write(&tampered, text.replacen(&root, &forged, 1)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["retention", "verify"])
        .arg(&tampered)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The purge itself is audited, naming its archive.
    let (status, fresh) = admin.get("/aip/v1/audit/events?limit=1000").await;
    assert_eq!(status, 200, "{fresh}");
    let events = fresh["events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["action"] == "retention.purged"
            && e["data"]["archive"]
                .as_str()
                .is_some_and(|a| a.starts_with("evidence-"))),
        "{fresh}"
    );
    let (status, about) = admin
        .get(&format!("/aip/v1/audit/events?action_id={action_id}"))
        .await;
    assert_eq!(status, 200, "{about}");
    assert_eq!(about["events"], json!([]), "{about}");
}

#[tokio::test]
async fn evidence_is_archived_in_batches_so_the_purges_own_audit_event_does_not_make_an_archive_every_period()
 {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        "[retention]\naudit_secs = 1\npurge_interval_secs = 1\narchive_dir = \"archive\"\n\
         archive_min_records = 3\narchive_max_wait_secs = 3600\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, Some(&config), &[]);
    let admin = server.admin();
    let archives = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(data.join("archive"))
            .map(|d| {
                d.map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|e| e == "json"))
                    .collect()
            })
            .unwrap_or_default()
    };
    // One admission is one audit event: below the batch, so nothing is archived yet.
    let (status, reply) = admin
        .act(json!({ "id": support::id("act_"), "capability_id": "cap:demo:echo", "input": {} }))
        .await;
    assert_eq!(status, 200, "{reply}");
    support::pause(3_000).await;
    assert!(archives().is_empty(), "{:?}", archives());
    // Three more fill a batch: one archive holds them.
    for _ in 0..3 {
        let (status, reply) = admin
            .act(
                json!({ "id": support::id("act_"), "capability_id": "cap:demo:echo", "input": {} }),
            )
            .await;
        assert_eq!(status, 200, "{reply}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while archives().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no archive was written"
        );
        support::pause(200).await;
    }
    // Several periods later the purge's own `retention.purged` event is due, alone: it waits for
    // a batch instead of becoming an archive of one record per period.
    support::pause(4_000).await;
    let written = archives();
    assert_eq!(written.len(), 1, "{written:?}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&written[0]).unwrap()).unwrap();
    assert!(doc["audit"].as_array().unwrap().len() >= 3, "{doc}");
    let (status, audit) = admin.get("/aip/v1/audit/events?limit=1000").await;
    assert_eq!(status, 200, "{audit}");
    let purges = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "retention.purged")
        .count();
    assert_eq!(purges, 1, "{audit}");
}

#[test]
fn evidence_retention_batch_bounds_are_checked_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        "[retention]\naudit_secs = 60\narchive_dir = \"a\"\narchive_min_records = 0\n",
    )
    .unwrap();
    let err = support::serve_refused(&dir.path().join("data"), &config);
    assert!(err.contains("archive_min_records"), "{err}");
}

#[test]
fn evidence_retention_without_an_archive_directory_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("aip.toml");
    std::fs::write(&config, "[retention]\nreceipts_secs = 60\n").unwrap();
    let err = support::serve_refused(&dir.path().join("data"), &config);
    assert!(err.contains("archive_dir"), "{err}");
}

/// Polls `path` until it answers 410 (within 20 s, answering 200 until then); the 410 body.
async fn gone(client: &support::Client, path: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, reply) = client.get(path).await;
        if status == 410 {
            return reply;
        }
        assert_eq!(status, 200, "{path}: {reply}");
        assert!(
            std::time::Instant::now() < deadline,
            "{path} was not purged: {reply}"
        );
        support::pause(200).await;
    }
}
