//! Callbacks through the binary (spec 17): an SSRF probe refused at admission; a delivery cut by
//! kill -9 mid-attempt delivered after restart under the same delivery id; the REST reads, the
//! re-drive refusal and `aip callbacks`; two PostgreSQL nodes delivering each callback exactly
//! once and never concurrently; and a callback to a NATS subject, signed by the node's did:key.
#![allow(clippy::unwrap_used)]

#[path = "../../aip-runtime/tests/callback_receiver/mod.rs"]
mod callback_receiver;
mod cluster;
mod support;

use aip_runtime::callback::sign;
use callback_receiver::Receiver;
use futures_util::StreamExt;
use serde_json::{Value, json};
use support::nats::nats_url;
use support::{Client, Server, id, pause, run_cli, token_file};

/// The explicit test policy that lets the nodes reach the loopback receiver (everything else
/// stays denied), with quick retries.
const LOOPBACK: &[(&str, &str)] = &[
    ("AIP_CALLBACKS__ALLOW_INTERNAL_HOSTS", "[\"127.0.0.1\"]"),
    ("AIP_CALLBACKS__ALLOW_HTTP_HOSTS", "[\"127.0.0.1\"]"),
    ("AIP_CALLBACKS__RETRY_BACKOFF_MS", "[100]"),
];

fn env<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    LOOPBACK.iter().chain(extra).copied().collect()
}

/// Submits an async echo with `callback`; returns its action id.
async fn echo_with(client: &Client, callback: Value) -> String {
    let action_id = id("act_");
    let (status, reply) = client
        .act(
            json!({ "id": action_id, "capability_id": "cap:demo:echo", "mode": "async",
                     "input": { "text": "hi" }, "callback": callback }),
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    action_id
}

/// The deliveries of `action_id` once all are delivered (bounded wait).
async fn delivered(client: &Client, action_id: &str) -> Vec<Value> {
    let mut last = Value::Null;
    for _ in 0..400 {
        let (status, list) = client
            .get(&format!("/aip/v1/callbacks?action_id={action_id}"))
            .await;
        assert_eq!(status, 200, "{list}");
        let deliveries = list["deliveries"].as_array().cloned().unwrap_or_default();
        if !deliveries.is_empty() && deliveries.iter().all(|d| d["status"] == "delivered") {
            return deliveries;
        }
        last = list;
        pause(50).await;
    }
    panic!("the callbacks of {action_id} were never delivered: {last}");
}

#[tokio::test]
async fn a_delivery_cut_by_kill_9_is_delivered_after_restart_under_its_delivery_id() {
    let receiver = Receiver::start(&[], None).await;
    receiver.slow(0, Some(20_000));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let settings = env(&[("AIP_LIMITS__LEASE_MS", "2000")]);
    let mut server = Server::start(&data, None, &settings);
    let admin = server.admin();
    // A loopback name the policy does not own is refused before anything is admitted.
    let (status, reply) = admin
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "async", "input": {},
                     "callback": { "profile": "aip.native.http.v1", "target": "http://localhost:9/hook" } }))
        .await;
    assert_eq!(status, 403, "{reply}");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.callback.target_denied"
    );

    let action_id = echo_with(
        &admin,
        json!({ "profile": "aip.native.http.v1", "target": receiver.url() }),
    )
    .await;
    for _ in 0..200 {
        if !receiver.hits().is_empty() {
            break;
        }
        pause(25).await;
    }
    assert_eq!(
        receiver.hits().len(),
        1,
        "the first attempt reached the receiver"
    );
    server.kill();

    let server = Server::start(&data, None, &settings);
    let admin = server.admin();
    let deliveries = delivered(&admin, &action_id).await;
    assert_eq!(deliveries.len(), 1);
    let d = &deliveries[0];
    let delivery_id = d["delivery_id"].as_str().unwrap();
    let hits = receiver.hits();
    assert_eq!(hits.len(), 2);
    assert!(
        hits.iter()
            .all(|h| h.headers[sign::DELIVERY_ID] == delivery_id)
    );
    assert_eq!(
        hits[0].body, hits[1].body,
        "the same message after the restart"
    );
    let attempts = d["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{d}");
    assert!(
        attempts[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("interrupted"),
        "{d}"
    );

    // The REST reads (and their alias) agree; a delivered callback is not re-driven.
    let (status, one) = admin.get(&format!("/aip/v1/callbacks/{delivery_id}")).await;
    assert_eq!(status, 200);
    assert_eq!(one["status"], "delivered");
    let (_, alias) = admin
        .get(&format!(
            "/aip/v1/callback-deliveries/{delivery_id}?include_receipts=true"
        ))
        .await;
    assert_eq!(
        alias["receipt_chain"]["receipts"].as_array().unwrap().len(),
        2,
        "{alias}"
    );
    let (status, refused) = admin
        .post(
            &format!("/aip/v1/callbacks/{delivery_id}/redrive"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(
        refused["error"]["code"], "aip.callback.not_redrivable",
        "{refused}"
    );
    let token = token_file(dir.path(), "admin.tok", &server.admin_token);
    let (code, out, err) = run_cli(
        &server.base,
        &token,
        &["callbacks", "list", "--action", &action_id],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(delivery_id) && out.contains("delivered"),
        "{out}"
    );
    let (code, out, err) = run_cli(&server.base, &token, &["callbacks", "show", delivery_id]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("interrupted"), "{out}");
}

#[tokio::test]
async fn two_postgres_nodes_deliver_each_callback_exactly_once_and_never_concurrently() {
    let Some(db) = cluster::TestDb::create("callbacks on two nodes").await else {
        return;
    };
    let receiver = Receiver::start(&[], None).await;
    receiver.slow(200, None);
    let dir = tempfile::tempdir().unwrap();
    let settings = env(&[]);
    let nodes = [
        cluster::start_node(&dir.path().join("a"), &db.url, &settings, None),
        cluster::start_node(&dir.path().join("b"), &db.url, &settings, None),
    ];
    let clients: Vec<Client> = nodes.iter().map(Server::admin).collect();
    let mut actions = Vec::new();
    for i in 0..12 {
        actions.push(
            echo_with(
                &clients[i % 2],
                json!({ "profile": "aip.native.http.v1", "target": receiver.url() }),
            )
            .await,
        );
    }
    let mut ids = std::collections::BTreeSet::new();
    for (i, action_id) in actions.iter().enumerate() {
        for d in delivered(&clients[(i + 1) % 2], action_id).await {
            assert_eq!(d["attempts"].as_array().unwrap().len(), 1, "{d}");
            ids.insert(d["delivery_id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(ids.len(), 12);
    let hits = receiver.hits();
    assert_eq!(
        hits.len(),
        12,
        "each delivery reached the receiver exactly once"
    );
    let delivered_ids: std::collections::BTreeSet<String> = hits
        .iter()
        .map(|h| h.headers[sign::DELIVERY_ID].clone())
        .collect();
    assert_eq!(delivered_ids, ids);
    assert_eq!(
        receiver.max_in_flight(),
        1,
        "no delivery was ever sent twice at once"
    );
}

#[tokio::test]
async fn a_callback_to_a_nats_subject_is_a_signed_request_the_receiver_acknowledges() {
    let Some(url) = nats_url("a NATS callback") else {
        return;
    };
    let prefix = format!("cbtest.{}.", id("n"));
    let prefixes = format!("[\"{prefix}\"]");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        None,
        &[
            ("AIP_NATS__URL", url.as_str()),
            ("AIP_NATS__PRINCIPAL", "admin"),
            ("AIP_CALLBACKS__NATS_SUBJECT_PREFIXES", prefixes.as_str()),
        ],
    );
    let admin = server.admin();
    let nats = async_nats::connect(url.as_str()).await.unwrap();
    let mut inbox = nats.subscribe(format!("{prefix}>")).await.unwrap();
    nats.flush().await.unwrap();
    let (_, manifest) = admin.get("/aip/v1/manifest").await;
    let did = manifest["agent"]["did"].as_str().unwrap().to_owned();
    let callbacks = &manifest["governance"]["callbacks"];
    assert!(
        callbacks["profiles"]
            .as_array()
            .unwrap()
            .contains(&json!("aip.native.nats.v1")),
        "{callbacks}"
    );
    assert_eq!(callbacks["signature"]["signer"], did.as_str());

    let target = format!("{prefix}done");
    let action_id = echo_with(
        &admin,
        json!({ "profile": "aip.native.nats.v1", "target": target }),
    )
    .await;
    let message = tokio::time::timeout(std::time::Duration::from_secs(20), inbox.next())
        .await
        .unwrap()
        .unwrap();
    let headers = message.headers.clone().unwrap();
    let header = |name: &str| headers.get(name).unwrap().as_str().to_owned();
    assert_eq!(header(sign::SIGNER), did);
    let timestamp: i64 = header(sign::TIMESTAMP).parse().unwrap();
    sign::verify(
        &did,
        &header(sign::DELIVERY_ID),
        timestamp,
        &message.payload,
        &header(sign::SIGNATURE),
    )
    .unwrap();
    let envelope: Value = serde_json::from_slice(&message.payload).unwrap();
    assert_eq!(
        envelope["body"]["action_result"]["action_id"],
        action_id.as_str()
    );
    nats.publish(message.reply.unwrap(), "ok".into())
        .await
        .unwrap();
    let deliveries = delivered(&admin, &action_id).await;
    assert_eq!(
        deliveries[0]["delivery_id"],
        header(sign::DELIVERY_ID).as_str()
    );
    assert_eq!(deliveries[0]["policy"]["target"]["target"], target.as_str());
}
