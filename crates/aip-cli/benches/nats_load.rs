//! Load benchmark of the NATS binding (spec 20.4): sync `cap:demo:echo` actions over NATS
//! request/reply with 32 in flight, in the same run against
//! - HTTP actions at the same concurrency on the same `aip serve` node and store (NATS should not be
//!   slower), and
//! - a raw async-nats responder in this process doing the same store writes per request through
//!   `aip-store` on the same store (admission: action row, 3 receipts, 2 events; result: CAS update,
//!   2 receipts, 1 event), without the runtime (target: aip >= 0.5x of it).
//!
//! SQLite by default; `AIP_BENCH_DATABASE=postgres://…` for PostgreSQL. Needs `AIP_TEST_NATS_URL`.
//! `cargo bench -p aip-cli --bench nats_load`; `AIP_BENCH_REQUESTS` sets the count per run (default
//! 3000), `AIP_BENCH_IN_FLIGHT` the concurrency (default 32), `AIP_BENCH_ROUNDS` how many NATS/HTTP pairs take turns (default 2; the means are compared).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;

use aip_store::{
    ActionState, Admission, AdmissionLease, AdmissionOutcome, NewAction, NewAudit, NewEvent,
    NewJob, NewReceipt, Store, Transition, WorkerId,
};
use futures_util::StreamExt as _;
use serde_json::{Value, json};

/// Requests in flight unless `AIP_BENCH_IN_FLIGHT` says otherwise.
const IN_FLIGHT: usize = 32;

fn main() {
    if !common::benchmarking("nats_load") {
        return;
    }
    let Ok(nats_url) = std::env::var("AIP_TEST_NATS_URL") else {
        println!("SKIP: AIP_TEST_NATS_URL is not set");
        return;
    };
    let requests = common::requests(3000);
    let in_flight: usize = std::env::var("AIP_BENCH_IN_FLIGHT")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(IN_FLIGHT)
        .max(1);
    let rounds: usize = std::env::var("AIP_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2)
        .max(1);
    let database = std::env::var("AIP_BENCH_DATABASE").ok();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-nats-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let domain = format!("bench{}", std::process::id());
    let load_before = common::load_average();
    let node = common::start_node(
        &dir,
        Some(&format!(
            "[nats]\nurl = \"{nats_url}\"\ntrust_domain = \"{domain}\"\nprincipal = \"admin\"\n"
        )),
        database.as_deref(),
    );

    let nats = rt.block_on(async_nats::connect(&nats_url)).unwrap();
    let subject = format!("aip.v1.{domain}.aip.v1.aip_core_v1_action");
    let http = common::http_client();
    let url = format!("http://{}/aip/v1/actions", node.addr);
    // The two transports take turns (NATS, HTTP, NATS, HTTP, …) on the same node and store, so
    // neither always meets the emptier database or the colder caches.
    let (mut nats_rates, mut http_rates) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        nats_rates.push(rt.block_on(common::run(requests, in_flight, {
            let (nats, subject) = (nats.clone(), subject.clone());
            move |i| {
                let (nats, subject) = (nats.clone(), subject.clone());
                async move { nats_action(&nats, subject, i).await }
            }
        })));
        http_rates.push(rt.block_on(common::run(requests, in_flight, {
            let (http, url, token) = (http.clone(), url.clone(), node.token.clone());
            move |i| {
                let (http, url, token) = (http.clone(), url.clone(), token.clone());
                async move { common::post_action(&http, &url, &token, i).await }
            }
        })));
    }
    let mean = |rates: &[f64]| rates.iter().sum::<f64>() / rates.len() as f64;
    let (nats_rate, http_rate) = (mean(&nats_rates), mean(&http_rates));
    drop(node);

    // The raw responder on the same store, once the node is gone.
    let location = database.clone().unwrap_or_else(|| {
        dir.join("data")
            .join("aip.sqlite")
            .to_string_lossy()
            .into_owned()
    });
    let raw_subject = format!("bench.raw.{}", std::process::id());
    let raw_rate = rt.block_on(async {
        let store = aip_store::open(&location).await.unwrap();
        let responder = tokio::spawn(raw_responder(nats_url.clone(), raw_subject.clone(), store));
        // Let the subscription reach the server before the first request.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let rate = common::run(requests, in_flight, {
            let (nats, subject) = (nats.clone(), raw_subject.clone());
            move |i| {
                let (nats, subject) = (nats.clone(), subject.clone());
                async move { nats_action(&nats, subject, i).await }
            }
        })
        .await;
        responder.abort();
        rate
    });
    let load_after = common::load_average();
    println!(
        "store: {}; {requests} sync echo actions, {in_flight} in flight (after {} warm-up); load average {load_before} -> {load_after}",
        if database.is_some() {
            "postgres"
        } else {
            "sqlite"
        },
        common::WARMUP
    );
    println!("| system | actions/s |\n|---|---:|");
    let each = |rates: &[f64]| {
        rates
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "| aip serve, NATS request/reply (mean of rounds: {}) | {nats_rate:.0} |",
        each(&nats_rates)
    );
    println!(
        "| aip serve, HTTP POST /aip/v1/actions (mean of rounds: {}) | {http_rate:.0} |",
        each(&http_rates)
    );
    println!("| raw async-nats responder, same store writes | {raw_rate:.0} |");
    println!(
        "NATS / HTTP = {:.2}x (target >= 1.0x)",
        nats_rate / http_rate
    );
    println!(
        "NATS / raw responder = {:.2}x (target >= 0.5x)",
        nats_rate / raw_rate
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// One action request whose reply must be an action result.
async fn nats_action(nats: &async_nats::Client, subject: String, i: usize) {
    let payload = json!({ "envelope": common::action(i) }).to_string();
    let reply = nats.request(subject, payload.into()).await.unwrap();
    let v: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(
        v["envelope"]["message_type"], "aip.core.v1.action_result",
        "{v}"
    );
}

/// Serves `subject` with the store writes of one sync action per request and no runtime.
async fn raw_responder(url: String, subject: String, store: Arc<dyn Store>) {
    let client = async_nats::connect(&url).await.unwrap();
    let mut sub = client.subscribe(subject).await.unwrap();
    client.flush().await.unwrap();
    let worker = WorkerId::fresh();
    while let Some(message) = sub.next().await {
        let (client, store, worker) = (client.clone(), Arc::clone(&store), worker.clone());
        tokio::spawn(async move {
            let request: Value = serde_json::from_slice(&message.payload).unwrap();
            let action = &request["envelope"]["body"]["action"];
            let id = action["id"].as_str().unwrap().to_owned();
            let output = action["input"].clone();
            raw_writes(store.as_ref(), &worker, &id, &request).await;
            let reply = json!({ "envelope": {
                "aip_version": "1.0",
                "message_type": "aip.core.v1.action_result",
                "message_id": format!("msg_{id}"),
                "sent_at": aip_core::Timestamp::now(),
                "body": { "action_result": { "action_id": id, "status": "completed", "output": output } },
            }});
            if let Some(reply_to) = message.reply {
                client
                    .publish(reply_to, reply.to_string().into())
                    .await
                    .unwrap();
            }
        });
    }
}

/// Admission (action, leased job, 3 receipts, 2 events) then result (fenced CAS update finishing the
/// job, 2 receipts, 1 event): the writes the runtime makes for one sync action.
async fn raw_writes(store: &dyn Store, worker: &WorkerId, id: &str, request: &Value) {
    let now = 1_796_088_921_571_i64;
    let receipt = |n: usize, kind: &str| NewReceipt {
        receipt_id: format!("rcpt_{id}_{n}"),
        chain_id: id.to_owned(),
        tenant: "default".into(),
        principal: Some("admin".into()),
        action_id: Some(id.to_owned()),
        receipt_type: kind.into(),
        hash: format!("{:064}", n + 1),
        previous_hash: (n > 0).then(|| format!("{n:064}")),
        created_at_ms: now,
        body: json!({ "id": format!("rcpt_{id}_{n}"), "type": kind, "chain_id": id, "data": { "capability_id": "cap:demo:echo" } }),
    };
    let event = |n: usize, kind: &str| NewEvent {
        event_id: format!("evt_{id}_{n}"),
        kind: kind.into(),
        tenant: "default".into(),
        principal: Some("admin".into()),
        session_id: None,
        action_id: Some(id.to_owned()),
        correlation_id: None,
        occurred_at_ms: now,
        data: json!({ "mode": "sync" }),
    };
    let admitted = store
        .admit(Admission {
            action: NewAction {
                action_id: id.to_owned(),
                tenant: "default".into(),
                principal: "admin".into(),
                session_id: None,
                capability: "cap:demo:echo".into(),
                correlation_id: None,
                mode: "sync".into(),
                state: ActionState::Running,
                input_hash: Some("0".repeat(64)),
                deadline_ms: Some(now + 60_000),
                created_at_ms: now,
                request: request["envelope"]["body"].clone(),
            },
            idempotency: None,
            receipts: vec![
                receipt(0, "request_received"),
                receipt(1, "action_accepted"),
                receipt(2, "policy_decision"),
            ],
            events: vec![
                event(0, "aip.action.accepted"),
                event(1, "aip.action.started"),
            ],
            // Like the runtime, a sync action's job is inserted already leased to this worker.
            job: Some(NewJob {
                job_id: format!("job_{id}"),
                queue: "actions".into(),
                action_id: Some(id.to_owned()),
                tenant: "default".into(),
                available_at_ms: now,
                max_attempts: 5,
                payload: json!({}),
            }),
            lease: Some(AdmissionLease {
                worker: worker.clone(),
                lease_ms: 30_000,
            }),
            approval: None,
            transaction: None,
            timers: Vec::new(),
            callback: None,
            quota: Default::default(),
            // Like the runtime, the admission decision's audit event.
            audit: vec![NewAudit {
                audit_id: format!("aud_{id}"),
                tenant: "default".into(),
                actor: "admin".into(),
                action_label: "action.admitted".into(),
                occurred_at_ms: now,
                data: json!({ "capability_id": "cap:demo:echo", "mode": "sync", "decision": "allow" }),
                action_id: Some(id.to_owned()),
                session_id: None,
            }],
        })
        .await
        .unwrap();
    let AdmissionOutcome::Admitted {
        lease: Some(lease), ..
    } = admitted
    else {
        panic!("the baseline admission must be admitted with its lease");
    };
    store
        .transition_action(Transition {
            tenant: "default".into(),
            action_id: id.to_owned(),
            from: vec![ActionState::Running],
            to: ActionState::Completed,
            result: Some(json!({ "action_id": id, "status": "completed" })),
            events: vec![event(2, "aip.action.completed")],
            receipts: vec![receipt(3, "tool_executed"), receipt(4, "result_returned")],
            fence: Some(lease.fence),
            finish_job: true,
            now_ms: now,
            operation: None,
        })
        .await
        .unwrap();
}
