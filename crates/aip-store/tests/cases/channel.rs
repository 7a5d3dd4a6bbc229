//! Suite cases of conversations and channel messages (run on both backends by `suite!`).

use super::*;

pub(super) fn conversation(
    tenant: &str,
    id: &str,
    by: &str,
    assignee: Option<&str>,
) -> ConversationWrite {
    ConversationWrite {
        tenant: tenant.into(),
        conversation_id: id.into(),
        recorded_by: by.into(),
        assignee: assignee.map(str::to_owned),
        contact: Some("contact:ann".into()),
        status: "open".into(),
        body: json!({ "id": id, "channel": { "kind": "chat" }, "status": "open" }),
        as_of_ms: T0,
    }
}

/// An audit event of `actor` (for the writes that append one).
pub fn audit_of(tenant: &str, actor: &str, label: &str) -> NewAudit {
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

pub(super) fn message(c: ConversationWrite, delivery: &str, text: &str) -> NewChannelMessage {
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
    // A later delivery carrying an older state (by the sender's clock) does not roll it back.
    let mut older = update.clone();
    older.status = "pending".into();
    older.as_of_ms = T0 - 1;
    let ChannelWrite::Recorded(kept) = s
        .update_conversation(older, audit(), Some("u0".into()), T0 + 3)
        .await
        .unwrap()
    else {
        panic!("an older update is recorded as a delivery")
    };
    assert_eq!(kept.status, "resolved");
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
