//! Suite cases of the job queue: leases, fencing, retries and recovery (run on both backends by
//! `suite!`).

use super::*;

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

pub async fn an_expired_lease_is_reclaimable_and_a_released_job_is_claimable_at_once(h: &Harness) {
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

pub async fn a_booting_node_supersedes_its_earlier_boots_leases_and_no_one_elses(h: &Harness) {
    let s = &h.store;
    for id in ["j1", "j2", "j3"] {
        s.enqueue(job(id, None, 5)).await.unwrap();
    }
    let (old_boot, other_node) = (WorkerId::of_node("n1"), WorkerId::of_node("n10"));
    let old = s
        .claim("actions", &old_boot, T0, 60_000)
        .await
        .unwrap()
        .unwrap();
    let theirs = s
        .claim("actions", &other_node, T0, 60_000)
        .await
        .unwrap()
        .unwrap();
    let new_boot = WorkerId::of_node("n1");
    let mine = s
        .claim("actions", &new_boot, T0, 60_000)
        .await
        .unwrap()
        .unwrap();
    // `n1` boots again: only its previous boot's lease lapses (not `n10`'s, whose id it prefixes).
    let lapsed = s
        .supersede_leases(StaleLeases::OfNode("n1"), &new_boot, T0 + 10)
        .await
        .unwrap();
    assert_eq!(lapsed, 1);
    let again = s
        .claim("actions", &new_boot, T0 + 10, 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.fence.job_id, old.fence.job_id);
    assert_eq!((again.fence.token, again.attempt), (2, 2));
    assert!(
        s.claim("actions", &new_boot, T0 + 10, 60_000)
            .await
            .unwrap()
            .is_none(),
        "the other node's and the current boot's leases stand"
    );
    // The previous boot, if somehow alive, can no longer write.
    assert!(matches!(
        s.complete_job(&old.fence, T0 + 11).await,
        Err(StoreError::StaleLease)
    ));
    // With the store held exclusively, every other lease lapses, the current boot's excepted.
    let lapsed = s
        .supersede_leases(StaleLeases::All, &new_boot, T0 + 20)
        .await
        .unwrap();
    assert_eq!(lapsed, 1);
    let taken = s
        .claim("actions", &new_boot, T0 + 20, 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.fence.job_id, theirs.fence.job_id);
    s.complete_job(&mine.fence, T0 + 21).await.unwrap();
    s.complete_job(&again.fence, T0 + 21).await.unwrap();
}

pub async fn a_claim_among_a_hundred_thousand_finished_jobs_is_planned_on_the_claimable_indexes(
    h: &Harness,
) {
    let s = &h.store;
    let postgres = h.raw_pg_connection().await.is_some();
    let numbers = if postgres {
        "FROM generate_series(1, 100000) AS n(i)"
    } else {
        "FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) SELECT i FROM n) AS n"
    };
    let inserted = h
        .raw_exec(&format!(
            "INSERT INTO aip_jobs (job_id, queue, action_id, tenant, state, available_at_ms, attempts, max_attempts, \
             fence, created_at_ms, updated_at_ms, payload) \
             SELECT 'done-' || CAST(i AS TEXT), 'actions', NULL, 't1', CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'done' END, \
             {T0}, 1, 3, 1, {T0}, {T0}, '{{}}' {numbers}"
        ))
        .await
        .unwrap();
    assert_eq!(inserted, 100_000);
    let mut lapsed = job("lapsed", None, 3);
    lapsed.available_at_ms = T0 + 5;
    s.enqueue(lapsed).await.unwrap();
    let first = s
        .claim("actions", &WorkerId::fresh(), T0 + 5, 10)
        .await
        .unwrap();
    assert_eq!(first.unwrap().fence.job_id, "lapsed");
    s.enqueue(job("ready", None, 3)).await.unwrap();
    // As in production: PostgreSQL's autovacuum analyzes the table; the embedded store never
    // runs ANALYZE, so SQLite plans on its defaults.
    if postgres {
        h.raw_exec("ANALYZE").await.unwrap();
    }

    for (pick, index) in CLAIM_PICKS
        .iter()
        .zip(["aip_jobs_expiring", "aip_jobs_claimable"])
    {
        let sql = pick
            .replace("$3", &(T0 + 1_000).to_string())
            .replace("$4", "'actions'");
        let plan = h.raw_plan(&sql).await;
        assert!(plan.contains(index), "{index} not in the plan:\n{plan}");
        assert!(
            !plan.contains("Seq Scan") && !plan.contains("SCAN aip_jobs"),
            "{plan}"
        );
    }
    // The lapsed lease is taken back first, then the job that fell due; none of the finished ones.
    let w = WorkerId::fresh();
    let order: Vec<_> = [
        s.claim("actions", &w, T0 + 1_000, 10).await.unwrap(),
        s.claim("actions", &w, T0 + 1_000, 10).await.unwrap(),
        s.claim("actions", &w, T0 + 1_000, 10).await.unwrap(),
    ]
    .into_iter()
    .map(|l| l.map(|l| (l.fence.job_id, l.fence.token)))
    .collect();
    assert_eq!(
        order,
        [Some(("lapsed".into(), 2)), Some(("ready".into(), 1)), None]
    );
}
