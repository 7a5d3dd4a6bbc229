//! Reads have one path (spec 16, 20): one table of read requests, each sent as a REST `GET`, as an
//! envelope to `POST /aip/v1/messages`, as a WebSocket frame and as a NATS request, by the same
//! principal; every transport must give the same answer (the same view, or the same typed error).
//! Needs `AIP_TEST_NATS_URL` (SKIP notice otherwise; a failure under `CI=true`).
#![allow(clippy::unwrap_used)]

#[path = "../../aip-runtime/tests/callback_receiver/mod.rs"]
mod callback_receiver;
mod support;

use serde_json::{Value, json};
use support::nats::{nats_url, request};
use support::{Client, Server, envelope, id, pause, token_file};

/// A node with NATS on, its reader principal's HTTP client and token, and its subject prefix.
struct Node {
    server: Server,
    http: Client,
    token: String,
    url: String,
    prefix: String,
    _dir: tempfile::TempDir,
}

impl Node {
    async fn start() -> Option<Node> {
        let url = nats_url("serve_parity")?;
        let dir = tempfile::tempdir().unwrap();
        let token = id("tok");
        let token_path = token_file(dir.path(), "reader.token", &token);
        let domain = format!("p{}.example", id(""));
        let config = dir.path().join("aip.toml");
        std::fs::write(
            &config,
            format!(
                "[nats]\nurl = \"{url}\"\ntrust_domain = \"{domain}\"\nprincipal = \"svc:reader\"\n\n\
                 [[principals]]\nid = \"svc:reader\"\nscopes = [\"*\"]\ntoken_file = \"{}\"\n\n\
                 [[resources]]\nid = \"res:notes\"\nname = \"Notes\"\nkind = \"doc\"\ntenant_id = \"default\"\ntext = \"hello\"\n\n\
                 [[resources]]\nid = \"res:foreign\"\nname = \"Foreign\"\nkind = \"doc\"\ntenant_id = \"other\"\naccess = {{ public = true }}\ntext = \"not yours\"\n\n\
                 [[resources]]\nid = \"res:old\"\nname = \"Old\"\nkind = \"doc\"\naccess = {{ public = true }}\nexpires_at = \"2020-01-01T00:00:00Z\"\ntext = \"gone\"\n\n\
                 [callbacks]\nallow_internal_hosts = [\"127.0.0.1\"]\nallow_http_hosts = [\"127.0.0.1\"]\n",
                token_path.display()
            ),
        )
        .unwrap();
        let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
        let http = server.client(&token);
        let prefix = format!("aip.v1.{}.aip.v1", domain.replace('.', "_"));
        Some(Node {
            server,
            http,
            token,
            url,
            prefix,
            _dir: dir,
        })
    }
}

/// One read: the envelope body, the REST path that asks the same, and the reply's body key.
struct Read {
    name: &'static str,
    message_type: &'static str,
    body: Value,
    rest: String,
    answer: &'static str,
}

/// A comparable answer: the view itself, or the error's code and category.
fn normalize(answer: &str, envelope_body: &Value) -> Value {
    match envelope_body.get("error") {
        Some(error) => error_shape(&error["error"]),
        None => envelope_body[answer].clone(),
    }
}

fn error_shape(error: &Value) -> Value {
    json!({ "error": { "code": error["code"], "category": error["category"] } })
}

fn normalize_rest(rest: &Value) -> Value {
    match rest.get("error") {
        Some(error) if rest.as_object().is_some_and(|o| o.len() == 1) => error_shape(error),
        _ => rest.clone(),
    }
}

/// What the table reads: session, echo action, stream action, receipt, approval, a planned
/// payment's transaction and plan, and a delivered callback.
type Setup = (
    String,
    String,
    String,
    String,
    String,
    (String, String),
    String,
);

async fn setup(client: &Client) -> Setup {
    let hello = envelope(
        "aip.core.v1.handshake",
        json!({ "handshake": { "client": { "id": "svc:reader", "kind": "service" }, "purpose": "parity", "profiles": [] } }),
    );
    let (status, reply) = client.post("/aip/v1/messages", &hello).await;
    assert_eq!(status, 200, "{reply}");
    let session = reply["body"]["handshake_response"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let echo = id("act_");
    let mut env = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": echo, "capability_id": "cap:demo:echo", "input": { "parity": true } } }),
    );
    env["session_id"] = json!(session);
    let (status, reply) = client.post("/aip/v1/actions", &env).await;
    assert_eq!(status, 200, "{reply}");
    let stream = id("act_");
    let (status, reply) = client
        .act(json!({ "id": stream, "capability_id": "cap:demo:count", "mode": "streaming", "input": { "n": 3 } }))
        .await;
    assert_eq!(status, 202, "{reply}");
    client.wait_terminal(&stream).await;
    // A cancelled action leaves an audit record.
    let slow = id("act_");
    client
        .act(json!({ "id": slow, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 60000 } }))
        .await;
    let (status, reply) = client
        .post(&format!("/aip/v1/actions/{slow}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 202, "{reply}");
    client.wait_terminal(&slow).await;
    let (_, chain) = client.get(&format!("/aip/v1/receipts/{echo}")).await;
    let receipt = chain["receipts"][0]["id"].as_str().unwrap().to_owned();
    // A transfer waiting for its approval.
    let (status, reply) = client
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:transfer", "mode": "async", "input": { "amount_minor": 500, "to": "acct:parity" } }))
        .await;
    assert_eq!(status, 202, "{reply}");
    let approval = reply["extensions"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A planned payment.
    let plan = envelope(
        "aip.transaction.v1.request",
        json!({ "transaction_request": { "transaction_id": id("txn_"),
            "action": { "id": id("act_"), "capability_id": "cap:demo:payment", "input": { "amount_minor": 10, "to": "acct:parity" },
                        "transaction": { "mode": "plan" } },
            "requested_by": { "id": "svc:reader", "kind": "service" } } }),
    );
    let (status, reply) = client.post("/aip/v1/messages", &plan).await;
    assert_eq!(status, 200, "{reply}");
    let planned = &reply["body"]["transaction_result"];
    let txn = (
        planned["transaction_id"].as_str().unwrap().to_owned(),
        planned["plan"]["plan_id"].as_str().unwrap().to_owned(),
    );
    // A delivered callback (to a loopback receiver the node's policy owns).
    let receiver = callback_receiver::Receiver::start(&[], None).await;
    let notified = id("act_");
    let (status, reply) = client
        .act(
            json!({ "id": notified, "capability_id": "cap:demo:echo", "mode": "async", "input": {},
                     "callback": { "profile": "aip.native.http.v1", "target": receiver.url() } }),
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    let mut delivery = None;
    for _ in 0..200 {
        let (_, list) = client
            .get(&format!("/aip/v1/callbacks?action_id={notified}"))
            .await;
        if list["deliveries"][0]["status"] == "delivered" {
            delivery = list["deliveries"][0]["delivery_id"]
                .as_str()
                .map(str::to_owned);
            break;
        }
        pause(50).await;
    }
    let delivery = delivery.expect("the parity callback was delivered");
    (session, echo, stream, receipt, approval, txn, delivery)
}

fn table(
    session: &str,
    echo: &str,
    stream: &str,
    receipt: &str,
    approval: &str,
    (txn, plan): (&str, &str),
    delivery: &str,
) -> Vec<Read> {
    let read = |name, message_type, body: Value, rest: String, answer| Read {
        name,
        message_type,
        body,
        rest,
        answer,
    };
    vec![
        read(
            "status with result and receipts",
            "aip.lifecycle.v1.action_status_request",
            json!({ "action_status_request": { "action_id": echo, "include_result": true, "include_receipts": true } }),
            format!("/aip/v1/actions/{echo}?include_result=true&include_receipts=true"),
            "action_status",
        ),
        read(
            "status with chunks",
            "aip.lifecycle.v1.action_status_request",
            json!({ "action_status_request": { "action_id": stream, "include_chunks": true } }),
            format!("/aip/v1/actions/{stream}?include_chunks=true"),
            "action_status",
        ),
        read(
            "status of a missing action",
            "aip.lifecycle.v1.action_status_request",
            json!({ "action_status_request": { "action_id": "act_missing" } }),
            "/aip/v1/actions/act_missing".into(),
            "action_status",
        ),
        read(
            "status naming another tenant",
            "aip.lifecycle.v1.action_status_request",
            json!({ "action_status_request": { "action_id": echo, "tenant_id": "elsewhere" } }),
            format!("/aip/v1/actions/{echo}?tenant_id=elsewhere"),
            "action_status",
        ),
        read(
            "result",
            "aip.lifecycle.v1.action_result_request",
            json!({ "action_result_request": { "action_id": echo } }),
            format!("/aip/v1/actions/{echo}/result"),
            "action_result",
        ),
        read(
            "list with results",
            "aip.lifecycle.v1.action_list_request",
            json!({ "action_list_request": { "limit": 10, "include_results": true } }),
            "/aip/v1/actions?limit=10&include_results=true".into(),
            "action_list",
        ),
        read(
            "list of a session",
            "aip.lifecycle.v1.action_list_request",
            json!({ "action_list_request": { "session_id": session } }),
            format!("/aip/v1/actions?session_id={session}"),
            "action_list",
        ),
        read(
            "list by state and capability with receipts",
            "aip.lifecycle.v1.action_list_request",
            json!({ "action_list_request": { "state": "completed", "capability_id": "cap:demo:echo", "include_receipts": true } }),
            "/aip/v1/actions?state=completed&capability_id=cap:demo:echo&include_receipts=true"
                .into(),
            "action_list",
        ),
        read(
            "list by principal",
            "aip.lifecycle.v1.action_list_request",
            json!({ "action_list_request": { "principal_id": "svc:reader" } }),
            "/aip/v1/actions?principal_id=svc:reader".into(),
            "action_list",
        ),
        read(
            "list by approval",
            "aip.lifecycle.v1.action_list_request",
            json!({ "action_list_request": { "approval_id": "apr_none" } }),
            "/aip/v1/actions?approval_id=apr_none".into(),
            "action_list",
        ),
        read(
            "list with a zero limit",
            "aip.lifecycle.v1.action_list_request",
            json!({ "action_list_request": { "limit": 0 } }),
            "/aip/v1/actions?limit=0".into(),
            "action_list",
        ),
        read(
            "events with chunks",
            "aip.lifecycle.v1.action_events_request",
            json!({ "action_events_request": { "action_id": stream, "include_chunks": true } }),
            format!("/aip/v1/actions/{stream}/events?include_chunks=true"),
            "action_events",
        ),
        read(
            "events, two per page",
            "aip.lifecycle.v1.action_events_request",
            json!({ "action_events_request": { "action_id": echo, "limit": 2 } }),
            format!("/aip/v1/actions/{echo}/events?limit=2"),
            "action_events",
        ),
        read(
            "events of one kind",
            "aip.lifecycle.v1.action_events_request",
            json!({ "action_events_request": { "action_id": echo, "kinds": ["aip.action.completed"] } }),
            format!("/aip/v1/actions/{echo}/events?kinds=aip.action.completed"),
            "action_events",
        ),
        read(
            "global feed",
            "aip.discovery.v1.event_stream_request",
            json!({ "event_stream_request": { "limit": 5 } }),
            "/aip/v1/events?limit=5".into(),
            "event_stream",
        ),
        read(
            "global feed of two kinds",
            "aip.discovery.v1.event_stream_request",
            json!({ "event_stream_request": { "kinds": ["aip.action.cancelled", "aip.session.created"] } }),
            "/aip/v1/events?kinds=aip.action.cancelled,aip.session.created".into(),
            "event_stream",
        ),
        read(
            "receipt chain",
            "aip.audit.v1.receipt_query_request",
            json!({ "receipt_query_request": { "chain_id": echo } }),
            format!("/aip/v1/receipts/{echo}"),
            "receipt_chain",
        ),
        read(
            "chain of a receipt",
            "aip.audit.v1.receipt_query_request",
            json!({ "receipt_query_request": { "receipt_id": receipt } }),
            format!("/aip/v1/receipts/by-receipt/{receipt}"),
            "receipt_chain",
        ),
        read(
            "audit",
            "aip.audit.v1.audit_query_request",
            json!({ "audit_query_request": { "limit": 10 } }),
            "/aip/v1/audit/events?limit=10".into(),
            "audit_query_result",
        ),
        read(
            "audit by principal",
            "aip.audit.v1.audit_query_request",
            json!({ "audit_query_request": { "principal_id": "svc:reader" } }),
            "/aip/v1/audit/events?principal_id=svc:reader".into(),
            "audit_query_result",
        ),
        read(
            "session",
            "aip.session.v1.session_request",
            json!({ "session_request": { "session_id": session } }),
            format!("/aip/v1/sessions/{session}"),
            "session_view",
        ),
        read(
            "sessions",
            "aip.session.v1.session_list_request",
            json!({ "session_list_request": { "status": "active" } }),
            "/aip/v1/sessions?status=active".into(),
            "session_list",
        ),
        read(
            "resources: another tenant's and expired ones are not even counted",
            "aip.resource.v1.resource_list_request",
            json!({ "resource_list_request": { "kind": "doc" } }),
            "/aip/v1/resources?kind=doc".into(),
            "resource_list",
        ),
        read(
            "a visible resource",
            "aip.resource.v1.resource_read_request",
            json!({ "resource_read_request": { "resource_id": "res:notes" } }),
            "/aip/v1/resources/res:notes".into(),
            "resource_read_result",
        ),
        read(
            "another tenant's resource reads like a missing one",
            "aip.resource.v1.resource_read_request",
            json!({ "resource_read_request": { "resource_id": "res:foreign" } }),
            "/aip/v1/resources/res:foreign".into(),
            "error",
        ),
        read(
            "an expired resource reads like a missing one",
            "aip.resource.v1.resource_read_request",
            json!({ "resource_read_request": { "resource_id": "res:old" } }),
            "/aip/v1/resources/res:old".into(),
            "error",
        ),
        read(
            "approval with its action's status",
            "aip.policy.v1.approval_query_request",
            json!({ "approval_query_request": { "approval_id": approval, "include_action_status": true } }),
            format!("/aip/v1/approvals/{approval}?include_action_status=true"),
            "approval_record_view",
        ),
        read(
            "pending approvals",
            "aip.policy.v1.approval_list_request",
            json!({ "approval_list_request": { "status": "pending" } }),
            "/aip/v1/approvals?status=pending".into(),
            "approval_list",
        ),
        read(
            "a transaction with its result and receipts",
            "aip.transaction.v1.query_request",
            json!({ "transaction_query_request": { "transaction_id": txn, "include_result": true, "include_receipts": true } }),
            format!("/aip/v1/transactions/{txn}?include_result=true&include_receipts=true"),
            "transaction_view",
        ),
        read(
            "the actions of a transaction",
            "aip.lifecycle.v1.action_list_request",
            json!({ "action_list_request": { "transaction_id": txn } }),
            format!("/aip/v1/actions?transaction_id={txn}"),
            "action_list",
        ),
        read(
            "a transaction by its plan",
            "aip.transaction.v1.query_request",
            json!({ "transaction_query_request": { "plan_id": plan } }),
            format!("/aip/v1/transactions/by-plan/{plan}"),
            "transaction_view",
        ),
        read(
            "a missing transaction",
            "aip.transaction.v1.query_request",
            json!({ "transaction_query_request": { "transaction_id": "txn_missing" } }),
            "/aip/v1/transactions/txn_missing".into(),
            "error",
        ),
        read(
            "a callback delivery with its receipts",
            "aip.callback.v1.delivery_query_request",
            json!({ "callback_delivery_query_request": { "delivery_id": delivery, "include_receipts": true } }),
            format!("/aip/v1/callbacks/{delivery}?include_receipts=true"),
            "callback_delivery_record",
        ),
        read(
            "delivered callbacks",
            "aip.callback.v1.delivery_list_request",
            json!({ "callback_delivery_list_request": { "status": "delivered", "limit": 5 } }),
            "/aip/v1/callbacks?status=delivered&limit=5".into(),
            "callback_delivery_list",
        ),
        read(
            "a missing callback delivery",
            "aip.callback.v1.delivery_query_request",
            json!({ "callback_delivery_query_request": { "delivery_id": "dlv_missing" } }),
            "/aip/v1/callbacks/dlv_missing".into(),
            "error",
        ),
    ]
}

/// The table's reads over the node's setup, and a WebSocket and a NATS connection to it.
async fn connected(node: &Node) -> (Vec<Read>, support::ws::Socket, async_nats::Client) {
    let (session, echo, stream, receipt, approval, (txn, plan), delivery) = setup(&node.http).await;
    let reads = table(
        &session,
        &echo,
        &stream,
        &receipt,
        &approval,
        (&txn, &plan),
        &delivery,
    );
    let socket = support::ws::connect(&node.server, &node.token).await;
    let nats = async_nats::connect(node.url.as_str()).await.unwrap();
    (reads, socket, nats)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_answers_the_same_over_rest_the_http_envelope_websocket_and_nats() {
    let Some(node) = Node::start().await else {
        return;
    };
    let (reads, mut socket, nats) = connected(&node).await;
    let Node { http, prefix, .. } = &node;
    for read in reads {
        let name = read.name;
        let (rest_status, rest) = http.get(&read.rest).await;
        let rest = normalize_rest(&rest);

        let env = envelope(read.message_type, read.body.clone());
        let (env_status, reply) = http.post("/aip/v1/messages", &env).await;
        assert_eq!(env_status, rest_status, "{name}: HTTP statuses differ");
        let over_http = normalize(read.answer, &reply["body"]);

        let env = envelope(read.message_type, read.body.clone());
        support::ws::send(&mut socket, &env).await;
        let reply = support::ws::next_envelope(&mut socket).await;
        assert_eq!(reply["in_response_to"], env["message_id"], "{name}");
        let over_ws = normalize(read.answer, &reply["body"]);

        let env = envelope(read.message_type, read.body.clone());
        let subject = format!("{prefix}.{}", read.message_type.replace('.', "_"));
        let (_, reply) = request(&nats, subject, &env, true).await;
        let over_nats = normalize(read.answer, &reply["envelope"]["body"]);

        assert!(!rest.is_null(), "{name}: no answer");
        assert_eq!(over_http, rest, "{name}: envelope vs REST");
        assert_eq!(over_ws, rest, "{name}: WebSocket vs REST");
        assert_eq!(over_nats, rest, "{name}: NATS vs REST");
    }
    // What the resource rows compared: only the visible resource, the others 404 like missing ones.
    let (_, list) = http.get("/aip/v1/resources").await;
    let ids: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["res:notes"], "{list}");
    let (_, foreign) = http.get("/aip/v1/resources/res:foreign").await;
    let (_, missing) = http.get("/aip/v1/resources/res:missing").await;
    assert_eq!(foreign, missing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_re_sent_over_any_transport_is_answered_with_its_original_outcome() {
    let Some(node) = Node::start().await else {
        return;
    };
    let mut socket = support::ws::connect(&node.server, &node.token).await;
    let nats = async_nats::connect(node.url.as_str()).await.unwrap();
    let subject = format!("{}.aip_core_v1_action", node.prefix);
    for (mode, first_ack) in [("sync", "accepted"), ("async", "queued")] {
        let action = json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "mode": mode, "input": { "mode": mode } });
        let send = || envelope("aip.core.v1.action", json!({ "action": action }));
        let (status, first) = node.http.post("/aip/v1/actions", &send()).await;
        assert!(status == 200 || status == 202, "{first}");
        let ack = |reply: &Value| {
            reply["extensions"]["ack"]["status"]
                .as_str()
                .or_else(|| reply["body"]["ack"]["status"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(ack(&first), first_ack, "{first}");
        let (status, over_http) = node.http.post("/aip/v1/actions", &send()).await;
        assert_eq!(status, 200, "{over_http}");
        support::ws::send(&mut socket, &send()).await;
        let over_ws = support::ws::next_envelope(&mut socket).await;
        let (_, over_nats) = request(&nats, subject.clone(), &send(), true).await;
        let over_nats = over_nats["envelope"].clone();
        for (transport, reply) in [
            ("HTTP", &over_http),
            ("WebSocket", &over_ws),
            ("NATS", &over_nats),
        ] {
            assert_eq!(ack(reply), "cached", "{mode} over {transport}: {reply}");
            if mode == "sync" {
                assert_eq!(
                    reply["body"]["action_result"], first["body"]["action_result"],
                    "{transport}: the original result"
                );
            }
        }
    }
}

/// The normative envelope schema (`../shared/aip-schemas/envelope.schema.json`) as a validator, or
/// `None` after a SKIP notice when `../shared` is absent.
fn envelope_schema() -> Option<jsonschema::Validator> {
    let shared = std::env::var("AIP_SHARED_DIR").map_or_else(
        |_| support::workspace().join("../shared"),
        std::path::PathBuf::from,
    );
    let Ok(text) = std::fs::read_to_string(shared.join("aip-schemas/envelope.schema.json")) else {
        println!("SKIP: ../shared/aip-schemas not found (set AIP_SHARED_DIR)");
        return None;
    };
    Some(jsonschema::draft202012::new(&serde_json::from_str::<Value>(&text).unwrap()).unwrap())
}

/// Every envelope the node sent, checked against the normative schema as it arrives.
struct Produced {
    schema: jsonschema::Validator,
    types: std::collections::BTreeSet<String>,
    count: usize,
}

impl Produced {
    fn check(&mut self, what: &str, transport: &str, envelope: &Value) {
        let errors: Vec<String> = self
            .schema
            .iter_errors(envelope)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .take(5)
            .collect();
        assert!(
            errors.is_empty(),
            "{what} over {transport}: the node sent an envelope the normative schema refuses: {errors:?}\n{envelope}"
        );
        self.types
            .insert(envelope["message_type"].as_str().unwrap().to_owned());
        self.count += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_envelope_the_node_sends_over_http_sse_websocket_and_nats_validates_against_the_normative_schema()
 {
    let Some(schema) = envelope_schema() else {
        return;
    };
    let Some(node) = Node::start().await else {
        return;
    };
    let mut produced = Produced {
        schema,
        types: Default::default(),
        count: 0,
    };
    let (reads, mut socket, nats) = connected(&node).await;
    let Node {
        http,
        token,
        prefix,
        ..
    } = &node;

    // Each request goes over the HTTP envelope endpoint, WebSocket and NATS.
    let hello = json!({ "handshake": { "client": { "id": "svc:reader", "kind": "service" }, "purpose": "producer", "profiles": [] } });
    let mut requests: Vec<(String, &str, Value)> = vec![
        ("handshake".into(), "aip.core.v1.handshake", hello),
        (
            "heartbeat".into(),
            "aip.core.v1.heartbeat",
            json!({ "heartbeat": { "sequence": 1 } }),
        ),
        (
            "manifest".into(),
            "aip.discovery.v1.manifest_request",
            json!({ "manifest_request": {} }),
        ),
        (
            "sync action".into(),
            "aip.core.v1.action",
            json!({ "action": { "id": "{act}", "capability_id": "cap:demo:echo", "input": { "x": 1 } } }),
        ),
        (
            "async action".into(),
            "aip.core.v1.action",
            json!({ "action": { "id": "{act}", "capability_id": "cap:demo:echo", "mode": "async", "input": {} } }),
        ),
        (
            "planned payment".into(),
            "aip.transaction.v1.request",
            json!({ "transaction_request": { "transaction_id": "{txn}",
                "action": { "id": "{act}", "capability_id": "cap:demo:payment", "input": { "amount_minor": 10, "to": "acct:parity" },
                            "transaction": { "mode": "plan" } },
                "requested_by": { "id": "svc:reader", "kind": "service" } } }),
        ),
        (
            "unknown capability".into(),
            "aip.core.v1.action",
            json!({ "action": { "id": "{act}", "capability_id": "cap:nope", "input": {} } }),
        ),
    ];
    for read in reads {
        requests.push((read.name.to_owned(), read.message_type, read.body));
    }
    // Every `"{act}"` and `"{txn}"` becomes a new id, so each transport's request is new work.
    fn fresh(body: &Value) -> Value {
        match body {
            Value::String(s) if s == "{act}" => json!(id("act_")),
            Value::String(s) if s == "{txn}" => json!(id("txn_")),
            Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), fresh(v))).collect(),
            Value::Array(items) => items.iter().map(fresh).collect(),
            other => other.clone(),
        }
    }
    let mut handshake = Value::Null;
    for (what, message_type, body) in &requests {
        let env = envelope(message_type, fresh(body));
        let (_, reply) = http.post("/aip/v1/messages", &env).await;
        produced.check(what, "HTTP", &reply);
        if *message_type == "aip.core.v1.handshake" {
            handshake = reply;
        }
        let env = envelope(message_type, fresh(body));
        support::ws::send(&mut socket, &env).await;
        // Up to its answer; what an earlier exchange still sent (a result after its ack) is checked
        // on the way.
        loop {
            let reply = support::ws::next_envelope(&mut socket).await;
            produced.check(what, "WebSocket", &reply);
            if reply["in_response_to"] == env["message_id"] {
                break;
            }
        }
        let env = envelope(message_type, fresh(body));
        let subject = format!("{prefix}.{}", message_type.replace('.', "_"));
        let (_, reply) = request(&nats, subject, &env, true).await;
        produced.check(what, "NATS", &reply["envelope"]);
    }

    // The check bites: the same answer with a mistyped member is refused.
    let mut mistyped = handshake.clone();
    mistyped["body"]["handshake_response"]["session_id"] = json!(5);
    assert!(!produced.schema.is_valid(&mistyped), "{mistyped}");
    let mut unknown = handshake.clone();
    unknown["body"] = json!({ "not_a_body": {} });
    assert!(!produced.schema.is_valid(&unknown), "{unknown}");

    // Resuming the handshake's session.
    let opened = &handshake["body"]["handshake_response"];
    let resume = envelope(
        "aip.session.v1.session_resume_request",
        json!({ "session_resume_request": { "session_id": opened["session_id"], "resume_token": opened["resume_token"] } }),
    );
    let (status, reply) = http.post("/aip/v1/messages", &resume).await;
    assert_eq!(status, 200, "{reply}");
    produced.check("session resume", "HTTP", &reply);

    // A streamed action over SSE and over WebSocket: the ack, every chunk and the result.
    let streaming = || {
        envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:count", "mode": "streaming", "input": { "n": 3 } } }),
        )
    };
    let response = http
        .http
        .post(format!("http://{}/aip/v1/actions", http.base))
        .bearer_auth(token)
        .header("content-type", "application/aip+json")
        .header("accept", "text/event-stream")
        .body(streaming().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = support::SseReader::new(response).rest().await;
    assert!(events.len() >= 4, "{events:?}");
    for event in &events {
        produced.check("streamed action", "SSE", &event.data);
    }
    support::ws::send(&mut socket, &streaming()).await;
    loop {
        let reply = support::ws::next_envelope(&mut socket).await;
        produced.check("streamed action", "WebSocket", &reply);
        if reply["message_type"] == "aip.core.v1.action_result" {
            break;
        }
    }

    println!(
        "{} envelopes of {} types valid: {:?}",
        produced.count,
        produced.types.len(),
        produced.types
    );
    // Every answer the conformance statement lists was among them, but the delegation result a
    // node sends only to a peer (serve_delegation).
    let statement = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["conformance", "statement", "--json"])
        .output()
        .unwrap();
    let statement: Value = serde_json::from_slice(&statement.stdout).unwrap();
    let answers = statement["answer_message_types"].as_array().unwrap();
    assert!(answers.len() >= 20, "{answers:?}");
    for answer in answers
        .iter()
        .map(|a| a.as_str().unwrap())
        .filter(|a| *a != "aip.agent.v1.delegation_result")
    {
        assert!(
            produced.types.contains(answer),
            "no {answer} among the {} envelopes checked: {:?}",
            produced.count,
            produced.types
        );
    }
}
