//! Starts the real `aip serve` binary and talks to it as a client.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

pub mod a2a;
pub mod mcp;
pub mod nats;
pub mod peers;
pub mod webhook;
pub mod ws;

/// A running `aip serve` child process; killed on drop.
pub struct Server {
    pub child: Child,
    pub base: String,
    pub admin_token: String,
    pub data_dir: PathBuf,
    /// What the process printed on stdout after it started (the drain report, ...).
    pub stdout: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    /// Start on a free port with `data_dir`, an optional config file and extra environment.
    pub fn start(data_dir: &Path, config: Option<&Path>, env: &[(&str, &str)]) -> Self {
        Self::start_with_flags(data_dir, config, env, &[])
    }

    /// [`Server::start`] with extra `aip serve` flags (e.g. `--insecure-dev`).
    pub fn start_with_flags(
        data_dir: &Path,
        config: Option<&Path>,
        env: &[(&str, &str)],
        flags: &[&str],
    ) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aip"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(flags);
        if let Some(config) = config {
            cmd.arg("--config").arg(config);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Self::from_child(child, data_dir)
    }

    /// Wait for a spawned `aip serve` (stdout piped) to report its address, then read its admin token.
    pub fn from_child(mut child: Child, data_dir: &Path) -> Self {
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut addr = None;
        for line in lines.by_ref() {
            let line = line.unwrap();
            assert!(
                !line.contains("aip_"),
                "stdout must never carry the token: {line}"
            );
            if let Some(rest) = line.split("listening on http://").nth(1) {
                addr = Some(rest.trim().to_owned());
            }
            if line.contains("data in") {
                break;
            }
        }
        let stdout = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let printed = std::sync::Arc::clone(&stdout);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                printed.lock().unwrap().push(line);
            }
        });
        let base = addr.expect("aip serve did not report its address");
        let admin_token = std::fs::read_to_string(data_dir.join("admin.token"))
            .unwrap()
            .trim()
            .to_owned();
        Self {
            child,
            base,
            admin_token,
            data_dir: data_dir.to_path_buf(),
            stdout,
        }
    }

    /// A client authenticated with `token`.
    pub fn client(&self, token: &str) -> Client {
        Client {
            base: self.base.clone(),
            token: Some(token.to_owned()),
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
        }
    }

    /// The admin client.
    pub fn admin(&self) -> Client {
        self.client(&self.admin_token.clone())
    }

    /// A client without credentials.
    pub fn anonymous(&self) -> Client {
        Client {
            base: self.base.clone(),
            token: None,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
        }
    }

    /// SIGKILL, no cleanup: the crash of the crash test.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An HTTP client for one principal.
pub struct Client {
    pub base: String,
    pub token: Option<String>,
    pub http: reqwest::Client,
}

impl Client {
    fn auth(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// GET a path; returns (status, JSON body).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .auth(self.http.get(format!("http://{}{path}", self.base)))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// GET a path as text (`/metrics`); panics unless it answers 200.
    pub async fn get_text(&self, path: &str) -> String {
        let r = self
            .auth(self.http.get(format!("http://{}{path}", self.base)))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.text().await.unwrap()
    }

    /// POST an envelope to a path; returns (status, JSON body).
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .auth(self.http.post(format!("http://{}{path}", self.base)))
            .header("content-type", "application/aip+json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Submit one action envelope to `/aip/v1/actions`.
    pub async fn act(&self, action: Value) -> (u16, Value) {
        self.post(
            "/aip/v1/actions",
            &envelope("aip.core.v1.action", json!({ "action": action })),
        )
        .await
    }

    /// Poll an action until it is terminal (bounded waits of the API, at most ~30 s in total).
    pub async fn wait_terminal(&self, action_id: &str) -> Value {
        let mut last = Value::Null;
        for _ in 0..6 {
            let (status, view) = self
                .get(&format!(
                    "/aip/v1/actions/{action_id}?include_result=true&wait_ms=5000"
                ))
                .await;
            assert_eq!(status, 200, "{view}");
            if [
                "completed",
                "failed",
                "cancelled",
                "expired",
                "dead_lettered",
            ]
            .contains(&view["state"].as_str().unwrap())
            {
                return view;
            }
            last = view;
        }
        panic!("action {action_id} did not reach a terminal state: {last}");
    }

    /// The kinds of an action's events, in order.
    pub async fn event_kinds(&self, action_id: &str) -> Vec<String> {
        let (status, events) = self
            .get(&format!("/aip/v1/actions/{action_id}/events"))
            .await;
        assert_eq!(status, 200, "{events}");
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// A fresh unique id with `prefix`.
pub fn id(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}{:x}{}{}",
        nanos,
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// An envelope carrying `body`.
pub fn envelope(message_type: &str, body: Value) -> Value {
    json!({
        "aip_version": "1.0",
        "message_type": message_type,
        "message_id": id("msg_"),
        "sent_at": aip_core::Timestamp::now(),
        "body": body,
    })
}

/// Write a token file with mode 0600 and return its path.
pub fn token_file(dir: &Path, name: &str, token: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, token).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Sleep without blocking the runtime.
pub async fn pause(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// A test's service (PostgreSQL, NATS) is missing, `why`: a SKIP notice, or under `CI=true` a
/// failure, so a green CI run never hides a skipped half of the suite.
pub fn skip_or_fail(why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{why}; CI=true, so this fails instead of skipping (.ci/run sets AIP_TEST_POSTGRES_URL \
             and AIP_TEST_NATS_URL once the services' ports are open)"
        );
    }
    eprintln!("SKIP: {why}");
}

/// The repository root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The interop venv's Python (`target/interop-venv`, installed by `.ci/run`) when it holds
/// `package` at exactly `version`, or why not.
pub fn interop_python(package: &str, version: &str) -> Result<PathBuf, String> {
    let python = workspace().join("target/interop-venv/bin/python");
    let check = Command::new(&python)
        .args([
            "-c",
            &format!(
                "import importlib.metadata as m, sys; sys.exit(m.version('{package}') != '{version}')"
            ),
        ])
        .stderr(Stdio::null())
        .status();
    match check {
        Ok(s) if s.success() => Ok(python),
        _ => Err(format!(
            "{package}=={version} is not installed in {}; .ci/run installs it",
            python.display()
        )),
    }
}

/// Starts `aip serve` with `config` and expects it to refuse to start; its stderr.
pub fn serve_refused(data_dir: &Path, config: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "aip serve started with {}",
        config.display()
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs the interop script `script` (relative to the repository root) with `python` and `args`,
/// `input` as JSON on its stdin; its stdout parsed as JSON. A failing script fails the test.
pub fn run_script(python: &Path, script: &str, args: &[&str], input: &Value) -> Value {
    use std::io::Write;
    let mut child = Command::new(python)
        .arg(workspace().join(script))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{script} failed: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{script} printed no JSON ({e}): {text}"))
}

/// One parsed SSE event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub name: String,
    pub id: String,
    pub data: Value,
}

/// A minimal SSE reader over a streaming response.
pub struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    /// Reads SSE events from a streaming response.
    pub fn new(response: reqwest::Response) -> Self {
        SseReader {
            response,
            buffer: String::new(),
        }
    }

    /// The next event, or `None` when the stream ends (20 s stall bound).
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut name, mut event_id, mut data) =
                    (String::new(), String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("id:") {
                        event_id = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if name.is_empty() && data.is_empty() {
                    continue; // keep-alive comment
                }
                return Some(SseEvent {
                    name,
                    id: event_id,
                    // Not JSON (an MCP legacy `endpoint` event): the text itself.
                    data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
                });
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.response.chunk())
                .await
                .expect("stream stalled")
                .ok()??;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Events until the stream ends.
    pub async fn rest(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}

/// Runs `aip <args>` against the server at `base` as the holder of `token_file`; returns (exit code,
/// stdout, stderr).
pub fn run_cli(base: &str, token_file: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(args)
        .env("AIP_URL", format!("http://{base}"))
        .env("AIP_TOKEN_FILE", token_file)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A free TCP port on 127.0.0.1 (for a peer process the test starts), picked at random below the
/// kernel's ephemeral range (32768 and up on Linux): a port handed out by `bind(0)` is free again
/// once checked, and a test running beside this one, binding port 0 or connecting, could take it
/// before the peer binds it; ports below that range are never handed out that way.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    loop {
        // Each `RandomState` is freshly keyed: a random pick per call, per process.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let port = 20_000 + (random % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A process killed when dropped (a failing test leaks no peer process).
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Admits `n` async sleeps of `ms` and waits until each runs.
pub async fn running_sleeps(server: &Server, n: usize, ms: u64) -> Vec<String> {
    let admin = server.admin();
    let mut ids = Vec::new();
    for _ in 0..n {
        let action_id = id("act_");
        let (status, _) = admin.act(json!({ "id": action_id, "capability_id": "cap:demo:sleep", "mode": "async", "input": { "ms": ms } })).await;
        assert_eq!(status, 202);
        ids.push(action_id);
    }
    for action_id in &ids {
        for _ in 0..200 {
            let (_, view) = admin.get(&format!("/aip/v1/actions/{action_id}")).await;
            if view["state"] == "running" {
                break;
            }
            pause(10).await;
        }
    }
    ids
}
