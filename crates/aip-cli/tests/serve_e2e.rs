//! End-to-end tests of `aip serve`: the real binary, spoken to over HTTP as a client (spec 20.1).
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::json;
use support::{Server, envelope, id, pause, token_file};

fn start() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    (dir, server)
}

#[tokio::test]
async fn discovery_lists_the_demo_capabilities_and_filters_by_side_effect() {
    let (_dir, server) = start();
    let admin = server.admin();
    let (status, manifest) = admin.get("/aip/v1/manifest").await;
    assert_eq!(status, 200);
    assert_eq!(manifest["manifest_version"], "aip-manifest/v1");
    // Exactly the bindings this node serves (no NATS configured here).
    assert_eq!(
        manifest["profiles"],
        json!([
            "aip.native.http.v1",
            "aip.sse.stream.v1",
            "aip.websocket.stream.v1",
            "aip.mcp.compat.v1",
            "aip.a2a.compat.v1"
        ])
    );
    let ids: Vec<&str> = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for cap in ["cap:demo:echo", "cap:demo:sleep", "cap:demo:book"] {
        assert!(ids.contains(&cap), "{cap} missing from {ids:?}");
    }
    let request = envelope(
        "aip.discovery.v1.manifest_request",
        json!({ "manifest_request": { "filter": { "side_effects": ["write"] } } }),
    );
    let (status, reply) = admin.post("/aip/v1/messages", &request).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["message_type"], "aip.discovery.v1.manifest_response");
    let filtered: Vec<&str> = reply["body"]["manifest"]["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(filtered, vec!["cap:demo:book"]);
}

#[tokio::test]
async fn a_sync_echo_returns_its_input_with_a_verifiable_receipt_chain() {
    let (_dir, server) = start();
    let admin = server.admin();
    let action_id = id("act_");
    let (status, reply) = admin.act(json!({ "id": action_id, "capability_id": "cap:demo:echo", "mode": "sync", "input": { "hello": "world" } })).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["message_type"], "aip.core.v1.action_result");
    assert_eq!(reply["body"]["action_result"]["status"], "completed");
    assert_eq!(
        reply["body"]["action_result"]["output"],
        json!({ "hello": "world" })
    );
    assert_eq!(reply["extensions"]["ack"]["status"], "accepted");
    let (status, chain) = admin.get(&format!("/aip/v1/receipts/{action_id}")).await;
    assert_eq!(status, 200);
    let chain: aip_core::ReceiptChain = serde_json::from_value(chain).unwrap();
    let types: Vec<String> = chain
        .receipts
        .iter()
        .map(|r| {
            serde_json::to_value(r.receipt_type)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        types,
        [
            "request_received",
            "action_accepted",
            "policy_decision",
            "tool_executed",
            "result_returned"
        ]
    );
    aip_core::chain::verify_chain(&chain).unwrap();
    let last = chain.receipts.last().unwrap();
    assert_eq!(
        reply["body"]["action_result"]["receipt"]["hash"],
        json!(last.hash)
    );
}

#[tokio::test]
async fn an_async_sleep_is_queued_then_polled_to_completion() {
    let (_dir, server) = start();
    let admin = server.admin();
    let action_id = id("act_");
    let (status, reply) = admin.act(json!({ "id": action_id, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 300 } })).await;
    assert_eq!(status, 202, "{reply}");
    assert_eq!(reply["body"]["ack"]["status"], "queued");
    let view = admin.wait_terminal(&action_id).await;
    assert_eq!(view["state"], "completed");
    assert_eq!(view["result"]["output"], json!({ "slept_ms": 300 }));
    let (_, events) = admin
        .get(&format!("/aip/v1/actions/{action_id}/events"))
        .await;
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "aip.action.accepted",
            "aip.action.queued",
            "aip.action.started",
            "aip.action.completed"
        ]
    );
    assert_eq!(events["terminal"], true);
}

#[tokio::test]
async fn an_async_sleep_cancelled_mid_run_ends_cancelled_only_after_the_handler_confirms() {
    let (_dir, server) = start();
    let admin = server.admin();
    let action_id = id("act_");
    let (status, _) = admin.act(json!({ "id": action_id, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 20000 } })).await;
    assert_eq!(status, 202);
    for _ in 0..50 {
        let (_, view) = admin.get(&format!("/aip/v1/actions/{action_id}")).await;
        if view["state"] == "running" {
            break;
        }
        pause(50).await;
    }
    let (status, view) = admin
        .post(
            &format!("/aip/v1/actions/{action_id}/cancel"),
            &json!({ "reason": "test" }),
        )
        .await;
    assert_eq!(status, 202, "{view}");
    assert!(
        ["cancelling", "cancelled"].contains(&view["state"].as_str().unwrap()),
        "{view}"
    );
    let view = admin.wait_terminal(&action_id).await;
    assert_eq!(view["state"], "cancelled");
    assert_eq!(view["result"]["status"], "cancelled");
    let (status, again) = admin
        .post(&format!("/aip/v1/actions/{action_id}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "aip.action.terminal");
}

#[tokio::test]
async fn an_idempotent_replay_is_cached_with_the_original_result_and_never_dispatched_again() {
    let (_dir, server) = start();
    let admin = server.admin();
    let first = id("act_");
    let (status, original) = admin.act(json!({ "id": first, "capability_id": "cap:demo:echo", "input": { "n": 1 }, "idempotency_key": "echo-key-1" })).await;
    assert_eq!(status, 200, "{original}");
    let second = id("act_");
    let (status, replay) = admin.act(json!({ "id": second, "capability_id": "cap:demo:echo", "input": { "n": 1 }, "idempotency_key": "echo-key-1" })).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["extensions"]["ack"]["status"], "cached");
    assert_eq!(replay["extensions"]["ack"]["action_id"], json!(first));
    assert_eq!(
        replay["body"]["action_result"],
        original["body"]["action_result"]
    );
    // Not dispatched: the replay was never admitted as an action, and the original ran once.
    let (status, _) = admin.get(&format!("/aip/v1/actions/{second}")).await;
    assert_eq!(status, 404);
    let (_, events) = admin.get(&format!("/aip/v1/actions/{first}/events")).await;
    let started = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "aip.action.started")
        .count();
    assert_eq!(started, 1);
}

#[tokio::test]
async fn a_conflicting_idempotency_key_is_rejected_without_dispatch() {
    let (_dir, server) = start();
    let admin = server.admin();
    let booking = json!({ "name": "Jordan", "party_size": 2, "time": "19:30" });
    let (status, first) = admin.act(json!({ "id": id("act_"), "capability_id": "cap:demo:book", "input": booking, "idempotency_key": "table-7" })).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["body"]["action_result"]["status"], "completed");
    let second = id("act_");
    let (status, conflict) = admin.act(json!({ "id": second, "capability_id": "cap:demo:book", "input": { "name": "Sam", "party_size": 4, "time": "20:00" }, "idempotency_key": "table-7" })).await;
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(conflict["message_type"], "aip.core.v1.error");
    assert_eq!(
        conflict["body"]["error"]["error"]["code"],
        "aip.idempotency.conflict"
    );
    let (status, _) = admin.get(&format!("/aip/v1/actions/{second}")).await;
    assert_eq!(status, 404);
    let (_, list) = admin
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:bookings", "input": {} }))
        .await;
    assert_eq!(
        list["body"]["action_result"]["output"]["count"], 1,
        "{list}"
    );
    let (status, missing) = admin
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:book", "input": booking }))
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        missing["body"]["error"]["error"]["code"],
        "aip.idempotency.key_required"
    );
}

#[tokio::test]
async fn requests_without_a_valid_bearer_token_get_401_except_the_probes_which_disclose_nothing() {
    let (_dir, server) = start();
    let anonymous = server.anonymous();
    let (status, health) = anonymous.get("/health").await;
    assert_eq!((status, health), (200, json!({ "status": "ok" })));
    // A Kubernetes probe has no token; readiness says ready and nothing else (no backend, no version).
    let (status, ready) = anonymous.get("/ready").await;
    assert_eq!((status, ready), (200, json!({ "status": "ready" })));
    // A kubelet probes by the pod's address, which the Host guard does not name: the probes
    // answer it; everything else is refused.
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    for (path, allowed) in [
        ("/ready", true),
        ("/health", true),
        ("/aip/v1/manifest", false),
    ] {
        let probed = http
            .get(format!("http://{}{path}", server.base))
            .header("host", "10.1.2.3:7700")
            .send()
            .await
            .unwrap();
        assert_eq!(
            probed.status().is_success(),
            allowed,
            "{path}: {}",
            probed.status()
        );
    }
    for path in [
        "/aip/v1/manifest",
        "/aip/v1/actions",
        "/metrics",
        "/aip/v1/nowhere",
    ] {
        let (status, body) = anonymous.get(path).await;
        assert_eq!(status, 401, "{path}");
        assert_eq!(body["error"]["category"], "auth");
    }
    let (status, reply) = anonymous
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} }))
        .await;
    assert_eq!(status, 401);
    assert_eq!(reply["message_type"], "aip.core.v1.error");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.auth.unauthenticated"
    );
    let (status, _) = server.client("not-the-token").get("/aip/v1/manifest").await;
    assert_eq!(status, 401);
    let (status, ready) = server.admin().get("/ready").await;
    assert_eq!((status, ready), (200, json!({ "status": "ready" })));
}

#[tokio::test]
async fn another_tenants_action_is_not_found_and_never_counted() {
    let dir = tempfile::tempdir().unwrap();
    let a = token_file(dir.path(), "a.token", "token-of-tenant-a");
    let b = token_file(dir.path(), "b.token", "token-of-tenant-b");
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "[[principals]]\nid = \"svc:a\"\ntenant = \"tenant-a\"\nscopes = [\"invoke:cap:demo:*\"]\ntoken_file = \"{}\"\n\n\
             [[principals]]\nid = \"svc:b\"\ntenant = \"tenant-b\"\nscopes = [\"invoke:cap:demo:*\", \"read:tenant\"]\ntoken_file = \"{}\"\n",
            a.display(),
            b.display()
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let (ca, cb) = (
        server.client("token-of-tenant-a"),
        server.client("token-of-tenant-b"),
    );
    let action_id = id("act_");
    let (status, _) = ca
        .act(json!({ "id": action_id, "capability_id": "cap:demo:echo", "input": { "secret": 1 } }))
        .await;
    assert_eq!(status, 200);
    let (status, body) = cb.get(&format!("/aip/v1/actions/{action_id}")).await;
    assert_eq!(status, 404);
    let (status_missing, body_missing) = cb.get("/aip/v1/actions/act_does_not_exist").await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (status_missing, body_missing["error"]["code"].clone())
    );
    for path in [
        format!("/aip/v1/actions/{action_id}/result"),
        format!("/aip/v1/actions/{action_id}/events"),
        format!("/aip/v1/receipts/{action_id}"),
    ] {
        assert_eq!(cb.get(&path).await.0, 404, "{path}");
    }
    assert_eq!(
        cb.post(&format!("/aip/v1/actions/{action_id}/cancel"), &json!({}))
            .await
            .0,
        404
    );
    let (status, list) = cb.get("/aip/v1/actions").await;
    assert_eq!(status, 200);
    assert_eq!(list["actions"], json!([]));
    assert_eq!(list["total_size"], 0);
    let (_, events) = cb.get("/aip/v1/events").await;
    assert_eq!(events["events"], json!([]));
    let (_, list) = ca.get("/aip/v1/actions").await;
    assert_eq!(list["total_size"], 1);
    // The admin (tenant `default`) does not see tenant-a either.
    assert_eq!(
        server
            .admin()
            .get(&format!("/aip/v1/actions/{action_id}"))
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn an_unsupported_mode_and_bad_input_get_typed_rejections() {
    let (_dir, server) = start();
    let admin = server.admin();
    let (status, reply) = admin.act(json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "streaming", "input": {} })).await;
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["message_type"], "aip.core.v1.error");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.action.unsupported_mode"
    );
    assert_eq!(reply["body"]["error"]["error"]["category"], "permanent");
    let (status, reply) = admin.act(json!({ "id": id("act_"), "capability_id": "cap:demo:sleep", "input": { "ms": "soon" } })).await;
    assert_eq!(status, 400);
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.action.invalid_input"
    );
    let (status, reply) = admin
        .act(json!({ "id": id("act_"), "capability_id": "cap:nope", "input": {} }))
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.discovery.capability_not_found"
    );
    let (status, reply) = admin
        .post("/aip/v1/actions", &json!({ "aip_version": "2.0" }))
        .await;
    assert_eq!(status, 400);
    assert_eq!(reply["message_type"], "aip.core.v1.error");
    let (status, reply) = admin.get("/aip/v1/actions?limit=1001").await;
    assert_eq!(status, 400, "{reply}");
    let (status, _) = admin.get("/aip/v1/events?wait_ms=30001").await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn foreign_hosts_origins_and_oversized_bodies_are_refused() {
    let (_dir, server) = start();
    let admin = server.admin();
    let url = format!("http://{}/aip/v1/manifest", server.base);
    let r = admin
        .http
        .get(&url)
        .bearer_auth(&server.admin_token)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = admin
        .http
        .get(&url)
        .bearer_auth(&server.admin_token)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let big = json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": { "blob": "x".repeat(2 * 1024 * 1024) } });
    let (status, reply) = admin.act(big).await;
    assert_eq!(status, 413);
    assert_eq!(reply["message_type"], "aip.core.v1.error");
}

#[tokio::test]
async fn metrics_count_admitted_actions() {
    let (_dir, server) = start();
    let admin = server.admin();
    admin
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} }))
        .await;
    let text = admin.get_text("/metrics").await;
    assert!(text.contains("aip_actions_admitted_total"), "{text}");
    assert!(text.contains("aip_node_info{backend=\"sqlite\""), "{text}");
    assert!(text.contains("aip_http_requests_total"));
}

#[tokio::test]
async fn a_sync_action_whose_client_disconnects_runs_to_completion_and_its_result_stays_readable() {
    let (_dir, server) = start();
    let admin = server.admin();
    let action_id = id("act_");
    let body = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": action_id, "capability_id": "cap:demo:sleep", "mode": "sync", "input": { "ms": 1500 } } }),
    );
    // The client gives up long before the handler finishes and drops the connection.
    let impatient = reqwest::Client::builder()
        .no_proxy()
        .timeout(std::time::Duration::from_millis(300))
        .build()
        .unwrap();
    let sent = impatient
        .post(format!("http://{}/aip/v1/actions", server.base))
        .bearer_auth(&server.admin_token)
        .header("content-type", "application/aip+json")
        .body(body.to_string())
        .send()
        .await;
    assert!(sent.is_err(), "the client timed out");
    // HTTP connection loss does not cancel admitted work (spec 20.1).
    let view = admin.wait_terminal(&action_id).await;
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["result"]["output"], json!({ "slept_ms": 1500 }));
}

#[tokio::test]
async fn a_path_segment_that_is_not_utf8_gets_the_typed_json_error_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let admin = server.admin();
    let bad = "%00%ff";
    let gets = [
        "/aip/v1/actions/{}",
        "/aip/v1/actions/{}/result",
        "/aip/v1/actions/{}/events",
        "/aip/v1/actions/{}/chunks",
        "/aip/v1/approvals/{}",
        "/aip/v1/approvals/{}/decisions",
        "/aip/v1/callback-deliveries/{}",
        "/aip/v1/callbacks/{}",
        "/aip/v1/conversations/{}",
        "/aip/v1/conversations/{}/messages",
        "/aip/v1/escalations/{}",
        "/aip/v1/receipts/{}",
        "/aip/v1/receipts/by-receipt/{}",
        "/aip/v1/resources/{}",
        "/aip/v1/sessions/{}",
        "/aip/v1/settlements/{}",
        "/aip/v1/transactions/{}",
        "/aip/v1/transactions/by-plan/{}",
        "/aip/v1/transactions/by-action/{}",
    ];
    let posts = [
        "/aip/v1/actions/{}/cancel",
        "/aip/v1/approvals/{}/decision",
        "/aip/v1/callbacks/{}/redrive",
        "/aip/v1/escalations/{}/resolution",
        "/aip/v1/sessions/{}/cancel",
        "/aip/v1/sessions/{}/close",
        "/aip/v1/sessions/{}/resume",
    ];
    for route in gets {
        let (status, reply) = admin.get(&route.replace("{}", bad)).await;
        assert_eq!(
            (status, reply["error"]["code"].as_str()),
            (400, Some("aip.read.invalid_query")),
            "GET {route}: {reply}"
        );
    }
    for route in posts {
        let (status, reply) = admin.post(&route.replace("{}", bad), &json!({})).await;
        assert_eq!(
            (status, reply["error"]["code"].as_str()),
            (400, Some("aip.read.invalid_query")),
            "POST {route}: {reply}"
        );
    }
}

#[tokio::test]
async fn readiness_turns_false_while_the_writer_is_stalled_and_true_again_once_it_writes() {
    let (dir, server) = start();
    let anonymous = server.anonymous();
    assert_eq!(anonymous.get("/ready").await.0, 200);
    // Another connection takes the database's write lock: the node's writer waits behind it.
    let database = dir.path().join("data").join("aip.sqlite");
    let blocker = rusqlite::Connection::open(&database).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    pause(600).await;
    let started = std::time::Instant::now();
    let (status, ready) = anonymous.get("/ready").await;
    assert_eq!((status, ready), (503, json!({ "status": "not_ready" })));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "the probe is bounded: {:?}",
        started.elapsed()
    );
    blocker.execute_batch("ROLLBACK").unwrap();
    let mut probed = anonymous.get("/ready").await;
    for _ in 0..40 {
        if probed.0 == 200 {
            break;
        }
        pause(100).await;
        probed = anonymous.get("/ready").await;
    }
    assert_eq!(probed, (200, json!({ "status": "ready" })));
}
