//! Suite cases of the approval and escalation aggregates (run on both backends by `suite!`).

use super::*;

/// Admission of `id` waiting for approval `apr-{id}`, decidable by `approvers`, with its expiry
/// timer as the job.
pub(super) fn gated(id: &str, approvers: &[&str]) -> Admission {
    let mut a = admission(id, None);
    a.action.state = ActionState::PendingApproval;
    a.job = Some(NewJob {
        queue: "approvals".into(),
        available_at_ms: T0 + 60_000,
        ..job(&format!("timer-{id}"), Some(id), 5)
    });
    a.approval = Some(NewApproval {
        approval_id: format!("apr-{id}"),
        tenant: "t1".into(),
        action_id: id.into(),
        capability: "cap:demo:transfer".into(),
        requester: "alice".into(),
        policy_hash: "ph".into(),
        expires_at_ms: T0 + 60_000,
        created_at_ms: T0,
        request: json!({ "approval": id }),
        approvers: approvers.iter().map(|a| (*a).to_owned()).collect(),
    });
    a
}

pub(super) fn decision(id: &str, approver: &str) -> NewDecision {
    NewDecision {
        decision_id: id.into(),
        approver: approver.into(),
        kind: "approved".into(),
        decided_at_ms: T0 + 1,
        body: json!({ "decision": id }),
    }
}

pub(super) fn approval_write(id: &str, version: i64) -> ApprovalWrite {
    ApprovalWrite {
        tenant: "t1".into(),
        approval_id: format!("apr-{id}"),
        expected_version: version,
        decision: None,
        to: None,
        action: None,
        job: None,
        receipts: vec![],
        events: vec![],
        finish_job: None,
        audit: Vec::new(),
        now_ms: T0 + 1,
    }
}

pub async fn an_approval_is_created_with_its_action_and_read_with_its_approvers(h: &Harness) {
    let s = &h.store;
    admit_ok(s, gated("a1", &["role:approver", "principal:carol"])).await;
    let approval = s.get_approval("t1", "apr-a1").await.unwrap().unwrap();
    assert_eq!(approval.state, ApprovalState::Pending);
    assert_eq!(approval.action_id, "a1");
    assert_eq!(approval.approvers, ["principal:carol", "role:approver"]);
    assert_eq!(
        s.approval_of_action("t1", "a1")
            .await
            .unwrap()
            .unwrap()
            .approval_id,
        "apr-a1"
    );
    assert!(
        s.get_approval("t2", "apr-a1").await.unwrap().is_none(),
        "tenant-scoped"
    );
    assert_eq!(
        s.get_action("t1", "a1").await.unwrap().unwrap().state,
        ActionState::PendingApproval
    );
    // An action waiting for approval is not work a crash left unfinished.
    assert!(
        s.list_unfinished_actions(T0 + 120_000, T0 + 120_000, Limit::max())
            .await
            .unwrap()
            .is_empty()
    );
    // An approval is created only with its own action.
    let mut foreign = gated("a2", &[]);
    if let Some(a) = foreign.approval.as_mut() {
        a.action_id = "a1".into();
    }
    assert!(matches!(
        s.admit(foreign).await,
        Err(StoreError::InvalidInput(_))
    ));
    assert!(s.get_action("t1", "a2").await.unwrap().is_none());
}

pub async fn approval_writes_are_compare_and_set_and_a_decision_id_is_replayed(h: &Harness) {
    let s = &h.store;
    admit_ok(s, gated("a1", &["role:approver"])).await;
    let first = ApprovalWrite {
        decision: Some(decision("d1", "bob")),
        ..approval_write("a1", 0)
    };
    let ApprovalWritten::Written(after) = s.write_approval(first.clone()).await.unwrap() else {
        panic!("the first decision is written");
    };
    assert_eq!((after.version, after.state), (1, ApprovalState::Pending));
    // The same decision id again: replayed, nothing written, whatever the version says.
    let again = s.write_approval(first).await.unwrap();
    assert!(
        matches!(again, ApprovalWritten::Replayed(ref d) if d.approver == "bob"),
        "{again:?}"
    );
    // A writer that read version 0 loses to the one that wrote version 1.
    let stale = ApprovalWrite {
        decision: Some(decision("d2", "carol")),
        ..approval_write("a1", 0)
    };
    assert!(matches!(
        s.write_approval(stale).await,
        Err(StoreError::StateConflict { .. })
    ));
    let decisions = s.list_decisions("t1", "apr-a1").await.unwrap();
    assert_eq!(decisions.len(), 1);
    assert!(
        h.raw_exec("DELETE FROM aip_approval_decisions")
            .await
            .is_err(),
        "append-only"
    );
    assert!(matches!(
        s.write_approval(approval_write("missing", 0)).await,
        Err(StoreError::NotFound { kind: "approval" })
    ));
}

pub async fn an_approval_write_moves_its_action_and_queues_its_job_all_or_nothing(h: &Harness) {
    let s = &h.store;
    admit_ok(s, gated("a1", &["role:approver"])).await;
    // An action transition that cannot apply (wrong current state) fails the whole write.
    let broken = ApprovalWrite {
        decision: Some(decision("d1", "bob")),
        to: Some(ApprovalState::Approved),
        action: Some(transition(
            "a1",
            &[ActionState::Running],
            ActionState::Queued,
        )),
        ..approval_write("a1", 0)
    };
    assert!(matches!(
        s.write_approval(broken).await,
        Err(StoreError::StateConflict { .. })
    ));
    assert!(s.list_decisions("t1", "apr-a1").await.unwrap().is_empty());
    assert_eq!(
        s.get_approval("t1", "apr-a1").await.unwrap().unwrap().state,
        ApprovalState::Pending
    );
    let granted = ApprovalWrite {
        decision: Some(decision("d1", "bob")),
        to: Some(ApprovalState::Approved),
        action: Some(transition(
            "a1",
            &[ActionState::PendingApproval],
            ActionState::Queued,
        )),
        job: Some(job("resume-a1", Some("a1"), 5)),
        events: vec![event("ev-granted", "t1", Some("alice"), Some("a1"))],
        ..approval_write("a1", 0)
    };
    let ApprovalWritten::Written(after) = s.write_approval(granted).await.unwrap() else {
        panic!("written");
    };
    assert_eq!(after.state, ApprovalState::Approved);
    assert_eq!(
        s.get_action("t1", "a1").await.unwrap().unwrap().state,
        ActionState::Queued
    );
    let lease = s
        .claim("actions", &WorkerId::fresh(), T0 + 2, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.fence.job_id, "resume-a1");
    // The expiry timer, claimed later, completes under its fence with the approval's last word.
    let timer = s
        .claim("approvals", &WorkerId::fresh(), T0 + 60_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    let done = ApprovalWrite {
        finish_job: Some(timer.fence.clone()),
        audit: Vec::new(),
        now_ms: T0 + 60_001,
        ..approval_write("a1", 1)
    };
    s.write_approval(done).await.unwrap();
    assert!(matches!(
        s.complete_job(&timer.fence, T0 + 60_002).await,
        Err(StoreError::StaleLease)
    ));
}

pub async fn approval_lists_show_only_what_the_reader_requested_or_may_decide(h: &Harness) {
    let s = &h.store;
    admit_ok(s, gated("a1", &["role:approver"])).await;
    admit_ok(s, gated("a2", &["principal:carol"])).await;
    let mut bobs = gated("a3", &["role:approver"]);
    bobs.action.principal = "bob".into();
    if let Some(a) = bobs.approval.as_mut() {
        a.requester = "bob".into();
    }
    admit_ok(s, bobs).await;
    let ids =
        |p: Page<ApprovalRecord>| p.items.into_iter().map(|a| a.action_id).collect::<Vec<_>>();
    let as_reader = |who: &str, keys: &[&str]| ApprovalQuery {
        tenant: "t1".into(),
        reader: Some((who.into(), keys.iter().map(|k| (*k).to_owned()).collect())),
        ..Default::default()
    };
    // Carol requested nothing and may decide only a2.
    let carol = as_reader("carol", &["principal:carol"]);
    assert_eq!(
        ids(s.list_approvals(&carol, None, Limit::max()).await.unwrap()),
        ["a2"]
    );
    // An approver sees what the role may decide; a requester sees its own requests.
    let dave = as_reader("dave", &["principal:dave", "role:approver"]);
    assert_eq!(
        ids(s.list_approvals(&dave, None, Limit::max()).await.unwrap()),
        ["a1", "a3"]
    );
    let bob = as_reader("bob", &["principal:bob"]);
    assert_eq!(
        ids(s.list_approvals(&bob, None, Limit::max()).await.unwrap()),
        ["a3"]
    );
    // Filters narrow, never widen, and cursors page on.
    let all = ApprovalQuery {
        tenant: "t1".into(),
        ..Default::default()
    };
    let first = s
        .list_approvals(&all, None, Limit::new(2).unwrap())
        .await
        .unwrap();
    let next = s
        .list_approvals(&all, Some(&first.next_cursor), Limit::max())
        .await
        .unwrap();
    assert_eq!(
        (ids(first), ids(next)),
        (vec!["a1".to_owned(), "a2".into()], vec!["a3".to_owned()])
    );
    let requested_by_bob = ApprovalQuery {
        requester: Some("bob".into()),
        ..carol.clone()
    };
    assert!(
        s.list_approvals(&requested_by_bob, None, Limit::max())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let decidable_by_role = ApprovalQuery {
        approver_keys: Some(vec!["role:approver".into()]),
        ..all.clone()
    };
    assert_eq!(
        ids(s
            .list_approvals(&decidable_by_role, None, Limit::max())
            .await
            .unwrap()),
        ["a1", "a3"]
    );
    let pending = ApprovalQuery {
        state: Some(ApprovalState::Approved),
        ..all
    };
    assert!(
        s.list_approvals(&pending, None, Limit::max())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(matches!(
        s.list_approvals(
            &dave,
            Some(
                &s.list_approvals(&carol, None, Limit::max())
                    .await
                    .unwrap()
                    .next_cursor
            ),
            Limit::max()
        )
        .await,
        Err(StoreError::ForeignCursor | StoreError::InvalidCursor)
    ));
}

pub(super) fn escalation(tenant: &str, id: &str, requester: &str, kind: &str) -> NewEscalation {
    NewEscalation {
        escalation_id: id.into(),
        tenant: tenant.into(),
        requester: requester.into(),
        kind: kind.into(),
        correlation_id: Some("corr-1".into()),
        session_id: None,
        expires_at_ms: Some(T0 + 60_000),
        created_at_ms: T0,
        body: json!({ "kind": kind, "reason": id }),
    }
}

fn escalation_timer(tenant: &str, id: &str) -> NewJob {
    NewJob {
        job_id: format!("job-{id}"),
        queue: "escalations".into(),
        action_id: None,
        tenant: tenant.into(),
        available_at_ms: T0 + 60_000,
        max_attempts: 3,
        payload: json!({ "escalation_id": id }),
    }
}

fn resolution(tenant: &str, id: &str, version: i64, to: EscalationState) -> EscalationResolve {
    EscalationResolve {
        tenant: tenant.into(),
        escalation_id: id.into(),
        expected_version: version,
        to,
        resolver: Some("rita".into()),
        resolution: json!({ "status": to.as_str() }),
        finish_job: None,
        now_ms: T0 + 10,
    }
}

pub async fn an_escalation_is_stored_once_per_tenant_id_with_its_timer(h: &Harness) {
    let s = &h.store;
    let created = s
        .create_escalation(
            escalation("t1", "esc-1", "agent", "input"),
            Some(escalation_timer("t1", "esc-1")),
        )
        .await
        .unwrap();
    let EscalationCreated::Created(record) = created else {
        panic!("first create must store");
    };
    assert_eq!(record.state, EscalationState::Open);
    assert_eq!(record.correlation_id.as_deref(), Some("corr-1"));
    assert!(record.resolution.is_none());
    // The same id again writes nothing (not even a second timer).
    let again = s
        .create_escalation(
            escalation("t1", "esc-1", "other", "handoff"),
            Some(escalation_timer("t1", "esc-1b")),
        )
        .await
        .unwrap();
    let EscalationCreated::Existing(existing) = again else {
        panic!("a taken id must return the stored escalation");
    };
    assert_eq!(
        (existing.requester.as_str(), existing.kind.as_str()),
        ("agent", "input")
    );
    // Another tenant's id is its own.
    assert!(matches!(
        s.create_escalation(escalation("t2", "esc-1", "agent", "input"), None)
            .await
            .unwrap(),
        EscalationCreated::Created(_)
    ));
    assert!(s.get_escalation("t3", "esc-1").await.unwrap().is_none());
    // Exactly one timer, due at the expiry.
    assert!(
        s.claim("escalations", &WorkerId::fresh(), T0, 1000)
            .await
            .unwrap()
            .is_none()
    );
    let lease = s
        .claim("escalations", &WorkerId::fresh(), T0 + 60_000, 1000)
        .await
        .unwrap()
        .expect("the timer is due at the expiry");
    assert_eq!(lease.payload["escalation_id"], "esc-1");
    assert!(
        s.claim("escalations", &WorkerId::fresh(), T0 + 60_000, 1000)
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn an_escalation_is_resolved_once_and_a_stale_or_second_resolution_is_refused(
    h: &Harness,
) {
    let s = &h.store;
    s.create_escalation(escalation("t1", "esc-2", "agent", "approval"), None)
        .await
        .unwrap();
    assert!(matches!(
        s.resolve_escalation(resolution("t1", "esc-2", 0, EscalationState::Open))
            .await,
        Err(StoreError::InvalidInput(_))
    ));
    assert!(matches!(
        s.resolve_escalation(resolution("t1", "esc-2", 7, EscalationState::Approved))
            .await,
        Err(StoreError::StateConflict { .. })
    ));
    let done = s
        .resolve_escalation(resolution("t1", "esc-2", 0, EscalationState::Rejected))
        .await
        .unwrap();
    assert_eq!(done.state, EscalationState::Rejected);
    assert_eq!(done.resolver.as_deref(), Some("rita"));
    assert_eq!(done.resolution, Some(json!({ "status": "rejected" })));
    assert_eq!(done.version, 1);
    // Closed: even with the current version nothing changes.
    assert!(matches!(
        s.resolve_escalation(resolution("t1", "esc-2", 1, EscalationState::Approved)).await,
        Err(StoreError::StateConflict { actual }) if actual == "rejected"
    ));
    assert!(matches!(
        s.resolve_escalation(resolution("t9", "esc-2", 0, EscalationState::Approved))
            .await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        s.get_escalation("t1", "esc-2")
            .await
            .unwrap()
            .unwrap()
            .state,
        EscalationState::Rejected
    );
}

pub async fn escalation_lists_are_scoped_to_their_reader_and_filters(h: &Harness) {
    let s = &h.store;
    for (id, requester, kind) in [
        ("e1", "amy", "input"),
        ("e2", "bob", "handoff"),
        ("e3", "amy", "approval"),
    ] {
        s.create_escalation(escalation("t1", id, requester, kind), None)
            .await
            .unwrap();
    }
    s.create_escalation(escalation("t2", "e4", "amy", "input"), None)
        .await
        .unwrap();
    s.resolve_escalation(resolution("t1", "e3", 0, EscalationState::Cancelled))
        .await
        .unwrap();
    let ids = |p: &Page<EscalationRecord>| {
        p.items
            .iter()
            .map(|e| e.escalation_id.clone())
            .collect::<Vec<_>>()
    };
    let all = EscalationQuery {
        tenant: "t1".into(),
        ..Default::default()
    };
    assert_eq!(
        ids(&s.list_escalations(&all, None, Limit::max()).await.unwrap()),
        ["e1", "e2", "e3"]
    );
    let amy = EscalationQuery {
        requester_only: Some("amy".into()),
        ..all.clone()
    };
    assert_eq!(
        ids(&s.list_escalations(&amy, None, Limit::max()).await.unwrap()),
        ["e1", "e3"]
    );
    let open = EscalationQuery {
        state: Some(EscalationState::Open),
        ..all.clone()
    };
    assert_eq!(
        ids(&s.list_escalations(&open, None, Limit::max()).await.unwrap()),
        ["e1", "e2"]
    );
    let handoffs = EscalationQuery {
        kind: Some("handoff".into()),
        ..all.clone()
    };
    assert_eq!(
        ids(&s
            .list_escalations(&handoffs, None, Limit::max())
            .await
            .unwrap()),
        ["e2"]
    );
    // Pages with a cursor bound to the reader's scope.
    let first = s
        .list_escalations(&all, None, Limit::new(2).unwrap())
        .await
        .unwrap();
    assert_eq!(ids(&first), ["e1", "e2"]);
    let rest = s
        .list_escalations(&all, Some(&first.next_cursor), Limit::max())
        .await
        .unwrap();
    assert_eq!(ids(&rest), ["e3"]);
    assert!(matches!(
        s.list_escalations(&amy, Some(&first.next_cursor), Limit::max())
            .await,
        Err(StoreError::ForeignCursor | StoreError::InvalidCursor)
    ));
}
