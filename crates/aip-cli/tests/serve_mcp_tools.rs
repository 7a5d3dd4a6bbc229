//! The MCP compatibility profile through the binary, its tools (spec 21.1, notes section 5 items
//! 8-10): version-gated tool descriptions, tool calls as native actions, approvals never reported
//! as success, cancellation, DELETE leaving admitted work running, the facade tools, tasks,
//! progress with `Last-Event-ID` resumption, resources and prompts.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::{Value, json};
use support::mcp::{ALICE, BOB, Mcp, two_principals as server};
use support::{Server, token_file};

const CAROL: &str = "carol-token-0123456789abcdef";

#[tokio::test]
async fn tools_follow_the_negotiated_version_and_each_call_is_a_native_action_of_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut old = Mcp::new(&server.base, Some(ALICE));
    old.open("2024-11-05").await;
    let tools = old.call("tools/list", json!({})).await.body["result"]["tools"].clone();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "demo_echo")
        .unwrap()
        .clone();
    assert!(
        echo.get("title").is_none()
            && echo.get("annotations").is_none()
            && echo.get("outputSchema").is_none(),
        "{echo}"
    );
    // The 23 facade tools come first; capability tools never use their aip_ namespace.
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names[..23].iter().all(|n| n.starts_with("aip_")),
        "{names:?}"
    );
    assert!(
        names[23..].iter().all(|n| !n.starts_with("aip_")),
        "{names:?}"
    );
    for t in tools.as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        assert!(
            name.len() <= 128
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
            "{name}"
        );
        assert_eq!(t["inputSchema"]["type"], "object");
    }
    let result = old.tool("demo_echo", json!({"hello": "old"})).await;
    assert_eq!(result["isError"], false);
    assert!(result.get("structuredContent").is_none());
    assert_eq!(
        result["content"][0]["text"],
        json!({"hello": "old"}).to_string()
    );

    let mut new = Mcp::new(&server.base, Some(ALICE));
    new.open("2025-11-25").await;
    let tools = new.call("tools/list", json!({})).await.body["result"]["tools"].clone();
    let find = |n: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .unwrap()
            .clone()
    };
    let sleep = find("demo_sleep");
    assert_eq!(sleep["title"], "Sleep");
    assert_eq!(sleep["annotations"]["readOnlyHint"], true);
    assert_eq!(sleep["execution"]["taskSupport"], "optional");
    assert!(sleep["outputSchema"].is_object());
    let book = find("demo_book");
    assert_eq!(book["annotations"]["readOnlyHint"], false);
    assert_eq!(book["annotations"]["idempotentHint"], true);
    let transfer = find("demo_transfer");
    assert_eq!(transfer["annotations"]["destructiveHint"], true);
    assert_eq!(transfer["_meta"]["dev.aip/aip"]["requires_approval"], true);

    let result = new.tool("demo_echo", json!({"hello": "new"})).await;
    assert_eq!(result["structuredContent"], json!({"hello": "new"}));
    let action_id = result["_meta"]["dev.aip/aip"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The native read model holds the action: alice's, in the MCP session.
    let (status, view) = server
        .client(ALICE)
        .get(&format!("/aip/v1/actions/{action_id}"))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["session_id"].as_str(), new.session.as_deref());
    let sid = new.session.clone().unwrap();
    let (_, listed) = server
        .admin()
        .get(&format!(
            "/aip/v1/actions?principal_id=alice&session_id={sid}"
        ))
        .await;
    assert!(
        listed["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["action_id"] == action_id.as_str()),
        "{listed}"
    );
    assert_eq!(
        server
            .client(BOB)
            .get(&format!("/aip/v1/actions/{action_id}"))
            .await
            .0,
        404
    );

    // Unkeyed calls are distinct actions; keyed calls are one action with one result.
    let again = new.tool("demo_echo", json!({"hello": "new"})).await;
    assert_ne!(again["_meta"]["dev.aip/aip"]["action_id"], json!(action_id));
    let keyed = |k: &str| json!({ "name": "demo_book", "arguments": {"name": "Ada", "party_size": 2, "time": "19:00"}, "_meta": {"dev.aip/idempotency_key": k} });
    let first = new.call("tools/call", keyed("mcp-key-1")).await.body["result"].clone();
    let second = new.call("tools/call", keyed("mcp-key-1")).await.body["result"].clone();
    assert_eq!(first["isError"], false, "{first}");
    assert_eq!(first["structuredContent"], second["structuredContent"]);
    assert_eq!(first["_meta"], second["_meta"]);
    // Retried from a new session (the client reconnected): still the same action and result.
    let mut reconnected = Mcp::new(&server.base, Some(ALICE));
    reconnected.open("2025-11-25").await;
    let third = reconnected
        .call("tools/call", keyed("mcp-key-1"))
        .await
        .body["result"]
        .clone();
    assert_eq!(third["_meta"], first["_meta"], "{third}");
    assert_eq!(third["structuredContent"], first["structuredContent"]);
    // A capability failure or refusal is a tool error, not success.
    let invalid = new.tool("demo_sleep", json!({"ms": "soon"})).await;
    assert_eq!(invalid["isError"], true, "{invalid}");
    // Unknown tools and methods of later versions are JSON-RPC errors.
    let unknown = new
        .call("tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert_eq!(unknown.body["error"]["code"], -32602);
}

#[tokio::test]
async fn an_approval_gated_call_is_an_error_naming_its_approval_and_never_a_success() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    let result = mcp
        .tool(
            "demo_transfer",
            json!({"amount_minor": 500, "to": "acct-9"}),
        )
        .await;
    assert_eq!(result["isError"], true, "{result}");
    // The facts ride in _meta, never as structuredContent (which clients check against the
    // tool's output schema).
    assert!(result.get("structuredContent").is_none(), "{result}");
    assert_eq!(result["_meta"]["dev.aip/aip"]["status"], "pending_approval");
    let approval = result["_meta"]["dev.aip/aip"]["approval_id"]
        .as_str()
        .unwrap();
    let (status, view) = server
        .admin()
        .get(&format!("/aip/v1/approvals/{approval}"))
        .await;
    assert_eq!(status, 200, "{view}");
    // At 2024-11-05 the same facts travel in the text.
    let mut old = Mcp::new(&server.base, Some(ALICE));
    old.open("2024-11-05").await;
    let result = old
        .tool(
            "demo_transfer",
            json!({"amount_minor": 700, "to": "acct-9"}),
        )
        .await;
    assert_eq!(result["isError"], true);
    assert!(result.get("structuredContent").is_none());
    assert!(
        result["content"][1]["text"]
            .as_str()
            .unwrap()
            .contains("approval_id"),
        "{result}"
    );
}

#[tokio::test]
async fn cancelled_notifications_cancel_the_call_and_delete_leaves_admitted_work_running() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-11-25").await;

    // A long sleep cancelled by its request id.
    let mut caller = Mcp::new(&server.base, Some(ALICE));
    caller.session = mcp.session.clone();
    caller.version = mcp.version.clone();
    let call = tokio::spawn(async move {
        caller.post_raw(json!({"jsonrpc": "2.0", "id": "long-1", "method": "tools/call", "params": {"name": "demo_sleep", "arguments": {"ms": 30000}}}).to_string()).await
    });
    support::pause(500).await;
    assert_eq!(
        mcp.notify(
            "notifications/cancelled",
            json!({"requestId": "long-1", "reason": "user"})
        )
        .await
        .status,
        202
    );
    let answered = tokio::time::timeout(std::time::Duration::from_secs(20), call)
        .await
        .unwrap()
        .unwrap();
    let result = &answered.body["result"];
    assert_eq!(result["isError"], true, "{}", answered.body);
    assert_eq!(result["_meta"]["dev.aip/aip"]["status"], "cancelled");

    // DELETE while a call runs: the session ends, the action completes.
    let mut caller = Mcp::new(&server.base, Some(ALICE));
    caller.session = mcp.session.clone();
    caller.version = mcp.version.clone();
    let call = tokio::spawn(async move {
        caller.post_raw(json!({"jsonrpc": "2.0", "id": "short-1", "method": "tools/call", "params": {"name": "demo_sleep", "arguments": {"ms": 1500}}}).to_string()).await
    });
    support::pause(400).await;
    assert_eq!(mcp.delete().await, 204);
    let answered = call.await.unwrap();
    let action_id = answered.body["result"]["_meta"]["dev.aip/aip"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let view = server.client(ALICE).wait_terminal(&action_id).await;
    assert_eq!(view["state"], "completed", "{view}");
}

#[tokio::test]
async fn a_request_id_in_flight_in_its_session_is_refused_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    let call = |id: i64, name: &str, arguments: serde_json::Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}).to_string()
    };
    let mut caller = Mcp::new(&server.base, Some(ALICE));
    caller.session = mcp.session.clone();
    caller.version = mcp.version.clone();
    let sleep = call(7, "demo_sleep", json!({"ms": 1500}));
    let first = tokio::spawn(async move { caller.post_raw(sleep).await });
    support::pause(400).await;
    let again = mcp.post_raw(call(7, "demo_echo", json!({"x": 1}))).await;
    assert_eq!(again.body["error"]["code"], -32600, "{}", again.body);
    let first = first.await.unwrap();
    assert_eq!(first.body["result"]["isError"], false, "{}", first.body);
    let action_of = |body: &serde_json::Value| {
        body["result"]["_meta"]["dev.aip/aip"]["action_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let sid = mcp.session.clone().unwrap();
    let (_, listed) = server
        .admin()
        .get(&format!(
            "/aip/v1/actions?principal_id=alice&session_id={sid}"
        ))
        .await;
    assert_eq!(listed["actions"].as_array().unwrap().len(), 1, "{listed}");

    // Answered, the id may name a new call: a new action, later in id order (ids are time-ordered).
    let next = mcp.post_raw(call(7, "demo_echo", json!({"x": 2}))).await;
    assert_eq!(next.body["result"]["structuredContent"], json!({"x": 2}));
    assert!(
        action_of(&next.body) > action_of(&first.body),
        "{}",
        next.body
    );
}

/// The facade tool's structured answer (`{message_type, body}`), asserting it is not an error.
async fn facade(mcp: &mut Mcp, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
    let result = mcp.tool(tool, arguments).await;
    assert_eq!(result["isError"], false, "{tool}: {result}");
    result["structuredContent"].clone()
}

#[tokio::test]
async fn facade_tools_are_the_native_messages_under_the_callers_own_authority() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut alice = Mcp::new(&server.base, Some(ALICE));
    alice.open("2025-11-25").await;
    let expected = [
        "aip_capabilities",
        "aip_call",
        "aip_events",
        "aip_action_status",
        "aip_action_result",
        "aip_action_list",
        "aip_action_events",
        "aip_action_cancel",
        "aip_session_get",
        "aip_session_list",
        "aip_session_close",
        "aip_session_resume",
        "aip_approval_get",
        "aip_approval_list",
        "aip_approval_decide",
        "aip_callback_delivery_get",
        "aip_callback_delivery_list",
        "aip_transaction_get",
        "aip_receipt_get",
        "aip_audit_events",
        "aip_resource_list",
        "aip_resource_read",
        "aip_delegate",
    ];
    let listed = alice.call("tools/list", json!({})).await.body["result"]["tools"].clone();
    for name in expected {
        assert!(
            listed.as_array().unwrap().iter().any(|t| t["name"] == name),
            "{name}"
        );
    }

    // aip_call is a native action; its status and receipts read back through the facade.
    let called = facade(
        &mut alice,
        "aip_call",
        json!({"capability_id": "cap:demo:echo", "input": {"n": 1}}),
    )
    .await;
    assert_eq!(
        called["message_type"], "aip.core.v1.action_result",
        "{called}"
    );
    assert_eq!(called["body"]["action_result"]["output"], json!({"n": 1}));
    let action_id = called["body"]["action_result"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let status = facade(
        &mut alice,
        "aip.action_status",
        json!({"action_id": action_id}),
    )
    .await;
    assert_eq!(status["body"]["action_status"]["state"], "completed");
    let chain = facade(
        &mut alice,
        "aip_receipt_get",
        json!({"chain_id": action_id}),
    )
    .await;
    assert_eq!(
        chain["message_type"], "aip.audit.v1.receipt_chain",
        "{chain}"
    );
    let caps = facade(
        &mut alice,
        "aip_capabilities",
        json!({"query": "echo", "include_schemas": false}),
    )
    .await;
    let manifest = &caps["body"]["manifest"];
    assert_eq!(manifest["total"], 1, "{caps}");
    assert_eq!(manifest["capabilities"][0]["mcp_tool_name"], "demo_echo");
    assert!(manifest["capabilities"][0].get("input_schema").is_none());

    // Async through the facade, then cancelled through it.
    let queued = facade(
        &mut alice,
        "aip_call",
        json!({"capability_id": "cap:demo:sleep", "input": {"ms": 30000}, "mode": "async"}),
    )
    .await;
    assert_eq!(queued["message_type"], "aip.core.v1.ack", "{queued}");
    let sleeping = queued["body"]["ack"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    facade(
        &mut alice,
        "aip_action_cancel",
        json!({"action_id": sleeping, "reason": "test"}),
    )
    .await;
    let view = server.client(ALICE).wait_terminal(&sleeping).await;
    assert_eq!(view["state"], "cancelled");

    // Arguments never override the authenticated principal.
    let spoof = alice
        .call("tools/call", json!({"name": "aip_approval_decide", "arguments": {"approval_id": "appr_x", "decision": "approve", "approver_principal": "bob"}}))
        .await;
    assert_eq!(spoof.body["error"]["code"], -32003, "{}", spoof.body);
    let mut bob = Mcp::new(&server.base, Some(BOB));
    bob.open("2025-11-25").await;
    let others = facade(
        &mut bob,
        "aip_action_list",
        json!({"principal_id": "alice"}),
    )
    .await;
    assert_eq!(
        others["body"]["action_list"]["actions"],
        json!([]),
        "{others}"
    );
    let foreign = bob
        .tool("aip_action_status", json!({"action_id": action_id}))
        .await;
    assert_eq!(foreign["isError"], true, "{foreign}");
    // At 2024-11-05 a facade error carries its native answer in the text.
    let mut old = Mcp::new(&server.base, Some(BOB));
    old.open("2024-11-05").await;
    let foreign_old = old
        .tool("aip_action_status", json!({"action_id": action_id}))
        .await;
    assert_eq!(foreign_old["isError"], true);
    assert!(foreign_old.get("structuredContent").is_none());
    assert!(
        foreign_old["content"][1]["text"]
            .as_str()
            .unwrap()
            .contains("aip.core.v1.error"),
        "{foreign_old}"
    );
    // Unknown arguments are refused, not ignored.
    let unknown = alice
        .call(
            "tools/call",
            json!({"name": "aip_action_status", "arguments": {"action_id": "a", "wait": 1}}),
        )
        .await;
    assert_eq!(unknown.body["error"]["code"], -32602);

    // An approval decided through the facade by an approver releases alice's transfer.
    let pending = alice
        .tool(
            "demo_transfer",
            json!({"amount_minor": 900, "to": "acct-1"}),
        )
        .await;
    let approval = pending["_meta"]["dev.aip/aip"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let transfer = pending["_meta"]["dev.aip/aip"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let approver_token = std::fs::read_to_string(dir.path().join("data/approver-1.token")).unwrap();
    let mut approver = Mcp::new(&server.base, Some(approver_token.trim()));
    approver.open("2025-06-18").await;
    let decided = facade(
        &mut approver,
        "aip_approval_decide",
        json!({"approval_id": approval, "decision": "approve", "reason": "ok"}),
    )
    .await;
    assert!(
        decided["message_type"]
            .as_str()
            .unwrap()
            .starts_with("aip.policy."),
        "{decided}"
    );
    let done = facade(
        &mut alice,
        "aip_action_result",
        json!({"action_id": transfer, "wait_ms": 10000}),
    )
    .await;
    assert_eq!(
        done["body"]["action_result"]["status"], "completed",
        "{done}"
    );
}

#[tokio::test]
async fn queued_capabilities_run_as_tasks_at_2025_11_25_only_and_tasks_are_their_callers() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-11-25").await;
    let tools = mcp.call("tools/list", json!({})).await.body["result"]["tools"].clone();
    let support = |n: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .unwrap()["execution"]["taskSupport"]
            .clone()
    };
    assert_eq!(support("demo_sleep"), "optional");
    assert_eq!(support("demo_bookings"), "forbidden");

    // A task runs as a queued native action named by the task id.
    let created = mcp
        .call(
            "tools/call",
            json!({"name": "demo_sleep", "arguments": {"ms": 300}, "task": {}}),
        )
        .await;
    let task = created.body["result"]["task"].clone();
    assert!(
        ["working", "completed"].contains(&task["status"].as_str().unwrap()),
        "{}",
        created.body
    );
    assert!(task["createdAt"].is_string() && task["ttl"].is_null());
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    let (status, _) = server
        .client(ALICE)
        .get(&format!("/aip/v1/actions/{task_id}"))
        .await;
    assert_eq!(status, 200);
    let result = mcp
        .call("tasks/result", json!({"taskId": task_id}))
        .await
        .body["result"]
        .clone();
    assert_eq!(
        result["structuredContent"],
        json!({"slept_ms": 300}),
        "{result}"
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    let got = mcp.call("tasks/get", json!({"taskId": task_id})).await.body["result"].clone();
    assert_eq!(got["status"], "completed");
    let listed = mcp.call("tasks/list", json!({})).await.body["result"]["tasks"].clone();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["taskId"] == task_id.as_str()),
        "{listed}"
    );
    // A terminal task cannot be cancelled; a running one can.
    let late = mcp.call("tasks/cancel", json!({"taskId": task_id})).await;
    assert_eq!(late.body["error"]["code"], -32602);
    let long = mcp
        .call(
            "tools/call",
            json!({"name": "demo_sleep", "arguments": {"ms": 30000}, "task": {"ttl": 60000}}),
        )
        .await;
    let long_id = long.body["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancelled = mcp.call("tasks/cancel", json!({"taskId": long_id})).await;
    assert!(
        cancelled.body["result"]["status"].is_string(),
        "{}",
        cancelled.body
    );
    let view = server.client(ALICE).wait_terminal(&long_id).await;
    assert_eq!(view["state"], "cancelled");
    // Another principal's task is unknown; a tool without queueing refuses tasks.
    let mut bob = Mcp::new(&server.base, Some(BOB));
    bob.open("2025-11-25").await;
    assert_eq!(
        bob.call("tasks/get", json!({"taskId": task_id})).await.body["error"]["code"],
        -32602
    );
    let listed = bob.call("tasks/list", json!({})).await.body["result"]["tasks"].clone();
    assert_eq!(listed, json!([]));
    let refused = mcp
        .call(
            "tools/call",
            json!({"name": "demo_bookings", "arguments": {}, "task": {}}),
        )
        .await;
    assert_eq!(refused.body["error"]["code"], -32602);
    // Below 2025-11-25 tasks do not exist.
    let mut older = Mcp::new(&server.base, Some(ALICE));
    older.open("2025-06-18").await;
    assert_eq!(
        older
            .call("tasks/get", json!({"taskId": task_id}))
            .await
            .body["error"]["code"],
        -32601
    );
    let no_task = older
        .call(
            "tools/call",
            json!({"name": "demo_sleep", "arguments": {"ms": 1}, "task": {}}),
        )
        .await;
    assert_eq!(no_task.body["error"]["code"], -32602);
}

#[tokio::test]
async fn a_call_asking_for_progress_is_answered_as_a_stream_of_progress_then_its_response() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "demo_count", "arguments": {"n": 3, "interval_ms": 5}, "_meta": {"progressToken": "tok-1"}}});
    let response = mcp
        .request(reqwest::Method::POST)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = support::SseReader::new(response).rest().await;
    let (last, progress) = events.split_last().unwrap();
    assert!(progress.len() >= 3, "{events:?}");
    let mut previous = 0;
    for event in progress {
        assert_eq!(event.data["method"], "notifications/progress");
        assert_eq!(event.data["params"]["progressToken"], "tok-1");
        let step = event.data["params"]["progress"].as_u64().unwrap();
        assert!(step > previous, "progress must increase: {events:?}");
        previous = step;
    }
    assert_eq!(last.data["id"], 9);
    assert_eq!(
        last.data["result"]["structuredContent"],
        json!({"count": 3})
    );

    // A reader that goes away stops the notifications, not the action.
    let long = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {
        "name": "demo_count", "arguments": {"n": 20, "interval_ms": 50}, "_meta": {"progressToken": 7}}});
    let response = mcp.post_streaming(long.to_string()).await;
    let mut reader = support::SseReader::new(response);
    let first = reader.next().await.unwrap();
    assert_eq!(first.data["params"]["progressToken"], 7);
    assert!(!first.id.is_empty(), "progress events carry resumable ids");
    drop(reader);
    // Resumed with Last-Event-ID: the progress not seen yet, then the response, once.
    let resumed = mcp.resume(&first.id).await;
    assert_eq!(resumed.status(), 200);
    let events = support::SseReader::new(resumed).rest().await;
    let (last, progress) = events.split_last().unwrap();
    let first_step = first.data["params"]["progress"].as_u64().unwrap();
    assert!(!progress.is_empty());
    assert!(
        progress
            .iter()
            .all(|e| e.data["params"]["progress"].as_u64().unwrap() > first_step)
    );
    assert_eq!(last.data["id"], 10);
    assert_eq!(
        last.data["result"]["structuredContent"],
        json!({"count": 20})
    );
    // The event id resumes nothing for another session or principal, and a forged one is refused.
    let mut other = Mcp::new(&server.base, Some(ALICE));
    other.open("2025-06-18").await;
    assert_eq!(other.resume(&first.id).await.status(), 404);
    let mut bob = Mcp::new(&server.base, Some(BOB));
    bob.open("2025-06-18").await;
    assert_eq!(bob.resume(&first.id).await.status(), 404);
    assert_eq!(mcp.resume("act_x~e30~forged").await.status(), 400);
    assert_eq!(mcp.resume("garbage").await.status(), 400);
    let (stem, _) = first.id.rsplit_once('~').unwrap();
    let forged_cursor = format!("{stem}~AAAA");
    assert_eq!(mcp.resume(&forged_cursor).await.status(), 400);
    let (_, list) = server
        .client(ALICE)
        .get("/aip/v1/actions?capability_id=cap:demo:count")
        .await;
    let actions = list["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 2, "{list}");
    for a in actions {
        let view = server
            .client(ALICE)
            .wait_terminal(a["action_id"].as_str().unwrap())
            .await;
        assert_eq!(view["state"], "completed", "{view}");
    }
}

#[tokio::test]
async fn resources_follow_their_read_policy_and_prompts_fill_their_templates() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("logo.bin"), [0u8, 159, 146, 150, 255]).unwrap();
    let alice = token_file(dir.path(), "alice.token", ALICE);
    let bob = token_file(dir.path(), "bob.token", BOB);
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            r#"resource_root = "{root}"

[[principals]]
id = "alice"
kind = "agent"
tenant = "default"
scopes = ["invoke:cap:demo:*", "docs:read"]
token_file = "{alice}"

[[principals]]
id = "bob"
kind = "agent"
tenant = "default"
scopes = ["invoke:cap:demo:*"]
token_file = "{bob}"

[[resources]]
id = "res:guide"
name = "Guide"
mime_type = "text/markdown"
tenant_id = "default"
access = {{ required_scopes = ["docs:read"] }}
text = "Read me"

[[resources]]
id = "res:logo"
name = "Logo"
mime_type = "application/octet-stream"
tenant_id = "default"
access = {{ required_scopes = ["docs:read"] }}
file = "logo.bin"

[[mcp.resource_templates]]
uri_template = "orders://{{id}}/summary"
name = "Order summary"
capability = "cap:demo:echo"

[[principals]]
id = "carol"
kind = "agent"
tenant = "default"
scopes = ["docs:read"]
token_file = "{carol}"

[[mcp.prompts]]
name = "summarize"
title = "Summarize"
description = "Summarize a text"
arguments = [{{ name = "text", required = true }}]
messages = [{{ role = "user", text = "Summarize: {{{{text}}}}" }}]
"#,
            root = root.display(),
            alice = alice.display(),
            bob = bob.display(),
            carol = token_file(dir.path(), "carol.token", CAROL).display()
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let mut alice = Mcp::new(&server.base, Some(ALICE));
    let init = alice.open("2025-06-18").await;
    assert!(
        init["capabilities"]["resources"].is_object()
            && init["capabilities"]["prompts"].is_object()
    );
    let listed = alice.call("resources/list", json!({})).await.body["result"]["resources"].clone();
    let uris: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["res:guide", "res:logo"], "{listed}");
    let text = alice
        .call("resources/read", json!({"uri": "res:guide"}))
        .await
        .body["result"]["contents"]
        .clone();
    assert_eq!(text[0]["text"], "Read me");
    assert_eq!(text[0]["mimeType"], "text/markdown");
    let blob = alice
        .call("resources/read", json!({"uri": "res:logo"}))
        .await
        .body["result"]["contents"]
        .clone();
    assert_eq!(blob[0]["blob"], "AJ+Slv8=", "{blob}");
    assert_eq!(
        alice
            .call("resources/read", json!({"uri": "res:none"}))
            .await
            .body["error"]["code"],
        -32002
    );
    // Bob may not list them: for him they do not exist.
    let mut bob = Mcp::new(&server.base, Some(BOB));
    bob.open("2025-06-18").await;
    let none = bob.call("resources/list", json!({})).await.body["result"]["resources"].clone();
    assert_eq!(none, json!([]));
    assert_eq!(
        bob.call("resources/read", json!({"uri": "res:guide"}))
            .await
            .body["error"]["code"],
        -32002
    );
    // A template: each read runs its read-only capability as the reader, with the URI's variables.
    let templates = alice.call("resources/templates/list", json!({})).await;
    assert_eq!(
        templates.body["result"]["resourceTemplates"][0]["uriTemplate"],
        "orders://{id}/summary"
    );
    let produced = alice
        .call("resources/read", json!({"uri": "orders://42/summary"}))
        .await;
    let content = &produced.body["result"]["contents"][0];
    assert_eq!(content["mimeType"], "application/json", "{}", produced.body);
    let text: Value = serde_json::from_str(content["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, json!({"id": "42"}));
    // Who may not invoke the capability finds neither the template nor its resources.
    let mut carol = Mcp::new(&server.base, Some(CAROL));
    carol.open("2025-06-18").await;
    let hidden = carol.call("resources/templates/list", json!({})).await;
    assert_eq!(hidden.body["result"]["resourceTemplates"], json!([]));
    let refused = carol
        .call("resources/read", json!({"uri": "orders://42/summary"}))
        .await;
    assert_eq!(refused.body["error"]["code"], -32002, "{}", refused.body);
    // Subscriptions: only to what one may read; a changed file is announced on the session's
    // standalone stream.
    assert_eq!(init["capabilities"]["resources"]["subscribe"], true);
    let refused = bob
        .call("resources/subscribe", json!({"uri": "res:logo"}))
        .await;
    assert_eq!(refused.body["error"]["code"], -32002, "{}", refused.body);
    let subscribed = alice
        .call("resources/subscribe", json!({"uri": "res:logo"}))
        .await;
    assert_eq!(subscribed.body["result"], json!({}), "{}", subscribed.body);
    let stream = alice
        .request(reqwest::Method::GET)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut events = support::SseReader::new(stream);
    std::fs::write(root.join("logo.bin"), [1u8, 2, 3]).unwrap();
    let updated = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let event = events.next().await.expect("the stream ended");
            let message = event.data;
            if message["method"] == "notifications/resources/updated" {
                break message;
            }
        }
    })
    .await
    .expect("no notifications/resources/updated within 20 s");
    assert_eq!(updated["params"]["uri"], "res:logo");
    let unsubscribed = alice
        .call("resources/unsubscribe", json!({"uri": "res:logo"}))
        .await;
    assert_eq!(unsubscribed.body["result"], json!({}));
    // Prompts.
    let prompts = alice.call("prompts/list", json!({})).await.body["result"]["prompts"].clone();
    assert_eq!(prompts[0]["name"], "summarize");
    assert_eq!(prompts[0]["title"], "Summarize");
    let got = alice
        .call(
            "prompts/get",
            json!({"name": "summarize", "arguments": {"text": "AIP"}}),
        )
        .await;
    assert_eq!(
        got.body["result"]["messages"][0]["content"]["text"], "Summarize: AIP",
        "{}",
        got.body
    );
    let missing = alice
        .call("prompts/get", json!({"name": "summarize"}))
        .await;
    assert_eq!(missing.body["error"]["code"], -32602);
}

#[tokio::test]
async fn a_keyed_facade_call_retried_from_a_new_session_is_the_original_action_and_other_input_is_a_conflict()
 {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut first = Mcp::new(&server.base, Some(ALICE));
    first.open("2025-11-25").await;
    let book = |key: &str, party: u64| {
        json!({"capability_id": "cap:demo:book", "idempotency_key": key,
               "input": {"name": "Ada", "party_size": party, "time": "19:00"}})
    };
    let original = facade(&mut first, "aip_call", book("facade-key-1", 2)).await;
    let result = &original["body"]["action_result"];
    assert_eq!(result["status"], "completed", "{original}");
    // The client reconnected: a new MCP session retries the call (reject_conflict capability).
    let mut second = Mcp::new(&server.base, Some(ALICE));
    second.open("2025-11-25").await;
    let retried = facade(&mut second, "aip_call", book("facade-key-1", 2)).await;
    assert_eq!(
        retried["body"]["action_result"]["action_id"],
        result["action_id"]
    );
    assert_eq!(retried["body"]["action_result"]["output"], result["output"]);
    // A keyed tools/call with that key is the same action as well.
    let tool = second
        .call(
            "tools/call",
            json!({"name": "demo_book", "arguments": {"name": "Ada", "party_size": 2, "time": "19:00"},
                   "_meta": {"dev.aip/idempotency_key": "facade-key-1"}}),
        )
        .await
        .body["result"]
        .clone();
    assert_eq!(
        tool["_meta"]["dev.aip/aip"]["action_id"], result["action_id"],
        "{tool}"
    );
    // The same key with other input is a conflict, and books nothing.
    let other = second.tool("aip_call", book("facade-key-1", 4)).await;
    assert_eq!(other["isError"], true, "{other}");
    assert!(
        other["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("aip.idempotency.conflict"),
        "{other}"
    );
    // A return_original_result capability answers the retry with the original outcome too.
    let echo = |n: u64| json!({"capability_id": "cap:demo:echo", "idempotency_key": "facade-key-2", "input": {"n": n}});
    let echoed = facade(&mut first, "aip_call", echo(1)).await;
    let again = facade(&mut second, "aip_call", echo(1)).await;
    assert_eq!(
        echoed["body"]["action_result"],
        again["body"]["action_result"]
    );
}
