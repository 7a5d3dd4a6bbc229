//! Suite cases of settlement batches (run on both backends by `suite!`).

use super::*;

/// Batch `id` of tenant `t1` settling `actions`, with one receipt (chain `id`) and its audit event.
pub(super) fn batch(id: &str, actions: &[&str]) -> NewSettlement {
    NewSettlement {
        batch_id: id.into(),
        tenant: "t1".into(),
        model: "per_call".into(),
        body: json!({ "id": id }),
        action_ids: actions.iter().map(|a| (*a).to_owned()).collect(),
        receipts: vec![receipt(&format!("{id}-r"), id, &format!("{id}-h"), None)],
        audit: audit_of("t1", "svc:billing", "settlement.closed"),
        now_ms: T0,
    }
}

pub async fn a_settlement_claims_each_completed_action_once_with_its_receipts(h: &Harness) {
    let s = &h.store;
    for id in ["set-a1", "set-a2", "set-a3"] {
        admit_ok(s, admission(id, None)).await;
    }
    for id in ["set-a1", "set-a2"] {
        let done = transition(id, &[ActionState::Accepted], ActionState::Completed);
        s.transition_action(done).await.unwrap();
    }
    let caps = vec!["cap:demo:echo".to_owned()];
    let unsettled = |s: Arc<dyn Store>, caps: Vec<String>| async move {
        s.unsettled_actions("t1", &caps, Limit::max())
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.action_id)
            .filter(|id| id.starts_with("set-"))
            .collect::<Vec<_>>()
    };
    // Only completed actions of the listed capabilities.
    assert_eq!(
        unsettled(s.clone(), caps.clone()).await,
        ["set-a1", "set-a2"]
    );
    assert!(
        unsettled(s.clone(), vec!["cap:other".into()])
            .await
            .is_empty()
    );
    let recorded = s
        .record_settlement(batch("b1", &["set-a1", "set-a2"]))
        .await
        .unwrap();
    assert_eq!(recorded.batch_id, "b1");
    assert!(unsettled(s.clone(), caps.clone()).await.is_empty());
    // An action already settled, or a batch id already used, refuses the whole batch.
    assert!(matches!(
        s.record_settlement(batch("b2", &["set-a1"])).await,
        Err(StoreError::Duplicate { .. })
    ));
    assert!(s.get_settlement("t1", "b2").await.unwrap().is_none());
    assert!(s.get_receipt("t1", "b2-r").await.unwrap().is_none());
    assert!(matches!(
        s.record_settlement(batch("b1", &[])).await,
        Err(StoreError::Duplicate { .. })
    ));
    assert_eq!(
        s.get_settlement("t1", "b1").await.unwrap().unwrap().body,
        json!({ "id": "b1" })
    );
    assert!(s.get_settlement("t2", "b1").await.unwrap().is_none());
}
