//! Rate limits through the binary (spec 22.8): a principal past its bucket gets 429
//! `aip.limit.rate_limited` with `Retry-After` over native HTTP, the typed error envelope over
//! WebSocket, a JSON-RPC error naming the code over MCP and a rejected, unrecorded task naming it
//! over A2A; another principal keeps its own bucket. Concurrency quotas the same way with
//! `aip.limit.quota_exceeded`. Node-wide: requests past `max_in_flight_requests` are refused
//! at once with `aip.runtime.overloaded` (the probes still answer), and a native request not
//! answered within `request_timeout_ms` gets `aip.runtime.request_timeout` while its action runs on;
//! past `max_open_streams` (SSE and WebSocket together) a stream request gets
//! `aip.transport.too_many_streams` before any work, and a closed stream frees its slot; past
//! `max_queued_actions` waiting for a worker an async action gets `aip.runtime.queue_full`.
//! Past `max_connections` a connection is answered `aip.runtime.overloaded` unread and closed,
//! and a client that does not finish its request head in `header_read_timeout_ms` is cut (an idle
//! keep-alive connection too).
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::json;
use support::a2a::{a2a_send, assert_a2a_refused};
use support::id;
use support::mcp::{ALICE, BOB, Mcp, refused_over_mcp, two_principals_with};

#[tokio::test]
async fn a_principal_past_its_rate_gets_429_with_retry_after_and_a_typed_mcp_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = two_principals_with(
        dir.path(),
        "[a2a]\ndefault_capability = \"cap:demo:echo\"\n\n[limits.principal_rates]\nalice = { per_second = 1, burst = 2 }\n",
    );
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    let echo = || {
        support::envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} } }),
        )
        .to_string()
    };
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let send = |token: &'static str| {
        http.post(format!("http://{}/aip/v1/actions", server.base))
            .bearer_auth(token)
            .header("content-type", "application/aip+json")
            .body(echo())
            .send()
    };
    for _ in 0..2 {
        assert_eq!(send(ALICE).await.unwrap().status(), 200);
    }
    let refused = send(ALICE).await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: serde_json::Value = refused.json().await.unwrap();
    let error = &body["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.limit.rate_limited", "{body}");
    assert_eq!(error["retryable"], true, "{body}");
    // Over MCP the same bucket refuses with a JSON-RPC error that names the code.
    refused_over_mcp(&mut mcp, "aip.limit.rate_limited").await;
    // Over WebSocket too: the reply is the typed, retryable error envelope.
    let mut socket = support::ws::connect(&server, ALICE).await;
    // (A slow machine may have refilled one token since: the next action then meets the limit.)
    let mut reply = serde_json::Value::Null;
    for _ in 0..2 {
        let action: serde_json::Value = serde_json::from_str(&echo()).unwrap();
        support::ws::send(&mut socket, &action).await;
        reply = support::ws::next_envelope(&mut socket).await;
        if reply["message_type"] == "aip.core.v1.error" {
            break;
        }
    }
    let error = &reply["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.limit.rate_limited", "{reply}");
    assert_eq!(error["retryable"], true, "{reply}");
    // Over A2A: a rejected task, not recorded, naming the typed retryable error.
    // (Twice at most, as above.)
    let mut a2a = a2a_send(&server.base, ALICE).await;
    if a2a["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED" {
        a2a = a2a_send(&server.base, ALICE).await;
    }
    assert_a2a_refused(&a2a, "aip.limit.rate_limited");
    // Bob has no named rate and no default: unlimited.
    for _ in 0..5 {
        assert_eq!(send(BOB).await.unwrap().status(), 200);
    }
}

#[tokio::test]
async fn a_principal_at_its_concurrency_quota_gets_429_until_one_of_its_actions_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let server = two_principals_with(
        dir.path(),
        "[a2a]\ndefault_capability = \"cap:demo:echo\"\n\n[limits.principal_running]\nalice = 2\n",
    );
    let (on_alice, on_bob) = (server.client(ALICE), server.client(BOB));
    let sleep = || json!({ "id": id("act_"), "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": 3000 } });
    let mut held = Vec::new();
    for _ in 0..2 {
        let action = sleep();
        let (status, reply) = on_alice.act(action.clone()).await;
        assert_eq!(status, 202, "{reply}");
        held.push(action["id"].as_str().unwrap().to_owned());
    }
    let (status, reply) = on_alice.act(sleep()).await;
    assert_eq!(status, 429, "{reply}");
    let error = &reply["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.limit.quota_exceeded", "{reply}");
    assert_eq!(error["retryable"], true, "{reply}");
    assert_eq!(error["details"]["limit"], 2, "{reply}");
    assert_eq!(error["details"]["bucket"], "principal", "{reply}");
    // Audited in the tenant's log, aggregated like the rate's refusals; the first at once.
    let (events, count, first) = limit_refusals(&server.admin(), "quota_exceeded").await;
    assert_eq!((events, count), (1, 1), "{first}");
    assert_eq!(first["actor"]["id"], "alice", "{first}");
    // Over MCP: a JSON-RPC error naming the code.
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    refused_over_mcp(&mut mcp, "aip.limit.quota_exceeded").await;
    // Over WebSocket: the typed error envelope.
    let mut socket = support::ws::connect(&server, ALICE).await;
    let action = support::envelope("aip.core.v1.action", json!({ "action": sleep() }));
    support::ws::send(&mut socket, &action).await;
    let reply = support::ws::next_envelope(&mut socket).await;
    assert_eq!(reply["in_response_to"], action["message_id"], "{reply}");
    let error = &reply["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.limit.quota_exceeded", "{reply}");
    assert_eq!(error["retryable"], true, "{reply}");
    // Over A2A: a rejected task naming the typed retryable error.
    let a2a = a2a_send(&server.base, ALICE).await;
    assert_a2a_refused(&a2a, "aip.limit.quota_exceeded");
    // Bob has no quota.
    for _ in 0..3 {
        let (status, reply) = on_bob.act(sleep()).await;
        assert_eq!(status, 202, "{reply}");
    }
    // Once one of Alice's actions finishes, she is admitted again.
    on_alice.wait_terminal(&held[0]).await;
    let (status, reply) = on_alice.act(sleep()).await;
    assert_eq!(status, 202, "{reply}");
}

#[tokio::test]
async fn a_node_at_its_in_flight_bound_refuses_at_once_and_a_slow_request_times_out_while_its_action_runs_on()
 {
    let dir = tempfile::tempdir().unwrap();
    let server = two_principals_with(
        dir.path(),
        "[limits]\nmax_in_flight_requests = 1\nmax_wait_ms = 500\nrequest_timeout_ms = 1500\n",
    );
    let on_alice = server.client(ALICE);
    let slow =
        json!({ "id": id("act_"), "capability_id": "cap:demo:sleep", "input": { "ms": 3000 } });
    let slow_id = slow["id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    let first = tokio::spawn({
        let on_alice = server.client(ALICE);
        async move { on_alice.act(slow).await }
    });
    // The sync sleep holds the node's only request slot.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (status, reply) = on_alice
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} }))
        .await;
    assert_eq!(status, 503, "{reply}");
    let error = &reply["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.runtime.overloaded", "{reply}");
    assert_eq!(error["retryable"], true, "{reply}");
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let read = http
        .get(format!("http://{}/aip/v1/actions/{slow_id}", server.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 503);
    assert_eq!(read.headers()["retry-after"], "1");
    let body: serde_json::Value = read.json().await.unwrap();
    assert_eq!(body["error"]["code"], "aip.runtime.overloaded", "{body}");
    // The probes are outside the bound: a saturated node is alive and ready.
    for probe in ["/health", "/ready"] {
        let answer = http
            .get(format!("http://{}{probe}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{probe}");
    }
    // The slow request is answered with the typed timeout, well before its action ends.
    let (status, reply) = first.await.unwrap();
    assert_eq!(status, 504, "{reply}");
    let error = &reply["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.runtime.request_timeout", "{reply}");
    assert_eq!(error["retryable"], true, "{reply}");
    assert!(started.elapsed() < std::time::Duration::from_millis(2900));
    // Its action was not cancelled: it runs on to completion, once, read by its id.
    let mut view = serde_json::Value::Null;
    for _ in 0..40 {
        let (status, got) = on_alice
            .get(&format!(
                "/aip/v1/actions/{slow_id}?include_result=true&wait_ms=500"
            ))
            .await;
        assert_eq!(status, 200, "{got}");
        view = got;
        if view["state"] == "completed" {
            break;
        }
    }
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["result"]["output"]["slept_ms"], 3000, "{view}");
}

/// A WebSocket upgrade as `token`: the socket, or the HTTP status it was refused with.
async fn upgrade(
    base: &str,
    token: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    u16,
> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{base}/aip/v1/ws")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.headers()["retry-after"], "1");
            Err(response.status().as_u16())
        }
        Err(other) => panic!("{other}"),
    }
}

#[tokio::test]
async fn past_its_open_stream_bound_a_node_refuses_sse_and_websocket_streams_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let server = two_principals_with(
        dir.path(),
        "[limits]\nmax_open_streams = 2\nstream_heartbeat_ms = 100\n",
    );
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let feed = || {
        http.get(format!("http://{}/aip/v1/events", server.base))
            .bearer_auth(ALICE)
            .header("accept", "text/event-stream")
            .send()
    };
    let sse = feed().await.unwrap();
    assert_eq!(sse.status(), 200);
    let socket = upgrade(&server.base, BOB).await.unwrap();
    // Both slots are taken: another feed, an action asking for its stream, and an upgrade are
    // refused before any work.
    let refused = feed().await.unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(
        body["error"]["code"], "aip.transport.too_many_streams",
        "{body}"
    );
    let streamed = json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} });
    let refused = http
        .post(format!("http://{}/aip/v1/actions", server.base))
        .bearer_auth(ALICE)
        .header("content-type", "application/aip+json")
        .header("accept", "text/event-stream")
        .body(
            support::envelope("aip.core.v1.action", json!({ "action": streamed.clone() }))
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    let body: serde_json::Value = refused.json().await.unwrap();
    let error = &body["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.transport.too_many_streams", "{body}");
    assert_eq!(error["retryable"], true, "{body}");
    let (status, _) = server
        .client(ALICE)
        .get(&format!(
            "/aip/v1/actions/{}",
            streamed["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 404, "a refused stream request admitted nothing");
    assert_eq!(upgrade(&server.base, BOB).await.err(), Some(503));
    // Plain reads are not streams.
    let (status, _) = server.client(ALICE).get("/aip/v1/actions").await;
    assert_eq!(status, 200);
    // Closing a stream frees its slot (the server notices at its next heartbeat).
    drop(sse);
    drop(socket);
    let mut reopened = None;
    for _ in 0..50 {
        let answer = feed().await.unwrap();
        if answer.status() == 200 {
            reopened = Some(answer);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        reopened.is_some(),
        "the closed streams' slots were never freed"
    );
    upgrade(&server.base, BOB).await.unwrap();
}

#[tokio::test]
async fn an_async_action_past_the_queue_bound_is_refused_typed_and_admitted_once_the_queue_moves() {
    let dir = tempfile::tempdir().unwrap();
    let server = two_principals_with(
        dir.path(),
        "[limits]\nasync_workers = 1\nmax_queued_actions = 2\n",
    );
    let on_alice = server.client(ALICE);
    let sleep = |ms: u64| json!({ "id": id("act_"), "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": ms } });
    let first = sleep(1500);
    let (status, reply) = on_alice.act(first.clone()).await;
    assert_eq!(status, 202, "{reply}");
    // Once the only worker runs the first, the next two wait in the queue and fill it.
    let path = format!("/aip/v1/actions/{}", first["id"].as_str().unwrap());
    for _ in 0..50 {
        if on_alice.get(&path).await.1["state"] == "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(on_alice.get(&path).await.1["state"], "running");
    for _ in 0..2 {
        let (status, reply) = on_alice.act(sleep(10)).await;
        assert_eq!(status, 202, "{reply}");
    }
    let refused = sleep(10);
    let (status, reply) = on_alice.act(refused.clone()).await;
    assert_eq!(status, 503, "{reply}");
    let error = &reply["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.runtime.queue_full", "{reply}");
    assert_eq!(error["retryable"], true, "{reply}");
    assert_eq!(error["details"]["limit"], 2, "{reply}");
    let (status, _) = on_alice
        .get(&format!(
            "/aip/v1/actions/{}",
            refused["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 404, "nothing was admitted");
    // A sync action does not wait for a worker.
    let (status, reply) = on_alice
        .act(json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} }))
        .await;
    assert_eq!(status, 200, "{reply}");
    // Once the queue drains, the same action is admitted.
    on_alice.wait_terminal(first["id"].as_str().unwrap()).await;
    let mut status = 0;
    for _ in 0..50 {
        status = on_alice.act(refused.clone()).await.0;
        if status == 202 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, 202);
}

/// Reads what the server sends on `stream` until it closes it (at most 10 s).
async fn read_to_close(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut out),
    )
    .await
    .expect("the server kept the connection open")
    .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn past_its_connection_bound_a_node_answers_overloaded_unread_and_cuts_clients_that_never_finish_their_headers()
 {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("AIP_LIMITS__MAX_CONNECTIONS", "2"),
        ("AIP_LIMITS__HEADER_READ_TIMEOUT_MS", "1000"),
    ];
    let server = support::Server::start(&dir.path().join("data"), None, &env);
    // Two slow clients hold both connections with half a request head each.
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut stream = tokio::net::TcpStream::connect(&server.base).await.unwrap();
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        slow.push(stream);
    }
    support::pause(100).await;
    // A third is answered at once, typed and retryable, without its request being read.
    let mut third = tokio::net::TcpStream::connect(&server.base).await.unwrap();
    third
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut third).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["error"]["code"], "aip.runtime.overloaded", "{body}");
    // The slow clients are cut once their header time is over (nothing was answered to them)...
    let started = std::time::Instant::now();
    for stream in &mut slow {
        let answer = read_to_close(stream).await;
        assert!(!answer.contains("200 OK"), "{answer}");
    }
    let cut = started.elapsed();
    assert!(cut < std::time::Duration::from_secs(5), "{cut:?}");
    // ...which frees their slots: requests are served again.
    support::pause(100).await;
    let (status, _) = server.anonymous().get("/health").await;
    assert_eq!(status, 200);
    // An idle keep-alive connection is closed too once the next request head is that late, so
    // idle clients cannot hold the connection slots either.
    let mut idle = tokio::net::TcpStream::connect(&server.base).await.unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let answer = read_to_close(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let idle_for = started.elapsed();
    assert!(idle_for < std::time::Duration::from_secs(5), "{idle_for:?}");
}

/// The caller's tenant's `limit.refused` events of `reason`: (their number, the refusals they
/// stand for, the first event).
async fn limit_refusals(admin: &support::Client, reason: &str) -> (usize, u64, serde_json::Value) {
    let (status, page) = admin.get("/aip/v1/audit/events?limit=1000").await;
    assert_eq!(status, 200, "{page}");
    let events: Vec<&serde_json::Value> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "limit.refused" && e["data"]["reason"] == reason)
        .collect();
    let count = events
        .iter()
        .map(|e| e["data"]["count"].as_u64().unwrap())
        .sum();
    let first = events
        .first()
        .map_or(serde_json::Value::Null, |e| (*e).clone());
    (events.len(), count, first)
}

#[tokio::test]
async fn a_flood_past_a_principals_rate_is_a_few_audit_events_of_its_tenant_carrying_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        "[security]\nrefusal_audit_window_ms = 500\n\n[limits.principal_rates]\nadmin = { per_second = 1, burst = 1 }\n",
    )
    .unwrap();
    let server = support::Server::start(&dir.path().join("data"), Some(&config), &[]);
    let admin = server.admin();
    let started = std::time::Instant::now();
    let mut refused = 0;
    for _ in 0..300 {
        let echo = json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} });
        match admin.act(echo).await {
            (200, _) => {}
            (429, _) => refused += 1,
            (status, reply) => panic!("{status}: {reply}"),
        }
    }
    let took = started.elapsed();
    assert!(refused >= 250, "only {refused} of 300 refused in {took:?}");
    // The first refusal of each window is written at once; the rest when its window ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while limit_refusals(&admin, "rate_limited").await.1 < refused {
        assert!(
            std::time::Instant::now() < deadline,
            "the window's count was never written"
        );
        support::pause(100).await;
    }
    let (events, count, first) = limit_refusals(&admin, "rate_limited").await;
    let windows = usize::try_from(took.as_millis() / 500).unwrap() + 2;
    println!("{refused} rate-limited actions in {took:?}: {events} audit events");
    assert_eq!(count, refused);
    assert!(
        events <= 2 * windows,
        "{events} events for {windows} windows"
    );
    assert_eq!(first["actor"]["id"], "admin", "{first}");
    assert_ne!(first["actor"]["kind"], "system", "{first}");
    assert_eq!(first["data"]["code"], "aip.limit.rate_limited", "{first}");
    assert_eq!(first["data"]["capability_id"], "cap:demo:echo", "{first}");
    // And each is counted in the metrics, by bucket.
    let metrics = admin.get_text("/metrics").await;
    let counted: u64 = metrics
        .lines()
        .find(|l| l.starts_with("aip_rate_limited_total{bucket=\"principal\"}"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no rate-limit metric in {metrics}"));
    assert_eq!(counted, refused);
}

/// Sends `path` a request head promising a 100-byte body, then one byte; returns what the node
/// answers and how long it took.
async fn trickled(server: &support::Server, path: &str) -> (String, std::time::Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(&server.base).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{",
        server.base, server.admin_token
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let mut answer = vec![0; 4096];
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), socket.read(&mut answer))
        .await
        .expect("no answer to a trickled body")
        .unwrap();
    (
        String::from_utf8_lossy(&answer[..read]).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn a_client_trickling_its_body_is_answered_request_timeout_on_native_and_mcp_routes() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::Server::start(
        &dir.path().join("data"),
        None,
        &[("AIP_LIMITS__BODY_READ_TIMEOUT_MS", "500")],
    );
    for path in ["/aip/v1/actions", "/mcp"] {
        let (answer, took) = trickled(&server, path).await;
        assert!(answer.starts_with("HTTP/1.1 504"), "{path}: {answer}");
        assert!(
            answer.contains("aip.runtime.request_timeout"),
            "{path}: {answer}"
        );
        assert!(took < std::time::Duration::from_secs(5), "{path}: {took:?}");
    }
    // A whole body is served as before.
    let echo = json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} });
    assert_eq!(server.admin().act(echo).await.0, 200);
}

#[tokio::test]
async fn a_principal_past_its_read_rate_gets_429_on_rest_and_envelopes_while_its_actions_keep_their_own_bucket()
 {
    let dir = tempfile::tempdir().unwrap();
    let server = two_principals_with(
        dir.path(),
        "[limits.read_rate_per_principal]\nper_second = 1\nburst = 3\n",
    );
    let alice = server.client(ALICE);
    // (Opening the socket is a GET, charged too: open it first.)
    let mut socket = support::ws::connect(&server, ALICE).await;
    let mut statuses = Vec::new();
    let mut refused = serde_json::Value::Null;
    for _ in 0..6 {
        let (status, body) = alice.get("/aip/v1/actions").await;
        if status == 429 {
            refused = body;
        }
        statuses.push(status);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    let error = &refused["error"];
    assert_eq!(
        refused["error"]["code"], "aip.limit.rate_limited",
        "{refused}"
    );
    assert_eq!(error["details"]["bucket"], "principal_reads", "{refused}");
    // A read envelope over WebSocket meets the same bucket.
    let status = support::envelope(
        "aip.lifecycle.v1.action_status_request",
        json!({ "action_status_request": { "action_id": id("act_") } }),
    );
    support::ws::send(&mut socket, &status).await;
    let reply = support::ws::next_envelope(&mut socket).await;
    assert_eq!(
        reply["body"]["error"]["error"]["code"], "aip.limit.rate_limited",
        "{reply}"
    );
    // Actions are charged to the admission buckets (unlimited here): still admitted.
    let echo = json!({ "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} });
    assert_eq!(alice.act(echo).await.0, 200);
    // Bob has his own bucket.
    assert_eq!(server.client(BOB).get("/aip/v1/actions").await.0, 200);
}
