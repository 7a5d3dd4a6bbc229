//! Graceful drain of `aip serve` (spec 11, 20.1): the first SIGTERM refuses new work with a
//! retryable `aip.runtime.draining` (503, `Retry-After`) while reads are served and `/ready` says
//! `draining`; running handlers finish and commit within `shutdown.grace_ms`, and work still
//! running when the grace is over is interrupted and its lease released, so the restarted node or
//! another node on the same PostgreSQL database claims it at once; an MCP call whose stream the
//! shutdown cut resumes on the restarted node. The PostgreSQL case needs
//! `AIP_TEST_POSTGRES_URL` (SKIP notice otherwise; a failure under `CI=true`).
#![allow(clippy::unwrap_used)]

mod cluster;
mod support;

use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use support::{Server, id, pause, running_sleeps};

fn sigterm(server: &Server) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for the process to exit, at most `limit`; returns how long it took.
async fn exited(server: &mut Server, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "aip serve exited with {status}");
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "aip serve still running after {limit:?}"
        );
        pause(20).await;
    }
}

#[tokio::test]
async fn a_drain_refuses_new_work_with_a_retryable_error_serves_reads_and_lets_running_handlers_finish()
 {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let env = [
        ("AIP_SHUTDOWN__GRACE_MS", "20000"),
        ("AIP_LIMITS__ASYNC_WORKERS", "24"),
    ];
    let mut server = Server::start(&data, None, &env);
    let sleeps = running_sleeps(&server, 20, 3000).await;
    sigterm(&server);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    // The drain begins at once: new work is refused, typed and retryable, with Retry-After.
    let mut refused = None;
    for _ in 0..100 {
        let response = http
            .post(format!("http://{}/aip/v1/actions", server.base))
            .bearer_auth(&server.admin_token)
            .header("content-type", "application/aip+json")
            .body(
                support::envelope(
                    "aip.core.v1.action",
                    json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} } }),
                )
                .to_string(),
            )
            .send()
            .await
            .unwrap();
        if response.status() == 503 {
            refused = Some(response);
            break;
        }
        pause(10).await;
    }
    let refused = refused.expect("new work was still admitted while draining");
    assert_eq!(refused.headers()["retry-after"], "5");
    let body: serde_json::Value = refused.json().await.unwrap();
    let error = &body["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.runtime.draining", "{body}");
    assert_eq!(error["retryable"], true, "{body}");
    // Reads are served; readiness says draining.
    let (status, view) = server
        .admin()
        .get(&format!("/aip/v1/actions/{}", sleeps[0]))
        .await;
    assert_eq!(status, 200, "{view}");
    let ready = http
        .get(format!("http://{}/ready", server.base))
        .bearer_auth(&server.admin_token)
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    assert_eq!(
        ready.json::<serde_json::Value>().await.unwrap()["status"],
        "draining"
    );
    // The running sleeps finish and commit, then the process exits, well within the grace.
    let took = exited(&mut server, Duration::from_secs(20)).await;
    assert!(took < Duration::from_secs(10), "{took:?}");
    let server = Server::start(&data, None, &env);
    let admin = server.admin();
    for action_id in &sleeps {
        let (_, view) = admin
            .get(&format!("/aip/v1/actions/{action_id}?include_result=true"))
            .await;
        assert_eq!(
            view["state"], "completed",
            "finished before the exit: {view}"
        );
        assert_eq!(view["result"]["output"], json!({ "slept_ms": 3000 }));
        // Finished by the draining node: run once, never re-run after the restart.
        let kinds = admin.event_kinds(action_id).await;
        assert_eq!(
            kinds.iter().filter(|k| *k == "aip.action.started").count(),
            1,
            "{kinds:?}"
        );
    }
}

#[tokio::test]
async fn work_still_running_when_the_grace_is_over_is_taken_back_at_once_by_the_restarted_node() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Leases of a minute, a grace of 300 ms: the sleeps outlive the grace.
    let env = [
        ("AIP_SHUTDOWN__GRACE_MS", "300"),
        ("AIP_LIMITS__LEASE_MS", "60000"),
    ];
    let mut server = Server::start(&data, None, &env);
    let sleeps = running_sleeps(&server, 4, 3000).await;
    sigterm(&server);
    let took = exited(&mut server, Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(3), "{took:?}");
    let restarted = Instant::now();
    let server = Server::start(&data, None, &env);
    let admin = server.admin();
    // Each released sleep runs again on the restarted node at once (its lease was given back,
    // not left to lapse in a minute), and ends once.
    for action_id in &sleeps {
        let view = admin.wait_terminal(action_id).await;
        assert_eq!(view["state"], "completed", "{view}");
        assert_eq!(view["result"]["output"], json!({ "slept_ms": 3000 }));
        let kinds = admin.event_kinds(action_id).await;
        assert_eq!(
            kinds
                .iter()
                .filter(|k| *k == "aip.action.completed")
                .count(),
            1,
            "{kinds:?}"
        );
    }
    // The 3 s sleeps ran again from their start: what is beyond 3 s is the time to take them back.
    println!(
        "4 released 3 s sleeps completed {:?} after the restart began",
        restarted.elapsed()
    );
    let elapsed = restarted.elapsed();
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
}

#[tokio::test]
async fn a_second_signal_during_a_drain_exits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let env = [("AIP_SHUTDOWN__GRACE_MS", "30000")];
    let mut server = Server::start(&data, None, &env);
    running_sleeps(&server, 1, 60_000).await;
    sigterm(&server);
    pause(300).await;
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the drain waits for the sleep"
    );
    sigterm(&server);
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(130), "{status}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "still draining");
        pause(20).await;
    }
    let printed = server.stdout.lock().unwrap().join("\n");
    assert!(
        printed.contains("second signal: exiting at once"),
        "{printed}"
    );
}

#[tokio::test]
async fn leases_released_at_the_drain_deadline_are_claimed_at_once_by_another_node_and_never_cancelled()
 {
    let Some(db) = cluster::TestDb::create("serve_drain").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Leases of a minute: without the release, node B would wait that long.
    let env = [
        ("AIP_SHUTDOWN__GRACE_MS", "300"),
        ("AIP_LIMITS__LEASE_MS", "60000"),
    ];
    let mut a = cluster::start_node(&dir.path().join("a"), &db.url, &env, None);
    let sleeps = running_sleeps(&a, 4, 4000).await;
    // Node B starts after node A holds every sleep.
    let b = cluster::start_node(&dir.path().join("b"), &db.url, &env, None);
    let on_b = b.admin();
    sigterm(&a);
    let took = exited(&mut a, Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(3), "{took:?}");
    let released = Instant::now();
    for action_id in &sleeps {
        let view = on_b.wait_terminal(action_id).await;
        assert_eq!(view["state"], "completed", "{view}");
        assert_eq!(view["result"]["output"], json!({ "slept_ms": 4000 }));
        let kinds = on_b.event_kinds(action_id).await;
        assert!(
            !kinds.iter().any(|k| k.contains("cancel")),
            "an interrupted run is not a cancellation: {kinds:?}"
        );
    }
    // Each re-ran from the start on node B (4 s), far sooner than the minute-long lease.
    let elapsed = released.elapsed();
    println!("released work finished on the other node {elapsed:?} after the drain");
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
}

/// The `i` of a `data` chunk envelope, if it is one.
fn counted(envelope: &serde_json::Value) -> Option<u64> {
    let chunk = &envelope["body"]["stream_chunk"];
    (chunk["kind"] == "data").then(|| chunk["data"]["i"].as_u64().unwrap())
}

/// The stream of `action_id` over WebSocket, from the start or after `cursor`.
fn ws_follow(action_id: &str, cursor: Option<&str>) -> serde_json::Value {
    let mut env = support::envelope(
        "aip.lifecycle.v1.action_events_request",
        json!({ "action_events_request": { "action_id": action_id, "follow": true } }),
    );
    env["correlation_id"] = json!("follow");
    if let Some(cursor) = cursor {
        env["extensions"] = json!({ "aip.websocket.stream.v1": { "after": cursor } });
    }
    env
}

/// Reads WebSocket envelopes until the close frame (`Some(code)`) or the action's result (`None`);
/// collects the counted chunks and returns the last stream cursor seen.
async fn ws_read(
    socket: &mut support::ws::Socket,
    seen: &mut Vec<u64>,
    stop_after: Option<usize>,
) -> (Option<u16>, Option<String>, Option<serde_json::Value>) {
    use tokio_tungstenite::tungstenite::Message;
    let mut cursor = None;
    let mut last = None;
    loop {
        match support::ws::next_frame(socket).await {
            Some(Message::Text(text)) => {
                let env: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
                if let Some(c) = env["extensions"]["aip.websocket.stream.v1"]["cursor"].as_str() {
                    cursor = Some(c.to_owned());
                }
                if let Some(i) = counted(&env) {
                    seen.push(i);
                }
                let result = env["message_type"] == "aip.core.v1.action_result";
                last = Some(env);
                if result || stop_after.is_some_and(|n| seen.len() >= n) {
                    return (None, cursor, last);
                }
            }
            Some(Message::Close(frame)) => return (frame.map(|f| u16::from(f.code)), cursor, last),
            Some(_) => {}
            None => return (None, cursor, last),
        }
    }
}

#[tokio::test]
async fn an_sse_follower_and_a_websocket_stream_end_with_a_resumable_frame_at_the_drain_and_resume_after_the_restart_with_every_chunk_once()
 {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // The count outlives a grace of 300 ms; leases of a minute show the restart takes it back.
    let env = [
        ("AIP_SHUTDOWN__GRACE_MS", "300"),
        ("AIP_LIMITS__LEASE_MS", "60000"),
    ];
    let mut server = Server::start(&data, None, &env);
    let admin = server.admin();
    let action_id = id("act_");
    let (status, ack) = admin.act(json!({ "id": action_id, "capability_id": "cap:demo:count", "mode": "streaming", "input": { "n": 40, "interval_ms": 100 } })).await;
    assert_eq!(status, 202, "{ack}");
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let token = server.admin_token.clone();
    let open_sse = |base: &str, last: Option<String>| {
        let mut request = http
            .get(format!("http://{base}/aip/v1/actions/{action_id}/events"))
            .bearer_auth(&token)
            .header("accept", "text/event-stream");
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        request.send()
    };
    let mut sse = support::SseReader::new(open_sse(&server.base, None).await.unwrap());
    let mut sse_seen = Vec::new();
    while sse_seen.len() < 3 {
        let event = sse.next().await.expect("the stream ended early");
        sse_seen.extend(counted(&event.data));
    }
    let mut socket = support::ws::connect(&server, &server.admin_token).await;
    support::ws::send(&mut socket, &ws_follow(&action_id, None)).await;
    let mut ws_seen = Vec::new();
    ws_read(&mut socket, &mut ws_seen, Some(3)).await;

    sigterm(&server);
    // SSE: the stream goes on through the grace, then ends with a heartbeat saying to reconnect,
    // whose id is the cursor of the last event before it.
    let rest = sse.rest().await;
    let (last, before) = rest.split_last().expect("no final frame");
    assert_eq!(last.name, "heartbeat", "{rest:?}");
    let status = last.data["body"]["heartbeat"]["status"].as_str().unwrap();
    assert!(status.starts_with("draining"), "{status}");
    let resumed_from = before.iter().rev().find(|e| !e.id.is_empty()).map_or_else(
        || panic!("nothing before the final frame"),
        |e| e.id.clone(),
    );
    assert_eq!(
        last.id, resumed_from,
        "the final frame resumes where the stream stopped"
    );
    for event in before {
        sse_seen.extend(counted(&event.data));
    }
    // WebSocket: the same final heartbeat, then close 1012 "service restart".
    let (code, ws_cursor, final_frame) = ws_read(&mut socket, &mut ws_seen, None).await;
    assert_eq!(code, Some(1012), "{final_frame:?}");
    let final_frame = final_frame.unwrap();
    assert!(
        final_frame["body"]["heartbeat"]["status"]
            .as_str()
            .unwrap()
            .starts_with("draining"),
        "{final_frame}"
    );
    let ws_cursor = ws_cursor.unwrap();
    exited(&mut server, Duration::from_secs(10)).await;
    assert!(
        sse_seen.len() < 40 && ws_seen.len() < 40,
        "the count outlived the grace"
    );

    // After the restart both resume from their cursor: every chunk exactly once, then the result.
    let server = Server::start(&data, None, &env);
    let mut sse =
        support::SseReader::new(open_sse(&server.base, Some(last.id.clone())).await.unwrap());
    let mut result = None;
    while let Some(event) = sse.next().await {
        sse_seen.extend(counted(&event.data));
        if event.name == "result" {
            result = Some(event.data);
            break;
        }
    }
    let result = result.expect("no result after the restart");
    assert_eq!(
        result["body"]["action_result"]["output"],
        json!({ "count": 40 })
    );
    assert_eq!(sse_seen, (1..=40).collect::<Vec<_>>());
    let mut socket = support::ws::connect(&server, &server.admin_token).await;
    support::ws::send(&mut socket, &ws_follow(&action_id, Some(&ws_cursor))).await;
    let (_, _, last) = ws_read(&mut socket, &mut ws_seen, None).await;
    assert_eq!(last.unwrap()["message_type"], "aip.core.v1.action_result");
    assert_eq!(ws_seen, (1..=40).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_draining_node_refuses_new_work_over_mcp_a2a_and_websocket_with_the_typed_retryable_error()
 {
    use support::mcp::{ALICE, Mcp, refused_over_mcp, two_principals_with};
    let dir = tempfile::tempdir().unwrap();
    let mut server = two_principals_with(
        dir.path(),
        "[a2a]\ndefault_capability = \"cap:demo:echo\"\n\n[shutdown]\ngrace_ms = 20000\n",
    );
    // Sessions opened before the drain; one sleep keeps the node draining while they are tried.
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    let mut socket = support::ws::connect(&server, ALICE).await;
    running_sleeps(&server, 1, 5000).await;
    sigterm(&server);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    for _ in 0..200 {
        let ready = http
            .get(format!("http://{}/ready", server.base))
            .send()
            .await
            .unwrap();
        if ready.status() == 503 {
            break;
        }
        pause(10).await;
    }
    refused_over_mcp(&mut mcp, "aip.runtime.draining").await;
    // Over A2A no task is created: a JSON-RPC error naming the code, marked retryable.
    let a2a = support::a2a::a2a_send(&server.base, ALICE).await;
    let info = &a2a["error"]["data"][0]["metadata"];
    assert_eq!(info["aip.code"], "aip.runtime.draining", "{a2a}");
    assert_eq!(info["aip.retryable"], "true", "{a2a}");
    assert!(a2a.get("result").is_none(), "{a2a}");
    let action = support::envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": {} } }),
    );
    support::ws::send(&mut socket, &action).await;
    let reply = support::ws::next_envelope(&mut socket).await;
    let error = &reply["body"]["error"]["error"];
    assert_eq!(error["code"], "aip.runtime.draining", "{reply}");
    assert_eq!(error["retryable"], true, "{reply}");
    exited(&mut server, Duration::from_secs(20)).await;
}

/// A booking provider that counts the requests it receives and answers each after 5 s.
async fn slow_booking_provider() -> (String, Arc<AtomicUsize>) {
    let received = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&received);
    let app = axum::Router::new().route(
        "/book",
        axum::routing::post(move || {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(5)).await;
                axum::Json(json!({ "output": { "booking_id": "b-1" } }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), received)
}

/// The config of an unsafe booking capability `cap:ext:book` served by `provider`.
fn booking_config(dir: &std::path::Path, provider: &str) -> std::path::PathBuf {
    let config = dir.join("aip.toml");
    std::fs::write(
        &config,
        format!(
            r#"[[capabilities]]
id = "cap:ext:book"
name = "Book"
kind = "tool"
input_schema = {{ type = "object" }}
handler = {{ type = "http", url = "{provider}/book", timeout_ms = 20000 }}
[capabilities.contract]
side_effects = ["write"]
idempotency = {{ requirement = "optional", collision_behavior = "reject_conflict", key_scope = "tenant" }}
execution = {{ supports_sync = true, supports_async = true, supports_streaming = false, supports_cancel = false, supports_retry = false, expected_completion = "async", retry_safety = "unsafe" }}
data = {{ sensitivity = "internal", contains_pii = false, redaction_required = false }}
"#
        ),
    )
    .unwrap();
    config
}

/// Admits an async booking and waits until the provider holds it: (action id, the action).
async fn booking_sent(server: &Server, received: &AtomicUsize) -> (String, serde_json::Value) {
    let action_id = id("act_");
    let action = json!({ "id": action_id, "capability_id": "cap:ext:book", "mode": "async", "input": { "table": 7 }, "idempotency_key": id("book-") });
    let (status, reply) = server.admin().act(action.clone()).await;
    assert_eq!(status, 202, "{reply}");
    for _ in 0..250 {
        if received.load(Ordering::SeqCst) == 1 {
            break;
        }
        pause(20).await;
    }
    assert_eq!(
        received.load(Ordering::SeqCst),
        1,
        "the booking never reached the provider"
    );
    (action_id, action)
}

#[tokio::test]
async fn a_drain_waits_past_its_grace_for_a_running_mutation_while_work_safe_to_rerun_is_released_at_the_grace()
 {
    let (provider, received) = slow_booking_provider().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = booking_config(dir.path(), &provider);
    // The provider answers after 5 s: past the grace, within the mutations' grace.
    let env = [
        ("AIP_SHUTDOWN__GRACE_MS", "500"),
        ("AIP_SHUTDOWN__MUTATION_GRACE_MS", "15000"),
        ("AIP_LIMITS__LEASE_MS", "60000"),
    ];
    let mut server = Server::start(&data, Some(&config), &env);
    let sleeps = running_sleeps(&server, 1, 60_000).await;
    let (booking, _) = booking_sent(&server, &received).await;
    sigterm(&server);
    let took = exited(&mut server, Duration::from_secs(20)).await;
    assert!(
        took > Duration::from_secs(3),
        "the drain did not wait for the mutation: {took:?}"
    );
    let printed = server.stdout.lock().unwrap().join("\n");
    assert!(
        printed.contains("1 handler(s) finished; 1 still running")
            && printed.contains(&sleeps[0])
            && !printed.contains(&booking),
        "{printed}"
    );
    let server = Server::start(&data, Some(&config), &env);
    let admin = server.admin();
    let view = admin.wait_terminal(&booking).await;
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["result"]["output"]["booking_id"], "b-1", "{view}");
    assert_eq!(received.load(Ordering::SeqCst), 1);
    // The released sleep is not cancelled: the restarted node runs it again.
    let (_, slept) = admin.get(&format!("/aip/v1/actions/{}", sleeps[0])).await;
    assert!(
        slept["state"] == "running" || slept["state"] == "queued",
        "{slept}"
    );
}

#[tokio::test]
async fn a_mutation_in_flight_at_the_drain_deadline_is_settled_uncertain_after_the_restart_and_never_sent_twice()
 {
    let (provider, received) = slow_booking_provider().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = booking_config(dir.path(), &provider);
    // A grace shorter than the provider's answer, leases of a minute.
    let env = [
        ("AIP_SHUTDOWN__GRACE_MS", "500"),
        ("AIP_LIMITS__LEASE_MS", "60000"),
    ];
    let mut server = Server::start(&data, Some(&config), &env);
    let (action_id, action) = booking_sent(&server, &received).await;
    // The drain deadline passes while the provider still holds the booking.
    sigterm(&server);
    let took = exited(&mut server, Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(4), "{took:?}");
    let server = Server::start(&data, Some(&config), &env);
    let admin = server.admin();
    let view = admin.wait_terminal(&action_id).await;
    assert_eq!(view["state"], "failed", "{view}");
    assert_eq!(
        view["result"]["error"]["code"], "aip.connector.uncertain_outcome",
        "{view}"
    );
    let kinds = admin.event_kinds(&action_id).await;
    assert!(
        !kinds.iter().any(|k| k.contains("cancel")),
        "an interrupted run is not a cancellation: {kinds:?}"
    );
    // Sending it again answers the settled action; the provider saw one booking, ever.
    let (_, again) = admin.act(action).await;
    assert!(!again.to_string().contains("b-1"), "{again}");
    pause(1500).await;
    assert_eq!(
        received.load(Ordering::SeqCst),
        1,
        "the mutation was sent twice"
    );
}

/// The rest of a streamed response body, until the server ends it (at most 15 s).
async fn rest_of(response: reqwest::Response) -> String {
    let text = tokio::time::timeout(Duration::from_secs(15), response.text())
        .await
        .expect("the stream outlived the shutdown");
    text.unwrap_or_default()
}

#[tokio::test]
async fn mcp_streams_open_at_the_shutdown_end_with_a_retry_hint_naming_the_drain() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&dir.path().join("data"), None, &[]);
    // A Streamable HTTP session's standalone stream, and a legacy HTTP+SSE stream.
    let mut mcp = support::mcp::Mcp::new(&server.base, Some(&server.admin_token));
    mcp.open("2025-11-25").await;
    let standalone = mcp
        .request(reqwest::Method::GET)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(standalone.status(), 200);
    let legacy = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("http://{}/mcp/legacy/sse", server.base))
        .bearer_auth(&server.admin_token)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(legacy.status(), 200);
    pause(200).await;
    sigterm(&server);
    for (what, stream) in [("standalone", standalone), ("legacy", legacy)] {
        let text = rest_of(stream).await;
        let tail: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        assert!(
            tail.ends_with(&[": aip.runtime.draining", "retry: 1000"])
                || tail.ends_with(&["retry: 1000", ": aip.runtime.draining"]),
            "{what}: {text}"
        );
    }
    exited(&mut server, Duration::from_secs(15)).await;
}

#[tokio::test]
async fn an_mcp_call_stream_open_at_the_shutdown_ends_with_the_retry_hint_after_its_last_resumable_event()
 {
    let dir = tempfile::tempdir().unwrap();
    let env = [("AIP_SHUTDOWN__GRACE_MS", "300")];
    let mut server = Server::start(&dir.path().join("data"), None, &env);
    let mut mcp = support::mcp::Mcp::new(&server.base, Some(&server.admin_token));
    mcp.open("2025-06-18").await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "demo_count", "arguments": {"n": 400, "interval_ms": 50}, "_meta": {"progressToken": 1}}});
    let response = mcp.post_streaming(call.to_string()).await;
    assert_eq!(response.status(), 200);
    pause(300).await;
    sigterm(&server);
    let text = rest_of(response).await;
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert!(
        lines.ends_with(&[": aip.runtime.draining", "retry: 1000"])
            || lines.ends_with(&["retry: 1000", ": aip.runtime.draining"]),
        "{text}"
    );
    // Progress came before it, each with an id to resume from.
    assert!(
        lines.iter().any(|l| l.starts_with("id: ")),
        "no resumable event before the end: {text}"
    );
    exited(&mut server, Duration::from_secs(15)).await;
}

#[tokio::test]
async fn an_mcp_call_cut_by_the_shutdown_resumes_on_the_restarted_node_from_its_last_event_with_every_step_once()
 {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let env = [("AIP_SHUTDOWN__GRACE_MS", "300")];
    let mut server = Server::start(&data, None, &env);
    let mut mcp = support::mcp::Mcp::new(&server.base, Some(&server.admin_token));
    mcp.open("2025-06-18").await;
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "demo_count", "arguments": {"n": 40, "interval_ms": 50}, "_meta": {"progressToken": 9}}});
    let response = mcp.post_streaming(call.to_string()).await;
    assert_eq!(response.status(), 200);
    pause(300).await;
    sigterm(&server);
    // What the client saw before the node went away: progress, each with an id, and no response.
    let before = support::SseReader::new(response).rest().await;
    let last = before.last().expect("progress before the shutdown");
    assert!(
        before.iter().all(|e| e.data.get("id").is_none()),
        "{:?}",
        last.data
    );
    let step = |e: &support::SseEvent| e.data["params"]["progress"].as_u64();
    let seen = step(last).unwrap();
    exited(&mut server, Duration::from_secs(15)).await;

    // The restarted node serves the same session: the client resumes with its last event id.
    let server = Server::start(&data, None, &env);
    mcp.url = format!("http://{}/mcp", server.base);
    let resumed = mcp.resume(&last.id).await;
    assert_eq!(resumed.status(), 200);
    let after = support::SseReader::new(resumed).rest().await;
    let (response, progress) = after.split_last().expect("the call's response");
    assert_eq!(response.data["id"], 3, "{:?}", response.data);
    assert_eq!(
        response.data["result"]["structuredContent"],
        json!({"count": 40})
    );
    // Every step after the last one seen, once each and in order.
    let steps: Vec<u64> = progress.iter().filter_map(step).collect();
    assert!(
        steps.first().is_some_and(|s| *s > seen),
        "{seen} then {steps:?}"
    );
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
}
