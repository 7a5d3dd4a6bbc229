//! Suite cases of events and stream chunks: cursors, reader scopes, filters, waiters (run on both
//! backends by `suite!`).

use super::*;

pub async fn events_page_through_opaque_reader_scoped_cursors(h: &Harness) {
    let s = &h.store;
    let evs: Vec<_> = (0..25)
        .map(|i| event(&format!("e{i:02}"), "t1", Some("alice"), None))
        .collect();
    let seqs = s.append_events(evs).await.unwrap();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let q = EventQuery {
        tenant: "t1".into(),
        principal: Some("alice".into()),
        ..Default::default()
    };
    let mut cursor: Option<String> = None;
    let mut seen = Vec::new();
    loop {
        let page = s
            .list_events(&q, cursor.as_deref(), Limit::new(10).unwrap())
            .await
            .unwrap();
        assert!(page.items.len() <= 10);
        assert!(
            page.next_cursor.parse::<u64>().is_err(),
            "a cursor is not a raw sequence"
        );
        if page.items.is_empty() {
            assert_eq!(
                Some(page.next_cursor),
                cursor,
                "an empty page keeps the cursor"
            );
            break;
        }
        seen.extend(page.items.into_iter().map(|e| e.event_id));
        cursor = Some(page.next_cursor);
    }
    assert_eq!(
        seen,
        (0..25).map(|i| format!("e{i:02}")).collect::<Vec<_>>()
    );
    // The cursor is bound to the reader scope: another principal, tenant or filter cannot use it.
    let c = cursor.unwrap();
    for other in [
        EventQuery {
            principal: Some("mallory".into()),
            ..q.clone()
        },
        EventQuery {
            tenant: "t2".into(),
            ..q.clone()
        },
        EventQuery {
            principal: None,
            ..q.clone()
        },
        EventQuery {
            action_id: Some("a1".into()),
            ..q.clone()
        },
    ] {
        assert!(matches!(
            s.list_events(&other, Some(&c), Limit::max()).await,
            Err(StoreError::ForeignCursor)
        ));
    }
    // ... nor another list kind.
    let aq = ActionQuery {
        tenant: "t1".into(),
        principal: Some("alice".into()),
        ..Default::default()
    };
    assert!(matches!(
        s.list_actions(&aq, Some(&c), Limit::max()).await,
        Err(StoreError::ForeignCursor)
    ));
    for bad in ["", "not-a-cursor", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"] {
        let r = s.list_events(&q, Some(bad), Limit::max()).await;
        assert!(
            matches!(
                r,
                Err(StoreError::InvalidCursor) | Err(StoreError::ForeignCursor)
            ),
            "{bad}: {r:?}"
        );
    }
    assert!(matches!(
        s.append_events(vec![event("e00", "t1", None, None)]).await,
        Err(StoreError::Duplicate { kind: "event" })
    ));
}

pub async fn event_lists_never_show_another_readers_events(h: &Harness) {
    let s = &h.store;
    s.append_events(vec![
        event("e1", "t1", Some("alice"), Some("a1")),
        event("e2", "t1", Some("bob"), Some("b1")),
        event("e3", "t2", Some("alice"), Some("a1")),
        event("e4", "t1", None, None),
    ])
    .await
    .unwrap();
    let ids = |p: Page<EventRecord>| p.items.into_iter().map(|e| e.event_id).collect::<Vec<_>>();
    let alice = EventQuery {
        tenant: "t1".into(),
        principal: Some("alice".into()),
        ..Default::default()
    };
    assert_eq!(
        ids(s.list_events(&alice, None, Limit::max()).await.unwrap()),
        ["e1"]
    );
    let tenant = EventQuery {
        tenant: "t1".into(),
        ..Default::default()
    };
    assert_eq!(
        ids(s.list_events(&tenant, None, Limit::max()).await.unwrap()),
        ["e1", "e2", "e4"]
    );
    let action = EventQuery {
        tenant: "t1".into(),
        action_id: Some("a1".into()),
        ..Default::default()
    };
    assert_eq!(
        ids(s.list_events(&action, None, Limit::max()).await.unwrap()),
        ["e1"]
    );
    let t3 = EventQuery {
        tenant: "t3".into(),
        ..Default::default()
    };
    assert!(
        s.list_events(&t3, None, Limit::max())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

pub async fn a_waiter_wakes_when_an_event_is_committed(h: &Harness) {
    let s = &h.store;
    // A second instance stands for another node (on SQLite, another handle in this process).
    let writer = h.reopen().await.unwrap();
    let mut watch = s.watch_changes();
    watch.mark_seen();
    assert!(
        !watch.changed_within(Duration::from_millis(50)).await,
        "no change, no wake-up"
    );
    let same_store = {
        let s = s.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            s.append_events(vec![event("e1", "t1", None, None)])
                .await
                .unwrap();
        })
    };
    assert!(watch.changed_within(Duration::from_secs(5)).await);
    same_store.await.unwrap();
    if s.backend() == Backend::Postgres {
        // Another node's commit wakes this node through LISTEN/NOTIFY.
        watch.mark_seen();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            writer
                .append_events(vec![event("e2", "t1", None, None)])
                .await
                .unwrap();
        });
        assert!(watch.changed_within(Duration::from_secs(5)).await);
    }
}

pub async fn a_chunk_batch_is_written_in_order_all_or_nothing_and_under_its_fence(h: &Harness) {
    let s = &h.store;
    admit_ok(s, admission("a1", None)).await;
    let ch = |seq: u64, data: serde_json::Value| data_chunk("a1", seq, data);
    let seqs = |v: Vec<ChunkRecord>| v.into_iter().map(|c| c.sequence).collect::<Vec<_>>();
    assert_eq!(s.append_chunks(vec![], None, T0).await.unwrap(), []);
    assert_eq!(
        s.append_chunks(
            vec![ch(1, json!(1)), ch(2, json!(2)), ch(3, json!(3))],
            None,
            T0
        )
        .await
        .unwrap(),
        [ChunkAppend::Inserted; 3]
    );
    // A re-dispatched handler re-sending a retained chunk, then a new one.
    assert_eq!(
        s.append_chunks(vec![ch(3, json!(3)), ch(4, json!(4))], None, T0)
            .await
            .unwrap(),
        [ChunkAppend::Duplicate, ChunkAppend::Inserted]
    );
    // One refused chunk writes none of its batch.
    assert!(matches!(
        s.append_chunks(vec![ch(5, json!(5)), ch(2, json!("other"))], None, T0)
            .await,
        Err(StoreError::ChunkConflict { sequence: 2 })
    ));
    assert!(matches!(
        s.append_chunks(vec![ch(6, json!(6)), ch(5, json!(5))], None, T0)
            .await,
        Err(StoreError::ChunkOutOfOrder {
            sequence: 5,
            last: 6
        })
    ));
    assert_eq!(
        seqs(s.list_chunks("t1", "a1", None, Limit::max()).await.unwrap()),
        [1, 2, 3, 4]
    );
    // Fenced: a lease that is not held writes nothing.
    admit_ok(s, admission("a2", None)).await;
    s.enqueue(job("j2", Some("a2"), 3)).await.unwrap();
    let lease = s
        .claim_job("j2", &WorkerId::fresh(), T0, 1_000)
        .await
        .unwrap()
        .unwrap();
    let in_a2 = |seq: u64| data_chunk("a2", seq, json!(seq));
    assert!(matches!(
        s.append_chunks(vec![in_a2(1), in_a2(2)], Some(&lease.fence), T0 + 5_000)
            .await,
        Err(StoreError::StaleLease)
    ));
    assert_eq!(
        s.append_chunks(vec![in_a2(1), in_a2(2)], Some(&lease.fence), T0 + 1)
            .await
            .unwrap(),
        [ChunkAppend::Inserted; 2]
    );
    assert_eq!(
        seqs(s.list_chunks("t1", "a2", None, Limit::max()).await.unwrap()),
        [1, 2]
    );
}

pub async fn chunks_are_strictly_increasing_and_duplicates_are_tolerated(h: &Harness) {
    let s = &h.store;
    admit_ok(s, admission("a1", None)).await;
    let ch = |seq: u64, data: serde_json::Value| data_chunk("a1", seq, data);
    assert_eq!(
        s.append_chunk(ch(1, json!("one")), None, T0).await.unwrap(),
        ChunkAppend::Inserted
    );
    assert_eq!(
        s.append_chunk(ch(2, json!("two")), None, T0).await.unwrap(),
        ChunkAppend::Inserted
    );
    assert_eq!(
        s.append_chunk(ch(5, json!("five")), None, T0)
            .await
            .unwrap(),
        ChunkAppend::Inserted
    );
    assert_eq!(
        s.append_chunk(ch(2, json!("two")), None, T0).await.unwrap(),
        ChunkAppend::Duplicate
    );
    assert!(matches!(
        s.append_chunk(ch(2, json!("TWO")), None, T0).await,
        Err(StoreError::ChunkConflict { sequence: 2 })
    ));
    assert!(matches!(
        s.append_chunk(ch(4, json!("four")), None, T0).await,
        Err(StoreError::ChunkOutOfOrder {
            sequence: 4,
            last: 5
        })
    ));
    let mut other_kind = ch(5, json!("five"));
    other_kind.kind = "done".into();
    assert!(matches!(
        s.append_chunk(other_kind, None, T0).await,
        Err(StoreError::ChunkConflict { .. })
    ));
    let missing = NewChunk {
        action_id: "nope".into(),
        ..ch(1, json!(1))
    };
    assert!(matches!(
        s.append_chunk(missing, None, T0).await,
        Err(StoreError::NotFound { kind: "action" })
    ));
    let seqs = |v: Vec<ChunkRecord>| v.into_iter().map(|c| c.sequence).collect::<Vec<_>>();
    assert_eq!(
        seqs(s.list_chunks("t1", "a1", None, Limit::max()).await.unwrap()),
        [1, 2, 5]
    );
    assert_eq!(
        seqs(
            s.list_chunks("t1", "a1", Some(1), Limit::max())
                .await
                .unwrap()
        ),
        [2, 5]
    );
    assert_eq!(
        seqs(
            s.list_chunks("t1", "a1", Some(1), Limit::new(1).unwrap())
                .await
                .unwrap()
        ),
        [2]
    );
    assert_eq!(
        s.list_chunks("t1", "a1", Some(0), Limit::max())
            .await
            .unwrap()[0]
            .data,
        json!("one")
    );
    assert!(
        s.list_chunks("t1", "a1", Some(5), Limit::max())
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn events_filter_by_kind_and_a_cursor_is_bound_to_its_filter(h: &Harness) {
    let s = &h.store;
    let kinded = |id: &str, kind: &str| NewEvent {
        kind: kind.into(),
        ..event(id, "t1", Some("alice"), Some("a1"))
    };
    s.append_events(vec![
        kinded("k1", "aip.action.accepted"),
        kinded("k2", "aip.action.completed"),
        kinded("k3", "aip.action.accepted"),
        kinded("k4", "aip.session.created"),
    ])
    .await
    .unwrap();
    let ids = |p: &Page<EventRecord>| {
        p.items
            .iter()
            .map(|e| e.event_id.clone())
            .collect::<Vec<_>>()
    };
    let accepted = EventQuery {
        tenant: "t1".into(),
        kinds: vec!["aip.action.accepted".into()],
        ..Default::default()
    };
    let first = s
        .list_events(&accepted, None, Limit::new(1).unwrap())
        .await
        .unwrap();
    assert_eq!(ids(&first), ["k1"]);
    let next = s
        .list_events(&accepted, Some(&first.next_cursor), Limit::max())
        .await
        .unwrap();
    assert_eq!(ids(&next), ["k3"]);
    let two = EventQuery {
        kinds: vec!["aip.session.created".into(), "aip.action.completed".into()],
        ..accepted.clone()
    };
    assert_eq!(
        ids(&s.list_events(&two, None, Limit::max()).await.unwrap()),
        ["k2", "k4"]
    );
    // A cursor from a filtered list is not valid for another filter, nor for no filter.
    for other in [
        two,
        EventQuery {
            kinds: vec![],
            ..accepted.clone()
        },
    ] {
        assert!(matches!(
            s.list_events(&other, Some(&first.next_cursor), Limit::max())
                .await,
            Err(StoreError::ForeignCursor | StoreError::InvalidCursor)
        ));
    }
    let too_many = EventQuery {
        kinds: (0..=EventQuery::MAX_KINDS)
            .map(|i| format!("k{i}"))
            .collect(),
        ..accepted
    };
    assert!(matches!(
        s.list_events(&too_many, None, Limit::max()).await,
        Err(StoreError::InvalidInput(_))
    ));
}
