//! Suite cases of the audit log (run on both backends by `suite!`).

use super::*;

pub async fn audit_events_are_append_only_and_reader_scoped(h: &Harness) {
    let s = &h.store;
    let au = |id: &str, tenant: &str, actor: &str| NewAudit {
        audit_id: id.into(),
        tenant: tenant.into(),
        actor: actor.into(),
        action_label: "session.closed".into(),
        occurred_at_ms: T0,
        data: json!({"id": id}),
        action_id: None,
        session_id: None,
    };
    let a1 = s.append_audit(au("au1", "t1", "alice")).await.unwrap();
    let a2 = s.append_audit(au("au2", "t1", "bob")).await.unwrap();
    s.append_audit(au("au3", "t2", "alice")).await.unwrap();
    assert!(a1.sequence < a2.sequence);
    assert!(matches!(
        s.append_audit(au("au1", "t1", "alice")).await,
        Err(StoreError::Duplicate { .. })
    ));
    let ids = |p: Page<AuditRecord>| p.items.into_iter().map(|a| a.audit_id).collect::<Vec<_>>();
    let alice = AuditQuery {
        tenant: "t1".into(),
        actor: Some("alice".into()),
        action_id: None,
        session_id: None,
        from_ms: None,
        to_ms: None,
        transaction_id: None,
    };
    assert_eq!(
        ids(s.list_audit(&alice, None, Limit::max()).await.unwrap()),
        ["au1"]
    );
    let t1 = AuditQuery {
        tenant: "t1".into(),
        actor: None,
        action_id: None,
        session_id: None,
        from_ms: None,
        to_ms: None,
        transaction_id: None,
    };
    let first = s
        .list_audit(&t1, None, Limit::new(1).unwrap())
        .await
        .unwrap();
    assert_eq!(
        ids(s
            .list_audit(&t1, Some(&first.next_cursor), Limit::max())
            .await
            .unwrap()),
        ["au2"]
    );
    assert!(matches!(
        s.list_audit(&alice, Some(&first.next_cursor), Limit::max())
            .await,
        Err(StoreError::ForeignCursor)
    ));
    assert!(
        h.raw_exec("UPDATE aip_audit SET actor = 'mallory'")
            .await
            .is_err()
    );
    assert!(h.raw_exec("DELETE FROM aip_audit").await.is_err());
    // A listing position, once given, never moves either (the sequencer only fills NULLs).
    assert!(
        h.raw_exec("UPDATE aip_audit SET pos = pos + 1000000")
            .await
            .is_err()
    );
    assert!(h.raw_exec("UPDATE aip_audit SET pos = NULL").await.is_err());
}

pub async fn audit_events_filter_by_action_session_and_time(h: &Harness) {
    let s = &h.store;
    let au = |id: &str, action: Option<&str>, session: Option<&str>, at: i64| NewAudit {
        audit_id: id.into(),
        tenant: "t1".into(),
        actor: "alice".into(),
        action_label: "action.cancel_requested".into(),
        action_id: action.map(Into::into),
        session_id: session.map(Into::into),
        occurred_at_ms: at,
        data: json!({}),
    };
    for a in [
        au("x1", Some("a1"), None, T0),
        au("x2", Some("a2"), Some("s1"), T0 + 10),
        au("x3", None, Some("s1"), T0 + 20),
        au("x4", Some("a1"), None, T0 + 30),
    ] {
        s.append_audit(a).await.unwrap();
    }
    let ids = |p: Page<AuditRecord>| p.items.into_iter().map(|a| a.audit_id).collect::<Vec<_>>();
    let all = AuditQuery {
        tenant: "t1".into(),
        ..Default::default()
    };
    let query = |f: fn(&mut AuditQuery)| {
        let mut q = all.clone();
        f(&mut q);
        q
    };
    let by_action = query(|q| q.action_id = Some("a1".into()));
    assert_eq!(
        ids(s.list_audit(&by_action, None, Limit::max()).await.unwrap()),
        ["x1", "x4"]
    );
    let by_session = query(|q| q.session_id = Some("s1".into()));
    assert_eq!(
        ids(s.list_audit(&by_session, None, Limit::max()).await.unwrap()),
        ["x2", "x3"]
    );
    let window = query(|q| {
        q.from_ms = Some(T0 + 10);
        q.to_ms = Some(T0 + 20);
    });
    assert_eq!(
        ids(s.list_audit(&window, None, Limit::max()).await.unwrap()),
        ["x2", "x3"]
    );
    let record = s.list_audit(&by_action, None, Limit::max()).await.unwrap();
    assert_eq!(record.items[0].action_id.as_deref(), Some("a1"));
}
