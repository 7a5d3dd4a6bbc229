//! The operator's client CLI through the binary (spec 16): `aip call` in every mode, `aip actions
//! list|show|cancel`, `aip events` (a page, and `--follow`), `aip manifest`, `aip sessions list`, typed
//! refusals with what to do, and a followed stream that resumes after its connection is cut, printing
//! every chunk exactly once.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::{Server, id};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

fn aip(base: &str, token_file: &Path, args: &[&str]) -> (i32, String, String) {
    support::run_cli(base, token_file, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_command_answers_from_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, None, &[]);
    let token = data.join("admin.token");
    let base = server.base.as_str();

    let (code, out, err) = aip(base, &token, &["manifest"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("cap:demo:echo") && out.contains("cap:demo:transfer"),
        "{out}"
    );
    let (_, out, _) = aip(base, &token, &["manifest", "--json"]);
    let manifest: Value = serde_json::from_str(&out).unwrap();
    assert!(manifest["capabilities"].as_array().unwrap().len() >= 6);

    // Sync: the output; the same --id again is the same outcome, not a second run.
    let echo = id("act_");
    let (code, out, err) = aip(
        base,
        &token,
        &[
            "call",
            "cap:demo:echo",
            "--id",
            &echo,
            "--input",
            r#"{"hello":"world"}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({ "hello": "world" })
    );
    let (code, again, _) = aip(
        base,
        &token,
        &[
            "call",
            "cap:demo:echo",
            "--id",
            &echo,
            "--input",
            r#"{"hello":"world"}"#,
        ],
    );
    assert_eq!((code, again), (0, out));
    // Input from a file.
    let input = dir.path().join("input.json");
    std::fs::write(&input, r#"{"from": "file"}"#).unwrap();
    let (code, out, _) = aip(
        base,
        &token,
        &[
            "call",
            "cap:demo:echo",
            "--input",
            &format!("@{}", input.display()),
            "--json",
        ],
    );
    assert_eq!(code, 0);
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (result["status"].clone(), result["output"].clone()),
        (json!("completed"), json!({ "from": "file" }))
    );
    // Typed refusals say what to do and exit 1; usage errors exit 2.
    let (code, _, err) = aip(base, &token, &["call", "cap:demo:nope"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("aip.discovery.capability_not_found") && err.contains("what to do"),
        "{err}"
    );
    let (code, _, err) = aip(base, &token, &["call", "cap:demo:echo", "--input", "[1"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = aip(base, &dir.path().join("missing.token"), &["manifest"]);
    assert_eq!(code, 2, "{err}");

    // Async: the ack, or with --wait the result.
    let (code, out, err) = aip(
        base,
        &token,
        &[
            "call",
            "cap:demo:sleep",
            "--mode",
            "async",
            "--input",
            r#"{"ms": 50}"#,
            "--wait",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({ "slept_ms": 50 })
    );
    let sleeper = id("act_");
    let (code, out, _) = aip(
        base,
        &token,
        &[
            "call",
            "cap:demo:sleep",
            "--mode",
            "async",
            "--id",
            &sleeper,
            "--input",
            r#"{"ms": 30000}"#,
        ],
    );
    assert_eq!(code, 0);
    assert!(out.starts_with(&sleeper), "{out}");

    // Actions: list, cancel, show with receipts.
    let (code, out, _) = aip(base, &token, &["actions", "list"]);
    assert_eq!(code, 0);
    assert!(out.contains(&echo) && out.contains(&sleeper), "{out}");
    let (_, out, _) = aip(
        base,
        &token,
        &["actions", "list", "--capability", "cap:demo:echo", "--json"],
    );
    let list: Value = serde_json::from_str(&out).unwrap();
    assert!(
        list["actions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["capability_id"] == "cap:demo:echo")
    );
    let (code, out, err) = aip(
        base,
        &token,
        &["actions", "cancel", &sleeper, "--reason", "test"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cancellation recorded"), "{out}");
    server.admin().wait_terminal(&sleeper).await;
    let (code, out, _) = aip(base, &token, &["actions", "show", &sleeper, "--receipts"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("cancelled") && out.contains("request_received"),
        "{out}"
    );
    let (code, _, err) = aip(base, &token, &["actions", "show", "act_missing"]);
    assert_eq!(code, 1);
    assert!(err.contains("aip.core.not_found"), "{err}");

    // Events: a page of the feed, and an action's stream followed to its result.
    let (code, out, _) = aip(base, &token, &["events"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("aip.action.completed") && out.contains("next: aip events --after"),
        "{out}"
    );
    let (code, out, err) = aip(base, &token, &["events", "--action", &echo, "--follow"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.trim_end()
            .ends_with(r#"result completed {"hello":"world"}"#),
        "{out}"
    );

    // Sessions.
    let (code, out, _) = aip(base, &token, &["sessions", "list"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("no sessions") || out.contains("SESSION"),
        "{out}"
    );
    let (code, out, _) = aip(base, &token, &["sessions", "list", "--json"]);
    assert_eq!(code, 0);
    assert!(serde_json::from_str::<Value>(&out).unwrap()["sessions"].is_array());
}

/// A TCP proxy to `upstream` whose open connections are all cut when `cut` fires.
async fn proxy(upstream: String) -> (String, broadcast::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (cut, _) = broadcast::channel::<()>(4);
    let cuts = cut.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let mut cut = cuts.subscribe();
            tokio::spawn(async move {
                let mut outbound = TcpStream::connect(&upstream).await.unwrap();
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = cut.recv() => {
                        let _ = inbound.shutdown().await;
                    }
                }
            });
        }
    });
    (addr, cut)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_stream_cut_mid_way_resumes_and_prints_every_chunk_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, None, &[]);
    let (via, cut) = proxy(server.base.clone()).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args([
            "call",
            "cap:demo:count",
            "--mode",
            "streaming",
            "--input",
            r#"{"n": 40, "interval_ms": 40}"#,
        ])
        .env("AIP_URL", format!("http://{via}"))
        .env("AIP_TOKEN_FILE", data.join("admin.token"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, mut lines_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines_tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    // Cut every connection twice, once after 5 chunks and once after 15.
    while let Some(line) = lines_rx.recv().await {
        lines.push(line);
        if lines.len() == 5 || lines.len() == 15 {
            cut.send(()).unwrap();
        }
    }
    let status = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8(status.stderr).unwrap();
    assert!(status.status.success(), "{stderr}");
    assert!(stderr.matches("resuming").count() >= 2, "{stderr}");
    let data_lines: Vec<Value> = lines
        .iter()
        .filter(|l| l.starts_with("{\"i\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<u64> = data_lines
        .iter()
        .map(|v| v["i"].as_u64().unwrap())
        .collect();
    assert_eq!(seen, (1..=40).collect::<Vec<_>>(), "{lines:?}");
    let tail = lines[lines.iter().position(|l| l == "{").unwrap()..].join("\n");
    assert_eq!(
        serde_json::from_str::<Value>(&tail).unwrap(),
        json!({ "count": 40 })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_feed_cut_mid_way_resumes_without_losing_or_repeating_an_event() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, None, &[]);
    let admin = server.admin();
    let (via, cut) = proxy(server.base.clone()).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["events", "--follow"])
        .env("AIP_URL", format!("http://{via}"))
        .env("AIP_TOKEN_FILE", data.join("admin.token"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, mut lines_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let echo = |n: usize| {
        let admin = &admin;
        async move {
            let action_id = format!("act_feed_{n}_{}", std::process::id());
            let (status, reply) = admin
                .act(json!({ "id": action_id, "capability_id": "cap:demo:echo", "input": { "n": n } }))
                .await;
            assert_eq!(status, 200, "{reply}");
            action_id
        }
    };
    let mut ids = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    for n in 0..3 {
        ids.push(echo(n).await);
    }
    wait_for(&mut lines_rx, &mut lines, &ids[2]).await;
    cut.send(()).unwrap();
    for n in 3..6 {
        ids.push(echo(n).await);
    }
    wait_for(&mut lines_rx, &mut lines, &ids[5]).await;
    let _ = child.kill();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("resuming"), "{stderr}");
    for action in &ids {
        let completed = lines
            .iter()
            .filter(|l| l.contains("aip.action.completed") && l.contains(action.as_str()))
            .count();
        assert_eq!(completed, 1, "{action}: {lines:#?}");
    }
    let mut seen = std::collections::HashSet::new();
    for line in &lines {
        assert!(seen.insert(line.clone()), "printed twice: {line}");
    }
}

/// Reads feed lines into `lines` until `action`'s completion is among them (bounded wait).
async fn wait_for(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    lines: &mut Vec<String>,
    action: &str,
) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while !lines
        .iter()
        .any(|l| l.contains("aip.action.completed") && l.contains(action))
    {
        let line = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("the feed went quiet")
            .expect("aip events exited");
        lines.push(line);
    }
}

#[test]
fn every_client_command_has_help_with_an_example() {
    for command in [
        &["call"][..],
        &["actions", "list"],
        &["actions", "show"],
        &["actions", "cancel"],
        &["events"],
        &["manifest"],
        &["sessions", "list"],
        &["approvals", "list"],
        &["approvals", "show"],
        &["approvals", "approve"],
        &["approvals", "deny"],
        &["approvals", "revoke"],
        &["escalations", "list"],
        &["escalations", "show"],
        &["escalations", "resolve"],
        &["transactions", "show"],
        &["transactions", "dry-run"],
        &["transactions", "plan"],
        &["transactions", "commit"],
        &["transactions", "reconcile"],
        &["transactions", "compensate"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_aip"))
            .args(command)
            .arg("--help")
            .output()
            .unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{command:?}");
        assert!(
            help.contains("Example") && help.contains("--token-file") && help.contains("--json"),
            "{command:?}: {help}"
        );
    }
}
