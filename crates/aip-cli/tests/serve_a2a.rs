//! The A2A profile (`aip.a2a.compat.v1`, spec 21.2) driven by the official A2A Python
//! SDK client (`a2a-sdk` 1.3.0, through `tests/interop/a2a_probe.py`): card, SendMessage,
//! SendStreamingMessage until the server closes the stream, GetTask, ListTasks, CancelTask,
//! SubscribeToTask across a kill -9, an approval-gated skill as input-required, another
//! principal's task not found, refused features, and the JSON-RPC / version errors on the wire.
//! Without the interop venv this prints a notice and skips; under `CI=true` it fails.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::a2a::{ok, probe, python};
use support::{Server, token_file};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef01";
const CAROL: &str = "carol-token-0123456789abcdef0";
const APPROVER: &str = "approver-token-0123456789abcdef";

fn config(dir: &Path) -> PathBuf {
    let alice = token_file(dir, "alice.token", ALICE);
    let bob = token_file(dir, "bob.token", BOB);
    let carol = token_file(dir, "carol.token", CAROL);
    let approver = token_file(dir, "approver.token", APPROVER);
    let path = dir.join("aip.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[limits]
lease_ms = 1000

[[principals]]
id = "alice"
token_file = "{alice}"
scopes = ["invoke:cap:demo:*"]

[[principals]]
id = "bob"
token_file = "{bob}"
scopes = ["invoke:cap:demo:*"]

[[principals]]
id = "carol"
token_file = "{carol}"
scopes = ["invoke:cap:demo:echo", "invoke:cap:ext:charge"]

[[principals]]
id = "approver"
token_file = "{approver}"
scopes = []
roles = ["approver"]

# Keys scoped to an external account: a caller bound to none is refused by policy at admission
# (the A2A messageId is the key). Never dispatched in these tests.
[[capabilities]]
id = "cap:ext:charge"
name = "Charge"
kind = "tool"
input_schema = {{ type = "object" }}
handler = {{ type = "http", url = "http://127.0.0.1:9/charge", timeout_ms = 400 }}
policy = {{ allow_without_approval = true }}
[capabilities.contract]
side_effects = ["financial"]
idempotency = {{ requirement = "required", collision_behavior = "reject_conflict", key_scope = "external_account" }}
execution = {{ supports_sync = true, supports_async = false, supports_streaming = false, supports_cancel = false, supports_retry = false, expected_completion = "sync", retry_safety = "unsafe" }}
data = {{ sensitivity = "restricted", contains_pii = false, redaction_required = false }}

[a2a]
public_skills = ["cap:demo:echo"]
default_capability = "cap:demo:echo"
"#,
            alice = alice.display(),
            bob = bob.display(),
            carol = carol.display(),
            approver = approver.display()
        ),
    )
    .unwrap();
    path
}

/// The task of a `send` step's first event.
fn first_task(result: &Value) -> &Value {
    &ok(result)[0]["task"]
}

/// The states a streamed send went through, in order.
fn states(events: &Value) -> Vec<String> {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            e.pointer("/task/status/state")
                .or_else(|| e.pointer("/statusUpdate/status/state"))
        })
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

const ORDER: [&str; 3] = [
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
];

fn assert_monotone(states: &[String]) {
    let ranks: Vec<usize> = states
        .iter()
        .map(|s| {
            ORDER
                .iter()
                .position(|o| o == s)
                .unwrap_or_else(|| panic!("{s}"))
        })
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{states:?}");
    assert_eq!(states.last().unwrap(), "TASK_STATE_COMPLETED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_client_reads_the_cards_and_runs_tasks_streamed_and_not() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config(dir.path())), &[]);
    let message_id = support::id("msg-");
    let results = probe(
        &python,
        &server,
        ALICE,
        true,
        &[
            json!({ "op": "card" }),
            json!({ "op": "extended_card" }),
            json!({ "op": "send", "text": "hello a2a" }),
            json!({ "op": "send", "capability": "cap:demo:count", "data": { "n": 3, "interval_ms": 20 } }),
            json!({ "op": "send", "capability": "cap:demo:echo", "data": { "n": 7 }, "message_id": message_id }),
        ],
    );
    let card = ok(&results[0]);
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["capabilities"]["streaming"], true);
    let public: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(public, ["cap:demo:echo"]);
    let extended = ok(&results[1])["skills"].as_array().unwrap().clone();
    for id in ["cap:demo:count", "cap:demo:transfer", "cap:demo:sleep"] {
        assert!(
            extended.iter().any(|s| s["id"] == id),
            "{id} missing: {extended:?}"
        );
    }

    // Text to the default capability: streamed until the server closed the stream.
    let echo = ok(&results[2]);
    assert_monotone(&states(echo));
    let artifact = echo
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e.pointer("/artifactUpdate/artifact"))
        .unwrap();
    assert_eq!(artifact["parts"][0]["data"], json!({ "text": "hello a2a" }));
    // A streaming capability: one artifact update per chunk, then the result; `n` arrived as 3.0
    // and ran as the integer 3.
    let count = ok(&results[3]);
    assert_monotone(&states(count));
    let chunks: Vec<&Value> = count
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.pointer("/artifactUpdate/artifact"))
        .filter(|a| a["name"] == "stream")
        .collect();
    assert!(chunks.len() >= 3, "{count}");
    let result = count
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| {
            e.pointer("/artifactUpdate/artifact")
                .filter(|a| a["name"] == "result")
        })
        .unwrap();
    assert_eq!(result["parts"][0]["data"]["count"], 3.0, "{result}");

    // Not streamed: SendMessage answers the finished task; the same messageId is the same task.
    let echo_id = first_task(&results[4])["id"].as_str().unwrap().to_owned();
    let again = probe(
        &python,
        &server,
        ALICE,
        false,
        &[
            json!({ "op": "send", "capability": "cap:demo:echo", "data": { "n": 7 }, "message_id": message_id }),
            json!({ "op": "send", "capability": "cap:demo:count", "data": { "n": 2 } }),
            json!({ "op": "get", "id": echo_id }),
            json!({ "op": "list", "page_size": 50 }),
        ],
    );
    let resent = first_task(&again[0]);
    assert_eq!(resent["id"], echo_id.as_str());
    assert_eq!(ok(&again[0]).as_array().unwrap().len(), 1);
    let counted = first_task(&again[1]);
    assert_eq!(
        counted["status"]["state"], "TASK_STATE_COMPLETED",
        "{counted}"
    );
    assert_eq!(counted["artifacts"][0]["parts"][0]["data"]["count"], 2.0);
    let got = ok(&again[2]);
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(got["artifacts"][0]["parts"][0]["data"], json!({ "n": 7.0 }));
    let listed = ok(&again[3]);
    // Four distinct messages became four tasks (the re-sent one is not a fifth).
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 4, "{listed}");
    assert_eq!(listed["totalSize"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_cancellation_ownership_and_refused_features_keep_native_semantics() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config(dir.path())), &[]);
    let results = probe(
        &python,
        &server,
        ALICE,
        true,
        &[
            // An approval-gated capability: input-required (never completed); the stream closes.
            json!({ "op": "send", "capability": "cap:demo:transfer", "data": { "amount_minor": 250000, "to": "acct:bob" } }),
            json!({ "op": "send", "text": "again", "task_id": "act_x" }),
            json!({ "op": "push_create", "id": "act_nothing", "url": "http://127.0.0.1:9/hook" }),
        ],
    );
    let transfer = ok(&results[0]);
    let last = states(transfer);
    assert_eq!(
        last.last().unwrap(),
        "TASK_STATE_INPUT_REQUIRED",
        "{transfer}"
    );
    assert!(!last.contains(&"TASK_STATE_COMPLETED".to_owned()));
    let input_required = transfer
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find_map(|e| {
            e.pointer("/statusUpdate/status")
                .or_else(|| e.pointer("/task/status"))
        })
        .unwrap();
    let approval = input_required["message"]["metadata"]["aip.approval_id"]
        .as_str()
        .unwrap();
    assert!(approval.starts_with("appr_"), "{input_required}");

    assert_eq!(
        results[1]["error"], "UnsupportedOperationError",
        "{}",
        results[1]
    );
    // Push configs are supported (see serve_a2a_push); this task does not exist.
    assert_eq!(results[2]["error"], "TaskNotFoundError", "{}", results[2]);
    // Message metadata never chooses the principal or tenant.
    let queued = probe(
        &python,
        &server,
        ALICE,
        false,
        &[
            json!({ "op": "send", "capability": "cap:demo:sleep", "data": { "ms": 20000 },
                   "metadata": { "principal": "bob", "principal_id": "bob", "tenant": "other" }, "return_immediately": true }),
        ],
    );
    let sleeping = first_task(&queued[0])["id"].as_str().unwrap().to_owned();
    let (status, mine) = server
        .client(ALICE)
        .get("/aip/v1/actions?principal_id=alice&capability_id=cap:demo:sleep")
        .await;
    assert_eq!(status, 200);
    assert_eq!(mine["actions"][0]["action_id"], sleeping.as_str(), "{mine}");

    // Bob cannot see, cancel or follow alice's task: it does not exist for him.
    let bob = probe(
        &python,
        &server,
        BOB,
        true,
        &[
            json!({ "op": "get", "id": sleeping }),
            json!({ "op": "cancel", "id": sleeping }),
            json!({ "op": "subscribe", "id": sleeping }),
            json!({ "op": "list" }),
        ],
    );
    for refused in &bob[..3] {
        assert_eq!(refused["error"], "TaskNotFoundError", "{refused}");
    }
    assert!(
        ok(&bob[3])
            .get("tasks")
            .is_none_or(|t| t.as_array().unwrap().is_empty())
    );

    // Alice cancels it: native cancelled, A2A canceled; a finished task cannot be cancelled again.
    let cancelled = probe(
        &python,
        &server,
        ALICE,
        false,
        &[
            json!({ "op": "cancel", "id": sleeping }),
            json!({ "op": "cancel", "id": sleeping }),
        ],
    );
    assert_eq!(
        ok(&cancelled[0])["status"]["state"],
        "TASK_STATE_CANCELED",
        "{}",
        cancelled[0]
    );
    assert_eq!(
        cancelled[1]["error"], "TaskNotCancelableError",
        "{}",
        cancelled[1]
    );
    let view = server.client(ALICE).wait_terminal(&sleeping).await;
    assert_eq!(view["state"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_survives_kill_9_and_subscribe_to_task_follows_it_to_the_end_after_the_restart() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = config(dir.path());
    let mut server = Server::start(&data, Some(&config), &[]);
    let started = probe(
        &python,
        &server,
        ALICE,
        false,
        &[
            json!({ "op": "send", "capability": "cap:demo:sleep", "data": { "ms": 2500 }, "return_immediately": true }),
        ],
    );
    let id = first_task(&started[0])["id"].as_str().unwrap().to_owned();
    server.kill();
    let server = Server::start(&data, Some(&config), &[]);
    let after = probe(
        &python,
        &server,
        ALICE,
        true,
        &[
            json!({ "op": "get", "id": id }),
            json!({ "op": "subscribe", "id": id }),
            json!({ "op": "subscribe", "id": id }),
        ],
    );
    assert_eq!(ok(&after[0])["id"], id.as_str());
    let followed = ok(&after[1]);
    assert_eq!(followed[0]["task"]["id"], id.as_str());
    assert_eq!(
        states(followed).last().unwrap(),
        "TASK_STATE_COMPLETED",
        "{followed}"
    );
    // Subscribing to a finished task is refused (GetTask reads it).
    assert_eq!(
        after[2]["error"], "UnsupportedOperationError",
        "{}",
        after[2]
    );
}

#[tokio::test]
async fn the_wire_refuses_missing_versions_old_methods_and_unauthenticated_calls() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config(dir.path())), &[]);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let call = |version: Option<&str>, token: Option<&str>, body: String| {
        let mut request = http
            .post(format!("http://{}/a2a", server.base))
            .header("content-type", "application/json")
            .body(body);
        if let Some(version) = version {
            request = request.header("A2A-Version", version);
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let get =
        json!({ "jsonrpc": "2.0", "id": "1", "method": "GetTask", "params": { "id": "act_x" } })
            .to_string();
    let cases = [
        (
            None,
            Some(ALICE),
            get.clone(),
            -32009,
            "VERSION_NOT_SUPPORTED",
        ),
        (
            Some("9.9"),
            Some(ALICE),
            get.clone(),
            -32009,
            "VERSION_NOT_SUPPORTED",
        ),
        (
            Some("1.0"),
            Some(ALICE),
            get.clone(),
            -32001,
            "TASK_NOT_FOUND",
        ),
        (
            Some("1.0"),
            Some(ALICE),
            json!({ "jsonrpc": "2.0", "id": "t", "method": "ListTasks", "params": { "tenant": "other" } }).to_string(),
            -32602,
            "INVALID_PARAMS",
        ),
        (
            Some("1.0"),
            Some(ALICE),
            json!({ "jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {} })
                .to_string(),
            -32601,
            "METHOD_NOT_FOUND",
        ),
        (
            Some("1.0"),
            Some(ALICE),
            "{not json".to_owned(),
            -32700,
            "PARSE_ERROR",
        ),
        (
            Some("1.0"),
            Some(ALICE),
            json!([{ "jsonrpc": "2.0", "id": 3, "method": "GetTask" }]).to_string(),
            -32600,
            "INVALID_REQUEST",
        ),
    ];
    for (version, token, body, code, reason) in cases {
        let (status, reply) = call(version, token, body.clone()).await;
        assert_eq!(status, 200, "{body}: {reply}");
        assert_eq!(reply["error"]["code"], code, "{body}: {reply}");
        assert_eq!(reply["error"]["data"][0]["reason"], reason, "{reply}");
        assert_eq!(
            reply["error"]["data"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
    }
    for token in [None, Some("wrong-token-0123456789abcdef")] {
        let (status, _) = call(Some("1.0"), token, get.clone()).await;
        assert_eq!(status, 401);
    }
    // The card is public; the interface URL is where the card was asked for.
    let card: Value = http
        .get(format!(
            "http://{}/.well-known/agent-card.json",
            server.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("http://{}/a2a", server.base)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_ids_group_tasks_in_native_sessions_and_policy_refusals_are_rejected() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config(dir.path())), &[]);
    let send = |text: &str, context: Option<&str>| {
        let mut step = json!({ "op": "send", "text": text });
        if let Some(context) = context {
            step["context_id"] = json!(context);
        }
        step
    };
    let first = probe(
        &python,
        &server,
        ALICE,
        false,
        &[send("one", Some("ctx-1")), send("alone", None)],
    );
    let one = first_task(&first[0]).clone();
    let alone = first_task(&first[1]).clone();
    assert_eq!(one["contextId"], "ctx-1", "{one}");
    // A task outside any context is a context of its own.
    assert_eq!(alone["contextId"], alone["id"], "{alone}");
    let alone_id = alone["id"].as_str().unwrap().to_owned();
    let more = probe(
        &python,
        &server,
        ALICE,
        true,
        &[
            send("two", Some("ctx-1")),
            send("follow-up", Some(&alone_id)),
            json!({ "op": "list", "context_id": "ctx-1" }),
            json!({ "op": "list", "context_id": alone_id }),
            json!({ "op": "get", "id": one["id"] }),
        ],
    );
    let two = first_task(&more[0]).clone();
    assert_eq!(two["contextId"], "ctx-1", "{two}");
    let streamed = ok(&more[0]).as_array().unwrap();
    assert!(
        streamed
            .iter()
            .filter_map(|e| e.pointer("/statusUpdate/contextId"))
            .all(|c| c == "ctx-1"),
        "{streamed:?}"
    );
    let follow_up = first_task(&more[1]).clone();
    assert_eq!(follow_up["contextId"], alone_id.as_str(), "{follow_up}");
    let ids = |listed: &Value| -> Vec<String> {
        listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut in_ctx = ids(ok(&more[2]));
    in_ctx.sort();
    let mut expected = vec![
        one["id"].as_str().unwrap().to_owned(),
        two["id"].as_str().unwrap().to_owned(),
    ];
    expected.sort();
    assert_eq!(in_ctx, expected);
    assert_eq!(
        ids(ok(&more[3])),
        [
            alone_id.clone(),
            follow_up["id"].as_str().unwrap().to_owned()
        ]
    );
    assert_eq!(ok(&more[4])["contextId"], "ctx-1");
    // Natively, the context is one session of alice's, opened by the A2A profile; the tasks are
    // its actions and nothing links them as parent and child.
    let alice = server.client(ALICE);
    let (_, action) = alice
        .get(&format!("/aip/v1/actions/{}", one["id"].as_str().unwrap()))
        .await;
    let session = action["session_id"].as_str().unwrap().to_owned();
    assert!(session.starts_with("sess_a2a"), "{action}");
    assert!(
        action.get("delegation_id").is_none_or(Value::is_null),
        "{action}"
    );
    let (_, other) = alice
        .get(&format!("/aip/v1/actions/{}", two["id"].as_str().unwrap()))
        .await;
    assert_eq!(other["session_id"], session.as_str());
    let (status, view) = alice.get(&format!("/aip/v1/sessions/{session}")).await;
    assert_eq!(status, 200, "{view}");
    // Bob's "ctx-1" is his own context: he sees none of alice's tasks in it.
    let bobs = probe(
        &python,
        &server,
        BOB,
        false,
        &[
            send("bob", Some("ctx-1")),
            json!({ "op": "list", "context_id": "ctx-1" }),
        ],
    );
    let bob_task = first_task(&bobs[0]).clone();
    assert_eq!(bob_task["contextId"], "ctx-1");
    assert_eq!(
        ids(ok(&bobs[1])),
        [bob_task["id"].as_str().unwrap().to_owned()]
    );
    let (status, _) = server
        .client(BOB)
        .get(&format!("/aip/v1/sessions/{session}"))
        .await;
    assert_eq!(status, 404);

    // Refused by policy at admission (carol's key would need an external account she is not
    // bound to): rejected, not recorded.
    let carol = probe(
        &python,
        &server,
        CAROL,
        false,
        &[json!({ "op": "send", "capability": "cap:ext:charge", "data": { "amount": 1 } })],
    );
    let refused = first_task(&carol[0]).clone();
    assert_eq!(
        refused["status"]["state"], "TASK_STATE_REJECTED",
        "{refused}"
    );
    assert_eq!(refused["metadata"]["aip.recorded"], false);
    assert_eq!(
        refused["status"]["message"]["metadata"]["aip.error"]["code"],
        "aip.idempotency.external_account_unbound"
    );
    // An approval denied: the input-required task ends rejected.
    let gated = probe(
        &python,
        &server,
        ALICE,
        false,
        &[
            json!({ "op": "send", "capability": "cap:demo:transfer", "data": { "amount_minor": 500, "to": "acct:bob" } }),
        ],
    );
    let waiting = first_task(&gated[0]).clone();
    assert_eq!(
        waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{waiting}"
    );
    let approval = waiting["status"]["message"]["metadata"]["aip.approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, decided) = server
        .client(APPROVER)
        .post(
            &format!("/aip/v1/approvals/{approval}/decision"),
            &json!({ "decision": "denied", "reason": "not today" }),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    let after = probe(
        &python,
        &server,
        ALICE,
        false,
        &[json!({ "op": "get", "id": waiting["id"] })],
    );
    let rejected = ok(&after[0]);
    assert_eq!(
        rejected["status"]["state"], "TASK_STATE_REJECTED",
        "{rejected}"
    );
    assert_eq!(
        rejected["status"]["message"]["metadata"]["aip.error"]["code"],
        "aip.policy.approval_denied"
    );
}
