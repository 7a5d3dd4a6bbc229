//! The web console in a real browser (spec 12.4, 18.2): Debian's chromium driven by Playwright for
//! Python (`tests/browser/console_test.py`, pinned in `.ci/run`), against the real binary. Signs
//! in, approves a pending transfer as its second approver, watches it complete, verifies its
//! receipts in the browser, sees a tampered chain flagged and an outsider's empty inbox, with
//! axe-core checks on each page. Screenshots land in `target/console-screenshots/`. Without the
//! browser tools this prints a notice and skips; under `CI=true` it fails.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use support::{Server, id, token_file};

const CHROMIUM: &str = "/usr/lib/chromium/chromium";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The browser tools, or why they are missing.
fn tools() -> Result<(PathBuf, PathBuf), String> {
    let python = workspace().join("target/interop-venv/bin/python");
    let axe = workspace().join("target/interop-node/node_modules/axe-core/axe.min.js");
    for (path, what) in [
        (
            python.as_path(),
            "the Playwright venv (target/interop-venv)",
        ),
        (axe.as_path(), "axe-core (target/interop-node)"),
        (Path::new(CHROMIUM), "Debian's chromium"),
    ] {
        if !path.exists() {
            return Err(format!(
                "{what} is not installed ({}); .ci/run installs it",
                path.display()
            ));
        }
    }
    Ok((python, axe))
}

/// Alters one stored receipt of `action_id` behind the server's back (the receipts table refuses
/// updates, so its guards are dropped first): a test fixture for a tampered chain.
fn tamper(db: &Path, action_id: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let triggers: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'aip_receipts'",
        )
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for trigger in triggers {
        conn.execute_batch(&format!("DROP TRIGGER {trigger}"))
            .unwrap();
    }
    let n = conn
        .execute(
            "UPDATE aip_receipts SET body = json_set(body, '$.data.tampered', 1) \
             WHERE chain_id = ?1 AND position = 2",
            [action_id],
        )
        .unwrap();
    assert_eq!(n, 1, "no receipt to tamper with");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_signs_in_approves_follows_the_action_and_checks_receipts_in_chromium() {
    let (python, axe) = match tools() {
        Ok(t) => t,
        Err(why) => {
            support::skip_or_fail(&format!("console browser test: {why}"));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let outsider = "outsider-token-0123456789abcdef";
    let outsider_file = token_file(dir.path(), "outsider.token", outsider);
    let exporter = "exporter-token-0123456789abcdef";
    let exporter_file = token_file(dir.path(), "exporter.token", exporter);
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "console = true\n\n[[principals]]\nid = \"outsider\"\nkind = \"human\"\ntenant = \"default\"\nscopes = [\"invoke:cap:demo:echo\"]\ntoken_file = \"{}\"\n\n\
             [[principals]]\nid = \"exporter\"\nkind = \"human\"\ntenant = \"default\"\nroles = [\"approver\"]\n\
             scopes = [\"invoke:cap:demo:*\", \"approval:export\", \"approval:sensitive\"]\ntoken_file = \"{}\"\n",
            outsider_file.display(),
            exporter_file.display()
        ),
    )
    .unwrap();
    let server = Server::start(&data, Some(&config), &[]);
    let admin = server.admin();
    // The console is served with its CSP; the API behind it still needs a token.
    let page = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("http://{}/console/", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(server.anonymous().get("/aip/v1/approvals").await.0, 401);

    // A large transfer: approver-1 approves over the API; the console's user is the second.
    let action_id = id("act_");
    let (status, reply) = admin
        .act(
            json!({ "id": action_id, "capability_id": "cap:demo:transfer", "mode": "async",
                     "input": { "amount_minor": 250000, "to": "acct:bob" } }),
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    let approval = reply["extensions"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = server.client(
        std::fs::read_to_string(data.join("approver-1.token"))
            .unwrap()
            .trim(),
    );
    let (status, reply) = first
        .post(
            &format!("/aip/v1/approvals/{approval}/decision"),
            &json!({ "decision": "approved" }),
        )
        .await;
    assert_eq!(
        (status, &reply["status"]),
        (200, &json!("pending")),
        "{reply}"
    );
    // A completed action whose stored chain is then altered.
    let tampered = id("act_");
    let (status, reply) = server
        .client(
            std::fs::read_to_string(data.join("approver-2.token"))
                .unwrap()
                .trim(),
        )
        .act(
            json!({ "id": tampered, "capability_id": "cap:demo:transfer", "mode": "async",
                     "input": { "amount_minor": 100, "to": "acct:carol" } }),
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    let small = reply["extensions"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    first
        .post(
            &format!("/aip/v1/approvals/{small}/decision"),
            &json!({ "decision": "approved" }),
        )
        .await;
    server
        .client(
            std::fs::read_to_string(data.join("approver-2.token"))
                .unwrap()
                .trim(),
        )
        .wait_terminal(&tampered)
        .await;
    tamper(&data.join("aip.sqlite"), &tampered);
    // A transfer the console's user requested itself: its approve is refused (separation of duties).
    let own = id("act_");
    let (status, reply) = server
        .client(
            std::fs::read_to_string(data.join("approver-2.token"))
                .unwrap()
                .trim(),
        )
        .act(
            json!({ "id": own, "capability_id": "cap:demo:transfer", "mode": "async",
                     "input": { "amount_minor": 100, "to": "acct:dave" } }),
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    let own_approval = reply["extensions"]["approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let shots = workspace().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let second = std::fs::read_to_string(data.join("approver-2.token")).unwrap();
    let out = Command::new(python)
        .arg(workspace().join("tests/browser/console_test.py"))
        .args(["--url", &format!("http://{}", server.base)])
        .args([
            "--approver",
            second.trim(),
            "--outsider",
            outsider,
            "--exporter",
            exporter,
        ])
        .args(["--requester", &server.admin_token])
        .args([
            "--approval",
            &approval,
            "--action",
            &action_id,
            "--tampered",
            &tampered,
        ])
        .args(["--own-approval", &own_approval])
        .arg("--axe")
        .arg(&axe)
        .arg("--shots")
        .arg(&shots)
        .env("PLAYWRIGHT_BROWSERS_PATH", "/nonexistent")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("console: all steps passed"), "{stdout}");
    for shot in [
        "signin",
        "approvals",
        "action",
        "receipts",
        "tampered",
        "actions",
    ] {
        assert!(
            shots.join(format!("{shot}.png")).exists(),
            "{shot}.png missing"
        );
    }
    // The decision went through the normal API: the transfer ran once.
    let done = admin.wait_terminal(&action_id).await;
    assert_eq!(done["state"], "completed", "{done}");
}

#[tokio::test]
async fn the_console_is_on_for_the_no_config_demo_and_off_once_a_config_file_does_not_ask_for_it() {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let demo = Server::start(&dir.path().join("demo"), None, &[]);
    let page = http
        .get(format!("http://{}/console/", demo.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    let script = http
        .get(format!("http://{}/console/app.js", demo.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        script.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    // A cross-site page may not drive the API from a browser, even with a token.
    let foreign = http
        .post(format!("http://{}/aip/v1/approvals/x/decision", demo.base))
        .header("origin", "http://evil.example")
        .bearer_auth(&demo.admin_token)
        .json(&json!({ "decision": "approved" }))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    drop(demo);

    let config = dir.path().join("aip.toml");
    std::fs::write(&config, "demo_capabilities = true\n").unwrap();
    let configured = Server::start(&dir.path().join("configured"), Some(&config), &[]);
    let page = http
        .get(format!("http://{}/console/", configured.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 401, "the console must be off");
}

/// A TCP proxy to `upstream` that cuts every connection open longer than 500 ms each time `cut`
/// fires (short page reads pass; long-lived streams are cut). Returns its address, the trigger and
/// the count of connections it cut.
async fn cutting_proxy(
    upstream: String,
) -> (
    String,
    tokio::sync::broadcast::Sender<()>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::Ordering;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (cut, _) = tokio::sync::broadcast::channel::<()>(8);
    let cuts = cut.clone();
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&killed);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let mut cut = cuts.subscribe();
            let counter = std::sync::Arc::clone(&counter);
            tokio::spawn(async move {
                let opened = std::time::Instant::now();
                let mut outbound = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                let copy = tokio::io::copy_bidirectional(&mut inbound, &mut outbound);
                tokio::pin!(copy);
                loop {
                    tokio::select! {
                        _ = &mut copy => return,
                        _ = cut.recv() => {
                            if opened.elapsed() > std::time::Duration::from_millis(500) {
                                counter.fetch_add(1, Ordering::Relaxed);
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    (addr, cut, killed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consoles_live_stream_resumes_across_cut_connections_with_every_chunk_once() {
    let (python, _) = match tools() {
        Ok(t) => t,
        Err(why) => {
            support::skip_or_fail(&format!("console browser test: {why}"));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let (via, cut, killed) = cutting_proxy(server.base.clone()).await;
    let action_id = id("act_");
    let (status, reply) = server
        .admin()
        .act(
            json!({ "id": action_id, "capability_id": "cap:demo:count", "mode": "streaming",
                     "input": { "n": 60, "interval_ms": 120 } }),
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    // Cuts every 700 ms while the browser runs (bounded), so a slow browser start under load
    // still meets a live stream to cut.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cutter = tokio::spawn({
        let done = std::sync::Arc::clone(&done);
        async move {
            for _ in 0..40 {
                tokio::time::sleep(std::time::Duration::from_millis(700)).await;
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let _ = cut.send(());
            }
        }
    });
    let shots = workspace().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let child = tokio::process::Command::new(python)
        .arg(workspace().join("tests/browser/console_test.py"))
        .args(["--stream-only", "--url", &format!("http://{via}")])
        .args(["--requester", &server.admin_token, "--action", &action_id])
        .arg("--shots")
        .arg(&shots)
        .env("PLAYWRIGHT_BROWSERS_PATH", "/nonexistent")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    let status = out.status;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    cutter.await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("stream followed across cuts"), "{stdout}");
    assert!(
        killed.load(std::sync::atomic::Ordering::Relaxed) >= 1,
        "no stream was cut: the test proved nothing"
    );
}
