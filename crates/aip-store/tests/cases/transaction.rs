//! Suite cases of the transaction aggregate (run on both backends by `suite!`).

use super::*;

/// Admission of `id` linked to transaction `txn` in `role`, at `version` (`None`: creates it).
pub(super) fn linked(
    id: &str,
    txn: &str,
    role: TransactionRole,
    version: Option<i64>,
) -> Admission {
    let mut a = admission(id, None);
    a.transaction = Some(TransactionLink {
        transaction_id: txn.into(),
        role,
        expected_version: version,
        capability: "cap:demo:payment".into(),
        principal: "alice".into(),
        plan: (role == TransactionRole::Plan).then(|| {
            (
                format!("plan-{txn}"),
                json!({ "plan_id": format!("plan-{txn}") }),
                Some(T0 + 60_000),
            )
        }),
        operation: matches!(role, TransactionRole::Commit | TransactionRole::Execute)
            .then(|| json!({ "provider": "demo", "operation_id": format!("op-{id}") })),
    });
    a
}

pub async fn a_plan_is_stored_with_its_action_and_found_by_id_plan_and_action(h: &Harness) {
    let s = &h.store;
    admit_ok(s, linked("p1", "txn1", TransactionRole::Plan, None)).await;
    let t = s.get_transaction("t1", "txn1").await.unwrap().unwrap();
    assert_eq!(t.plan_id.as_deref(), Some("plan-txn1"));
    assert_eq!(t.plan_action_id.as_deref(), Some("p1"));
    assert_eq!(t.plan_expires_at_ms, Some(T0 + 60_000));
    assert_eq!(t.plan.as_ref().unwrap()["plan_id"], "plan-txn1");
    assert_eq!((t.version, t.commit_action_id.as_deref()), (0, None));
    let by_plan = s.transaction_by_plan("t1", "plan-txn1").await.unwrap();
    assert_eq!(by_plan.as_ref(), Some(&t));
    let (of_action, role) = s.transaction_of_action("t1", "p1").await.unwrap().unwrap();
    assert_eq!((of_action, role), (t, TransactionRole::Plan));
    assert!(
        s.get_transaction("t2", "txn1").await.unwrap().is_none(),
        "tenant-scoped"
    );
    assert!(
        s.transaction_by_plan("t2", "plan-txn1")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.transaction_of_action("t1", "nope")
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn concurrent_commits_of_one_plan_admit_exactly_one(h: &Harness) {
    let s = h.store.clone();
    admit_ok(&s, linked("p2", "txn2", TransactionRole::Plan, None)).await;
    let outcomes = race(8, move |i| {
        let s = s.clone();
        async move {
            s.admit(linked(
                &format!("c2-{i}"),
                "txn2",
                TransactionRole::Commit,
                Some(0),
            ))
            .await
        }
    })
    .await;
    assert_eq!(wins(&outcomes), 1, "{outcomes:?}");
    for r in &outcomes {
        if let Err(e) = r {
            assert!(matches!(e, StoreError::StateConflict { .. }), "{e:?}");
        }
    }
    let winner = outcomes.iter().position(Result::is_ok).unwrap();
    let t = h
        .store
        .get_transaction("t1", "txn2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.commit_action_id, Some(format!("c2-{winner}")));
    assert_eq!(
        t.operation.unwrap()["operation_id"],
        format!("op-c2-{winner}")
    );
    assert_eq!(t.version, 1);
    for i in 0..8 {
        let stored = h.store.get_action("t1", &format!("c2-{i}")).await.unwrap();
        assert_eq!(
            stored.is_some(),
            i == winner,
            "a losing commit admits nothing: {i}"
        );
    }
}

pub async fn a_transaction_id_is_created_once_and_a_stale_version_is_refused(h: &Harness) {
    let s = &h.store;
    admit_ok(s, linked("d3", "txn3", TransactionRole::DryRun, None)).await;
    let again = s
        .admit(linked("d3b", "txn3", TransactionRole::DryRun, None))
        .await;
    assert!(
        matches!(again, Err(StoreError::StateConflict { .. })),
        "{again:?}"
    );
    assert!(s.get_action("t1", "d3b").await.unwrap().is_none());
    admit_ok(s, linked("p3", "txn3", TransactionRole::Plan, Some(0))).await;
    let stale = s
        .admit(linked("c3", "txn3", TransactionRole::Commit, Some(0)))
        .await;
    assert!(
        matches!(stale, Err(StoreError::StateConflict { .. })),
        "{stale:?}"
    );
    admit_ok(s, linked("c3", "txn3", TransactionRole::Commit, Some(1))).await;
    admit_ok(s, linked("r3", "txn3", TransactionRole::Reconcile, Some(2))).await;
    let t = s.get_transaction("t1", "txn3").await.unwrap().unwrap();
    assert_eq!(t.dry_run_action_id.as_deref(), Some("d3"));
    assert_eq!(t.reconcile_action_id.as_deref(), Some("r3"));
    // A new commit supersedes the reconciliation of the one before.
    admit_ok(s, linked("c3b", "txn3", TransactionRole::Commit, Some(3))).await;
    let t = s.get_transaction("t1", "txn3").await.unwrap().unwrap();
    assert_eq!(t.commit_action_id.as_deref(), Some("c3b"));
    assert_eq!(t.reconcile_action_id, None);
    assert_eq!(t.operation.unwrap()["operation_id"], "op-c3b");
    let joins = s
        .admit(linked("c4", "txn-none", TransactionRole::Commit, None))
        .await;
    assert!(
        matches!(joins, Err(StoreError::InvalidInput(_))),
        "{joins:?}"
    );
}

pub async fn a_fenced_record_is_written_only_under_a_live_lease(h: &Harness) {
    let s = &h.store;
    s.enqueue(job("jf", None, 3)).await.unwrap();
    let worker = WorkerId::fresh();
    let lease = s
        .claim("actions", &worker, T0, 1_000)
        .await
        .unwrap()
        .unwrap();
    let record = |id: &str| AppRecord {
        collection: "demo.payments".into(),
        record_id: id.into(),
        tenant: "t1".into(),
        created_at_ms: T0,
        body: json!({ "id": id }),
    };
    s.insert_record_fenced(record("pay1"), &lease.fence, T0 + 10)
        .await
        .unwrap();
    // The lease lapses and another worker takes the job over: the first fence writes nothing.
    let other = s
        .claim("actions", &WorkerId::fresh(), T0 + 2_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    let stale = s
        .insert_record_fenced(record("pay2"), &lease.fence, T0 + 2_001)
        .await;
    assert!(matches!(stale, Err(StoreError::StaleLease)), "{stale:?}");
    assert!(
        s.get_record("demo.payments", "t1", "pay2")
            .await
            .unwrap()
            .is_none()
    );
    s.insert_record_fenced(record("pay3"), &other.fence, T0 + 2_002)
        .await
        .unwrap();
    let got = s
        .get_record("demo.payments", "t1", "pay1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.body["id"], "pay1");
    assert!(
        s.get_record("demo.payments", "t2", "pay1")
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn action_lists_and_audit_filter_by_transaction(h: &Harness) {
    let s = &h.store;
    admit_ok(s, linked("fp1", "txnf", TransactionRole::Plan, None)).await;
    admit_ok(s, linked("fc1", "txnf", TransactionRole::Commit, Some(0))).await;
    admit_ok(s, admission("fx1", None)).await;
    let q = |txn: &str| ActionQuery {
        tenant: "t1".into(),
        transaction_id: Some(txn.into()),
        ..Default::default()
    };
    let ids = |p: Page<ActionRecord>| p.items.into_iter().map(|r| r.action_id).collect::<Vec<_>>();
    assert_eq!(
        ids(s
            .list_actions(&q("txnf"), None, Limit::max())
            .await
            .unwrap()),
        ["fp1", "fc1"]
    );
    assert!(
        s.list_actions(&q("txn-none"), None, Limit::max())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let mut other = q("txnf");
    other.tenant = "t2".into();
    assert!(
        s.list_actions(&other, None, Limit::max())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // A cursor of one transaction's list is not another's.
    let first = s
        .list_actions(&q("txnf"), None, Limit::new(1).unwrap())
        .await
        .unwrap();
    assert!(
        s.list_actions(&q("txn-none"), Some(&first.next_cursor), Limit::max())
            .await
            .is_err()
    );
    for (id, action) in [("af1", "fc1"), ("af2", "fx1")] {
        s.append_audit(NewAudit {
            audit_id: id.into(),
            tenant: "t1".into(),
            actor: "alice".into(),
            action_label: "action.cancel_requested".into(),
            occurred_at_ms: T0,
            data: json!({}),
            action_id: Some(action.into()),
            session_id: None,
        })
        .await
        .unwrap();
    }
    let audit = AuditQuery {
        tenant: "t1".into(),
        transaction_id: Some("txnf".into()),
        ..Default::default()
    };
    let found = s.list_audit(&audit, None, Limit::max()).await.unwrap();
    let found: Vec<String> = found.items.into_iter().map(|a| a.audit_id).collect();
    assert_eq!(found, ["af1"]);
}
