//! Suite cases of conversations and channel messages (run on both backends by `suite!`).

use super::*;

fn conversation(tenant: &str, id: &str, by: &str, assignee: Option<&str>) -> ConversationWrite {
    ConversationWrite {
        tenant: tenant.into(),
        conversation_id: id.into(),
        recorded_by: by.into(),
        assignee: assignee.map(str::to_owned),
        contact: Some("contact:ann".into()),
        status: "open".into(),
        body: json!({ "id": id, "channel": { "kind": "chat" }, "status": "open" }),
    }
}

fn audit_of(tenant: &str, actor: &str, label: &str) -> NewAudit {
    NewAudit {
        audit_id: format!("aud_{}", uuid::Uuid::now_v7().simple()),
        tenant: tenant.into(),
        actor: actor.into(),
        action_label: label.into(),
        occurred_at_ms: T0,
        data: json!({}),
        action_id: None,
        session_id: None,
    }
}

fn message(c: ConversationWrite, delivery: &str, text: &str) -> NewChannelMessage {
    NewChannelMessage {
        audit: audit_of(&c.tenant, &c.recorded_by, "channel.message_recorded"),
        conversation: c,
        message_id: format!("chm_{}", uuid::Uuid::now_v7().simple()),
        delivery_key: delivery.into(),
        body: json!({ "parts": [{ "type": "text", "text": text }] }),
        now_ms: T0,
    }
}

async fn audit_count(s: &Arc<dyn Store>, tenant: &str) -> usize {
    let q = AuditQuery {
        tenant: tenant.into(),
        actor: None,
        action_id: None,
        session_id: None,
        from_ms: None,
        to_ms: None,
        transaction_id: None,
    };
    s.list_audit(&q, None, Limit::max())
        .await
        .unwrap()
        .items
        .len()
}

pub async fn a_channel_message_upserts_its_conversation_and_a_replayed_delivery_writes_nothing(
    h: &Harness,
) {
    let s = &h.store;
    let c = conversation("t1", "conv_1", "svc:connector", None);
    let first = s
        .record_channel_message(message(c.clone(), "d1", "hello"))
        .await
        .unwrap();
    let ChannelWrite::Recorded(record) = first else {
        panic!("first delivery is recorded")
    };
    assert_eq!((record.message_count, record.status.as_str()), (1, "open"));
    // The same connector's delivery again: nothing written, no audit line.
    let audits = audit_count(s, "t1").await;
    assert_eq!(audits, 1);
    let again = s
        .record_channel_message(message(c.clone(), "d1", "hello again"))
        .await
        .unwrap();
    assert_eq!(again, ChannelWrite::Replayed);
    assert_eq!(audit_count(s, "t1").await, audits);
    // Another connector's delivery with the same id, and the next delivery, are new messages.
    let mut other = c.clone();
    other.recorded_by = "svc:other".into();
    other.status = "pending".into();
    assert!(matches!(
        s.record_channel_message(message(other, "d1", "x"))
            .await
            .unwrap(),
        ChannelWrite::Recorded(_)
    ));
    let ChannelWrite::Recorded(third) = s
        .record_channel_message(message(c.clone(), "d2", "bye"))
        .await
        .unwrap()
    else {
        panic!("a new delivery is recorded")
    };
    // The first connector stays the recorder; the count and the latest columns are the store's.
    assert_eq!(
        (
            third.message_count,
            third.recorded_by.as_str(),
            third.status.as_str()
        ),
        (3, "svc:connector", "open")
    );
    let messages = s
        .list_channel_messages("t1", "conv_1", None, Limit::new(2).unwrap())
        .await
        .unwrap();
    assert_eq!(messages.items.len(), 2);
    assert_eq!(messages.items[0].body["parts"][0]["text"], "hello");
    let rest = s
        .list_channel_messages("t1", "conv_1", Some(&messages.next_cursor), Limit::max())
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.items[0].body["parts"][0]["text"], "bye");
    // A cursor of one conversation does not page another.
    assert!(
        s.list_channel_messages("t1", "conv_2", Some(&messages.next_cursor), Limit::max())
            .await
            .is_err()
    );
    // After a restart the claim still holds.
    let reopened = h.reopen().await.unwrap();
    assert_eq!(
        reopened
            .record_channel_message(message(c, "d2", "bye"))
            .await
            .unwrap(),
        ChannelWrite::Replayed
    );
}

pub async fn conversations_are_seen_by_their_connector_assignee_contact_and_tenant_readers(
    h: &Harness,
) {
    let s = &h.store;
    for (tenant, id, by, assignee) in [
        ("t1", "conv_a", "svc:c1", Some("agent:amy")),
        ("t1", "conv_b", "svc:c2", None),
        ("t2", "conv_c", "svc:c1", Some("agent:amy")),
    ] {
        s.record_channel_message(message(conversation(tenant, id, by, assignee), "d", "x"))
            .await
            .unwrap();
    }
    let ids = |p: Page<ConversationRecord>| {
        p.items
            .into_iter()
            .map(|c| c.conversation_id)
            .collect::<Vec<_>>()
    };
    let q = |reader: Option<&str>| ConversationQuery {
        tenant: "t1".into(),
        reader: reader.map(str::to_owned),
        ..Default::default()
    };
    let all = s
        .list_conversations(&q(None), None, Limit::max())
        .await
        .unwrap();
    assert_eq!(ids(all), ["conv_a", "conv_b"]);
    for (reader, seen) in [
        ("svc:c1", vec!["conv_a"]),
        ("agent:amy", vec!["conv_a"]),
        ("contact:ann", vec!["conv_a", "conv_b"]),
        ("svc:nobody", vec![]),
    ] {
        let page = s
            .list_conversations(&q(Some(reader)), None, Limit::max())
            .await
            .unwrap();
        assert_eq!(ids(page), seen, "{reader}");
    }
    assert!(
        s.get_conversation(&q(Some("svc:c2")), "conv_a")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.get_conversation(&q(None), "conv_c")
            .await
            .unwrap()
            .is_none()
    );
    // An update replaces the columns and filters follow it.
    let mut update = conversation("t1", "conv_b", "svc:c2", Some("agent:bob"));
    update.status = "resolved".into();
    let audit = || audit_of("t1", "svc:c2", "channel.conversation_updated");
    let ChannelWrite::Recorded(updated) = s
        .update_conversation(update.clone(), audit(), Some("u1".into()), T0 + 1)
        .await
        .unwrap()
    else {
        panic!("a first update is written")
    };
    // The same delivery again writes nothing, even with other content.
    let mut stale = update.clone();
    stale.status = "open".into();
    assert_eq!(
        s.update_conversation(stale, audit(), Some("u1".into()), T0 + 2)
            .await
            .unwrap(),
        ChannelWrite::Replayed
    );
    assert_eq!(
        (
            updated.status.as_str(),
            updated.message_count,
            updated.updated_at_ms
        ),
        ("resolved", 1, T0 + 1)
    );
    let resolved = ConversationQuery {
        status: Some("resolved".into()),
        ..q(None)
    };
    assert_eq!(
        ids(s
            .list_conversations(&resolved, None, Limit::max())
            .await
            .unwrap()),
        ["conv_b"]
    );
    // A cursor is bound to its query.
    let first = s
        .list_conversations(&q(None), None, Limit::new(1).unwrap())
        .await
        .unwrap();
    assert!(
        s.list_conversations(&resolved, Some(&first.next_cursor), Limit::max())
            .await
            .is_err()
    );
    let next = s
        .list_conversations(&q(None), Some(&first.next_cursor), Limit::max())
        .await
        .unwrap();
    assert_eq!(ids(next), ["conv_b"]);
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

pub async fn a_settlement_claims_each_completed_action_once_with_its_receipts(h: &Harness) {
    let s = &h.store;
    for id in ["set-a1", "set-a2", "set-a3"] {
        admit_ok(s, admission(id, None)).await;
    }
    for id in ["set-a1", "set-a2"] {
        let done = transition(id, &[ActionState::Accepted], ActionState::Completed);
        s.transition_action(done).await.unwrap();
    }
    let caps = vec!["cap:demo:echo".to_owned()];
    let unsettled = |s: Arc<dyn Store>, caps: Vec<String>| async move {
        s.unsettled_actions("t1", &caps, Limit::max())
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.action_id)
            .filter(|id| id.starts_with("set-"))
            .collect::<Vec<_>>()
    };
    // Only completed actions of the listed capabilities.
    assert_eq!(
        unsettled(s.clone(), caps.clone()).await,
        ["set-a1", "set-a2"]
    );
    assert!(
        unsettled(s.clone(), vec!["cap:other".into()])
            .await
            .is_empty()
    );
    let batch = |id: &str, actions: &[&str]| NewSettlement {
        batch_id: id.into(),
        tenant: "t1".into(),
        model: "per_call".into(),
        body: json!({ "id": id }),
        action_ids: actions.iter().map(|a| (*a).to_owned()).collect(),
        receipts: vec![receipt(&format!("{id}-r"), id, &format!("{id}-h"), None)],
        audit: audit_of("t1", "svc:billing", "settlement.closed"),
        now_ms: T0,
    };
    let recorded = s
        .record_settlement(batch("b1", &["set-a1", "set-a2"]))
        .await
        .unwrap();
    assert_eq!(recorded.batch_id, "b1");
    assert!(unsettled(s.clone(), caps.clone()).await.is_empty());
    // An action already settled, or a batch id already used, refuses the whole batch.
    assert!(matches!(
        s.record_settlement(batch("b2", &["set-a1"])).await,
        Err(StoreError::Duplicate { .. })
    ));
    assert!(s.get_settlement("t1", "b2").await.unwrap().is_none());
    assert!(s.get_receipt("b2-r").await.unwrap().is_none());
    assert!(matches!(
        s.record_settlement(batch("b1", &[])).await,
        Err(StoreError::Duplicate { .. })
    ));
    assert_eq!(
        s.get_settlement("t1", "b1").await.unwrap().unwrap().body,
        json!({ "id": "b1" })
    );
    assert!(s.get_settlement("t2", "b1").await.unwrap().is_none());
}
