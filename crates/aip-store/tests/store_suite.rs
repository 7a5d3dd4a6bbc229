//! The shared store suite: every case runs against SQLite (`sqlite::…`) and PostgreSQL
//! (`postgres::…`, skipped with a notice when `AIP_TEST_POSTGRES_URL` is unset, failing instead
//! under `CI=true`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use aip_store::*;
use harness::Harness;
use serde_json::json;

macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let h = crate::harness::Harness::sqlite().await;
                    crate::cases::$name(&h).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(h) = crate::harness::Harness::postgres().await else { return };
                    crate::cases::$name(&h).await;
                }
            )*
        }
    };
}

suite!(
    admission_writes_action_receipts_events_and_job_in_one_transaction,
    a_duplicate_action_id_is_rejected_and_writes_nothing,
    return_original_result_replays_the_owner_whatever_the_input,
    reject_conflict_rejects_every_duplicate_without_writing,
    revalidate_input_hash_replays_only_a_matching_hash,
    an_expired_reservation_is_taken_over_by_a_new_action,
    many_concurrent_admissions_on_one_key_yield_exactly_one_owner,
    transitions_are_compare_and_set_and_terminal_states_are_final,
    a_failed_transition_writes_none_of_its_events_or_receipts,
    two_workers_racing_for_one_job_get_one_lease,
    many_workers_draining_a_queue_claim_each_job_once,
    a_stale_fencing_token_is_rejected_after_the_lease_is_taken_over,
    an_expired_lease_is_reclaimable_and_a_released_job_is_claimable_at_once,
    failed_jobs_retry_until_attempts_are_exhausted_then_die,
    unfinished_actions_are_listed_for_recovery,
    events_page_through_opaque_reader_scoped_cursors,
    event_lists_never_show_another_readers_events,
    a_waiter_wakes_when_an_event_is_committed,
    chunks_are_strictly_increasing_and_duplicates_are_tolerated,
    a_chunk_batch_is_written_in_order_all_or_nothing_and_under_its_fence,
    sessions_follow_the_state_machine_with_compare_and_set,
    resume_tokens_are_single_use_stored_hashed_and_expire,
    concurrent_resumes_consume_a_token_once,
    message_id_claims_detect_replays_and_survive_a_restart,
    receipt_chains_append_in_order_and_refuse_forks,
    concurrent_receipt_appends_never_fork_a_chain,
    audit_events_are_append_only_and_reader_scoped,
    app_records_make_duplicates_observable,
    purge_removes_only_expired_entries,
    action_lists_are_reader_scoped_with_cursors,
    state_and_cursors_survive_a_restart,
    a_changed_migration_stops_startup,
    list_limits_are_bounded,
    concurrent_writes_succeed_or_fail_independently,
    writes_queued_together_keep_only_the_ones_that_succeed,
    a_named_job_is_claimed_only_when_claimable,
    active_actions_are_counted_per_session_under_the_readers_scope,
    a_job_leased_at_admission_is_fenced_and_kept_from_recovery_until_its_lease_lapses,
    one_action_id_in_two_tenants_is_two_actions_with_their_own_jobs_chunks_and_receipts,
    a_resume_token_presented_on_another_session_is_refused_and_stays_usable,
    events_filter_by_kind_and_a_cursor_is_bound_to_its_filter,
    audit_events_filter_by_action_session_and_time,
    an_approval_is_created_with_its_action_and_read_with_its_approvers,
    approval_writes_are_compare_and_set_and_a_decision_id_is_replayed,
    an_approval_write_moves_its_action_and_queues_its_job_all_or_nothing,
    approval_lists_show_only_what_the_reader_requested_or_may_decide,
    an_escalation_is_stored_once_per_tenant_id_with_its_timer,
    an_escalation_is_resolved_once_and_a_stale_or_second_resolution_is_refused,
    escalation_lists_are_scoped_to_their_reader_and_filters,
    a_plan_is_stored_with_its_action_and_found_by_id_plan_and_action,
    concurrent_commits_of_one_plan_admit_exactly_one,
    a_transaction_id_is_created_once_and_a_stale_version_is_refused,
    a_fenced_record_is_written_only_under_a_live_lease,
    action_lists_and_audit_filter_by_transaction,
    a_transition_queues_a_delivery_only_for_the_states_its_callback_covers,
    subscriptions_added_after_admission_queue_deliveries_until_removed,
    delivery_attempts_are_fenced_retried_and_settled_with_their_job,
    a_dead_lettered_delivery_is_redriven_with_its_id_and_a_stranded_one_is_dead_lettered,
    delivery_lists_filter_by_principal_status_and_target_behind_scoped_cursors,
    a_channel_message_upserts_its_conversation_and_a_replayed_delivery_writes_nothing,
    conversations_are_seen_by_their_connector_assignee_contact_and_tenant_readers,
    history_past_retention_is_purged_and_a_cursor_into_it_is_expired,
    evidence_is_removed_only_by_its_purge_and_a_purged_chain_leaves_a_tombstone,
    a_settlement_claims_each_completed_action_once_with_its_receipts,
);

/// PostgreSQL assigns event sequences outside the commit order; a transaction that began earlier and
/// commits later must still appear after a reader's cursor, never behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_events_committed_late_are_never_skipped_by_a_cursor() {
    use sqlx::Connection as _;
    let Some(h) = Harness::postgres().await else {
        return;
    };
    let s = &h.store;
    let ev = |id: &str| cases::event(id, "t1", None, None);
    s.append_events(vec![ev("e1")]).await.unwrap();
    let q = EventQuery {
        tenant: "t1".into(),
        ..Default::default()
    };
    let first = s.list_events(&q, None, Limit::max()).await.unwrap();
    assert_eq!(first.items.len(), 1);
    // A slow writer starts first (takes the older transaction id and an event) and stays open.
    let mut slow = h.raw_pg_connection().await.unwrap();
    let mut slow_tx = slow.begin().await.unwrap();
    sqlx::query("INSERT INTO aip_events (event_id, kind, tenant, occurred_at_ms, data) VALUES ('e-slow', 'aip.test', 't1', 1, '{}')")
        .execute(&mut *slow_tx)
        .await
        .unwrap();
    // A fast writer commits after it; its event is listable at once.
    s.append_events(vec![ev("e-fast")]).await.unwrap();
    let fast = s
        .list_events(&q, Some(&first.next_cursor), Limit::max())
        .await
        .unwrap();
    assert_eq!(
        fast.items
            .iter()
            .map(|e| e.event_id.as_str())
            .collect::<Vec<_>>(),
        ["e-fast"]
    );
    // The slow writer commits last (and never runs the sequencer itself, like a node that died
    // right after commit): the background sweep positions its event AFTER the cursor already handed
    // out, so the reader still sees it.
    slow_tx.commit().await.unwrap();
    let mut watch = s.watch_changes();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let late = loop {
        watch.mark_seen();
        let page = s
            .list_events(&q, Some(&fast.next_cursor), Limit::max())
            .await
            .unwrap();
        if !page.items.is_empty() || tokio::time::Instant::now() > deadline {
            break page;
        }
        watch.changed_within(Duration::from_secs(2)).await;
    };
    assert_eq!(
        late.items
            .iter()
            .map(|e| e.event_id.as_str())
            .collect::<Vec<_>>(),
        ["e-slow"]
    );
}

/// Each PostgreSQL writer's events are listable as soon as its write returns (read your writes), also
/// when many writers commit at once and share sequencer runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_concurrent_writers_each_list_their_own_events_when_their_write_returns() {
    let Some(h) = Harness::postgres().await else {
        return;
    };
    let tasks: Vec<_> = (0..48)
        .map(|i| {
            let s = Arc::clone(&h.store);
            tokio::spawn(async move {
                let event_id = format!("rw-{i}");
                s.append_events(vec![cases::event(&event_id, "t-rw", None, None)])
                    .await
                    .unwrap();
                let q = EventQuery {
                    tenant: "t-rw".into(),
                    ..Default::default()
                };
                let page = s.list_events(&q, None, Limit::max()).await.unwrap();
                assert!(
                    page.items.iter().any(|e| e.event_id == event_id),
                    "{event_id} not listable after its write returned"
                );
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

mod cases {
    use super::*;

    /// Runs `n` copies of `op` at once (`op(i)` for task `i`), each retried while the store reports
    /// a retryable (busy) error; returns the outcomes in task order.
    async fn race<T, F, Fut>(n: usize, op: F) -> Vec<StoreResult<T>>
    where
        T: Send + 'static,
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = StoreResult<T>> + Send + 'static,
    {
        let op = Arc::new(op);
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let op = op.clone();
                tokio::spawn(async move {
                    loop {
                        match op(i).await {
                            Err(e) if e.is_retryable() => tokio::task::yield_now().await,
                            other => return other,
                        }
                    }
                })
            })
            .collect();
        let mut out = Vec::with_capacity(n);
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }

    fn wins<T>(outcomes: &[StoreResult<T>]) -> usize {
        outcomes.iter().filter(|r| r.is_ok()).count()
    }

    const T0: i64 = 1_700_000_000_000;

    fn new_action(id: &str, tenant: &str, principal: &str, state: ActionState) -> NewAction {
        NewAction {
            action_id: id.into(),
            tenant: tenant.into(),
            principal: principal.into(),
            session_id: None,
            capability: "cap:demo:echo".into(),
            correlation_id: None,
            mode: "sync".into(),
            state,
            input_hash: None,
            deadline_ms: None,
            created_at_ms: T0,
            request: json!({"input": id}),
        }
    }

    pub(super) fn event(
        id: &str,
        tenant: &str,
        principal: Option<&str>,
        action: Option<&str>,
    ) -> NewEvent {
        NewEvent {
            event_id: id.into(),
            kind: "aip.action.accepted".into(),
            tenant: tenant.into(),
            principal: principal.map(Into::into),
            session_id: None,
            action_id: action.map(Into::into),
            correlation_id: None,
            occurred_at_ms: T0,
            data: json!({"event": id}),
        }
    }

    fn receipt(id: &str, chain: &str, hash: &str, prev: Option<&str>) -> NewReceipt {
        NewReceipt {
            receipt_id: id.into(),
            chain_id: chain.into(),
            tenant: "t1".into(),
            principal: Some("alice".into()),
            action_id: Some(chain.into()),
            receipt_type: "request_received".into(),
            hash: hash.into(),
            previous_hash: prev.map(Into::into),
            created_at_ms: T0,
            body: json!({"receipt": id}),
        }
    }

    fn job(id: &str, action: Option<&str>, max_attempts: u32) -> NewJob {
        NewJob {
            job_id: id.into(),
            queue: "actions".into(),
            action_id: action.map(Into::into),
            tenant: "t1".into(),
            available_at_ms: T0,
            max_attempts,
            payload: json!({"job": id}),
        }
    }

    fn claim(key: &str, hash: &str, behavior: CollisionBehavior) -> IdempotencyClaim {
        IdempotencyClaim {
            scope: "tenant:t1/cap:demo:book".into(),
            key: key.into(),
            input_hash: hash.into(),
            behavior,
            expires_at_ms: T0 + 60_000,
        }
    }

    fn admission(id: &str, idem: Option<IdempotencyClaim>) -> Admission {
        Admission {
            action: new_action(id, "t1", "alice", ActionState::Accepted),
            idempotency: idem,
            receipts: vec![],
            events: vec![event(&format!("ev-{id}"), "t1", Some("alice"), Some(id))],
            job: None,
            lease: None,
            approval: None,
            transaction: None,
            timers: Vec::new(),
            callback: None,
            audit: Vec::new(),
        }
    }

    fn all_events(q: &EventQuery) -> EventQuery {
        q.clone()
    }

    async fn events_of(store: &Arc<dyn Store>, tenant: &str) -> Vec<EventRecord> {
        let q = EventQuery {
            tenant: tenant.into(),
            ..Default::default()
        };
        store
            .list_events(&all_events(&q), None, Limit::max())
            .await
            .unwrap()
            .items
    }

    async fn admit_ok(store: &Arc<dyn Store>, a: Admission) -> ActionRecord {
        match store.admit(a).await.unwrap() {
            AdmissionOutcome::Admitted { record, .. } => record,
            other => panic!("expected admission, got {other:?}"),
        }
    }

    fn transition(id: &str, from: &[ActionState], to: ActionState) -> Transition {
        Transition {
            tenant: "t1".into(),
            action_id: id.into(),
            from: from.to_vec(),
            to,
            result: None,
            events: vec![],
            receipts: vec![],
            fence: None,
            finish_job: false,
            now_ms: T0 + 1,
            operation: None,
        }
    }

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

    pub async fn many_concurrent_admissions_on_one_key_yield_exactly_one_owner(h: &Harness) {
        let s = h.store.clone();
        let outcomes = race(32, move |i| {
            let s = s.clone();
            let behavior = if i % 2 == 0 {
                CollisionBehavior::RevalidateInputHash
            } else {
                CollisionBehavior::ReturnOriginalResult
            };
            async move {
                s.admit(admission(
                    &format!("a{i}"),
                    Some(claim("race", "h", behavior)),
                ))
                .await
            }
        })
        .await;
        let mut owners = Vec::new();
        let mut replays = HashSet::new();
        for outcome in outcomes {
            match outcome.unwrap() {
                AdmissionOutcome::Admitted { record, .. } => owners.push(record.action_id),
                AdmissionOutcome::Replayed { original, .. } => {
                    replays.insert(original.action_id);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(owners.len(), 1, "exactly one owner: {owners:?}");
        assert!(replays.len() <= 1 && replays.iter().all(|r| r == &owners[0]));
        let q = ActionQuery {
            tenant: "t1".into(),
            ..Default::default()
        };
        assert_eq!(
            h.store
                .list_actions(&q, None, Limit::max())
                .await
                .unwrap()
                .items
                .len(),
            1
        );
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

    pub async fn two_workers_racing_for_one_job_get_one_lease(h: &Harness) {
        let s = &h.store;
        s.enqueue(job("j1", None, 5)).await.unwrap();
        let other = h.reopen().await.unwrap();
        // Two store instances stand for two nodes.
        let stores = [s.clone(), other];
        let outcomes = race(4, move |i| {
            let store = stores[i % 2].clone();
            async move {
                store
                    .claim("actions", &WorkerId::fresh(), T0 + i as i64, 10_000)
                    .await
            }
        })
        .await;
        let leases: Vec<Lease> = outcomes.into_iter().filter_map(|o| o.unwrap()).collect();
        assert_eq!(leases.len(), 1);
        assert_eq!((leases[0].fence.token, leases[0].attempt), (1, 1));
    }

    pub async fn many_workers_draining_a_queue_claim_each_job_once(h: &Harness) {
        let s = &h.store;
        for i in 0..40 {
            s.enqueue(job(&format!("j{i:02}"), None, 5)).await.unwrap();
        }
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let w = WorkerId::fresh();
                let mut got = Vec::new();
                loop {
                    match s.claim("actions", &w, T0, 60_000).await {
                        Ok(Some(l)) => {
                            s.complete_job(&l.fence, T0 + 1).await.unwrap();
                            got.push(l.fence.job_id);
                        }
                        Ok(None) => return got,
                        Err(e) if e.is_retryable() => tokio::task::yield_now().await,
                        Err(e) => panic!("{e}"),
                    }
                }
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let unique: HashSet<_> = all.iter().collect();
        assert_eq!((all.len(), unique.len()), (40, 40));
    }

    pub async fn a_stale_fencing_token_is_rejected_after_the_lease_is_taken_over(h: &Harness) {
        let s = &h.store;
        let mut a = admission("a1", None);
        a.action.state = ActionState::Queued;
        a.job = Some(job("j1", Some("a1"), 5));
        admit_ok(s, a).await;
        let (w1, w2) = (WorkerId::fresh(), WorkerId::fresh());
        let l1 = s.claim("actions", &w1, T0, 1_000).await.unwrap().unwrap();
        s.transition_action(Transition {
            fence: Some(l1.fence.clone()),
            ..transition("a1", &[ActionState::Queued], ActionState::Running)
        })
        .await
        .unwrap();
        assert!(
            s.claim("actions", &w2, T0 + 999, 1_000)
                .await
                .unwrap()
                .is_none(),
            "a live lease is not claimable"
        );
        // w1 pauses past its lease; w2 takes over with a greater token.
        let l2 = s
            .claim("actions", &w2, T0 + 1_000, 1_000)
            .await
            .unwrap()
            .unwrap();
        assert!(l2.fence.token > l1.fence.token);
        assert_eq!(l2.attempt, 2);
        let late = T0 + 1_001;
        assert!(matches!(
            s.renew(&l1.fence, late, 1_000).await,
            Err(StoreError::StaleLease)
        ));
        assert!(matches!(
            s.complete_job(&l1.fence, late).await,
            Err(StoreError::StaleLease)
        ));
        assert!(matches!(
            s.release_job(&l1.fence, late).await,
            Err(StoreError::StaleLease)
        ));
        assert!(matches!(
            s.fail_job(&l1.fence, late, None, "x").await,
            Err(StoreError::StaleLease)
        ));
        let mut stale = transition("a1", &[ActionState::Running], ActionState::Completed);
        stale.fence = Some(l1.fence.clone());
        stale.finish_job = true;
        stale.result = Some(json!({"from": "stale"}));
        stale.now_ms = late;
        assert!(matches!(
            s.transition_action(stale).await,
            Err(StoreError::StaleLease)
        ));
        let chunk = NewChunk {
            tenant: "t1".into(),
            action_id: "a1".into(),
            sequence: 1,
            kind: "data".into(),
            data: json!(1),
            created_at_ms: late,
        };
        assert!(matches!(
            s.append_chunk(chunk.clone(), Some(&l1.fence), late).await,
            Err(StoreError::StaleLease)
        ));
        // A forged token for the right worker is stale too.
        let forged = Fence {
            token: l2.fence.token + 1,
            ..l2.fence.clone()
        };
        assert!(matches!(
            s.renew(&forged, late, 1_000).await,
            Err(StoreError::StaleLease)
        ));
        // The current holder writes.
        assert_eq!(
            s.append_chunk(chunk, Some(&l2.fence), late).await.unwrap(),
            ChunkAppend::Inserted
        );
        let exp = s.renew(&l2.fence, late, 5_000).await.unwrap();
        assert_eq!(exp, late + 5_000);
        let mut ok = transition("a1", &[ActionState::Running], ActionState::Completed);
        ok.fence = Some(l2.fence.clone());
        ok.finish_job = true;
        ok.result = Some(json!({"from": "w2"}));
        ok.now_ms = late + 1;
        s.transition_action(ok).await.unwrap();
        assert_eq!(
            s.get_action("t1", "a1").await.unwrap().unwrap().result,
            Some(json!({"from": "w2"}))
        );
        // The finished job is neither claimable nor writable.
        assert!(
            s.claim("actions", &w1, late + 100_000, 1_000)
                .await
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            s.renew(&l2.fence, late + 2, 1_000).await,
            Err(StoreError::StaleLease)
        ));
        // An expired lease that nobody took over is stale as well.
        s.enqueue(job("j2", None, 5)).await.unwrap();
        let l3 = s.claim("actions", &w1, T0, 10).await.unwrap().unwrap();
        assert!(matches!(
            s.complete_job(&l3.fence, T0 + 10).await,
            Err(StoreError::StaleLease)
        ));
        let unknown = Fence {
            job_id: "nope".into(),
            ..l3.fence
        };
        assert!(matches!(
            s.complete_job(&unknown, T0).await,
            Err(StoreError::NotFound { kind: "job" })
        ));
    }

    pub async fn an_expired_lease_is_reclaimable_and_a_released_job_is_claimable_at_once(
        h: &Harness,
    ) {
        let s = &h.store;
        s.enqueue(job("j1", None, 5)).await.unwrap();
        let mut later = job("j2", None, 5);
        later.available_at_ms = T0 + 50_000;
        s.enqueue(later).await.unwrap();
        let w = WorkerId::fresh();
        let l = s.claim("actions", &w, T0, 100).await.unwrap().unwrap();
        assert_eq!(l.fence.job_id, "j1");
        assert!(
            s.claim("actions", &w, T0 + 50, 100)
                .await
                .unwrap()
                .is_none(),
            "j2 is not yet available"
        );
        let l2 = s
            .claim("actions", &WorkerId::fresh(), T0 + 100, 100)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((l2.fence.job_id.as_str(), l2.fence.token), ("j1", 2));
        s.release_job(&l2.fence, T0 + 110).await.unwrap();
        let l3 = s
            .claim("actions", &w, T0 + 110, 100)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (l3.fence.job_id.as_str(), l3.fence.token, l3.attempt),
            ("j1", 3, 2)
        );
        assert!(
            s.claim("other-queue", &w, T0 + 60_000, 100)
                .await
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            s.claim("actions", &w, T0, 0).await,
            Err(StoreError::InvalidInput(_))
        ));
        assert!(matches!(
            s.enqueue(job("j1", None, 5)).await,
            Err(StoreError::Duplicate { kind: "job" })
        ));
    }

    pub async fn failed_jobs_retry_until_attempts_are_exhausted_then_die(h: &Harness) {
        let s = &h.store;
        s.enqueue(job("j1", None, 2)).await.unwrap();
        let w = WorkerId::fresh();
        let l = s.claim("actions", &w, T0, 1_000).await.unwrap().unwrap();
        assert_eq!(
            s.fail_job(&l.fence, T0 + 1, Some(T0 + 500), "boom")
                .await
                .unwrap(),
            JobState::Ready
        );
        assert!(
            s.claim("actions", &w, T0 + 499, 1_000)
                .await
                .unwrap()
                .is_none(),
            "backoff is honoured"
        );
        let l = s
            .claim("actions", &w, T0 + 500, 1_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(l.attempt, 2);
        assert_eq!(
            s.fail_job(&l.fence, T0 + 501, Some(T0 + 600), "boom")
                .await
                .unwrap(),
            JobState::Dead
        );
        assert!(
            s.claim("actions", &w, T0 + 100_000, 1_000)
                .await
                .unwrap()
                .is_none()
        );
        s.enqueue(job("j2", None, 5)).await.unwrap();
        let l = s.claim("actions", &w, T0, 1_000).await.unwrap().unwrap();
        assert_eq!(
            s.fail_job(&l.fence, T0 + 1, None, &"e".repeat(10_000))
                .await
                .unwrap(),
            JobState::Dead
        );
    }

    pub async fn unfinished_actions_are_listed_for_recovery(h: &Harness) {
        let s = &h.store;
        // a1: sync, running when the process died (no job) -> unfinished.
        admit_ok(s, admission("a1", None)).await;
        // a2: completed -> finished.
        admit_ok(s, admission("a2", None)).await;
        s.transition_action(transition(
            "a2",
            &[ActionState::Accepted],
            ActionState::Completed,
        ))
        .await
        .unwrap();
        // a3: queued with a ready job -> a worker will claim it.
        let mut a3 = admission("a3", None);
        a3.job = Some(job("j3", Some("a3"), 1));
        admit_ok(s, a3).await;
        // a4: queued, its only attempt leased and expired -> unfinished (exhausted).
        let mut a4 = admission("a4", None);
        a4.job = Some(job("j4", Some("a4"), 1));
        admit_ok(s, a4).await;
        let w = WorkerId::fresh();
        let l = s.claim("actions", &w, T0, 100).await.unwrap().unwrap();
        assert_eq!(l.fence.job_id, "j3");
        let l4 = s.claim("actions", &w, T0, 100).await.unwrap().unwrap();
        assert_eq!(l4.fence.job_id, "j4");
        let ids = |v: Vec<ActionRecord>| v.into_iter().map(|a| a.action_id).collect::<Vec<_>>();
        // While leases are live only the sync orphan is unfinished.
        assert_eq!(
            ids(s
                .list_unfinished_actions(T0 + 50, T0, Limit::max())
                .await
                .unwrap()),
            ["a1"]
        );
        // After expiry a3 and a4 are exhausted (max_attempts 1), so they are unfinished too.
        assert_eq!(
            ids(s
                .list_unfinished_actions(T0 + 100, T0, Limit::max())
                .await
                .unwrap()),
            ["a1", "a3", "a4"]
        );
        // Actions admitted after the cutoff (possibly running on a live node) are excluded.
        assert!(
            s.list_unfinished_actions(T0 + 100, T0 - 1, Limit::max())
                .await
                .unwrap()
                .is_empty()
        );
    }

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
        let ids =
            |p: Page<EventRecord>| p.items.into_iter().map(|e| e.event_id).collect::<Vec<_>>();
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

    /// A `data` chunk of `action_id` at `seq`.
    fn data_chunk(action_id: &str, seq: u64, data: serde_json::Value) -> NewChunk {
        NewChunk {
            tenant: "t1".into(),
            action_id: action_id.into(),
            sequence: seq,
            kind: "data".into(),
            data,
            created_at_ms: T0,
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

    fn new_session(id: &str, principal: &str) -> NewSession {
        NewSession {
            session_id: id.into(),
            tenant: "t1".into(),
            principal: principal.into(),
            peer: Some("peer-1".into()),
            state: SessionState::New,
            created_at_ms: T0,
            expires_at_ms: Some(T0 + 3_600_000),
            data: json!({"profile": "aip.native.http.v1"}),
        }
    }

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
            s.get_session("s1").await.unwrap().unwrap().state,
            SessionState::Settled
        );
        assert!(s.get_session("nope").await.unwrap().is_none());
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

    pub async fn receipt_chains_append_in_order_and_refuse_forks(h: &Harness) {
        let s = &h.store;
        let r0 = s
            .append_receipt(receipt("r0", "c1", "h0", None))
            .await
            .unwrap();
        let r1 = s
            .append_receipt(receipt("r1", "c1", "h1", Some("h0")))
            .await
            .unwrap();
        assert_eq!((r0.position, r1.position), (0, 1));
        assert!(matches!(
            s.append_receipt(receipt("r2", "c1", "h2", Some("h0")))
                .await,
            Err(StoreError::ReceiptChainConflict { .. })
        ));
        assert!(matches!(
            s.append_receipt(receipt("r2", "c1", "h2", None)).await,
            Err(StoreError::ReceiptChainConflict { .. })
        ));
        assert!(matches!(
            s.append_receipt(receipt("r9", "c2", "h9", Some("h1")))
                .await,
            Err(StoreError::ReceiptChainConflict { .. })
        ));
        assert!(matches!(
            s.append_receipt(receipt("r1", "c3", "hx", None)).await,
            Err(StoreError::Duplicate { kind: "receipt" })
        ));
        s.append_receipt(receipt("r2", "c1", "h2", Some("h1")))
            .await
            .unwrap();
        let chain = s.list_receipts("t1", "c1", Limit::max()).await.unwrap();
        assert_eq!(
            chain.iter().map(|r| r.hash.as_str()).collect::<Vec<_>>(),
            ["h0", "h1", "h2"]
        );
        assert_eq!(
            s.list_receipts("t1", "c1", Limit::new(2).unwrap())
                .await
                .unwrap()
                .len(),
            2
        );
        assert_eq!(s.get_receipt("r1").await.unwrap().unwrap(), r1);
        assert!(s.get_receipt("nope").await.unwrap().is_none());
        // Receipts are append-only in storage.
        assert!(
            h.raw_exec("UPDATE aip_receipts SET hash = 'x'")
                .await
                .is_err()
        );
        assert!(h.raw_exec("DELETE FROM aip_receipts").await.is_err());
    }

    pub async fn concurrent_receipt_appends_never_fork_a_chain(h: &Harness) {
        let s = &h.store;
        s.append_receipt(receipt("r0", "c1", "h0", None))
            .await
            .unwrap();
        let st = s.clone();
        let outcomes = race(10, move |i| {
            let s = st.clone();
            async move {
                s.append_receipt(receipt(
                    &format!("r-{i}"),
                    "c1",
                    &format!("h-{i}"),
                    Some("h0"),
                ))
                .await
            }
        })
        .await;
        assert_eq!(wins(&outcomes), 1);
        assert_eq!(
            s.list_receipts("t1", "c1", Limit::max())
                .await
                .unwrap()
                .len(),
            2
        );
    }

    pub async fn app_records_make_duplicates_observable(h: &Harness) {
        let s = &h.store;
        let rec = |id: &str, tenant: &str| AppRecord {
            collection: "bookings".into(),
            record_id: id.into(),
            tenant: tenant.into(),
            created_at_ms: T0,
            body: json!({"seat": id}),
        };
        s.insert_record(rec("b1", "t1")).await.unwrap();
        s.insert_record(rec("b2", "t1")).await.unwrap();
        s.insert_record(rec("b3", "t2")).await.unwrap();
        assert!(matches!(
            s.insert_record(rec("b1", "t1")).await,
            Err(StoreError::Duplicate { kind: "record" })
        ));
        assert_eq!(s.count_records("bookings", "t1").await.unwrap(), 2);
        assert_eq!(s.count_records("other", "t1").await.unwrap(), 0);
        let list = s
            .list_records("bookings", "t1", Limit::max())
            .await
            .unwrap();
        assert_eq!(list, vec![rec("b1", "t1"), rec("b2", "t1")]);
    }

    pub async fn purge_removes_only_expired_entries(h: &Harness) {
        let s = &h.store;
        s.claim_message_id("sc", "old", T0, T0 + 10).await.unwrap();
        s.claim_message_id("sc", "new", T0, T0 + 1_000)
            .await
            .unwrap();
        let mut c = claim("k-old", "h", CollisionBehavior::RejectConflict);
        c.expires_at_ms = T0 + 10;
        admit_ok(s, admission("a1", Some(c))).await;
        admit_ok(
            s,
            admission(
                "a2",
                Some(claim("k-new", "h", CollisionBehavior::RejectConflict)),
            ),
        )
        .await;
        s.create_session(new_session("s1", "alice"), vec![])
            .await
            .unwrap();
        s.issue_resume_token("s1", "t-old", T0 + 10, T0)
            .await
            .unwrap();
        s.issue_resume_token("s1", "t-used", T0 + 1_000, T0)
            .await
            .unwrap();
        s.issue_resume_token("s1", "t-live", T0 + 1_000, T0)
            .await
            .unwrap();
        s.consume_resume_token("s1", "t-used", None, T0 + 1)
            .await
            .unwrap();
        let report = s.purge_expired(T0 + 10).await.unwrap();
        assert_eq!(
            report,
            PurgeReport {
                replay_claims: 1,
                idempotency_reservations: 1,
                resume_tokens: 2
            }
        );
        assert_eq!(
            s.claim_message_id("sc", "new", T0 + 11, T0 + 1_000)
                .await
                .unwrap(),
            ReplayClaim::Replayed
        );
        assert!(
            s.get_idempotency("tenant:t1/cap:demo:book", "k-new", T0 + 11)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            s.consume_resume_token("s1", "t-live", None, T0 + 11)
                .await
                .is_ok()
        );
    }

    pub async fn action_lists_are_reader_scoped_with_cursors(h: &Harness) {
        let s = &h.store;
        for (id, tenant, principal) in [
            ("a1", "t1", "alice"),
            ("a2", "t1", "bob"),
            ("a3", "t1", "alice"),
            ("a4", "t2", "alice"),
        ] {
            let mut a = admission(id, None);
            a.action = new_action(id, tenant, principal, ActionState::Accepted);
            a.events = vec![];
            admit_ok(s, a).await;
        }
        s.transition_action(transition(
            "a3",
            &[ActionState::Accepted],
            ActionState::Completed,
        ))
        .await
        .unwrap();
        let ids = |p: &Page<ActionRecord>| {
            p.items
                .iter()
                .map(|a| a.action_id.clone())
                .collect::<Vec<_>>()
        };
        let alice = ActionQuery {
            tenant: "t1".into(),
            principal: Some("alice".into()),
            ..Default::default()
        };
        let first = s
            .list_actions(&alice, None, Limit::new(1).unwrap())
            .await
            .unwrap();
        assert_eq!(ids(&first), ["a1"]);
        let second = s
            .list_actions(&alice, Some(&first.next_cursor), Limit::new(1).unwrap())
            .await
            .unwrap();
        assert_eq!(ids(&second), ["a3"]);
        let done = ActionQuery {
            state: Some(ActionState::Completed),
            ..alice.clone()
        };
        assert_eq!(
            ids(&s.list_actions(&done, None, Limit::max()).await.unwrap()),
            ["a3"]
        );
        let t1 = ActionQuery {
            tenant: "t1".into(),
            ..Default::default()
        };
        assert_eq!(
            ids(&s.list_actions(&t1, None, Limit::max()).await.unwrap()),
            ["a1", "a2", "a3"]
        );
        let bob = ActionQuery {
            tenant: "t1".into(),
            principal: Some("bob".into()),
            ..Default::default()
        };
        assert!(matches!(
            s.list_actions(&bob, Some(&first.next_cursor), Limit::max())
                .await,
            Err(StoreError::ForeignCursor)
        ));
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
    }

    pub async fn state_and_cursors_survive_a_restart(h: &Harness) {
        let s = &h.store;
        let mut a = admission(
            "a1",
            Some(claim("k", "h", CollisionBehavior::RevalidateInputHash)),
        );
        a.job = Some(job("j1", Some("a1"), 3));
        admit_ok(s, a).await;
        s.append_events(vec![event("e2", "t1", Some("alice"), None)])
            .await
            .unwrap();
        let q = EventQuery {
            tenant: "t1".into(),
            principal: Some("alice".into()),
            ..Default::default()
        };
        let page = s
            .list_events(&q, None, Limit::new(1).unwrap())
            .await
            .unwrap();
        let restarted = h.reopen().await.unwrap();
        assert_eq!(
            restarted.get_action("t1", "a1").await.unwrap(),
            s.get_action("t1", "a1").await.unwrap()
        );
        let rest = restarted
            .list_events(&q, Some(&page.next_cursor), Limit::max())
            .await
            .unwrap();
        assert_eq!(
            rest.items
                .iter()
                .map(|e| e.event_id.as_str())
                .collect::<Vec<_>>(),
            ["e2"]
        );
        match restarted
            .admit(admission(
                "a2",
                Some(claim("k", "h", CollisionBehavior::RevalidateInputHash)),
            ))
            .await
            .unwrap()
        {
            AdmissionOutcome::Replayed { original, .. } => assert_eq!(original.action_id, "a1"),
            other => panic!("expected replay after restart, got {other:?}"),
        }
        assert!(
            restarted
                .claim("actions", &WorkerId::fresh(), T0, 1_000)
                .await
                .unwrap()
                .is_some()
        );
        restarted.ping().await.unwrap();
        assert_ne!(
            WorkerId::fresh(),
            WorkerId::fresh(),
            "worker ids are new on every boot"
        );
    }

    pub async fn a_changed_migration_stops_startup(h: &Harness) {
        assert_eq!(
            h.raw_exec("UPDATE aip_migrations SET checksum = 'tampered' WHERE version = 1")
                .await
                .unwrap(),
            1
        );
        match h.reopen().await {
            Err(e @ StoreError::MigrationChanged { version: 1, .. }) => {
                assert_eq!(e.code(), "store.migration_changed")
            }
            other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
        }
        h.raw_exec("INSERT INTO aip_migrations (version, name, checksum, applied_at_ms) VALUES (999, 'future', 'x', 0)").await.unwrap();
        h.raw_exec("DELETE FROM aip_migrations WHERE version = 1")
            .await
            .unwrap();
        assert!(matches!(
            h.reopen().await.map(|_| ()),
            Err(StoreError::MigrationUnknown { version: 999 })
        ));
    }

    pub async fn list_limits_are_bounded(h: &Harness) {
        assert!(Limit::new(0).is_err());
        assert!(Limit::new(1001).is_err());
        assert_eq!(Limit::new(1000).unwrap().get(), 1000);
        let s = &h.store;
        let evs: Vec<_> = (0..1005)
            .map(|i| event(&format!("e{i}"), "t1", None, None))
            .collect();
        s.append_events(evs).await.unwrap();
        let q = EventQuery {
            tenant: "t1".into(),
            ..Default::default()
        };
        let page = s.list_events(&q, None, Limit::max()).await.unwrap();
        assert_eq!(page.items.len(), 1000);
        let rest = s
            .list_events(&q, Some(&page.next_cursor), Limit::max())
            .await
            .unwrap();
        assert_eq!(rest.items.len(), 5);
    }

    /// Admission `{p}{i}` with idempotency key `{p}k{i}` and receipt `{p}r{i}`; a `broken` one's
    /// receipt claims a chain tip that does not exist, so the whole admission must fail.
    fn maybe_broken_admission(p: &str, i: usize, broken: bool) -> Admission {
        let id = format!("{p}{i:02}");
        let mut a = admission(
            &id,
            Some(claim(
                &format!("{p}k{i}"),
                "h",
                CollisionBehavior::RejectConflict,
            )),
        );
        let prev = broken.then_some("no-such-tip");
        a.receipts = vec![receipt(&format!("{p}r{i}"), &id, &format!("{p}h{i}"), prev)];
        a.audit = vec![NewAudit {
            audit_id: format!("{p}aud{i}"),
            tenant: "t1".into(),
            actor: "alice".into(),
            action_label: "action.admitted".into(),
            occurred_at_ms: T0,
            data: json!({}),
            action_id: Some(id.clone()),
            session_id: None,
        }];
        a
    }

    /// Checks each outcome of [`maybe_broken_admission`]s and that exactly the unbroken ones (and
    /// their events) are stored while the broken ones left no reservation and no receipt.
    async fn only_unbroken_admissions_remain(
        h: &Harness,
        p: &str,
        broken: &[bool],
        outcomes: Vec<StoreResult<AdmissionOutcome>>,
    ) {
        for (i, r) in outcomes.into_iter().enumerate() {
            if broken[i] {
                assert!(
                    matches!(r, Err(StoreError::ReceiptChainConflict { .. })),
                    "{i}: {r:?}"
                );
            } else {
                assert!(
                    matches!(r, Ok(AdmissionOutcome::Admitted { .. })),
                    "{i}: {r:?}"
                );
            }
        }
        let q = ActionQuery {
            tenant: "t1".into(),
            ..Default::default()
        };
        let mut got: Vec<String> = h
            .store
            .list_actions(&q, None, Limit::max())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|a| a.action_id)
            .collect();
        got.sort();
        let expected: Vec<String> = (0..broken.len())
            .filter(|&i| !broken[i])
            .map(|i| format!("{p}{i:02}"))
            .collect();
        assert_eq!(got, expected);
        assert_eq!(events_of(&h.store, "t1").await.len(), expected.len());
        // Each admission's audit event committed with it, and only with it.
        let audit = AuditQuery {
            tenant: "t1".into(),
            actor: None,
            action_id: None,
            session_id: None,
            from_ms: None,
            to_ms: None,
            transaction_id: None,
        };
        let mut audited: Vec<String> = h
            .store
            .list_audit(&audit, None, Limit::max())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|a| a.action_id)
            .filter(|id| id.starts_with(p))
            .collect();
        audited.sort();
        assert_eq!(audited, expected);
        for i in (0..broken.len()).filter(|&i| broken[i]) {
            assert!(
                h.store
                    .get_idempotency("tenant:t1/cap:demo:book", &format!("{p}k{i}"), T0)
                    .await
                    .unwrap()
                    .is_none()
            );
            assert!(
                h.store
                    .get_receipt(&format!("{p}r{i}"))
                    .await
                    .unwrap()
                    .is_none()
            );
        }
    }

    pub async fn writes_queued_together_keep_only_the_ones_that_succeed(h: &Harness) {
        // Queued from one task, these writes reach SQLite's writer together: the batch's first write
        // (run without a savepoint), a middle one and the last one fail and must leave no trace,
        // and the writes after each failure must still commit.
        let broken = [true, false, true, true, false, false, true];
        let adm = |i: usize| h.store.admit(maybe_broken_admission("q", i, broken[i]));
        let (r0, r1, r2, r3, r4, r5, r6) =
            tokio::join!(adm(0), adm(1), adm(2), adm(3), adm(4), adm(5), adm(6));
        only_unbroken_admissions_remain(h, "q", &broken, vec![r0, r1, r2, r3, r4, r5, r6]).await;
    }

    pub async fn concurrent_writes_succeed_or_fail_independently(h: &Harness) {
        // Writes that run together (one SQLite group commit, or parallel PostgreSQL transactions)
        // must not take each other down: every odd admission carries a receipt that breaks its
        // chain and must leave no trace; every even one must be fully there.
        let s = h.store.clone();
        let outcomes = race(64, move |i| {
            let a = maybe_broken_admission("a", i, i % 2 == 1);
            let s = s.clone();
            async move { s.admit(a).await }
        })
        .await;
        let broken: Vec<bool> = (0..64).map(|i| i % 2 == 1).collect();
        only_unbroken_admissions_remain(h, "a", &broken, outcomes).await;
    }

    pub async fn a_named_job_is_claimed_only_when_claimable(h: &Harness) {
        let s = &h.store;
        // A node admits its own sync action with a one-attempt job and leases it at once.
        let mut a = admission("a1", None);
        let mut j = job("j1", Some("a1"), 1);
        j.queue = "sync".into();
        a.job = Some(j);
        admit_ok(s, a).await;
        let (w1, w2) = (WorkerId::fresh(), WorkerId::fresh());
        let l1 = s.claim_job("j1", &w1, T0, 1_000).await.unwrap().unwrap();
        assert_eq!(
            (l1.fence.token, l1.attempt, l1.queue.as_str()),
            (1, 1, "sync")
        );
        assert!(
            s.claim_job("j1", &w2, T0 + 1, 1_000)
                .await
                .unwrap()
                .is_none(),
            "held by a live lease"
        );
        assert!(s.claim_job("nope", &w2, T0, 1_000).await.unwrap().is_none());
        // While the lease lives, recovery leaves the action alone (its node may be running it).
        assert!(
            s.list_unfinished_actions(T0 + 999, T0 + 999, Limit::max())
                .await
                .unwrap()
                .is_empty()
        );
        // The node dies: after expiry, with its one attempt used, recovery reports it and nobody can
        // claim it again; the dead node's late write is rejected.
        let ids: Vec<_> = s
            .list_unfinished_actions(T0 + 1_000, T0 + 1_000, Limit::max())
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.action_id)
            .collect();
        assert_eq!(ids, ["a1"]);
        assert!(
            s.claim_job("j1", &w2, T0 + 1_000, 1_000)
                .await
                .unwrap()
                .is_none()
        );
        let mut late = transition("a1", &[ActionState::Accepted], ActionState::Completed);
        late.fence = Some(l1.fence.clone());
        late.finish_job = true;
        late.now_ms = T0 + 1_000;
        assert!(matches!(
            s.transition_action(late).await,
            Err(StoreError::StaleLease)
        ));
        // A job with attempts left is taken over with a greater token.
        s.enqueue(job("j2", None, 3)).await.unwrap();
        let l2 = s.claim_job("j2", &w1, T0, 100).await.unwrap().unwrap();
        let l3 = s
            .claim_job("j2", &w2, T0 + 100, 100)
            .await
            .unwrap()
            .unwrap();
        assert!(l3.fence.token > l2.fence.token);
        s.complete_job(&l3.fence, T0 + 150).await.unwrap();
        assert!(
            s.claim_job("j2", &w1, T0 + 10_000, 100)
                .await
                .unwrap()
                .is_none(),
            "a finished job stays finished"
        );
        assert!(matches!(
            s.claim_job("j2", &w1, T0, 0).await,
            Err(StoreError::InvalidInput(_))
        ));
    }
    pub async fn a_job_leased_at_admission_is_fenced_and_kept_from_recovery_until_its_lease_lapses(
        h: &Harness,
    ) {
        let s = &h.store;
        let (w1, w2) = (WorkerId::fresh(), WorkerId::fresh());
        // A lease needs a job and a positive length.
        let mut bad = admission("bad", None);
        bad.lease = Some(AdmissionLease {
            worker: w1.clone(),
            lease_ms: 1_000,
        });
        assert!(matches!(
            s.admit(bad).await,
            Err(StoreError::InvalidInput(_))
        ));
        let mut bad = admission("bad", None);
        bad.job = Some(job("jbad", Some("bad"), 5));
        bad.lease = Some(AdmissionLease {
            worker: w1.clone(),
            lease_ms: 0,
        });
        assert!(matches!(
            s.admit(bad).await,
            Err(StoreError::InvalidInput(_))
        ));
        assert!(s.get_action("t1", "bad").await.unwrap().is_none());

        // Node 1 admits a sync action already running under its own lease, in one transaction.
        let mut a = admission("a1", None);
        a.action.state = ActionState::Running;
        a.job = Some(job("j1", Some("a1"), 5));
        a.lease = Some(AdmissionLease {
            worker: w1.clone(),
            lease_ms: 1_000,
        });
        let lease = match s.admit(a).await.unwrap() {
            AdmissionOutcome::Admitted {
                lease: Some(lease), ..
            } => lease,
            other => panic!("expected a leased admission, got {other:?}"),
        };
        assert_eq!(
            (
                lease.fence.job_id.as_str(),
                lease.fence.token,
                lease.attempt,
                lease.expires_at_ms
            ),
            ("j1", 1, 1, T0 + 1_000)
        );
        assert_eq!(lease.fence.worker_id, w1);
        // Node 2 boots while node 1 runs it: no worker can take it and recovery does not list it.
        assert!(
            s.claim("actions", &w2, T0 + 500, 1_000)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            s.claim_job("j1", &w2, T0 + 500, 1_000)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            s.list_unfinished_actions(T0 + 500, T0 + 500, Limit::max())
                .await
                .unwrap()
                .is_empty(),
            "a live node's sync action is not recoverable"
        );
        // Renewal keeps it so past the first expiry.
        assert_eq!(
            s.renew(&lease.fence, T0 + 900, 1_000).await.unwrap(),
            T0 + 1_900
        );
        assert!(
            s.claim("actions", &w2, T0 + 1_500, 1_000)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            s.list_unfinished_actions(T0 + 1_500, T0 + 1_500, Limit::max())
                .await
                .unwrap()
                .is_empty()
        );
        // Node 1 dies: once the lease lapses another worker takes it over with a greater token, and
        // node 1's late result is refused.
        let taken = s
            .claim("actions", &w2, T0 + 1_900, 1_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((taken.fence.job_id.as_str(), taken.attempt), ("j1", 2));
        assert!(taken.fence.token > lease.fence.token);
        let mut late = transition("a1", &[ActionState::Running], ActionState::Completed);
        late.fence = Some(lease.fence.clone());
        late.finish_job = true;
        late.now_ms = T0 + 1_950;
        assert!(matches!(
            s.transition_action(late).await,
            Err(StoreError::StaleLease)
        ));
        let mut settle = transition("a1", &[ActionState::Running], ActionState::Failed);
        settle.fence = Some(taken.fence.clone());
        settle.finish_job = true;
        settle.now_ms = T0 + 1_950;
        s.transition_action(settle).await.unwrap();
        assert!(
            s.claim("actions", &w1, T0 + 10_000, 1_000)
                .await
                .unwrap()
                .is_none()
        );

        // A one-attempt job leased at admission is reported to recovery once its lease lapses.
        let mut b = admission("b1", None);
        b.action.state = ActionState::Running;
        b.job = Some(job("jb1", Some("b1"), 1));
        b.lease = Some(AdmissionLease {
            worker: w1.clone(),
            lease_ms: 1_000,
        });
        admit_ok(s, b).await;
        let ids = |v: Vec<ActionRecord>| v.into_iter().map(|a| a.action_id).collect::<Vec<_>>();
        assert!(
            s.list_unfinished_actions(T0 + 999, T0 + 999, Limit::max())
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            ids(s
                .list_unfinished_actions(T0 + 1_000, T0 + 1_000, Limit::max())
                .await
                .unwrap()),
            ["b1"]
        );
    }

    pub async fn one_action_id_in_two_tenants_is_two_actions_with_their_own_jobs_chunks_and_receipts(
        h: &Harness,
    ) {
        let s = &h.store;
        for (tenant, principal) in [("t1", "alice"), ("t2", "mallory")] {
            let mut a = admission("shared", None);
            a.action = new_action("shared", tenant, principal, ActionState::Queued);
            a.events = vec![event(
                &format!("ev-{tenant}"),
                tenant,
                Some(principal),
                Some("shared"),
            )];
            a.job = Some(NewJob {
                tenant: tenant.into(),
                ..job(&format!("job-{tenant}"), Some("shared"), 5)
            });
            a.receipts = vec![NewReceipt {
                tenant: tenant.into(),
                principal: Some(principal.into()),
                ..receipt(
                    &format!("r-{tenant}"),
                    "shared",
                    &format!("h-{tenant}"),
                    None,
                )
            }];
            admit_ok(s, a).await;
        }
        let t1 = s.get_action("t1", "shared").await.unwrap().unwrap();
        let t2 = s.get_action("t2", "shared").await.unwrap().unwrap();
        assert_eq!(
            (t1.principal.as_str(), t2.principal.as_str()),
            ("alice", "mallory")
        );
        assert!(s.get_action("t3", "shared").await.unwrap().is_none());
        // Chunks and receipt chains of the same id never mix.
        for tenant in ["t1", "t2"] {
            s.append_chunk(
                NewChunk {
                    tenant: tenant.into(),
                    ..data_chunk("shared", 1, json!(tenant))
                },
                None,
                T0,
            )
            .await
            .unwrap();
        }
        let chunks = s
            .list_chunks("t2", "shared", None, Limit::max())
            .await
            .unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].data, json!("t2"));
        let chain = s.list_receipts("t1", "shared", Limit::max()).await.unwrap();
        assert_eq!(chain.len(), 1);
        assert_eq!(chain[0].receipt_id, "r-t1");
        // A transition of one tenant's action leaves the other's alone.
        s.transition_action(Transition {
            tenant: "t2".into(),
            ..transition("shared", &[ActionState::Queued], ActionState::Cancelled)
        })
        .await
        .unwrap();
        assert_eq!(
            s.get_action("t1", "shared").await.unwrap().unwrap().state,
            ActionState::Queued
        );
        // Each job names its tenant, so a worker settles the right action.
        let mut tenants = Vec::new();
        while let Some(lease) = s
            .claim("actions", &WorkerId::fresh(), T0, 1_000)
            .await
            .unwrap()
        {
            assert_eq!(lease.action_id.as_deref(), Some("shared"));
            tenants.push(lease.tenant);
        }
        tenants.sort();
        assert_eq!(tenants, ["t1", "t2"]);
        // The same id twice in one tenant is still a duplicate.
        let mut again = admission("shared", None);
        again.action = new_action("shared", "t1", "bob", ActionState::Accepted);
        again.events = vec![];
        assert!(matches!(
            s.admit(again).await,
            Err(StoreError::Duplicate { kind: "action" })
        ));
    }

    pub async fn a_resume_token_presented_on_another_session_is_refused_and_stays_usable(
        h: &Harness,
    ) {
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

    mod governance;
    pub use governance::*;
    mod transaction;
    pub use transaction::*;
    mod callback;
    pub use callback::*;
    mod channel;
    pub use channel::*;
    mod audit;
    pub use audit::*;
    mod retention;
    pub use retention::*;
    mod settlement;
    pub use settlement::*;
}

/// The schema before action ids became tenant-scoped (`migrations`, as the bookkeeping table
/// records them) with the rows of `data/pre_tenant_keys.sql`: what an upgrade starts from.
fn pre_tenant_keys(migrations: &[(i64, &str, &str)]) -> String {
    use sha2::Digest;
    let mut prepare = String::from(
        "CREATE TABLE IF NOT EXISTS aip_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, \
         checksum TEXT NOT NULL, applied_at_ms BIGINT NOT NULL);\n",
    );
    for (version, name, sql) in migrations {
        let checksum: String = sha2::Sha256::digest(sql.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        prepare.push_str(sql);
        prepare.push_str(&format!(
            "\nINSERT INTO aip_migrations VALUES ({version}, '{name}', '{checksum}', 0);\n"
        ));
    }
    prepare.push_str(include_str!("data/pre_tenant_keys.sql"));
    prepare
}

/// After the upgrade the old rows are read under their tenant, and the append-only guards hold.
async fn the_pre_tenant_rows_are_kept_under_their_tenant(h: &Harness) {
    let s = &h.store;
    assert_eq!(
        s.get_action("t1", "a1").await.unwrap().unwrap().state,
        ActionState::Queued
    );
    assert!(s.get_action("t2", "a1").await.unwrap().is_none());
    let chunks = s.list_chunks("t1", "a1", None, Limit::max()).await.unwrap();
    assert_eq!(chunks.len(), 1);
    let chain = s.list_receipts("t1", "a1", Limit::max()).await.unwrap();
    assert_eq!(chain.len(), 1);
    let lease = s
        .claim("actions", &WorkerId::fresh(), 2, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (lease.tenant.as_str(), lease.action_id.as_deref()),
        ("t1", Some("a1"))
    );
    let audit = AuditQuery {
        tenant: "t1".into(),
        action_id: Some("a1".into()),
        ..Default::default()
    };
    let found = s.list_audit(&audit, None, Limit::max()).await.unwrap();
    assert_eq!(
        found.items.len(),
        1,
        "the audit record's action was filled in"
    );
    assert!(
        h.raw_exec("DELETE FROM aip_receipts").await.is_err(),
        "receipts stay append-only"
    );
    assert!(
        h.raw_exec("DELETE FROM aip_audit").await.is_err(),
        "audit stays append-only"
    );
}

/// A SQLite store written before action ids became tenant-scoped (migrations 1-4) keeps its rows
/// through migration 5 and gains the tenant keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_store_written_before_tenant_scoped_action_ids_keeps_its_data_under_tenant_keys() {
    let prepare = pre_tenant_keys(&[
        (
            1,
            "init",
            include_str!("../migrations/sqlite/0001_init.sql"),
        ),
        (
            2,
            "event_positions",
            include_str!("../migrations/sqlite/0002_event_positions.sql"),
        ),
        (
            3,
            "event_counter_trigger",
            include_str!("../migrations/sqlite/0003_event_counter_trigger.sql"),
        ),
        (
            4,
            "drop_superseded_event_indexes",
            include_str!("../migrations/sqlite/0004_drop_superseded_event_indexes.sql"),
        ),
    ]);
    let h = Harness::sqlite_from(Some(&prepare)).await;
    the_pre_tenant_rows_are_kept_under_their_tenant(&h).await;
}

/// The same upgrade on PostgreSQL (migrations 1-2, then 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_store_written_before_tenant_scoped_action_ids_keeps_its_data_under_tenant_keys()
{
    let prepare = pre_tenant_keys(&[
        (
            1,
            "init",
            include_str!("../migrations/postgres/0001_init.sql"),
        ),
        (
            2,
            "event_positions",
            include_str!("../migrations/postgres/0002_event_positions.sql"),
        ),
    ]);
    let Some(h) = Harness::postgres_from(Some(&prepare)).await else {
        return;
    };
    the_pre_tenant_rows_are_kept_under_their_tenant(&h).await;
}
