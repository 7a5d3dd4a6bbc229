//! Limits and shutdown of the NATS binding (spec 20.4, 22.8, 11), spoken to by a plain async-nats
//! client: a principal's rate and concurrency quota refuse with typed retryable error replies,
//! a request past `nats.max_in_flight` is refused at once with `aip.runtime.overloaded`, and a
//! draining node answers what it took, refuses new work, then leaves the queue group. Needs
//! `AIP_TEST_NATS_URL` (SKIP notice otherwise; a failure under `CI=true`); every test uses its own
//! trust domain, so its own subjects.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;
use std::time::Duration;

use async_nats::HeaderMap;
use serde_json::{Value, json};
use support::nats::{header, limited_node, nats_url, request};
use support::{envelope, id};

#[tokio::test]
async fn a_principal_past_its_rate_over_nats_gets_the_typed_retryable_error_reply() {
    let Some(url) = nats_url("serve_nats_limits") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, client, prefix) = limited_node(
        dir.path(),
        &url,
        "",
        "\n[limits.principal_rates]\n\"svc:nats\" = { per_second = 1, burst = 1 }\n",
    )
    .await;
    let subject = format!("{prefix}.aip_core_v1_action");
    let mut replies = Vec::new();
    // One token: the first is admitted, a later one meets the limit (three in case one refilled).
    for _ in 0..3 {
        let action = envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": {} } }),
        );
        let (_, reply) = request(&client, subject.clone(), &action, true).await;
        replies.push(reply["envelope"].clone());
    }
    assert_eq!(
        replies[0]["message_type"], "aip.core.v1.action_result",
        "{replies:?}"
    );
    let refused = replies
        .iter()
        .find(|r| r["message_type"] == "aip.core.v1.error")
        .unwrap_or_else(|| panic!("no refusal: {replies:?}"));
    let error = &refused["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.limit.rate_limited", "{refused}");
    assert_eq!(error["retryable"], true, "{refused}");
}

/// A sync action envelope of `cap:demo:sleep` for `ms`, or of `cap:demo:echo` when `ms` is `None`.
fn sync_action(ms: Option<u64>) -> Value {
    let (capability, input) = match ms {
        Some(ms) => ("cap:demo:sleep", json!({ "ms": ms })),
        None => ("cap:demo:echo", json!({ "n": 1 })),
    };
    envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": capability, "mode": "sync", "input": input } }),
    )
}

#[tokio::test]
async fn a_request_past_max_in_flight_gets_the_typed_retryable_overload_reply_at_once() {
    let Some(url) = nats_url("serve_nats_limits") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, client, prefix) = limited_node(dir.path(), &url, "max_in_flight = 1", "").await;
    let subject = format!("{prefix}.aip_core_v1_action");
    // One request holds the only slot for 2 s ...
    let held = {
        let (client, subject) = (client.clone(), subject.clone());
        tokio::spawn(
            async move { request(&client, subject, &sync_action(Some(2000)), false).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    // ... so the next is refused at once, typed and retryable, in reply to itself.
    let asked = sync_action(None);
    let started = std::time::Instant::now();
    let (headers, refused) = request(&client, subject.clone(), &asked, true).await;
    let took = started.elapsed();
    let refused = &refused["envelope"];
    assert_eq!(refused["message_type"], "aip.core.v1.error", "{refused}");
    let error = &refused["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.runtime.overloaded", "{refused}");
    assert_eq!(error["retryable"], true, "{refused}");
    assert_eq!(error["details"]["limit"], 1, "{refused}");
    assert_eq!(refused["in_response_to"], asked["message_id"], "{refused}");
    assert_eq!(header(&headers, "AIP-Message-Type"), "aip.core.v1.error");
    assert!(took < Duration::from_millis(1000), "refused after {took:?}");
    // Nothing of it was admitted; the held request completes; then there is room again.
    let (_, held) = held.await.unwrap();
    assert_eq!(held["message_type"], "aip.core.v1.action_result", "{held}");
    let (_, again) = request(&client, subject, &asked, false).await;
    assert_eq!(
        again["message_type"], "aip.core.v1.action_result",
        "{again}"
    );
    assert_eq!(
        again["body"]["action_result"]["status"], "completed",
        "{again}"
    );
}

#[tokio::test]
async fn a_draining_node_answers_over_nats_what_it_took_refuses_new_work_typed_and_then_leaves_the_queue_group()
 {
    let Some(url) = nats_url("serve_nats_limits") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut server, client, prefix) = limited_node(dir.path(), &url, "", "").await;
    let subject = format!("{prefix}.aip_core_v1_action");
    // A sync sleep over NATS is running when the signal arrives.
    let held = {
        let (client, subject) = (client.clone(), subject.clone());
        tokio::spawn(
            async move { request(&client, subject, &sync_action(Some(1500)), false).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    tokio::time::sleep(Duration::from_millis(200)).await;
    // While it drains: new work is refused with the typed retryable error, reads are served.
    let (_, refused) = request(&client, subject.clone(), &sync_action(None), false).await;
    let error = &refused["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.runtime.draining", "{refused}");
    assert_eq!(error["retryable"], true, "{refused}");
    let manifest = envelope(
        "aip.discovery.v1.manifest_request",
        json!({ "manifest_request": {} }),
    );
    let (_, read) = request(
        &client,
        format!("{prefix}.aip_discovery_v1_manifest_request"),
        &manifest,
        false,
    )
    .await;
    assert_eq!(
        read["message_type"], "aip.discovery.v1.manifest_response",
        "{read}"
    );
    // The request it took before the signal is answered with its result.
    let (_, held) = held.await.unwrap();
    assert_eq!(held["message_type"], "aip.core.v1.action_result", "{held}");
    assert_eq!(
        held["body"]["action_result"]["status"], "completed",
        "{held}"
    );
    // It exits cleanly, and its subscription is gone: nothing answers there any more.
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "aip serve exited with {status}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "still running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut headers = HeaderMap::new();
    headers.insert("AIP-Version", "1.0");
    let gone = client
        .request_with_headers(subject, headers, sync_action(None).to_string().into())
        .await;
    assert!(
        matches!(&gone, Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders),
        "{gone:?}"
    );
}

#[tokio::test]
async fn a_principal_at_its_concurrency_quota_over_nats_gets_the_typed_retryable_error_reply() {
    let Some(url) = nats_url("serve_nats_limits") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, client, prefix) = limited_node(
        dir.path(),
        &url,
        "",
        "\n[limits.principal_running]\n\"svc:nats\" = 1\n",
    )
    .await;
    let subject = format!("{prefix}.aip_core_v1_action");
    let sleep = || {
        envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 3000 } } }),
        )
    };
    // The only unfinished action the quota allows ...
    let (_, held) = request(&client, subject.clone(), &sleep(), false).await;
    assert_eq!(held["message_type"], "aip.core.v1.ack", "{held}");
    // ... so the next is refused, typed and retryable, naming the bucket and the quota.
    let asked = sleep();
    let (_, refused) = request(&client, subject, &asked, false).await;
    assert_eq!(refused["in_response_to"], asked["message_id"], "{refused}");
    let error = &refused["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.limit.quota_exceeded", "{refused}");
    assert_eq!(error["retryable"], true, "{refused}");
    assert_eq!(error["details"]["bucket"], "principal", "{refused}");
    assert_eq!(error["details"]["limit"], 1, "{refused}");
}
