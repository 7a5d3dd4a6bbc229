//! Rate limits on admitted work (spec 22.8): a bucket per principal and per tenant, overridable by
//! name, checked at admission (so every transport is bound by it), refusing with the retryable
//! `aip.limit.rate_limited` and admitting nothing.
#![allow(clippy::unwrap_used)]

mod support;

use std::num::NonZeroU32;

use aip_runtime::{Rate, RatePolicy};
use serde_json::json;
use support::{Harness, caller, code, id, runtime_config};

fn rate(per_second: u32, burst: u32) -> Rate {
    Rate {
        per_second: NonZeroU32::new(per_second).unwrap(),
        burst: NonZeroU32::new(burst).unwrap(),
    }
}

/// Sends `n` echo actions as `who`; returns the codes of the refused ones, in order, and checks
/// that a refused action was not admitted.
async fn burst(h: &Harness, who: &aip_runtime::Caller, n: usize) -> Vec<String> {
    let mut refused = Vec::new();
    for _ in 0..n {
        let action_id = id("act_");
        let (status, reply) = h
            .act(
                who,
                None,
                json!({ "id": action_id, "capability_id": "cap:demo:echo", "input": {} }),
            )
            .await;
        if status != 200 {
            let error = &reply["body"]["error"]["error"];
            assert_eq!(error["retryable"], true, "{reply}");
            assert!(
                error["details"]["retry_after_ms"].as_u64().unwrap() >= 1,
                "{reply}"
            );
            assert!(
                h.runtime
                    .store()
                    .get_action(&who.tenant, &action_id)
                    .await
                    .unwrap()
                    .is_none(),
                "a refused action is not admitted"
            );
            refused.push(code(&reply).to_owned());
        }
    }
    refused
}

#[tokio::test]
async fn a_principal_past_its_bucket_is_refused_typed_while_others_and_named_overrides_keep_their_own()
 {
    let mut config = runtime_config(2, 30_000);
    // One a second, bursts of three; `svc:vip` has ten; tenant `t2` has two for all its principals.
    config.rates = RatePolicy {
        per_principal: Some(rate(1, 3)),
        per_tenant: None,
        principals: [("svc:vip".to_owned(), rate(1, 10))].into(),
        tenants: [("t2".to_owned(), rate(1, 2))].into(),
    };
    let h = Harness::start_with(config).await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let bob = caller("svc:bob", "t1", &["invoke:*"]);
    let vip = caller("svc:vip", "t1", &["invoke:*"]);
    assert_eq!(
        burst(&h, &alice, 5).await,
        vec!["aip.limit.rate_limited"; 2]
    );
    // Bob's bucket is his own.
    assert!(burst(&h, &bob, 3).await.is_empty());
    assert!(burst(&h, &vip, 10).await.is_empty());
    // A tenant's bucket is shared: two principals of t2 get two admissions between them.
    let c1 = caller("svc:c1", "t2", &["invoke:*"]);
    let c2 = caller("svc:c2", "t2", &["invoke:*"]);
    assert!(burst(&h, &c1, 1).await.is_empty());
    assert!(burst(&h, &c2, 1).await.is_empty());
    assert_eq!(burst(&h, &c2, 1).await, vec!["aip.limit.rate_limited"]);
    // The bucket refills: a second later alice is admitted again.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert!(burst(&h, &alice, 1).await.is_empty());
}
