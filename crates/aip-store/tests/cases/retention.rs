//! Suite cases of retention (run on both backends by `suite!`).

use super::*;

/// Chain `chain_id` of tenant `t1` (alice's receipts) as archived: `receipts` ending at
/// `last_hash`, with root hash `root`.
pub(super) fn archived_chain(chain_id: &str, receipts: u64, last_hash: &str) -> ChainPurge {
    ChainPurge {
        tenant: "t1".into(),
        chain_id: chain_id.into(),
        principal: Some("alice".into()),
        receipts,
        last_hash: last_hash.into(),
        root_hash: "root".into(),
    }
}

pub async fn history_past_retention_is_purged_and_a_cursor_into_it_is_expired(h: &Harness) {
    let s = &h.store;
    // An ended action's chunks, and a live action's.
    admit_ok(s, admission("ret-a1", None)).await;
    admit_ok(s, admission("ret-a2", None)).await;
    for action in ["ret-a1", "ret-a2"] {
        for seq in [1, 2] {
            s.append_chunk(data_chunk(action, seq, json!(seq)), None, T0)
                .await
                .unwrap();
        }
    }
    let done = transition("ret-a1", &[ActionState::Accepted], ActionState::Completed);
    s.transition_action(done).await.unwrap();

    // Three events, the first two older than the cutoff; a reader holds a cursor after the first.
    let mut old = event("ret-e1", "t1", None, None);
    old.occurred_at_ms = T0;
    let mut old2 = event("ret-e2", "t1", None, None);
    old2.occurred_at_ms = T0 + 1;
    let mut new = event("ret-e3", "t1", None, None);
    new.occurred_at_ms = T0 + 100;
    s.append_events(vec![old, old2, new]).await.unwrap();
    let q = EventQuery {
        tenant: "t1".into(),
        ..Default::default()
    };
    let first = s
        .list_events(&q, None, Limit::new(1).unwrap())
        .await
        .unwrap();
    let purged = s
        .purge_history(RetentionCutoffs {
            events_before_ms: Some(T0 + 50),
            chunks_before_ms: Some(T0 + 50),
        })
        .await
        .unwrap();
    // The actions' own (older) events go too: a purge removes a prefix of the listing order.
    assert_eq!(
        purged,
        HistoryPurge {
            events: 4,
            chunks: 2
        }
    );
    // The held cursor points into purged history: a typed refusal, never a silent skip.
    assert!(matches!(
        s.list_events(&q, Some(&first.next_cursor), Limit::max())
            .await,
        Err(StoreError::CursorExpired)
    ));
    // Without a cursor the retained events are read, and their cursors work.
    let rest = s.list_events(&q, None, Limit::max()).await.unwrap();
    assert_eq!(
        rest.items
            .iter()
            .map(|e| e.event_id.as_str())
            .collect::<Vec<_>>(),
        ["ret-e3"]
    );
    assert!(
        s.list_events(&q, Some(&rest.next_cursor), Limit::max())
            .await
            .is_ok()
    );
    // The ended action's chunks are gone and a chunk cursor into them is expired; the live
    // action keeps its chunks.
    assert!(matches!(
        s.list_chunks("t1", "ret-a1", Some(1), Limit::max()).await,
        Err(StoreError::CursorExpired)
    ));
    assert!(
        s.list_chunks("t1", "ret-a1", None, Limit::max())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.list_chunks("t1", "ret-a2", Some(1), Limit::max())
            .await
            .unwrap()
            .len(),
        1
    );
    // Receipts and audit are never purged; a second purge with the same cutoffs removes nothing.
    let again = s
        .purge_history(RetentionCutoffs {
            events_before_ms: Some(T0 + 50),
            chunks_before_ms: Some(T0 + 50),
        })
        .await
        .unwrap();
    assert_eq!(again, HistoryPurge::default());
}

pub async fn evidence_is_removed_only_by_its_purge_and_a_purged_chain_leaves_a_tombstone(
    h: &Harness,
) {
    let s = &h.store;
    // An ended action with a two-receipt chain, a live one with a chain, two old audit events and
    // a newer one.
    admit_ok(s, admission("ev-done", None)).await;
    admit_ok(s, admission("ev-live", None)).await;
    let done = transition("ev-done", &[ActionState::Accepted], ActionState::Completed);
    s.transition_action(done).await.unwrap();
    s.append_receipt(receipt("ev-r0", "ev-done", "e0", None))
        .await
        .unwrap();
    s.append_receipt(receipt("ev-r1", "ev-done", "e1", Some("e0")))
        .await
        .unwrap();
    s.append_receipt(receipt("ev-l0", "ev-live", "l0", None))
        .await
        .unwrap();
    for (label, at) in [("a.old", T0), ("b.old", T0 + 1), ("c.new", i64::MAX / 2)] {
        let mut a = super::channel::audit_of("t1", "alice", label);
        a.occurred_at_ms = at;
        s.append_audit(a).await.unwrap();
    }
    let q = AuditQuery {
        tenant: "t1".into(),
        ..Default::default()
    };
    let first = s
        .list_audit(&q, None, Limit::new(1).unwrap())
        .await
        .unwrap();

    // Nothing else may delete evidence.
    for sql in ["DELETE FROM aip_receipts", "DELETE FROM aip_audit"] {
        assert!(h.raw_exec(sql).await.is_err(), "{sql} was allowed");
    }

    // Due: the old audit prefix (the ended action's admission events among it) and the ended
    // action's chain only (the live action's chain is never due, whatever its age).
    let cutoffs = EvidenceCutoffs {
        audit_before_ms: Some(T0 + 1_000_000),
        receipts_before_ms: Some(i64::MAX / 4),
        max_audit: 10_000,
        max_chains: 1_000,
    };
    let due = s.due_evidence(cutoffs).await.unwrap();
    let labels: Vec<_> = due.audit.iter().map(|a| a.action_label.as_str()).collect();
    assert!(labels.ends_with(&["a.old", "b.old"]), "{labels:?}");
    assert!(!labels.contains(&"c.new"), "{labels:?}");
    assert_eq!(
        due.chains
            .iter()
            .map(|c| (c.chain_id.as_str(), c.receipts.len()))
            .collect::<Vec<_>>(),
        [("ev-done", 2)]
    );
    let purge = |chains: Vec<ChainPurge>| EvidencePurge {
        audit_through: due.audit_through,
        chains,
        archive: Some("evidence-test.json".into()),
        archive_sha256: Some("ab".repeat(32)),
        purged_at_ms: T0 + 5,
        audit: vec![super::channel::audit_of(
            "t1",
            "svc:aip:housekeeping",
            "retention.purged",
        )],
    };
    let archived = archived_chain("ev-done", 2, "e1");
    // A chain that changed since it was archived is kept.
    let stale = ChainPurge {
        receipts: 1,
        last_hash: "e0".into(),
        ..archived.clone()
    };
    let skipped = s.purge_evidence(purge(vec![stale])).await.unwrap();
    assert_eq!((skipped.chains, skipped.chains_changed), (0, 1));
    assert_eq!(
        s.list_receipts("t1", "ev-done", Limit::max())
            .await
            .unwrap()
            .len(),
        2
    );
    // The archived one goes, leaving its tombstone.
    let purged = s.purge_evidence(purge(vec![archived])).await.unwrap();
    assert_eq!((purged.chains, purged.receipts, purged.audit), (1, 2, 0));
    assert!(
        s.list_receipts("t1", "ev-done", Limit::max())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.list_receipts("t1", "ev-live", Limit::max())
            .await
            .unwrap()
            .len(),
        1
    );
    let tomb = s.chain_tombstone("t1", "ev-done").await.unwrap().unwrap();
    assert_eq!(
        (
            tomb.receipts,
            tomb.root_hash.as_str(),
            tomb.archive.as_deref()
        ),
        (2, "root", Some("evidence-test.json"))
    );
    assert!(s.chain_tombstone("t2", "ev-done").await.unwrap().is_none());
    // A purged chain is never restarted under its id.
    assert!(matches!(
        s.append_receipt(receipt("ev-r9", "ev-done", "x0", None))
            .await,
        Err(StoreError::ReceiptChainConflict { .. })
    ));
    // The audit prefix is gone (the first purge already took it), a cursor into it is expired,
    // the newer event and the purges' own events stay; the permit did not outlive the purge.
    let rest = s.list_audit(&q, None, Limit::max()).await.unwrap();
    let labels: Vec<_> = rest.items.iter().map(|a| a.action_label.as_str()).collect();
    assert_eq!(labels, ["c.new", "retention.purged", "retention.purged"]);
    assert!(matches!(
        s.list_audit(&q, Some(&first.next_cursor), Limit::max())
            .await,
        Err(StoreError::CursorExpired)
    ));
    for sql in ["DELETE FROM aip_receipts", "DELETE FROM aip_audit"] {
        assert!(
            h.raw_exec(sql).await.is_err(),
            "{sql} was allowed after a purge"
        );
    }
}
