//! Suite cases of admission, idempotency reservations and action transitions (run on both
//! backends by `suite!`).

use super::*;

pub async fn admission_writes_action_receipts_events_and_job_in_one_transaction(h: &Harness) {
    let s = &h.store;
    let mut a = admission(
        "a1",
        Some(claim("k1", "h1", CollisionBehavior::RejectConflict)),
    );
    a.action.mode = "async".into();
    a.action.state = ActionState::Queued;
    a.receipts = vec![
        receipt("r1", "a1", "h-r1", None),
        receipt("r2", "a1", "h-r2", Some("h-r1")),
    ];
    a.job = Some(job("j1", Some("a1"), 3));
    let rec = admit_ok(s, a).await;
    assert_eq!(rec.state, ActionState::Queued);
    assert_eq!(rec.idempotency_key.as_deref(), Some("k1"));
    assert_eq!(rec.input_hash.as_deref(), Some("h1"));
    assert_eq!(s.get_action("t1", "a1").await.unwrap().unwrap(), rec);
    assert_eq!(
        s.list_receipts("t1", "a1", Limit::max())
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(events_of(s, "t1").await.len(), 1);
    let res = s
        .get_idempotency("tenant:t1/cap:demo:book", "k1", T0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(res.action_id, "a1");
    let lease = s
        .claim("actions", &WorkerId::fresh(), T0, 1000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.action_id.as_deref(), Some("a1"));
    assert_eq!(lease.payload, json!({"job": "j1"}));

    // A failing part (a receipt that does not extend its chain) rolls back every part.
    let mut bad = admission(
        "a2",
        Some(claim("k2", "h2", CollisionBehavior::RejectConflict)),
    );
    bad.receipts = vec![receipt("r3", "a1", "h-r3", Some("wrong"))];
    bad.job = Some(job("j2", Some("a2"), 3));
    assert!(matches!(
        s.admit(bad).await,
        Err(StoreError::ReceiptChainConflict { .. })
    ));
    assert!(s.get_action("t1", "a2").await.unwrap().is_none());
    assert!(
        s.get_idempotency("tenant:t1/cap:demo:book", "k2", T0)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(events_of(s, "t1").await.len(), 1);
    assert!(
        s.claim("actions", &WorkerId::fresh(), T0, 1000)
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn a_duplicate_action_id_is_rejected_and_writes_nothing(h: &Harness) {
    let s = &h.store;
    admit_ok(s, admission("a1", None)).await;
    let mut dup = admission("a1", None);
    dup.events = vec![event("ev-other", "t1", Some("alice"), Some("a1"))];
    assert!(matches!(
        s.admit(dup).await,
        Err(StoreError::Duplicate { kind: "action" })
    ));
    assert_eq!(events_of(s, "t1").await.len(), 1);
    let mut terminal = admission("a3", None);
    terminal.action.state = ActionState::Completed;
    assert!(matches!(
        s.admit(terminal).await,
        Err(StoreError::InvalidInput(_))
    ));
}

pub async fn return_original_result_replays_the_owner_whatever_the_input(h: &Harness) {
    let s = &h.store;
    admit_ok(
        s,
        admission(
            "a1",
            Some(claim("k", "h1", CollisionBehavior::ReturnOriginalResult)),
        ),
    )
    .await;
    let mut done = transition("a1", &[ActionState::Accepted], ActionState::Completed);
    done.result = Some(json!({"status": "completed", "output": 1}));
    s.transition_action(done).await.unwrap();
    for hash in ["h1", "h-other"] {
        match s
            .admit(admission(
                "a2",
                Some(claim("k", hash, CollisionBehavior::ReturnOriginalResult)),
            ))
            .await
            .unwrap()
        {
            AdmissionOutcome::Replayed {
                original,
                reservation,
            } => {
                assert_eq!(original.action_id, "a1");
                assert_eq!(
                    original.result,
                    Some(json!({"status": "completed", "output": 1}))
                );
                assert_eq!(reservation.input_hash, "h1");
            }
            other => panic!("expected replay, got {other:?}"),
        }
    }
    assert!(s.get_action("t1", "a2").await.unwrap().is_none());
    assert_eq!(
        events_of(s, "t1").await.len(),
        1,
        "a replay writes no events"
    );
}

pub async fn reject_conflict_rejects_every_duplicate_without_writing(h: &Harness) {
    let s = &h.store;
    admit_ok(
        s,
        admission(
            "a1",
            Some(claim("k", "h1", CollisionBehavior::RejectConflict)),
        ),
    )
    .await;
    for hash in ["h1", "h2"] {
        match s
            .admit(admission(
                "a2",
                Some(claim("k", hash, CollisionBehavior::RejectConflict)),
            ))
            .await
            .unwrap()
        {
            AdmissionOutcome::Conflict { reservation } => {
                assert_eq!(reservation.action_id, "a1")
            }
            other => panic!("expected conflict, got {other:?}"),
        }
    }
    assert!(s.get_action("t1", "a2").await.unwrap().is_none());
    // The same key in another scope is independent.
    let mut other = claim("k", "h1", CollisionBehavior::RejectConflict);
    other.scope = "tenant:t2/cap:demo:book".into();
    admit_ok(s, admission("a3", Some(other))).await;
}

pub async fn revalidate_input_hash_replays_only_a_matching_hash(h: &Harness) {
    let s = &h.store;
    admit_ok(
        s,
        admission(
            "a1",
            Some(claim("k", "h1", CollisionBehavior::RevalidateInputHash)),
        ),
    )
    .await;
    match s
        .admit(admission(
            "a2",
            Some(claim("k", "h1", CollisionBehavior::RevalidateInputHash)),
        ))
        .await
        .unwrap()
    {
        AdmissionOutcome::Replayed { original, .. } => assert_eq!(original.action_id, "a1"),
        other => panic!("expected replay, got {other:?}"),
    }
    match s
        .admit(admission(
            "a3",
            Some(claim("k", "h2", CollisionBehavior::RevalidateInputHash)),
        ))
        .await
        .unwrap()
    {
        AdmissionOutcome::Conflict { reservation } => assert_eq!(reservation.input_hash, "h1"),
        other => panic!("expected conflict, got {other:?}"),
    }
    assert!(s.get_action("t1", "a2").await.unwrap().is_none());
    assert!(s.get_action("t1", "a3").await.unwrap().is_none());
}

pub async fn an_expired_reservation_is_taken_over_by_a_new_action(h: &Harness) {
    let s = &h.store;
    let mut c = claim("k", "h1", CollisionBehavior::RejectConflict);
    c.expires_at_ms = T0 + 10;
    admit_ok(s, admission("a1", Some(c))).await;
    let mut later = admission(
        "a2",
        Some(claim("k", "h2", CollisionBehavior::RejectConflict)),
    );
    later.action.created_at_ms = T0 + 10;
    let mut c2 = claim("k", "h2", CollisionBehavior::RejectConflict);
    c2.expires_at_ms = T0 + 100_000;
    later.idempotency = Some(c2);
    admit_ok(s, later).await;
    let res = s
        .get_idempotency("tenant:t1/cap:demo:book", "k", T0 + 20)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (res.action_id.as_str(), res.input_hash.as_str()),
        ("a2", "h2")
    );
    assert!(
        s.get_action("t1", "a1").await.unwrap().is_some(),
        "the old action stays"
    );
    let mut expired = admission(
        "a3",
        Some(claim("k", "h", CollisionBehavior::RejectConflict)),
    );
    expired.idempotency.as_mut().unwrap().expires_at_ms = T0;
    assert!(matches!(
        s.admit(expired).await,
        Err(StoreError::InvalidInput(_))
    ));
}

pub async fn transitions_are_compare_and_set_and_terminal_states_are_final(h: &Harness) {
    let s = &h.store;
    admit_ok(s, admission("a1", None)).await;
    let r = s
        .transition_action(transition(
            "a1",
            &[ActionState::Accepted],
            ActionState::Running,
        ))
        .await
        .unwrap();
    assert_eq!(
        (r.state, r.version, r.updated_at_ms),
        (ActionState::Running, 1, T0 + 1)
    );
    match s
        .transition_action(transition(
            "a1",
            &[ActionState::Accepted],
            ActionState::Running,
        ))
        .await
    {
        Err(StoreError::StateConflict { actual }) => assert_eq!(actual, "running"),
        other => panic!("expected state conflict, got {other:?}"),
    }
    let mut done = transition("a1", &[ActionState::Running], ActionState::Completed);
    done.result = Some(json!({"ok": true}));
    done.events = vec![event("ev-done", "t1", Some("alice"), Some("a1"))];
    done.receipts = vec![receipt("r-done", "a1", "h-done", None)];
    let r = s.transition_action(done).await.unwrap();
    assert_eq!(r.result, Some(json!({"ok": true})));
    for to in [
        ActionState::Running,
        ActionState::Failed,
        ActionState::Completed,
    ] {
        let t = transition("a1", ActionState::ALL, to);
        assert!(matches!(
            s.transition_action(t).await,
            Err(StoreError::Terminal { .. })
        ));
    }
    assert!(matches!(
        s.transition_action(transition(
            "nope",
            &[ActionState::Accepted],
            ActionState::Running
        ))
        .await,
        Err(StoreError::NotFound { kind: "action" })
    ));
    assert_eq!(
        s.get_action("t1", "a1").await.unwrap().unwrap().result,
        Some(json!({"ok": true}))
    );
    assert_eq!(events_of(s, "t1").await.len(), 2);
    assert_eq!(
        s.list_receipts("t1", "a1", Limit::max())
            .await
            .unwrap()
            .len(),
        1
    );
    // Concurrent transitions from the same state: exactly one wins.
    admit_ok(s, admission("a2", None)).await;
    let st = s.clone();
    let outcomes = race(8, move |_| {
        let s = st.clone();
        async move {
            s.transition_action(transition(
                "a2",
                &[ActionState::Accepted],
                ActionState::Running,
            ))
            .await
        }
    })
    .await;
    assert_eq!(wins(&outcomes), 1);
}

pub async fn a_failed_transition_writes_none_of_its_events_or_receipts(h: &Harness) {
    let s = &h.store;
    admit_ok(s, admission("a1", None)).await;
    s.append_receipt(receipt("r0", "a1", "h0", None))
        .await
        .unwrap();
    let mut t = transition("a1", &[ActionState::Accepted], ActionState::Completed);
    t.result = Some(json!({"x": 1}));
    t.events = vec![event("ev-x", "t1", Some("alice"), Some("a1"))];
    t.receipts = vec![receipt("r1", "a1", "h1", Some("not-h0"))];
    assert!(matches!(
        s.transition_action(t).await,
        Err(StoreError::ReceiptChainConflict { .. })
    ));
    let a = s.get_action("t1", "a1").await.unwrap().unwrap();
    assert_eq!((a.state, a.result), (ActionState::Accepted, None));
    assert_eq!(events_of(s, "t1").await.len(), 1);
}

/// Spec 22.8: a principal's and a tenant's unfinished actions are bounded in the admission's own
/// transaction: past the quota nothing is written; finished work and work awaiting an approval free
/// or take no slot; a resend by id is still recognised; racing admissions never overshoot.
pub async fn concurrency_quotas_bound_unfinished_actions_in_the_admission_itself(h: &Harness) {
    let s = &h.store;
    let quota = |principal, tenant| RunningQuota {
        principal,
        tenant,
        queued: None,
    };
    let admit = |id: &str, principal: &str, q: RunningQuota| {
        let mut a = admission(id, None);
        a.action.principal = principal.into();
        a.events.clear();
        a.quota = q;
        a
    };
    let q2 = quota(Some(2), None);
    admit_ok(s, admit("q1", "alice", q2)).await;
    admit_ok(s, admit("q2", "alice", q2)).await;
    match s.admit(admit("q3", "alice", q2)).await {
        Err(StoreError::QuotaExceeded { bucket, limit }) => {
            assert_eq!((bucket, limit), ("principal", 2));
        }
        other => panic!("expected a quota refusal, got {other:?}"),
    }
    assert!(
        s.get_action("t1", "q3").await.unwrap().is_none(),
        "nothing written"
    );
    // A resend of an admitted id is still a duplicate, not a quota refusal.
    assert!(matches!(
        s.admit(admit("q2", "alice", q2)).await,
        Err(StoreError::Duplicate { kind: "action" })
    ));
    // Another principal has its own quota; the tenant's counts everyone.
    admit_ok(s, admit("q4", "bob", q2)).await;
    match s.admit(admit("q5", "carol", quota(None, Some(3)))).await {
        Err(StoreError::QuotaExceeded { bucket, limit }) => {
            assert_eq!((bucket, limit), ("tenant", 3));
        }
        other => panic!("expected the tenant's quota, got {other:?}"),
    }
    // Work waiting for an approval holds no slot.
    let mut gated = admit("q6", "alice", q2);
    gated.action.state = ActionState::PendingApproval;
    admit_ok(s, gated).await;
    // A finished action frees its slot.
    s.transition_action(transition(
        "q1",
        &[ActionState::Accepted],
        ActionState::Completed,
    ))
    .await
    .unwrap();
    admit_ok(s, admit("q7", "alice", q2)).await;
    // Racing admissions of a fresh principal with a quota of 3: exactly 3 get in.
    let store = s.clone();
    let outcomes = race(12, move |i| {
        let store = store.clone();
        let a = admit(&format!("race{i}"), "dave", quota(Some(3), None));
        async move { store.admit(a).await }
    })
    .await;
    let admitted = outcomes
        .iter()
        .filter(|o| matches!(o, Ok(AdmissionOutcome::Admitted { .. })))
        .count();
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, Err(StoreError::QuotaExceeded { .. })))
        .count();
    assert_eq!((admitted, refused), (3, 9), "{outcomes:?}");
}

/// Spec 22.8: the store's queue of actions waiting for a worker is bounded, every tenant together:
/// a queued admission past the bound is refused and writes nothing; work that does not wait for a
/// worker is not counted, and a queued action that starts frees its place.
pub async fn a_full_queue_refuses_a_queued_admission_and_writes_nothing(h: &Harness) {
    let s = &h.store;
    let bounded = RunningQuota {
        queued: Some(2),
        ..RunningQuota::default()
    };
    let admit = |id: &str, tenant: &str, state: ActionState| {
        let mut a = admission(id, None);
        a.action.tenant = tenant.into();
        a.action.state = state;
        a.events.clear();
        a.quota = bounded;
        a
    };
    admit_ok(s, admit("w1", "t1", ActionState::Queued)).await;
    admit_ok(s, admit("w2", "t2", ActionState::Queued)).await;
    match s.admit(admit("w3", "t1", ActionState::Queued)).await {
        Err(StoreError::QueueFull { limit }) => assert_eq!(limit, 2),
        other => panic!("expected a full queue, got {other:?}"),
    }
    assert!(
        s.get_action("t1", "w3").await.unwrap().is_none(),
        "nothing written"
    );
    // A sync admission does not wait for a worker.
    admit_ok(s, admit("w4", "t1", ActionState::Accepted)).await;
    // A queued action that starts leaves the queue.
    s.transition_action(transition(
        "w1",
        &[ActionState::Queued],
        ActionState::Running,
    ))
    .await
    .unwrap();
    admit_ok(s, admit("w5", "t1", ActionState::Queued)).await;
}
