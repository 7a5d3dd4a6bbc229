//! The shared store suite: every case runs against SQLite (`sqlite::…`) and PostgreSQL
//! (`postgres::…`, skipped with a notice when `AIP_TEST_POSTGRES_URL` is unset, failing instead
//! under `CI=true`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;
mod upgrade;

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
    a_claim_among_a_hundred_thousand_finished_jobs_is_planned_on_the_claimable_indexes,
    events_page_through_opaque_reader_scoped_cursors,
    event_lists_never_show_another_readers_events,
    a_waiter_wakes_when_an_event_is_committed,
    chunks_are_strictly_increasing_and_duplicates_are_tolerated,
    a_chunk_batch_is_written_in_order_all_or_nothing_and_under_its_fence,
    sessions_follow_the_state_machine_with_compare_and_set,
    a_session_read_after_its_change_sees_the_change,
    a_sessions_rows_are_listed_by_its_id_alone_even_beside_ids_sharing_its_tail,
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
    a_booting_node_supersedes_its_earlier_boots_leases_and_no_one_elses,
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
    a_foreign_tenants_action_id_and_its_chunks_are_not_found,
    a_foreign_tenants_receipt_its_chain_and_its_tombstone_are_not_found,
    a_foreign_tenants_session_id_is_not_found,
    a_foreign_tenants_approval_and_its_decisions_are_not_found,
    a_foreign_tenants_escalation_id_is_not_found,
    a_foreign_tenants_transaction_by_id_plan_and_action_is_not_found,
    a_foreign_tenants_delivery_and_subscriptions_are_not_found,
    a_foreign_tenants_conversation_and_its_messages_are_not_found,
    a_foreign_tenants_settlement_batch_is_not_found,
    a_foreign_tenants_audit_events_are_not_found,
    a_foreign_tenants_record_id_is_not_found,
    concurrency_quotas_bound_unfinished_actions_in_the_admission_itself,
    a_full_queue_refuses_a_queued_admission_and_writes_nothing,
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
            quota: RunningQuota::default(),
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
        // The readiness probe sees a schema that is no longer exactly this build's.
        h.store.ping().await.unwrap();
        h.raw_exec("DELETE FROM aip_migrations WHERE version = 2")
            .await
            .unwrap();
        match h.store.ping().await {
            Err(e @ StoreError::MigrationPending { version: 2 }) => {
                assert_eq!(e.code(), "store.migration_pending")
            }
            other => panic!("expected a pending migration, got {other:?}"),
        }
        h.raw_exec("INSERT INTO aip_migrations (version, name, checksum, applied_at_ms) VALUES (998, 'future', 'x', 0)").await.unwrap();
        assert!(matches!(
            h.store.ping().await,
            Err(StoreError::MigrationUnknown { version: 998 })
        ));
        h.raw_exec("DELETE FROM aip_migrations WHERE version = 998")
            .await
            .unwrap();
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
                    .get_receipt("t1", &format!("{p}r{i}"))
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

    // Named as evidence by the conformance statement (aip-cli/src/conformance.rs), which looks
    // for it in this file.
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

    mod admission;
    pub use admission::*;
    mod records;
    pub use records::*;
    mod jobs;
    pub use jobs::*;
    mod stream;
    pub use stream::*;
    mod session;
    pub use session::*;
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
    mod tenancy;
    pub use tenancy::*;
}
