//! Replay protection (spec 22.3): the `sent_at` skew bound holds for every envelope, signed or not,
//! within the configured window; nothing is admitted from an envelope outside it.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::json;
use support::{Harness, caller, envelope, id};

#[tokio::test]
async fn an_unsigned_envelope_outside_the_skew_window_is_refused_and_admits_nothing() {
    let h = Harness::start().await;
    let alice = caller("svc:alice", "t1", &["invoke:*"]);
    let now = aip_core::Timestamp::now().unix_millis().unwrap();
    // The harness accepts 300 s of skew; one side of the window, then the other.
    for offset_ms in [-301_000_i64, 301_000] {
        let action_id = id("act_");
        let mut env = envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": action_id, "capability_id": "cap:demo:echo", "input": {} } }),
        );
        env["sent_at"] = json!(aip_core::Timestamp::from_unix_millis(now + offset_ms).unwrap());
        let (status, reply) = h.send(&alice, &env).await;
        assert_eq!(status, 401, "{offset_ms}: {reply}");
        assert_eq!(
            reply["body"]["error"]["error"]["code"],
            "aip.security.clock_skew"
        );
        assert!(
            h.runtime
                .store()
                .get_action("t1", &action_id)
                .await
                .unwrap()
                .is_none()
        );
    }
    // Inside the window it is served.
    let mut env = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} } }),
    );
    env["sent_at"] = json!(aip_core::Timestamp::from_unix_millis(now - 200_000).unwrap());
    let (status, reply) = h.send(&alice, &env).await;
    assert_eq!(status, 200, "{reply}");
}
