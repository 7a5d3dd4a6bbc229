//! Suite cases of the callback outbox (run on both backends by `suite!`).

use super::*;

/// Admission of `id` with a callback subscription.
pub(super) fn subscribed(id: &str, terminal_only: bool, max_attempts: u32) -> Admission {
    let mut a = admission(id, None);
    a.callback = Some(CallbackSubscription {
        profile: "aip.native.http.v1".into(),
        target: format!("https://hooks.example.com/{id}"),
        terminal_only,
        max_attempts,
        spec: json!({ "timeout_ms": 1000 }),
    });
    a
}

pub(super) async fn deliveries(s: &Arc<dyn Store>, action: Option<&str>) -> Vec<DeliveryRecord> {
    let q = DeliveryQuery {
        tenant: "t1".into(),
        action_id: action.map(str::to_owned),
        ..Default::default()
    };
    s.list_deliveries(&q, None, Limit::max())
        .await
        .unwrap()
        .items
}

/// Subscription `id` of `action`, added after its admission.
pub(super) fn subscription(action: &str, id: &str, terminal_only: bool) -> NewActionSubscription {
    NewActionSubscription {
        tenant: "t1".into(),
        action_id: action.into(),
        subscription_id: id.into(),
        principal: "alice".into(),
        subscription: CallbackSubscription {
            profile: "aip.a2a.push.v1".into(),
            target: format!("https://hooks.example.com/{id}"),
            terminal_only,
            max_attempts: 2,
            spec: json!({ "id": id }),
        },
        created_at_ms: T0,
    }
}

async fn claim_delivery(s: &Arc<dyn Store>, now: i64) -> Lease {
    s.claim(CALLBACK_QUEUE, &WorkerId::fresh(), now, 1000)
        .await
        .unwrap()
        .expect("a delivery job is claimable")
}

pub async fn a_transition_queues_a_delivery_only_for_the_states_its_callback_covers(h: &Harness) {
    let s = &h.store;
    admit_ok(s, subscribed("cb1", true, 3)).await;
    admit_ok(s, subscribed("cb2", false, 3)).await;
    admit_ok(s, admission("cb3", None)).await;
    for id in ["cb1", "cb2", "cb3"] {
        s.transition_action(transition(
            id,
            &[ActionState::Accepted],
            ActionState::Running,
        ))
        .await
        .unwrap();
    }
    assert!(deliveries(s, Some("cb1")).await.is_empty(), "terminal only");
    assert_eq!(deliveries(s, Some("cb2")).await.len(), 1);
    for id in ["cb1", "cb2", "cb3"] {
        s.transition_action(transition(
            id,
            &[ActionState::Running],
            ActionState::Completed,
        ))
        .await
        .unwrap();
    }
    let one = deliveries(s, Some("cb1")).await;
    assert_eq!(one.len(), 1);
    let d = &one[0];
    assert_eq!(
        (d.action_state, d.status, d.principal.as_str()),
        (ActionState::Completed, DeliveryStatus::Pending, "alice")
    );
    assert_eq!(d.target, "https://hooks.example.com/cb1");
    assert_eq!(d.spec["timeout_ms"], 1000);
    assert!(d.attempts.is_empty() && d.leased_by.is_none());
    let two = deliveries(s, Some("cb2")).await;
    assert_eq!(
        two.iter().map(|d| d.action_state).collect::<Vec<_>>(),
        [ActionState::Running, ActionState::Completed]
    );
    assert_ne!(two[0].message_id, two[1].message_id);
    assert!(deliveries(s, Some("cb3")).await.is_empty());
    assert_eq!(
        s.get_delivery("t1", &d.delivery_id).await.unwrap().as_ref(),
        Some(d)
    );
    assert!(
        s.get_delivery("t2", &d.delivery_id)
            .await
            .unwrap()
            .is_none(),
        "tenant-scoped"
    );
    // A refused transition queues nothing.
    assert!(
        s.transition_action(transition(
            "cb2",
            &[ActionState::Running],
            ActionState::Failed
        ))
        .await
        .is_err()
    );
    assert_eq!(deliveries(s, Some("cb2")).await.len(), 2);
}

pub async fn delivery_attempts_are_fenced_retried_and_settled_with_their_job(h: &Harness) {
    let s = &h.store;
    admit_ok(s, subscribed("cb4", true, 2)).await;
    s.transition_action(transition(
        "cb4",
        &[ActionState::Accepted],
        ActionState::Failed,
    ))
    .await
    .unwrap();
    let lease = claim_delivery(s, T0 + 10).await;
    let started = s
        .start_delivery_attempt(&lease.fence, T0 + 11)
        .await
        .unwrap();
    assert_eq!(started.status, DeliveryStatus::Running);
    assert_eq!(
        started.leased_by.as_deref(),
        Some(lease.fence.worker_id.as_str())
    );
    assert_eq!(started.attempts.len(), 1);
    let retry = DeliveryOutcome::Retry {
        at_ms: T0 + 500,
        error: "503 from target".into(),
    };
    let waiting = s
        .finish_delivery_attempt(&lease.fence, retry, vec![], T0 + 12)
        .await
        .unwrap();
    assert_eq!(
        (waiting.status, waiting.next_attempt_at_ms),
        (DeliveryStatus::Pending, Some(T0 + 500))
    );
    assert_eq!(
        waiting.attempts[0].error.as_deref(),
        Some("503 from target")
    );
    assert_eq!(waiting.last_error.as_deref(), Some("503 from target"));
    // The old lease writes nothing more, and the retry is not due before its time.
    assert!(matches!(
        s.start_delivery_attempt(&lease.fence, T0 + 13).await,
        Err(StoreError::StaleLease)
    ));
    assert!(
        s.claim(CALLBACK_QUEUE, &WorkerId::fresh(), T0 + 499, 1000)
            .await
            .unwrap()
            .is_none()
    );
    let second = claim_delivery(s, T0 + 500).await;
    assert_eq!(second.fence.job_id, waiting.delivery_id);
    s.start_delivery_attempt(&second.fence, T0 + 501)
        .await
        .unwrap();
    let done = s
        .finish_delivery_attempt(&second.fence, DeliveryOutcome::Delivered, vec![], T0 + 502)
        .await
        .unwrap();
    assert_eq!(done.status, DeliveryStatus::Delivered);
    assert_eq!(done.completed_at_ms, Some(T0 + 502));
    assert_eq!(done.attempts.len(), 2);
    assert_eq!(done.attempts[1].error, None);
    assert!(done.leased_by.is_none());
    assert!(
        s.claim(CALLBACK_QUEUE, &WorkerId::fresh(), T0 + 10_000, 1000)
            .await
            .unwrap()
            .is_none(),
        "a delivered delivery is never attempted again"
    );
}

pub async fn a_dead_lettered_delivery_is_redriven_with_its_id_and_a_stranded_one_is_dead_lettered(
    h: &Harness,
) {
    let s = &h.store;
    admit_ok(s, subscribed("cb5", true, 1)).await;
    s.transition_action(transition(
        "cb5",
        &[ActionState::Accepted],
        ActionState::Completed,
    ))
    .await
    .unwrap();
    let lease = claim_delivery(s, T0 + 10).await;
    s.start_delivery_attempt(&lease.fence, T0 + 10)
        .await
        .unwrap();
    let dead = DeliveryOutcome::DeadLettered {
        error: "timed out".into(),
        reason: "max_attempts_exhausted".into(),
    };
    let parked = s
        .finish_delivery_attempt(&lease.fence, dead, vec![], T0 + 20)
        .await
        .unwrap();
    assert_eq!(parked.status, DeliveryStatus::DeadLettered);
    assert_eq!(
        parked.dead_letter_reason.as_deref(),
        Some("max_attempts_exhausted")
    );
    assert!(matches!(
        s.redrive_delivery("t2", &parked.delivery_id, 2, T0 + 30)
            .await,
        Err(StoreError::NotFound { .. })
    ));
    let again = s
        .redrive_delivery("t1", &parked.delivery_id, 2, T0 + 30)
        .await
        .unwrap();
    assert_eq!(
        (again.status, again.dead_letter_reason),
        (DeliveryStatus::Pending, None)
    );
    assert!(matches!(
        s.redrive_delivery("t1", &parked.delivery_id, 2, T0 + 31)
            .await,
        Err(StoreError::StateConflict { .. })
    ));
    let next = claim_delivery(s, T0 + 40).await;
    assert_eq!(next.fence.job_id, parked.delivery_id);
    assert!(
        next.fence.token > lease.fence.token,
        "fencing tokens only grow"
    );
    let running = s
        .start_delivery_attempt(&next.fence, T0 + 40)
        .await
        .unwrap();
    assert_eq!(running.attempts.len(), 2, "the history is kept");
    // This worker stops; its lease lapses, and the second (last) attempt strands the delivery.
    assert!(
        s.dead_letter_stranded(T0 + 45, "x")
            .await
            .unwrap()
            .is_empty()
    );
    let last = claim_delivery(s, T0 + 1041).await;
    let resumed = s
        .start_delivery_attempt(&last.fence, T0 + 1041)
        .await
        .unwrap();
    assert_eq!(
        resumed.attempts[1]
            .error
            .as_deref()
            .map(|e| e.starts_with("interrupted")),
        Some(true)
    );
    assert_eq!(resumed.attempts.len(), 3);
    let stranded = s
        .dead_letter_stranded(T0 + 3000, "attempts used up by stopped workers")
        .await
        .unwrap();
    assert_eq!(stranded.len(), 1);
    assert_eq!(stranded[0].status, DeliveryStatus::DeadLettered);
    assert!(
        stranded[0]
            .attempts
            .iter()
            .all(|a| a.finished_at_ms.is_some())
    );
    assert!(
        s.dead_letter_stranded(T0 + 4000, "x")
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn delivery_lists_filter_by_principal_status_and_target_behind_scoped_cursors(
    h: &Harness,
) {
    let s = &h.store;
    for i in 0..3 {
        let id = format!("cl{i}");
        admit_ok(s, subscribed(&id, true, 3)).await;
        s.transition_action(transition(
            &id,
            &[ActionState::Accepted],
            ActionState::Completed,
        ))
        .await
        .unwrap();
    }
    let q = DeliveryQuery {
        tenant: "t1".into(),
        principal: Some("alice".into()),
        status: Some(DeliveryStatus::Pending),
        ..Default::default()
    };
    let first = s
        .list_deliveries(&q, None, Limit::new(2).unwrap())
        .await
        .unwrap();
    assert_eq!(first.items.len(), 2);
    let rest = s
        .list_deliveries(&q, Some(&first.next_cursor), Limit::new(2).unwrap())
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.items[0].action_id, "cl2");
    let other = DeliveryQuery {
        principal: Some("bob".into()),
        ..q.clone()
    };
    assert!(
        s.list_deliveries(&other, None, Limit::max())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        s.list_deliveries(&other, Some(&first.next_cursor), Limit::max())
            .await
            .is_err(),
        "a cursor is bound to its query"
    );
    let by_target = DeliveryQuery {
        tenant: "t1".into(),
        target: Some("https://hooks.example.com/cl1".into()),
        ..Default::default()
    };
    let found = s
        .list_deliveries(&by_target, None, Limit::max())
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    let delivered = DeliveryQuery {
        status: Some(DeliveryStatus::Delivered),
        ..q
    };
    assert!(
        s.list_deliveries(&delivered, None, Limit::max())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

pub async fn subscriptions_added_after_admission_queue_deliveries_until_removed(h: &Harness) {
    let s = &h.store;
    admit_ok(s, admission("sub1", None)).await;
    let sub = |id: &str, terminal_only: bool| subscription("sub1", id, terminal_only);
    s.add_action_subscription(sub("every", false), 2)
        .await
        .unwrap();
    s.add_action_subscription(sub("last", true), 2)
        .await
        .unwrap();
    // Replacing one under its id is not one more; a third is one too many.
    s.add_action_subscription(sub("every", false), 2)
        .await
        .unwrap();
    assert!(matches!(
        s.add_action_subscription(sub("third", false), 2).await,
        Err(StoreError::InvalidInput(_))
    ));
    assert_eq!(
        s.list_action_subscriptions("t1", "sub1")
            .await
            .unwrap()
            .iter()
            .map(|r| r.subscription_id.as_str())
            .collect::<Vec<_>>(),
        ["every", "last"]
    );
    assert!(
        s.list_action_subscriptions("t2", "sub1")
            .await
            .unwrap()
            .is_empty()
    );
    s.transition_action(transition(
        "sub1",
        &[ActionState::Accepted],
        ActionState::Running,
    ))
    .await
    .unwrap();
    let running = deliveries(s, Some("sub1")).await;
    assert_eq!(
        running
            .iter()
            .map(|d| d.target.as_str())
            .collect::<Vec<_>>(),
        ["https://hooks.example.com/every"]
    );
    // Removed, it gets nothing more; the terminal transition reaches the other.
    assert!(
        s.remove_action_subscription("t1", "sub1", "every")
            .await
            .unwrap()
    );
    assert!(
        !s.remove_action_subscription("t1", "sub1", "every")
            .await
            .unwrap()
    );
    s.transition_action(transition(
        "sub1",
        &[ActionState::Running],
        ActionState::Completed,
    ))
    .await
    .unwrap();
    let all = deliveries(s, Some("sub1")).await;
    assert_eq!(
        all.iter()
            .map(|d| (d.target.as_str(), d.action_state))
            .collect::<Vec<_>>(),
        [
            ("https://hooks.example.com/every", ActionState::Running),
            ("https://hooks.example.com/last", ActionState::Completed)
        ]
    );
    assert_eq!(all[1].spec["id"], "last");
    // An ended or unknown action takes none.
    assert!(matches!(
        s.add_action_subscription(sub("late", false), 2).await,
        Err(StoreError::Terminal { .. })
    ));
    let mut unknown = sub("x", false);
    unknown.action_id = "nope".into();
    assert!(matches!(
        s.add_action_subscription(unknown, 2).await,
        Err(StoreError::NotFound { .. })
    ));
}
