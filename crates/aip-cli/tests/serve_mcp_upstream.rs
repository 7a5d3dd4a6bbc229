//! Upstream MCP servers as governed capabilities (`[[mcp_upstreams]]`, spec 21.1): a server written
//! with the official MCP Python SDK (`tests/interop/mcp_upstream_server.py`, `mcp==2.3.0`) over
//! stdio (started and supervised by `aip serve`) and over Streamable HTTP. Its allowed tools are
//! capabilities admitted like any other; errors are typed connector errors; a mutation that times
//! out is an uncertain outcome; an HTTP upstream that goes away is unreachable and is reconnected
//! once it is back. Without the SDK venv this prints a notice and skips; under `CI=true` it fails.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::mcp::Mcp;
use support::{Killed, Server, free_port, token_file};

const ALICE: &str = "alice-token-0123456789abcdef";

fn workspace() -> PathBuf {
    support::workspace()
}

fn python() -> Option<PathBuf> {
    support::interop_python("mcp", "2.3.0").ok()
}

/// The upstream server over HTTP on `port`, once it accepts connections.
fn http_upstream(python: &Path, port: u16) -> Killed {
    let child = Killed(
        Command::new(python)
            .arg(workspace().join("tests/interop/mcp_upstream_server.py"))
            .args(["http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the HTTP upstream did not start on port {port}");
}

async fn act(server: &Server, capability: &str, input: Value) -> Value {
    let client = server.client(ALICE);
    let (status, reply) = client
        .act(json!({ "id": support::id("act_"), "capability_id": capability, "input": input, "mode": "sync" }))
        .await;
    assert!(status < 500, "{reply}");
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_tools_over_stdio_and_http_are_governed_capabilities_with_typed_failures() {
    let Some(python) = python() else {
        support::skip_or_fail(
            "MCP upstream test: the MCP Python SDK (mcp==2.3.0 in target/interop-venv) is not installed; .ci/run installs it",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("upstream.log");
    let alice = token_file(dir.path(), "alice.token", ALICE);
    let http_port = free_port();
    let web = http_upstream(&python, http_port);
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[principals]]
id = "alice"
kind = "agent"
tenant = "default"
scopes = ["invoke:cap:*"]
token_file = "{alice}"

[[mcp_upstreams]]
name = "calc"
command = "{python}"
args = ["{script}", "stdio"]
env = {{ UPSTREAM_LOG = "{log}" }}
tools = ["add", "record", "fail", "slow", "publish", "unpublish"]
call_timeout_ms = 1500
resources = true
resources_refresh_secs = 1
[mcp_upstreams.overrides.add]
side_effects = ["read"]
risk = "low"
sensitivity = "internal"

[[mcp_upstreams]]
name = "web"
url = "http://127.0.0.1:{http_port}/mcp"
capability_prefix = "cap:web:"
tools = ["add"]
[mcp_upstreams.overrides.add]
side_effects = ["read"]
"#,
            alice = alice.display(),
            python = python.display(),
            script = workspace()
                .join("tests/interop/mcp_upstream_server.py")
                .display(),
            log = log.display(),
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);

    // The allowed tools, and only those, are capabilities with the upstream's schemas.
    let (_, manifest) = server.client(ALICE).get("/aip/v1/manifest").await;
    let ids: Vec<&str> = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for id in [
        "cap:mcp:calc:add",
        "cap:mcp:calc:record",
        "cap:mcp:calc:fail",
        "cap:mcp:calc:slow",
        "cap:web:add",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    assert!(!ids.iter().any(|i| i.ends_with("hidden")));
    let add = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cap:mcp:calc:add")
        .unwrap();
    assert_eq!(add["input_schema"]["required"], json!(["a", "b"]));
    let record = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cap:mcp:calc:record")
        .unwrap();
    assert_eq!(
        record["contract"]["side_effects"],
        json!(["write", "external_network"]),
        "conservative default"
    );
    // Nobody declared what the tool returns: unknown (spec 9.6), unless the operator states it.
    assert_eq!(record["contract"]["data"]["sensitivity"], "unknown");
    assert_eq!(add["contract"]["data"]["sensitivity"], "internal");

    // The stdio upstream's resources are AIP resources, read through it as alice's own action.
    let (status, listed) = server.client(ALICE).get("/aip/v1/resources").await;
    assert_eq!(status, 200, "{listed}");
    let resource_ids: Vec<&str> = listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        resource_ids,
        ["mcp:calc:memo://greeting", "mcp:calc:memo://settings"],
        "{listed}"
    );
    assert_eq!(listed["resources"][0]["name"], "Greeting", "{listed}");
    assert_eq!(
        listed["resources"][0]["capability_id"],
        "cap:mcp:calc:resource_read"
    );
    let (status, read) = server
        .client(ALICE)
        .post(
            "/aip/v1/messages",
            &support::envelope(
                "aip.resource.v1.resource_read_request",
                json!({ "resource_read_request": { "resource_id": "mcp:calc:memo://greeting" } }),
            ),
        )
        .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(
        read["body"]["resource_read_result"]["content"][0]["text"], "hello from the upstream",
        "{read}"
    );
    // The reader is read-only and sync; the web upstream offers no resources (not asked to).
    let reader = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cap:mcp:calc:resource_read")
        .unwrap();
    assert_eq!(reader["contract"]["side_effects"], json!(["read"]));
    assert!(!resource_ids.iter().any(|i| i.starts_with("mcp:web:")));

    // The list follows the upstream while the node runs: a resource it adds appears (and reads),
    // one it drops is gone (404 like any unknown resource).
    let published = act(
        &server,
        "cap:mcp:calc:publish",
        json!({"uri": "memo://fresh", "text": "published later"}),
    )
    .await;
    assert_eq!(
        published["body"]["action_result"]["status"], "completed",
        "{published}"
    );
    let read_fresh = || async {
        server
            .client(ALICE)
            .get("/aip/v1/resources/mcp:calc:memo:%2F%2Ffresh")
            .await
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let fresh = loop {
        let (status, reply) = read_fresh().await;
        if status == 200 {
            break reply;
        }
        assert_eq!(status, 404, "{reply}");
        assert!(
            std::time::Instant::now() < deadline,
            "the new resource never appeared"
        );
        support::pause(250).await;
    };
    assert!(fresh.to_string().contains("published later"), "{fresh}");
    act(
        &server,
        "cap:mcp:calc:unpublish",
        json!({"uri": "memo://fresh"}),
    )
    .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let (status, reply) = read_fresh().await;
        if status == 404 {
            break;
        }
        // Until the next listing, a read reaches the upstream, which refuses it (a typed 502).
        assert!(status == 200 || status == 502, "{reply}");
        assert!(
            std::time::Instant::now() < deadline,
            "the dropped resource stayed"
        );
        support::pause(250).await;
    }

    // Calls go through admission: a schema violation never reaches the upstream.
    let refused = act(&server, "cap:mcp:calc:add", json!({"a": "x", "b": 2})).await;
    assert_eq!(
        refused["body"]["error"]["error"]["code"], "aip.action.invalid_input",
        "{refused}"
    );
    let sum = act(&server, "cap:mcp:calc:add", json!({"a": 2, "b": 3})).await;
    assert_eq!(
        sum["body"]["action_result"]["output"],
        json!({"sum": 5}),
        "{sum}"
    );
    let over_http = act(&server, "cap:web:add", json!({"a": 20, "b": 22})).await;
    assert_eq!(
        over_http["body"]["action_result"]["output"],
        json!({"sum": 42}),
        "{over_http}"
    );
    let noted = act(&server, "cap:mcp:calc:record", json!({"note": "once"})).await;
    assert_eq!(
        noted["body"]["action_result"]["status"], "completed",
        "{noted}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "once\n");
    let action_id = noted["body"]["action_result"]["action_id"]
        .as_str()
        .unwrap();
    let (status, chain) = server
        .client(ALICE)
        .get(&format!("/aip/v1/receipts/{action_id}"))
        .await;
    assert_eq!(status, 200, "{chain}");

    // The tool's own error is a typed connector failure.
    let failed = act(&server, "cap:mcp:calc:fail", json!({"reason": "no"})).await;
    assert_eq!(
        failed["body"]["action_result"]["error"]["code"], "aip.connector.tool_error",
        "{failed}"
    );
    let message = failed["body"]["action_result"]["error"]["message"]
        .as_str()
        .unwrap();
    // The tool's own text (this SDK hides the exception message).
    assert!(message.contains("fail"), "{failed}");
    // A mutation that does not answer in time is an uncertain outcome, never a plain failure.
    let slow = act(&server, "cap:mcp:calc:slow", json!({"seconds": 5})).await;
    assert_eq!(
        slow["body"]["action_result"]["error"]["code"], "aip.connector.uncertain_outcome",
        "{slow}"
    );

    // Upstream tools are MCP tools of this server too.
    let mut mcp = Mcp::new(&server.base, Some(ALICE));
    mcp.open("2025-06-18").await;
    let result = mcp.tool("mcp_calc_add", json!({"a": 1, "b": 1})).await;
    assert_eq!(result["structuredContent"], json!({"sum": 2}), "{result}");

    // The HTTP upstream goes away: unreachable, nothing admitted is lost; back: reconnected.
    drop(web);
    let down = act(&server, "cap:web:add", json!({"a": 1, "b": 2})).await;
    let code = down["body"]["action_result"]["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        code == "aip.connector.unreachable" || code == "aip.connector.failed",
        "{down}"
    );
    let web = http_upstream(&python, http_port);
    let mut back = Value::Null;
    for _ in 0..40 {
        back = act(&server, "cap:web:add", json!({"a": 1, "b": 2})).await;
        if back["body"]["action_result"]["status"] == "completed" {
            break;
        }
        support::pause(500).await;
    }
    assert_eq!(
        back["body"]["action_result"]["output"],
        json!({"sum": 3}),
        "{back}"
    );
    drop(web);
}

#[tokio::test]
async fn an_unreachable_upstream_or_a_tool_it_does_not_offer_stops_startup() {
    let Some(python) = python() else {
        support::skip_or_fail(
            "MCP upstream test: the MCP Python SDK is not installed; .ci/run installs it",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in [
        (
            "unreachable",
            format!(
                "[[mcp_upstreams]]\nname = \"gone\"\nurl = \"http://127.0.0.1:{}/mcp\"\n",
                free_port()
            ),
        ),
        (
            "unknown tool",
            format!(
                "[[mcp_upstreams]]\nname = \"calc\"\ncommand = \"{}\"\nargs = [\"{}\", \"stdio\"]\ntools = [\"nope\"]\n",
                python.display(),
                workspace()
                    .join("tests/interop/mcp_upstream_server.py")
                    .display()
            ),
        ),
    ] {
        let config = dir.path().join(format!("{}.toml", name.replace(' ', "_")));
        std::fs::write(&config, body).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_aip"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join(name.replace(' ', "_")))
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("mcp_upstreams"), "{name}: {stderr}");
    }
}
