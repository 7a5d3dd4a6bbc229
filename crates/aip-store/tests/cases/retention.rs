//! Suite cases of retention (run on both backends by `suite!`).

use super::*;

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
