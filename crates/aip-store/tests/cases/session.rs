//! Suite cases of sessions, resume tokens and message-id replay claims (run on both backends by
//! `suite!`).

use super::*;

fn session_step(id: &str, from: SessionState, to: SessionState) -> SessionTransition {
    SessionTransition {
        session_id: id.into(),
        from: vec![from],
        to,
        data: None,
        events: vec![],
        now_ms: T0 + 5,
    }
}

/// Reads of a session may be answered from memory (SQLite): a committed change is never hidden by
/// an earlier read, whether the reads came just before it or raced it.
pub async fn a_session_read_after_its_change_sees_the_change(h: &Harness) {
    let s = &h.store;
    s.create_session(new_session("s-read", "alice"), vec![])
        .await
        .unwrap();
    let mut state = SessionState::New;
    for next in [
        SessionState::Active,
        SessionState::Processing,
        SessionState::Completed,
    ] {
        // Read it twice (the second may come from memory), change it, and read it at once.
        for _ in 0..2 {
            assert_eq!(
                s.get_session("t1", "s-read").await.unwrap().unwrap().state,
                state
            );
        }
        let reads = async {
            let mut seen = Vec::new();
            for _ in 0..8 {
                seen.push(s.get_session("t1", "s-read").await.unwrap().unwrap().state);
            }
            seen
        };
        let (changed, raced) = tokio::join!(
            s.transition_session(session_step("s-read", state, next)),
            reads
        );
        changed.unwrap();
        assert!(raced.iter().all(|r| [state, next].contains(r)), "{raced:?}");
        assert_eq!(
            s.get_session("t1", "s-read").await.unwrap().unwrap().state,
            next
        );
        state = next;
    }
}

pub async fn sessions_follow_the_state_machine_with_compare_and_set(h: &Harness) {
    let s = &h.store;
    let created = s
        .create_session(
            new_session("s1", "alice"),
            vec![event("ev-s1", "t1", Some("alice"), None)],
        )
        .await
        .unwrap();
    assert_eq!(created.state, SessionState::New);
    assert!(matches!(
        s.create_session(new_session("s1", "alice"), vec![]).await,
        Err(StoreError::Duplicate { kind: "session" })
    ));
    assert!(matches!(
        s.transition_session(session_step(
            "s1",
            SessionState::New,
            SessionState::Completed
        ))
        .await,
        Err(StoreError::InvalidTransition { .. })
    ));
    assert!(matches!(
        s.transition_session(session_step(
            "s1",
            SessionState::Active,
            SessionState::Processing
        ))
        .await,
        Err(StoreError::StateConflict { .. })
    ));
    let mut step = session_step("s1", SessionState::New, SessionState::Active);
    step.data = Some(json!({"profile": "x"}));
    let r = s.transition_session(step).await.unwrap();
    assert_eq!(
        (r.state, r.data.clone(), r.updated_at_ms),
        (SessionState::Active, json!({"profile": "x"}), T0 + 5)
    );
    for (from, to) in [
        (SessionState::Active, SessionState::Processing),
        (SessionState::Processing, SessionState::Completed),
        (SessionState::Completed, SessionState::Settled),
    ] {
        s.transition_session(session_step("s1", from, to))
            .await
            .unwrap();
    }
    assert!(matches!(
        s.transition_session(session_step(
            "s1",
            SessionState::Settled,
            SessionState::Active
        ))
        .await,
        Err(StoreError::Terminal { .. })
    ));
    assert_eq!(
        s.get_session("t1", "s1").await.unwrap().unwrap().state,
        SessionState::Settled
    );
    assert!(s.get_session("t1", "nope").await.unwrap().is_none());
    s.create_session(new_session("s2", "bob"), vec![])
        .await
        .unwrap();
    let alice = SessionQuery {
        tenant: "t1".into(),
        principal: Some("alice".into()),
        ..Default::default()
    };
    let page = s.list_sessions(&alice, None, Limit::max()).await.unwrap();
    assert_eq!(
        page.items
            .iter()
            .map(|x| x.session_id.as_str())
            .collect::<Vec<_>>(),
        ["s1"]
    );
    let all = SessionQuery {
        tenant: "t1".into(),
        ..Default::default()
    };
    let first = s
        .list_sessions(&all, None, Limit::new(1).unwrap())
        .await
        .unwrap();
    let second = s
        .list_sessions(&all, Some(&first.next_cursor), Limit::new(1).unwrap())
        .await
        .unwrap();
    assert_eq!(
        (
            first.items[0].session_id.as_str(),
            second.items[0].session_id.as_str()
        ),
        ("s1", "s2")
    );
    assert!(matches!(
        s.list_sessions(&alice, Some(&first.next_cursor), Limit::max())
            .await,
        Err(StoreError::ForeignCursor)
    ));
    assert_eq!(events_of(s, "t1").await.len(), 1);
}

pub async fn resume_tokens_are_single_use_stored_hashed_and_expire(h: &Harness) {
    let s = &h.store;
    s.create_session(new_session("s1", "alice"), vec![])
        .await
        .unwrap();
    assert!(matches!(
        s.issue_resume_token("nope", "tok", T0 + 10, T0).await,
        Err(StoreError::NotFound { kind: "session" })
    ));
    s.issue_resume_token("s1", "secret-token-1", T0 + 1_000, T0)
        .await
        .unwrap();
    let stored = h
        .raw_strings("SELECT token_hash FROM aip_resume_tokens")
        .await;
    assert_eq!(stored.len(), 1);
    assert!(
        !stored[0].contains("secret-token-1") && stored[0].len() == 64,
        "only a hash is stored"
    );
    let session = s
        .consume_resume_token(
            "s1",
            "secret-token-1",
            Some(("secret-token-2", T0 + 2_000)),
            T0 + 10,
        )
        .await
        .unwrap();
    assert_eq!(session.session_id, "s1");
    assert!(matches!(
        s.consume_resume_token("s1", "secret-token-1", None, T0 + 11)
            .await,
        Err(StoreError::ResumeTokenInvalid)
    ));
    assert!(
        matches!(
            s.consume_resume_token("s1", "secret-token-2", None, T0 + 2_000)
                .await,
            Err(StoreError::ResumeTokenInvalid)
        ),
        "expired"
    );
    assert!(matches!(
        s.consume_resume_token("s1", "never-issued", None, T0).await,
        Err(StoreError::ResumeTokenInvalid)
    ));
    s.issue_resume_token("s1", "secret-token-3", T0 + 1_000, T0)
        .await
        .unwrap();
    // A bad replacement aborts the consume: the old token stays usable.
    assert!(matches!(
        s.consume_resume_token("s1", "secret-token-3", Some(("secret-token-3", T0 + 5)), T0)
            .await,
        Err(StoreError::InvalidInput(_))
    ));
    assert!(
        s.consume_resume_token("s1", "secret-token-3", None, T0 + 1)
            .await
            .is_ok()
    );
}

pub async fn concurrent_resumes_consume_a_token_once(h: &Harness) {
    let s = &h.store;
    s.create_session(new_session("s1", "alice"), vec![])
        .await
        .unwrap();
    s.issue_resume_token("s1", "tok", T0 + 10_000, T0)
        .await
        .unwrap();
    let st = s.clone();
    let outcomes = race(12, move |i| {
        let s = st.clone();
        async move {
            s.consume_resume_token(
                "s1",
                "tok",
                Some((&format!("next-{i}"), T0 + 20_000)),
                T0 + 1,
            )
            .await
        }
    })
    .await;
    assert_eq!(wins(&outcomes), 1);
}

pub async fn message_id_claims_detect_replays_and_survive_a_restart(h: &Harness) {
    let s = &h.store;
    assert_eq!(
        s.claim_message_id("did:key:z1", "m1", T0, T0 + 1_000)
            .await
            .unwrap(),
        ReplayClaim::Claimed
    );
    assert_eq!(
        s.claim_message_id("did:key:z1", "m1", T0 + 1, T0 + 1_000)
            .await
            .unwrap(),
        ReplayClaim::Replayed
    );
    assert_eq!(
        s.claim_message_id("did:key:z2", "m1", T0 + 1, T0 + 1_000)
            .await
            .unwrap(),
        ReplayClaim::Claimed
    );
    let restarted = h.reopen().await.unwrap();
    assert_eq!(
        restarted
            .claim_message_id("did:key:z1", "m1", T0 + 999, T0 + 2_000)
            .await
            .unwrap(),
        ReplayClaim::Replayed
    );
    // After the retention window the id may be claimed again.
    assert_eq!(
        restarted
            .claim_message_id("did:key:z1", "m1", T0 + 1_000, T0 + 2_000)
            .await
            .unwrap(),
        ReplayClaim::Claimed
    );
    assert!(matches!(
        s.claim_message_id("x", "m", T0, T0).await,
        Err(StoreError::InvalidInput(_))
    ));
    // Concurrent claims of one id: exactly one wins.
    let st = s.clone();
    let outcomes = race(16, move |_| {
        let s = st.clone();
        async move { s.claim_message_id("race", "m", T0, T0 + 1_000).await }
    })
    .await;
    let claimed = outcomes
        .into_iter()
        .filter(|o| *o.as_ref().unwrap() == ReplayClaim::Claimed)
        .count();
    assert_eq!(claimed, 1);
}

pub async fn active_actions_are_counted_per_session_under_the_readers_scope(h: &Harness) {
    let s = &h.store;
    for (id, tenant, principal, session) in [
        ("c1", "t1", "alice", Some("s1")),
        ("c2", "t1", "alice", Some("s1")),
        ("c3", "t1", "bob", Some("s1")),
        ("c4", "t1", "alice", Some("s2")),
        ("c5", "t2", "alice", Some("s1")),
        ("c6", "t1", "alice", None),
    ] {
        let mut a = admission(id, None);
        a.action = new_action(id, tenant, principal, ActionState::Accepted);
        a.action.session_id = session.map(Into::into);
        a.events = vec![];
        admit_ok(s, a).await;
    }
    s.transition_action(transition(
        "c2",
        &[ActionState::Accepted],
        ActionState::Completed,
    ))
    .await
    .unwrap();
    let session = |principal: Option<&str>| ActionQuery {
        tenant: "t1".into(),
        principal: principal.map(Into::into),
        session_id: Some("s1".into()),
        ..Default::default()
    };
    assert_eq!(
        s.count_active_actions(&session(Some("alice")))
            .await
            .unwrap(),
        1
    );
    assert_eq!(s.count_active_actions(&session(None)).await.unwrap(), 2);
    assert_eq!(
        s.count_active_actions(&session(Some("carol")))
            .await
            .unwrap(),
        0
    );
    let t2 = ActionQuery {
        tenant: "t2".into(),
        session_id: Some("s2".into()),
        ..Default::default()
    };
    assert_eq!(s.count_active_actions(&t2).await.unwrap(), 0);
    // The same actions by state and mode: what the session is doing (spec 10.3).
    let by_state = s.active_actions_by_state(&session(None)).await.unwrap();
    assert_eq!(
        by_state
            .iter()
            .map(|a| (a.state, a.count))
            .collect::<Vec<_>>(),
        [(ActionState::Accepted, 2)],
        "{by_state:?}"
    );
    assert!(s.active_actions_by_state(&t2).await.unwrap().is_empty());
}

pub async fn a_resume_token_presented_on_another_session_is_refused_and_stays_usable(h: &Harness) {
    let s = &h.store;
    for id in ["s1", "s2"] {
        s.create_session(new_session(id, "alice"), vec![])
            .await
            .unwrap();
    }
    s.issue_resume_token("s1", "tok-of-s1", T0 + 1_000, T0)
        .await
        .unwrap();
    assert!(matches!(
        s.consume_resume_token("s2", "tok-of-s1", None, T0 + 1)
            .await,
        Err(StoreError::ResumeTokenInvalid)
    ));
    let resumed = s
        .consume_resume_token("s1", "tok-of-s1", None, T0 + 2)
        .await
        .unwrap();
    assert_eq!(resumed.session_id, "s1", "the token was not consumed");
}

/// Session listings key an index on the id's last 12 characters and compare the full id too: ids
/// that share a tail, a short id and rows without a session never mix, and pages keep going.
pub async fn a_sessions_rows_are_listed_by_its_id_alone_even_beside_ids_sharing_its_tail(
    h: &Harness,
) {
    let s = &h.store;
    let (a, b, short) = ("sess_a_0123456789ab", "sess_b_0123456789ab", "s1");
    for (id, session) in [
        ("x1", Some(a)),
        ("x2", Some(b)),
        ("x3", Some(a)),
        ("x4", None),
        ("x5", Some(short)),
        ("x6", Some(a)),
    ] {
        let mut admission = admission(id, None);
        admission.action.session_id = session.map(Into::into);
        admission.events[0].session_id = session.map(Into::into);
        admit_ok(s, admission).await;
        s.append_audit(NewAudit {
            audit_id: format!("au-{id}"),
            tenant: "t1".into(),
            actor: "alice".into(),
            action_label: "action.cancel_requested".into(),
            occurred_at_ms: T0,
            data: json!({}),
            action_id: Some(id.into()),
            session_id: session.map(Into::into),
        })
        .await
        .unwrap();
    }
    for (session, expected) in [
        (a, vec!["x1", "x3", "x6"]),
        (b, vec!["x2"]),
        (short, vec!["x5"]),
    ] {
        let [actions, events, audit] = session_rows(s, "t1", session).await;
        assert_eq!(actions, expected, "actions of {session}");
        let active = ActionQuery {
            tenant: "t1".into(),
            session_id: Some(session.into()),
            ..Default::default()
        };
        assert_eq!(
            s.count_active_actions(&active).await.unwrap(),
            expected.len() as u64
        );
        let want: Vec<_> = expected.iter().map(|id| format!("ev-{id}")).collect();
        assert_eq!(events, want, "events of {session}");
        let want: Vec<_> = expected.iter().map(|id| format!("au-{id}")).collect();
        assert_eq!(audit, want, "audit of {session}");
    }
    let everything = ActionQuery {
        tenant: "t1".into(),
        ..Default::default()
    };
    assert_eq!(s.count_active_actions(&everything).await.unwrap(), 6);
}

/// The ids of session `session`'s actions (read in pages of two), events and audit records.
pub async fn session_rows(s: &Arc<dyn Store>, tenant: &str, session: &str) -> [Vec<String>; 3] {
    let actions = ActionQuery {
        tenant: tenant.into(),
        session_id: Some(session.into()),
        ..Default::default()
    };
    let mut action_ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = s
            .list_actions(&actions, cursor.as_deref(), Limit::new(2).unwrap())
            .await
            .unwrap();
        if page.items.is_empty() {
            break;
        }
        action_ids.extend(page.items.into_iter().map(|r| r.action_id));
        cursor = Some(page.next_cursor);
    }
    let events = EventQuery {
        tenant: tenant.into(),
        session_id: Some(session.into()),
        ..Default::default()
    };
    let event_ids = s
        .list_events(&events, None, Limit::max())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| e.event_id)
        .collect();
    let audit = AuditQuery {
        tenant: tenant.into(),
        session_id: Some(session.into()),
        ..Default::default()
    };
    let audit_ids = s
        .list_audit(&audit, None, Limit::max())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|a| a.audit_id)
        .collect();
    [action_ids, event_ids, audit_ids]
}
