//! The MCP compatibility profile through the binary, its transport (spec 21.1, notes section 5
//! items 2-6): version negotiation and the discovery probe, session ownership and lifecycle, the
//! Streamable HTTP checks, the legacy HTTP+SSE binding, tool-name admission, the development
//! principal and shutdown. Tools, tasks, progress, the facade, resources and prompts are in
//! `serve_mcp_tools.rs`.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::{Value, json};
use support::mcp::{ALICE, BOB, Mcp, two_principals as server};
use support::{Server, token_file};

#[tokio::test]
async fn initialize_negotiates_each_stable_version_and_answers_the_discovery_probe_with_a_version_error()
 {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let result = mcp.initialize(version).await;
        assert_eq!(result["protocolVersion"], version);
        assert!(result["capabilities"]["tools"].is_object());
        // Tasks exist only at 2025-11-25.
        assert_eq!(
            result["capabilities"].get("tasks").is_some(),
            version == "2025-11-25",
            "{result}"
        );
        let sid = mcp.session.clone().unwrap();
        assert!(
            sid.len() >= 32 && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "{sid}"
        );
        assert_eq!(
            result["serverInfo"].get("title").is_some(),
            version >= "2025-06-18"
        );
    }
    for unknown in ["2026-07-28", "1999-01-01"] {
        assert_eq!(
            mcp.initialize(unknown).await["protocolVersion"],
            "2025-11-25"
        );
    }
    // The newer clients' probe: a JSON-RPC error at 400 (never 5xx, never success).
    mcp.session = None;
    mcp.version = Some("2025-11-25".into());
    let probe = mcp.call("server/discover", json!({})).await;
    assert_eq!(probe.status, 400);
    assert_eq!(probe.body["error"]["code"], -32022);
    assert_eq!(
        probe.body["error"]["data"]["supported"],
        json!(["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
    );
    // A wrong token never reaches the profile.
    let mut stranger = Mcp::new(&server.base, Some("not-a-token"));
    let a = stranger
        .call("initialize", json!({"protocolVersion": "2025-11-25"}))
        .await;
    assert_eq!(a.status, 401);
    assert!(a.headers.contains_key("www-authenticate"));
}

#[tokio::test]
async fn a_session_belongs_to_its_principal_needs_initialized_and_ends_with_delete() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut alice = Mcp::new(&server.base, Some(ALICE));
    // No session yet: 400; an unknown one: 404.
    let a = alice.call("tools/list", json!({})).await;
    assert_eq!(a.status, 400, "{}", a.body);
    alice.session = Some("ses_unknown".into());
    assert_eq!(alice.call("tools/list", json!({})).await.status, 404);

    alice.initialize("2025-11-25").await;
    // Before notifications/initialized only ping works.
    let early = alice.call("tools/list", json!({})).await;
    assert_eq!(early.body["error"]["code"], -32600, "{}", early.body);
    assert_eq!(
        alice.call("ping", json!({})).await.body["result"],
        json!({})
    );
    assert_eq!(
        alice
            .notify("notifications/initialized", json!({}))
            .await
            .status,
        202
    );
    assert!(alice.call("tools/list", json!({})).await.body["result"]["tools"].is_array());

    // Bob holding alice's session id sees exactly what an unknown id shows.
    let mut bob = Mcp::new(&server.base, Some(BOB));
    bob.session = alice.session.clone();
    bob.version = alice.version.clone();
    let foreign = bob.call("tools/list", json!({})).await;
    assert_eq!(foreign.status, 404);
    assert_eq!(foreign.body["error"]["code"], -32001);
    assert_eq!(bob.delete().await, 404);

    // It is a native session: listed for alice through the native read.
    let (status, sessions) = server.client(ALICE).get("/aip/v1/sessions").await;
    assert_eq!(status, 200);
    let sid = alice.session.clone().unwrap();
    assert!(
        sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["session_id"] == sid.as_str()),
        "{sessions}"
    );

    assert_eq!(alice.delete().await, 204);
    assert_eq!(alice.call("tools/list", json!({})).await.status, 404);
    assert_eq!(alice.delete().await, 404);
    let mut none = Mcp::new(&server.base, Some(ALICE));
    assert_eq!(none.delete().await, 400);
    none.session = Some("x".into());
    assert_eq!(none.delete().await, 404);
}

#[tokio::test]
async fn streamable_http_refuses_bad_headers_sizes_origins_and_batches_outside_2025_03_26() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let send = |accept: &'static str, content_type: &'static str, body: String| {
        mcp.request(reqwest::Method::POST)
            .header("accept", accept)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    assert_eq!(
        send("application/json", "application/json", ping.clone())
            .await
            .unwrap()
            .status(),
        406
    );
    assert_eq!(
        send(
            "application/json, text/event-stream",
            "text/plain",
            ping.clone()
        )
        .await
        .unwrap()
        .status(),
        415
    );
    // An unsupported version header, and one that differs from the negotiated version: 400.
    let mut other = Mcp::new(&server.base, Some(ALICE));
    other.session = mcp.session.clone();
    for version in ["not-a-version", "2000-01-01", "2099-01-01", "2025-11-25"] {
        other.version = Some(version.into());
        assert_eq!(other.call("ping", json!({})).await.status, 400, "{version}");
    }
    // A missing header on a session request uses the negotiated version.
    other.version = None;
    assert_eq!(other.call("ping", json!({})).await.status, 200);
    // Over the body limit: 413; not JSON: 400 with -32700; too deep: 400.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}",
        "a".repeat(2 << 20)
    );
    // The server may answer 413 and close before the whole body is written (a broken pipe on
    // this side): try again until the answer is read.
    // Its own connection pool: the server closes the refused connection, which must not be
    // reused by the requests that follow.
    let mut oversized = Mcp::new(&server.base, Some(ALICE));
    oversized.session = mcp.session.clone();
    oversized.version = mcp.version.clone();
    let mut refused = None;
    for _ in 0..5 {
        let sent = oversized
            .request(reqwest::Method::POST)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(big.clone())
            .send()
            .await;
        if let Ok(response) = sent {
            refused = Some(response.status().as_u16());
            break;
        }
    }
    assert_eq!(refused, Some(413));
    let garbage = mcp.post_raw("{not json".into()).await;
    assert_eq!(
        (garbage.status, garbage.body["error"]["code"].clone()),
        (400, json!(-32700))
    );
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert_eq!(mcp.post_raw(deep).await.status, 400);
    // A foreign Origin: 403 before anything else.
    let r = mcp
        .request(reqwest::Method::POST)
        .header("origin", "http://evil.example.com")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(ping.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Batches exist only at 2025-03-26.
    let batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]).to_string();
    let refused = mcp.post_raw(batch.clone()).await;
    assert_eq!(
        (refused.status, refused.body["error"]["code"].clone()),
        (400, json!(-32600))
    );
    let mut old = Mcp::new(&server.base, Some(ALICE));
    old.open("2025-03-26").await;
    let answered = old.post_raw(batch).await;
    assert_eq!(answered.status, 200, "{}", answered.body);
    assert_eq!(answered.body.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_standalone_get_stream_is_bounded_per_session_owned_and_ends_with_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut alice = Mcp::new(&server.base, Some(ALICE));
    alice.open("2025-11-25").await;
    let get = |client: &Mcp| {
        client
            .request(reqwest::Method::GET)
            .header("accept", "text/event-stream")
            .send()
    };
    let mut open = Vec::new();
    for _ in 0..8 {
        let stream = get(&alice).await.unwrap();
        assert_eq!(stream.status(), 200);
        assert!(
            stream.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        open.push(stream);
    }
    // The ninth on one session is refused; a closed one frees its place.
    assert_eq!(get(&alice).await.unwrap().status(), 429);
    drop(open.pop());
    let mut freed = None;
    for _ in 0..50 {
        let again = get(&alice).await.unwrap();
        if again.status() == 200 {
            freed = Some(again);
            break;
        }
        support::pause(100).await;
    }
    let freed = freed.expect("a closed stream's place is freed");
    // Another principal, or no session: not found / bad request, never a stream.
    let mut bob = Mcp::new(&server.base, Some(BOB));
    bob.session = alice.session.clone();
    assert_eq!(get(&bob).await.unwrap().status(), 404);
    let mut anonymous_session = Mcp::new(&server.base, Some(ALICE));
    anonymous_session.version = Some("2025-11-25".into());
    assert_eq!(get(&anonymous_session).await.unwrap().status(), 400);
    // DELETE ends the session and with it the open streams.
    assert_eq!(alice.delete().await, 204);
    let ended = tokio::time::timeout(std::time::Duration::from_secs(20), freed.bytes()).await;
    assert!(ended.is_ok(), "the stream outlived its session");
}

#[tokio::test]
async fn the_manifest_names_the_mcp_profile_and_a_reserved_tool_name_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let (_, manifest) = server.admin().get("/aip/v1/manifest").await;
    assert!(
        manifest["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "aip.mcp.compat.v1"),
        "{manifest}"
    );
    drop(server);

    let config = dir.path().join("bad.toml");
    std::fs::write(
        &config,
        r#"
[[capabilities]]
id = "cap:x:echo"
name = "X"
kind = "tool"
input_schema = { type = "object" }
bindings = [{ profile = "aip.mcp.compat.v1", tool = "aip_call" }]
handler = { type = "http", url = "http://127.0.0.1:9/x" }
[capabilities.contract]
side_effects = ["read"]
idempotency = { requirement = "optional", collision_behavior = "return_original_result", key_scope = "principal" }
execution = { supports_sync = true, supports_async = true, supports_streaming = false, supports_cancel = false, supports_retry = true, expected_completion = "any", retry_safety = "safe" }
data = { sensitivity = "internal", contains_pii = false, redaction_required = false }
"#,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("bad-data"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reserved aip_"), "{stderr}");
}

#[tokio::test]
async fn the_legacy_sse_binding_speaks_only_2024_11_05_and_its_stream_is_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let base = format!("http://{}", server.base);
    let open = http
        .get(format!("{base}/mcp/legacy/sse"))
        .bearer_auth(ALICE)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(open.status(), 200);
    let mut stream = support::SseReader::new(open);
    let endpoint = stream.next().await.unwrap();
    assert_eq!(endpoint.name, "endpoint");
    let path = endpoint.data.as_str().unwrap().to_owned();
    assert!(
        path.starts_with("/mcp/legacy/messages?sessionId=sess_"),
        "{path}"
    );
    let session = path.split("sessionId=").nth(1).unwrap().to_owned();
    let post = |token: &'static str, path: String, body: serde_json::Value| {
        http.post(format!("{base}{path}"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    // A 2025-11-25 client is answered 2024-11-05, on the stream.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    assert_eq!(post(ALICE, path.clone(), init).await.unwrap().status(), 202);
    let reply = stream.next().await.unwrap();
    assert_eq!(reply.name, "message");
    assert_eq!(reply.data["result"]["protocolVersion"], "2024-11-05");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        post(ALICE, path.clone(), initialized)
            .await
            .unwrap()
            .status(),
        202
    );
    // 2025-only methods and fields are absent.
    let tasks = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/list"});
    post(ALICE, path.clone(), tasks).await.unwrap();
    assert_eq!(stream.next().await.unwrap().data["error"]["code"], -32601);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    post(ALICE, path.clone(), list).await.unwrap();
    let tools = stream.next().await.unwrap().data["result"]["tools"].clone();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("title").is_none() && t.get("annotations").is_none()),
        "{tools}"
    );
    // Another principal, an unknown session, and the Streamable endpoint: 404.
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    assert_eq!(
        post(BOB, path.clone(), ping.clone())
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        post(
            ALICE,
            "/mcp/legacy/messages?sessionId=ses_nope".into(),
            ping.clone()
        )
        .await
        .unwrap()
        .status(),
        404
    );
    let mut streamable = Mcp::new(&server.base, Some(ALICE));
    streamable.session = Some(session.clone());
    assert_eq!(streamable.call("ping", json!({})).await.status, 404);
    // Closing the stream ends the session.
    drop(stream);
    let mut gone = 0;
    for _ in 0..50 {
        gone = post(ALICE, path.clone(), ping.clone())
            .await
            .unwrap()
            .status()
            .as_u16();
        if gone == 404 {
            break;
        }
        support::pause(100).await;
    }
    assert_eq!(gone, 404);
    // The stream is forgotten at once; the close is recorded just after it.
    let mut view = Value::Null;
    for _ in 0..50 {
        view = server
            .client(ALICE)
            .get(&format!("/aip/v1/sessions/{session}"))
            .await
            .1;
        if view["status"] == "settled" {
            break;
        }
        support::pause(100).await;
    }
    assert_eq!(view["status"], "settled", "{view}");
}

#[tokio::test]
async fn the_development_principal_needs_insecure_dev_loopback_and_no_other_principal_and_warns_at_every_start()
 {
    let dir = tempfile::tempdir().unwrap();
    let alice = token_file(dir.path(), "alice.token", ALICE);
    let bob = token_file(dir.path(), "bob.token", BOB);
    let principal = |id: &str, token: &std::path::Path| {
        format!(
            "[[principals]]\nid = \"{id}\"\nkind = \"agent\"\ntenant = \"default\"\nscopes = [\"invoke:cap:demo:*\"]\ntoken_file = \"{}\"\n\n",
            token.display()
        )
    };
    let config = dir.path().join("aip.toml");
    let dev = "[mcp]\ndev_principal = \"alice\"\n";
    std::fs::write(&config, format!("{}{dev}", principal("alice", &alice))).unwrap();
    let crowded = dir.path().join("crowded.toml");
    std::fs::write(
        &crowded,
        format!(
            "{}{}{dev}",
            principal("alice", &alice),
            principal("bob", &bob)
        ),
    )
    .unwrap();
    let refused = |listen: &str, config: &std::path::Path, flags: &[&str], data: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
            .args(["serve", "--listen", listen, "--data-dir"])
            .arg(dir.path().join(data))
            .arg("--config")
            .arg(config)
            .args(flags)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{data} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // A configuration file alone never turns it on.
    assert!(refused("127.0.0.1:0", &config, &[], "no-flag").contains("--insecure-dev"));
    let insecure = ["--insecure-dev"];
    assert!(refused("0.0.0.0:0", &config, &insecure, "off-loopback").contains("loopback"));
    // Beside a real identity it is refused: that principal would sit behind an open door.
    assert!(refused("127.0.0.1:0", &crowded, &insecure, "crowded").contains("principal bob"));

    let child = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--insecure-dev",
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Server::from_child(child, &dir.path().join("data"));
    // No credentials on /mcp: the development principal.
    let mut anonymous = Mcp::new(&server.base, None);
    anonymous.open("2025-11-25").await;
    // A wrong token is still refused, and the native API never takes the development principal.
    let mut wrong = Mcp::new(&server.base, Some("wrong-token"));
    let refused = wrong
        .call("initialize", json!({"protocolVersion": "2025-11-25"}))
        .await;
    assert_eq!(refused.status, 401);
    assert_eq!(server.anonymous().get("/aip/v1/actions").await.0, 401);
    server.kill();
    let mut log = String::new();
    std::io::Read::read_to_string(&mut server.child.stderr.take().unwrap(), &mut log).unwrap();
    assert!(log.contains("INSECURE: mcp.dev_principal is on"), "{log}");
}

#[tokio::test]
async fn a_shutdown_ends_open_legacy_streams_instead_of_waiting_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = server(dir.path());
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let open = http
        .get(format!("http://{}/mcp/legacy/sse", server.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    let mut stream = support::SseReader::new(open);
    assert_eq!(stream.next().await.unwrap().name, "endpoint");
    let pid = server.child.id().to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(term.success());
    // The stream ends and the process exits on its own, well before any client gives up.
    assert!(stream.rest().await.is_empty());
    let mut exited = false;
    for _ in 0..100 {
        if server.child.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        support::pause(100).await;
    }
    assert!(exited, "aip serve did not exit with a legacy stream open");
}
