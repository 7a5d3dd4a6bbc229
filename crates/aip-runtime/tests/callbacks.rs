//! Callbacks (spec 17): targets are checked against deployment policy at admission (every SSRF
//! probe refused, nothing admitted); deliveries are durable, signed, retried with one delivery id,
//! dead-lettered, re-driven by an operator, and read back with their attempts and receipts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod callback_receiver;
mod support;

use std::sync::Arc;
use std::time::Duration;

use aip_core::{CallbackDeliveryListRequest, CallbackDeliveryQueryRequest, CallbackDeliveryStatus};
use aip_runtime::callback::{CallbackPolicy, sign};
use aip_runtime::{Caller, RuntimeError};
use callback_receiver::Receiver;
use serde_json::{Value, json};
use support::{Harness, caller, id, runtime_config};

/// A policy that lets the tests reach their loopback receiver, explicitly (spec 17.4 "owned and
/// allowed"); everything else stays denied.
fn loopback_policy() -> CallbackPolicy {
    let mut policy = CallbackPolicy::default();
    policy.address.allow_internal.insert("127.0.0.1".into());
    policy.allow_http_hosts.insert("127.0.0.1".into());
    policy.retry_backoff_ms = vec![50];
    policy.timeout_ms = 2_000;
    policy
}

async fn harness(policy: CallbackPolicy) -> (Harness, ed25519_dalek::SigningKey) {
    let key = aip_core::signing::generate_signing_key();
    let mut config = runtime_config(2, 30_000);
    config.callbacks = policy;
    config.node_key = Some(Arc::new(key.clone()));
    (Harness::start_with(config).await, key)
}

fn alice() -> Caller {
    caller("svc:alice", "t1", &["invoke:*"])
}

fn operator() -> Caller {
    caller("svc:ops", "t1", &["*"])
}

/// An async echo with `callback`; returns its action id.
async fn echo_with(h: &Harness, who: &Caller, callback: Value) -> String {
    let action_id = id("act_");
    let (status, reply) = h
        .act(
            who,
            None,
            json!({ "id": action_id, "capability_id": "cap:demo:echo", "mode": "async",
                    "input": { "text": "hi" }, "callback": callback }),
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    action_id
}

/// The deliveries of `action_id` once every one is settled (bounded wait).
async fn settled(
    h: &Harness,
    who: &Caller,
    action_id: &str,
    n: usize,
) -> Vec<aip_core::CallbackDeliveryRecord> {
    let request = CallbackDeliveryListRequest {
        action_id: Some(aip_core::ActionId::new(action_id)),
        ..Default::default()
    };
    for _ in 0..400 {
        let list = h
            .runtime
            .read_callback_deliveries(who, &request)
            .await
            .unwrap();
        let done = list.deliveries.len() == n
            && list.deliveries.iter().all(|d| {
                !matches!(
                    d.status,
                    CallbackDeliveryStatus::Pending | CallbackDeliveryStatus::Running
                )
            });
        if done {
            return list.deliveries;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the deliveries of {action_id} never settled");
}

#[tokio::test]
async fn a_receiver_that_fails_twice_gets_one_signed_delivery_retried_under_one_delivery_id() {
    let (h, key) = harness(loopback_policy()).await;
    let receiver = Receiver::start(&[503, 503], None).await;
    let who = alice();
    let action_id = echo_with(
        &h,
        &who,
        json!({ "profile": "aip.native.http.v1", "target": receiver.url() }),
    )
    .await;
    let deliveries = settled(&h, &who, &action_id, 1).await;
    let d = &deliveries[0];
    assert_eq!(d.status, CallbackDeliveryStatus::Delivered);
    assert_eq!(d.message_type, "aip.core.v1.action_result");
    assert_eq!(d.attempts.len(), 3);
    assert!(
        d.attempts[..2]
            .iter()
            .all(|a| a.error.as_deref().unwrap().contains("503"))
    );
    assert!(d.attempts[2].error.is_none() && d.completed_at.is_some());
    let hits = receiver.hits();
    assert_eq!(
        hits.len(),
        3,
        "exactly one successful delivery after two refusals"
    );
    let did = aip_core::signing::did_key(&key.verifying_key());
    for (n, hit) in hits.iter().enumerate() {
        assert_eq!(
            hit.headers[sign::DELIVERY_ID],
            d.delivery_id,
            "one delivery id across retries"
        );
        assert_eq!(hit.headers[sign::IDEMPOTENCY_KEY], d.policy.idempotency_key);
        assert_eq!(hit.headers[sign::ATTEMPT], (n + 1).to_string());
        assert_eq!(hit.headers[sign::SIGNER], did);
        assert_eq!(hit.headers["content-type"], "application/aip+json");
        let ts: i64 = hit.headers[sign::TIMESTAMP].parse().unwrap();
        sign::verify(
            &did,
            &d.delivery_id,
            ts,
            &hit.body,
            &hit.headers[sign::SIGNATURE],
        )
        .unwrap();
        assert_eq!(hit.body, hits[0].body, "the same message on every attempt");
    }
    let envelope: Value = serde_json::from_slice(&hits[2].body).unwrap();
    let signer = aip_core::signing::verify_value(&envelope).unwrap();
    assert_eq!(
        signer.did, did,
        "the body is an envelope signed by the node"
    );
    assert_eq!(envelope["message_type"], "aip.core.v1.action_result");
    assert_eq!(envelope["message_id"], d.message_id.as_str());
    assert_eq!(
        envelope["body"]["action_result"]["action_id"],
        action_id.as_str()
    );
    assert_eq!(envelope["body"]["action_result"]["output"]["text"], "hi");
    // The delivery's receipts: three attempts and the delivery, hash-chained.
    let with_receipts = h
        .runtime
        .read_callback_delivery(
            &who,
            &CallbackDeliveryQueryRequest {
                delivery_id: d.delivery_id.clone(),
                tenant_id: None,
                include_receipts: true,
            },
        )
        .await
        .unwrap();
    let chain = with_receipts.receipt_chain.unwrap();
    let kinds: Vec<String> = chain
        .receipts
        .iter()
        .map(|r| r.receipt_type.as_str().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "callback_delivery_attempted",
            "callback_delivery_attempted",
            "callback_delivery_attempted",
            "callback_delivered"
        ]
    );
    for pair in chain.receipts.windows(2) {
        assert_eq!(pair[1].previous_hash, pair[0].hash);
    }
    // Nobody else sees it: not in lists, not by id.
    let mallory = caller("svc:mallory", "t1", &["invoke:*"]);
    assert!(matches!(
        h.runtime
            .read_callback_delivery(
                &mallory,
                &CallbackDeliveryQueryRequest {
                    delivery_id: d.delivery_id.clone(),
                    tenant_id: None,
                    include_receipts: false,
                }
            )
            .await,
        Err(RuntimeError::NotFound(_))
    ));
    let theirs = h
        .runtime
        .read_callback_deliveries(&mallory, &CallbackDeliveryListRequest::default())
        .await
        .unwrap();
    assert!(theirs.deliveries.is_empty());
}

#[tokio::test]
async fn a_target_that_keeps_failing_is_dead_lettered_and_an_operator_redrives_it_under_its_id() {
    let (h, _) = harness(loopback_policy()).await;
    let receiver = Receiver::start(&[], Some(500)).await;
    let who = alice();
    let action_id = echo_with(
        &h,
        &who,
        json!({ "profile": "aip.native.http.v1", "target": receiver.url(), "metadata": { "max_attempts": 2 } }),
    )
    .await;
    let d = settled(&h, &who, &action_id, 1).await.remove(0);
    assert_eq!(d.status, CallbackDeliveryStatus::DeadLettered);
    assert_eq!(d.attempts.len(), 2);
    assert!(
        d.dead_letter_reason
            .as_deref()
            .unwrap()
            .starts_with("max_attempts_exhausted")
    );
    assert_eq!(receiver.hits().len(), 2);
    // Only an operator re-drives, and only what is parked.
    assert!(matches!(
        h.runtime
            .redrive_callback_delivery(&who, &d.delivery_id)
            .await,
        Err(RuntimeError::ScopeDenied(_))
    ));
    receiver.answer(200);
    let again = h
        .runtime
        .redrive_callback_delivery(&operator(), &d.delivery_id)
        .await
        .unwrap();
    assert_eq!(again.status, CallbackDeliveryStatus::Pending);
    let done = settled(&h, &who, &action_id, 1).await.remove(0);
    assert_eq!(done.status, CallbackDeliveryStatus::Delivered);
    assert_eq!(done.delivery_id, d.delivery_id);
    assert_eq!(done.attempts.len(), 3, "the history is kept");
    let hits = receiver.hits();
    assert_eq!(hits.len(), 3);
    assert!(
        hits.iter()
            .all(|hit| hit.headers[sign::DELIVERY_ID] == d.delivery_id)
    );
    assert_eq!(hits[2].body, hits[0].body);
    let refused = h
        .runtime
        .redrive_callback_delivery(&operator(), &d.delivery_id)
        .await
        .unwrap_err();
    assert_eq!(refused.code().as_str(), "aip.callback.not_redrivable");
    // The action ran once: a retry re-sends, it never re-executes.
    let status = h
        .runtime
        .action_status(&who, &action_id, false, true, None)
        .await
        .unwrap();
    let tool_runs = status
        .receipt_chain
        .unwrap()
        .receipts
        .iter()
        .filter(|r| r.receipt_type.as_str() == "tool_executed")
        .count();
    assert!(tool_runs <= 1, "{tool_runs}");
}

#[tokio::test]
async fn every_ssrf_probe_and_malformed_callback_is_refused_at_admission_and_nothing_is_admitted() {
    let (h, _) = harness(CallbackPolicy::default()).await;
    let who = alice();
    let http = |target: &str| json!({ "profile": "aip.native.http.v1", "target": target });
    let mut probes: Vec<(Value, &str)> = [
        "https://127.0.0.1/hook",
        "https://localhost/hook",
        "https://[::1]/hook",
        "https://10.0.0.1/hook",
        "https://172.16.0.1/hook",
        "https://192.168.0.1/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://0.0.0.0/hook",
        "https://100.64.0.1/hook",
        "https://[fd00::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://2130706433/hook",
        "https://0x7f000001/hook",
        "https://017700000001/hook",
        "https://0177.0.0.1/hook",
        "https://127.1/hook",
        "http://hooks.example.com/hook",
    ]
    .iter()
    .map(|t| (http(t), "aip.callback.target_denied"))
    .collect();
    probes.extend([
        (http("ftp://hooks.example.com/x"), "aip.callback.target_invalid"),
        (http("https://user:pw@hooks.example.com/x"), "aip.callback.target_invalid"),
        (http("not a url"), "aip.callback.target_invalid"),
        (json!({ "profile": "aip.http.webhook.v1", "target": "https://hooks.example.com/x" }), "aip.callback.target_invalid"),
        (
            json!({ "profile": "aip.native.http.v1", "target": "https://hooks.example.com/x", "metadata": { "token": "s3cret" } }),
            "aip.callback.target_invalid",
        ),
        (
            json!({ "profile": "aip.native.http.v1", "target": "https://hooks.example.com/x", "metadata": { "max_attempts": 1000 } }),
            "aip.callback.target_invalid",
        ),
        (json!({ "profile": "aip.native.nats.v1", "target": "hooks.done" }), "aip.callback.target_denied"),
    ]);
    for (callback, code) in probes {
        let action_id = id("act_");
        let (status, reply) = h
            .act(
                &who,
                None,
                json!({ "id": action_id, "capability_id": "cap:demo:echo", "mode": "async",
                        "input": { "text": "x" }, "callback": callback }),
            )
            .await;
        let error = &reply["body"]["error"]["error"];
        assert_eq!(error["code"], code, "{callback}: {reply}");
        assert!(status == 400 || status == 403, "{callback}: {status}");
        assert!(
            h.runtime
                .store()
                .get_action("t1", &action_id)
                .await
                .unwrap()
                .is_none(),
            "{callback}: nothing is admitted"
        );
        assert!(
            !error.to_string().contains("s3cret"),
            "metadata values are not echoed"
        );
    }
}

#[tokio::test]
async fn a_redirect_is_not_followed_by_default_and_a_followed_hop_to_a_denied_address_is_refused() {
    for max_redirects in [0, 1] {
        let mut policy = loopback_policy();
        policy.max_redirects = max_redirects;
        // Plain http to `localhost` is allowed: what refuses the hop is its loopback address.
        policy.allow_http_hosts.insert("localhost".into());
        let (h, _) = harness(policy).await;
        let receiver = Receiver::start(&[], Some(307)).await;
        // `localhost` is not the allowed host: its loopback address stays denied.
        receiver.redirect_to(&format!("http://localhost:{}/hook", receiver.addr.port()));
        let who = alice();
        let action_id = echo_with(
            &h,
            &who,
            json!({ "profile": "aip.native.http.v1", "target": receiver.url() }),
        )
        .await;
        let d = settled(&h, &who, &action_id, 1).await.remove(0);
        assert_eq!(d.status, CallbackDeliveryStatus::Failed, "{max_redirects}");
        let error = d.last_error.unwrap();
        let expected = if max_redirects == 0 {
            "does not follow"
        } else {
            "localhost resolves to 127.0.0.1, a loopback address"
        };
        assert!(error.contains(expected), "{max_redirects}: {error}");
        assert_eq!(
            receiver.hits().len(),
            1,
            "the redirect target is never called"
        );
    }
}

#[tokio::test]
async fn a_status_callback_delivers_every_transition_in_order_and_a_4xx_fails_without_retry() {
    let (h, _) = harness(loopback_policy()).await;
    let receiver = Receiver::start(&[], None).await;
    let who = alice();
    let action_id = echo_with(
        &h,
        &who,
        json!({ "profile": "aip.native.http.v1", "target": receiver.url(), "metadata": { "terminal_only": false } }),
    )
    .await;
    let deliveries = settled(&h, &who, &action_id, 2).await;
    let types: Vec<&str> = deliveries.iter().map(|d| d.message_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "aip.lifecycle.v1.action_status",
            "aip.core.v1.action_result"
        ]
    );
    assert!(
        deliveries
            .iter()
            .all(|d| d.status == CallbackDeliveryStatus::Delivered && !d.policy.terminal_only)
    );
    // Deliveries are made concurrently: the receiver may see them in either order.
    let status: Value = receiver
        .hits()
        .iter()
        .map(|h| serde_json::from_slice::<Value>(&h.body).unwrap())
        .find(|b| b["message_type"] == "aip.lifecycle.v1.action_status")
        .unwrap();
    assert_eq!(status["body"]["action_status"]["state"], "running");

    let refusing = Receiver::start(&[], Some(410)).await;
    let gone = echo_with(
        &h,
        &who,
        json!({ "profile": "aip.native.http.v1", "target": refusing.url() }),
    )
    .await;
    let d = settled(&h, &who, &gone, 1).await.remove(0);
    assert_eq!(d.status, CallbackDeliveryStatus::Failed);
    assert_eq!(d.attempts.len(), 1, "a permanent refusal is not retried");
    assert!(d.last_error.unwrap().contains("410"));
}

#[tokio::test]
async fn a_delivery_in_flight_at_the_drain_deadline_gives_its_lease_back_for_another_node_to_claim_at_once()
 {
    let receiver = Receiver::start(&[], Some(200)).await;
    // The first delivery is held far past the drain's grace (and within the attempt's timeout).
    receiver.slow(0, Some(20_000));
    let mut policy = loopback_policy();
    policy.timeout_ms = 30_000;
    let (h, _) = harness(policy).await;
    echo_with(
        &h,
        &alice(),
        json!({ "profile": "aip.native.http.v1", "target": receiver.url() }),
    )
    .await;
    for _ in 0..500 {
        if !receiver.hits().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(receiver.hits().len(), 1, "the delivery never started");
    h.runtime.begin_drain();
    let started = std::time::Instant::now();
    let drain = h
        .runtime
        .drained(Duration::from_millis(300), Duration::from_millis(300))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(drain.released.is_empty(), "no action handler was running");
    // Its lease (30 s) is back in the store: another node claims the delivery now.
    let other = aip_store::WorkerId::fresh();
    let claimed = h
        .runtime
        .store()
        .claim(
            aip_store::CALLBACK_QUEUE,
            &other,
            aip_runtime::clock::now_ms(),
            30_000,
        )
        .await
        .unwrap();
    assert!(
        claimed.is_some(),
        "the delivery's lease was kept by the drained node"
    );
}
