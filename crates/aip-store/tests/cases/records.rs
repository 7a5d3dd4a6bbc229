//! Suite cases of receipt chains, application records and the expiry purge (run on both backends
//! by `suite!`).

use super::*;

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
    assert_eq!(s.get_receipt("t1", "r1").await.unwrap().unwrap(), r1);
    assert!(s.get_receipt("t1", "nope").await.unwrap().is_none());
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
