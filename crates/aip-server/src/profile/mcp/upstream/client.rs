//! A minimal MCP client for upstream servers (the reverse direction of the profile): JSON-RPC over
//! a child process's stdio (newline-delimited) or over Streamable HTTP (JSON or SSE answers). It
//! negotiates with `initialize`, answers the server's `ping`, refuses its other requests, bounds
//! every message and wait, and reconnects (restarting the process) with backoff after a failure.
//! The server's progress and log notifications during a request reach that request's listener
//! (see [`Upstream::listen`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, oneshot};

/// Longest message accepted from an upstream, bytes.
const MAX_MESSAGE: usize = 8 * 1024 * 1024;
/// Longest wait for `initialize` and `tools/list`.
const SETUP_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest pause between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The version this client asks for (structured output; no tasks).
const PROTOCOL_VERSION: &str = "2025-06-18";
/// Versions this client understands in the server's answer.
const UNDERSTOOD: [&str; 3] = ["2025-06-18", "2025-03-26", "2025-11-25"];

/// Where an upstream server is.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// A process started and supervised by `aip serve`.
    Stdio {
        /// Program.
        command: String,
        /// Arguments.
        args: Vec<String>,
        /// Extra environment (the process otherwise inherits none but `PATH` and `HOME`).
        env: Vec<(String, String)>,
        /// Working directory.
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The MCP URL.
        url: String,
        /// Bearer token sent with every request.
        bearer: Option<String>,
    },
}

/// What went wrong talking to an upstream.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpstreamError {
    /// Not connected (the process is down or the URL unreachable); nothing was sent.
    #[error("upstream unavailable: {0}")]
    Unavailable(String),
    /// The connection failed after the request was sent: the outcome is unknown.
    #[error("upstream connection lost: {0}")]
    Lost(String),
    /// No answer in time.
    #[error("upstream did not answer in time")]
    Timeout,
    /// The upstream answered with a JSON-RPC error.
    #[error("upstream error {code}: {message}")]
    Rpc {
        /// JSON-RPC code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// The upstream answered something that is not MCP.
    #[error("upstream protocol error: {0}")]
    Protocol(String),
}

type Pending = Arc<std::sync::Mutex<HashMap<u64, oneshot::Sender<Result<Value, UpstreamError>>>>>;

/// Where the notifications of a request in flight go, by request id.
type Listeners = Arc<std::sync::Mutex<HashMap<u64, tokio::sync::mpsc::Sender<Value>>>>;

/// Notifications queued for one request before more are dropped.
const LISTENER_QUEUE: usize = 64;

/// Hands a server notification or request to the request it belongs to: a progress notification
/// by its token (the request id, as this client sends it); a log message, a sampling or an
/// elicitation request to `request` (the HTTP stream it came on) or, over stdio where messages
/// name no request, to the only request in flight. Anything else, or a full queue, is dropped
/// (logged). Whether it was delivered.
fn route(listeners: &Listeners, message: &Value, request: Option<u64>) -> bool {
    let method = message.get("method").and_then(Value::as_str);
    let params = message.get("params");
    let listeners = listeners
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let target = match method {
        Some("notifications/progress") => params
            .and_then(|p| p.get("progressToken"))
            .and_then(Value::as_u64)
            .and_then(|id| listeners.get(&id)),
        Some("notifications/message" | "sampling/createMessage" | "elicitation/create") => {
            match request {
                Some(id) => listeners.get(&id),
                None if listeners.len() == 1 => listeners.values().next(),
                None => None,
            }
        }
        _ => None,
    };
    match target {
        Some(tx) if tx.try_send(message.clone()).is_err() => {
            tracing::debug!("an upstream notification was dropped (its listener is full or gone)");
            false
        }
        Some(_) => true,
        None if method == Some("notifications/message") => {
            let text = params.map(|p| p.to_string()).unwrap_or_default();
            tracing::info!(message = %text, "upstream log message");
            false
        }
        None => false,
    }
}

/// One live connection. Built once per (re)connection and shared behind an `Arc`: the variants'
/// sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Connection {
    Stdio {
        stdin: Mutex<tokio::process::ChildStdin>,
        pending: Pending,
        alive: Arc<AtomicBool>,
        // Held so the process ends with the connection (kill_on_drop).
        _child: Mutex<tokio::process::Child>,
    },
    Http {
        client: reqwest::Client,
        url: String,
        bearer: Option<String>,
        session: Option<String>,
        version: String,
        alive: AtomicBool,
    },
}

/// An upstream MCP server: its endpoint and, when up, its connection.
pub struct Upstream {
    /// Configured name (for messages).
    pub name: String,
    endpoint: Endpoint,
    connection: Mutex<Option<Arc<Connection>>>,
    next_id: AtomicU64,
    retry: std::sync::Mutex<(u32, Option<Instant>)>,
    listeners: Listeners,
}

impl Upstream {
    /// An upstream not connected yet.
    pub fn new(name: String, endpoint: Endpoint) -> Arc<Self> {
        Arc::new(Self {
            name,
            endpoint,
            connection: Mutex::new(None),
            next_id: AtomicU64::new(1),
            retry: std::sync::Mutex::new((0, None)),
            listeners: Arc::default(),
        })
    }

    /// Receives the server's progress and log notifications for request `id` until
    /// [`Upstream::unlisten`] (bounded: a slow reader loses notifications, never the request).
    pub fn listen(&self, id: u64) -> tokio::sync::mpsc::Receiver<Value> {
        let (tx, rx) = tokio::sync::mpsc::channel(LISTENER_QUEUE);
        self.listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, tx);
        rx
    }

    /// Answers the server's request `id` (sampling, elicitation) on the live connection.
    pub async fn respond(&self, id: Value, outcome: Result<Value, (i64, String)>) {
        let message = match outcome {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err((code, message)) => {
                json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
            }
        };
        let connection = self.connection.lock().await.clone();
        let sent = match connection.as_deref() {
            Some(connection) => post(connection, &message).await.map_err(|e| e.to_string()),
            None => Err("not connected".into()),
        };
        if let Err(e) = sent {
            tracing::warn!(upstream = %self.name, error = %e, "an answer to the upstream was not sent");
        }
    }

    /// Stops [`Upstream::listen`] for request `id`.
    pub fn unlisten(&self, id: u64) {
        self.listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
    }

    /// Every tool the server lists (following `nextCursor`, at most 1000 tools).
    pub async fn list_tools(&self) -> Result<Vec<Value>, UpstreamError> {
        self.list_all("tools/list", "tools").await
    }

    /// Every resource the server lists (following `nextCursor`, at most 1000).
    pub async fn list_resources(&self) -> Result<Vec<Value>, UpstreamError> {
        self.list_all("resources/list", "resources").await
    }

    async fn list_all(&self, method: &str, member: &str) -> Result<Vec<Value>, UpstreamError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..20 {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let page = self.request(method, params, SETUP_TIMEOUT).await?;
            if let Some(list) = page.get(member).and_then(Value::as_array) {
                tools.extend(list.iter().cloned());
            }
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() || tools.len() >= 1000 {
                break;
            }
        }
        Ok(tools)
    }

    /// One request; connects first when needed.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, UpstreamError> {
        let id = self.reserve_id();
        self.request_as(id, method, params, timeout).await
    }

    /// A fresh request id (so a caller can cancel the request it is about to send).
    pub fn reserve_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// [`Upstream::request`] under a reserved id.
    pub async fn request_as(
        &self,
        id: u64,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, UpstreamError> {
        let connection = self.connected().await?;
        let outcome = tokio::time::timeout(
            timeout,
            send(&connection, id, method, params, &self.listeners),
        )
        .await;
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                if matches!(err, UpstreamError::Lost(_) | UpstreamError::Unavailable(_)) {
                    self.drop_connection(&connection).await;
                }
                Err(err)
            }
            Err(_) => {
                // Tell the server to stop; it may still have acted.
                let note = json!({ "requestId": id, "reason": "timed out" });
                let _ = notify(&connection, "notifications/cancelled", note).await;
                Err(UpstreamError::Timeout)
            }
        }
    }

    /// Asks the server to stop request `id` (`notifications/cancelled`).
    pub async fn cancel(&self, id: u64, reason: &str) {
        let connection = self.connection.lock().await.clone();
        if let Some(connection) = connection {
            let note = json!({ "requestId": id, "reason": reason });
            let _ = notify(&connection, "notifications/cancelled", note).await;
        }
    }

    async fn drop_connection(&self, failed: &Arc<Connection>) {
        let mut slot = self.connection.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, failed)) {
            *slot = None;
        }
    }

    /// The live connection, (re)connecting with backoff.
    async fn connected(&self) -> Result<Arc<Connection>, UpstreamError> {
        let mut slot = self.connection.lock().await;
        if let Some(c) = slot.as_ref() {
            let alive = match c.as_ref() {
                Connection::Stdio { alive, .. } => alive.load(Ordering::Acquire),
                Connection::Http { alive, .. } => alive.load(Ordering::Acquire),
            };
            if alive {
                return Ok(Arc::clone(c));
            }
            *slot = None;
        }
        {
            let retry = self
                .retry
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(at) = retry.1
                && Instant::now() < at
            {
                return Err(UpstreamError::Unavailable(format!(
                    "{} is restarting (attempt {})",
                    self.name, retry.0
                )));
            }
        }
        match self.connect().await {
            Ok(c) => {
                *self
                    .retry
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = (0, None);
                *slot = Some(Arc::clone(&c));
                Ok(c)
            }
            Err(err) => {
                let mut retry = self
                    .retry
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                retry.0 = retry.0.saturating_add(1);
                let wait = Duration::from_millis(500u64.saturating_mul(1 << retry.0.min(6)))
                    .min(MAX_BACKOFF);
                retry.1 = Some(Instant::now() + wait);
                tracing::warn!(upstream = %self.name, error = %err, "MCP upstream connection failed; retrying after backoff");
                Err(UpstreamError::Unavailable(err.to_string()))
            }
        }
    }

    async fn connect(&self) -> Result<Arc<Connection>, UpstreamError> {
        let initialize = json!({
            "protocolVersion": PROTOCOL_VERSION,
            // Relayed to the calling /mcp client when it answers them (else refused per request).
            "capabilities": { "sampling": {}, "elicitation": {} },
            "clientInfo": { "name": "aip", "version": env!("CARGO_PKG_VERSION") },
        });
        match &self.endpoint {
            Endpoint::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args)
                    .env_clear()
                    .envs(std::env::vars().filter(|(k, _)| k == "PATH" || k == "HOME"))
                    .envs(env.iter().cloned())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                let mut child = cmd
                    .spawn()
                    .map_err(|e| UpstreamError::Unavailable(format!("{command}: {e}")))?;
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    return Err(UpstreamError::Unavailable("no stdio pipes".into()));
                };
                if let Some(stderr) = child.stderr.take() {
                    tokio::spawn(log_stderr(self.name.clone(), stderr));
                }
                let pending: Pending = Arc::default();
                let alive = Arc::new(AtomicBool::new(true));
                let connection = Arc::new(Connection::Stdio {
                    stdin: Mutex::new(stdin),
                    pending: Arc::clone(&pending),
                    alive: Arc::clone(&alive),
                    _child: Mutex::new(child),
                });
                tokio::spawn(read_stdio(
                    stdout,
                    Arc::downgrade(&connection),
                    (pending, Arc::clone(&self.listeners)),
                    alive,
                ));
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                let answer = tokio::time::timeout(
                    SETUP_TIMEOUT,
                    send(&connection, id, "initialize", initialize, &self.listeners),
                )
                .await
                .map_err(|_| UpstreamError::Timeout)??;
                check_version(&answer)?;
                notify(&connection, "notifications/initialized", json!({})).await?;
                Ok(connection)
            }
            Endpoint::Http { url, bearer } => {
                let client = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| UpstreamError::Unavailable(e.to_string()))?;
                let first = Connection::Http {
                    client: client.clone(),
                    url: url.clone(),
                    bearer: bearer.clone(),
                    session: None,
                    version: PROTOCOL_VERSION.into(),
                    alive: AtomicBool::new(true),
                };
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                let (answer, session) = tokio::time::timeout(
                    SETUP_TIMEOUT,
                    http_exchange(&first, &rpc(id, "initialize", initialize), None),
                )
                .await
                .map_err(|_| UpstreamError::Timeout)??;
                let answer =
                    answer.ok_or_else(|| UpstreamError::Protocol("no initialize result".into()))?;
                let answer = result_of(answer, id)?;
                let version = check_version(&answer)?;
                let connection = Arc::new(Connection::Http {
                    client,
                    url: url.clone(),
                    bearer: bearer.clone(),
                    session,
                    version,
                    alive: AtomicBool::new(true),
                });
                notify(&connection, "notifications/initialized", json!({})).await?;
                Ok(connection)
            }
        }
    }
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

fn check_version(answer: &Value) -> Result<String, UpstreamError> {
    let version = answer
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if UNDERSTOOD.contains(&version) {
        Ok(version.to_owned())
    } else {
        Err(UpstreamError::Protocol(format!(
            "the server speaks MCP {version:?}"
        )))
    }
}

/// A response's result, or its error.
fn result_of(message: Value, id: u64) -> Result<Value, UpstreamError> {
    if message.get("id").and_then(Value::as_u64) != Some(id) {
        return Err(UpstreamError::Protocol(
            "a response to another request".into(),
        ));
    }
    if let Some(error) = message.get("error") {
        let (code, message) = super::super::rpc::error_parts(error, 0);
        return Err(UpstreamError::Rpc { code, message });
    }
    message
        .get("result")
        .cloned()
        .ok_or_else(|| UpstreamError::Protocol("a response without result".into()))
}

async fn send(
    connection: &Connection,
    id: u64,
    method: &str,
    params: Value,
    listeners: &Listeners,
) -> Result<Value, UpstreamError> {
    let message = rpc(id, method, params);
    match connection {
        Connection::Stdio {
            stdin,
            pending,
            alive,
            ..
        } => {
            if !alive.load(Ordering::Acquire) {
                return Err(UpstreamError::Unavailable("the process exited".into()));
            }
            let (tx, rx) = oneshot::channel();
            pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(id, tx);
            let mut line = message.to_string();
            line.push('\n');
            let written = stdin.lock().await.write_all(line.as_bytes()).await;
            if let Err(e) = written {
                pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&id);
                return Err(UpstreamError::Unavailable(e.to_string()));
            }
            match rx.await {
                Ok(answer) => answer,
                Err(_) => Err(UpstreamError::Lost("the process exited".into())),
            }
        }
        Connection::Http { .. } => {
            let (answer, _) = http_exchange(connection, &message, Some(listeners)).await?;
            let answer = answer.ok_or_else(|| UpstreamError::Protocol("no response".into()))?;
            result_of(answer, id)
        }
    }
}

async fn notify(connection: &Connection, method: &str, params: Value) -> Result<(), UpstreamError> {
    let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
    post(connection, &message).await
}

/// Sends one message that gets no answer (a notification, or our response to the server).
async fn post(connection: &Connection, message: &Value) -> Result<(), UpstreamError> {
    match connection {
        Connection::Stdio { stdin, .. } => {
            let mut line = message.to_string();
            line.push('\n');
            stdin
                .lock()
                .await
                .write_all(line.as_bytes())
                .await
                .map_err(|e| UpstreamError::Unavailable(e.to_string()))
        }
        Connection::Http { .. } => http_exchange(connection, message, None).await.map(|_| ()),
    }
}

/// POSTs one message; returns the response to it (JSON or from an SSE stream) and the session id
/// the server assigned, if any. Notifications on the stream before the response go to `listeners`.
async fn http_exchange(
    connection: &Connection,
    message: &Value,
    listeners: Option<&Listeners>,
) -> Result<(Option<Value>, Option<String>), UpstreamError> {
    let Connection::Http {
        client,
        url,
        bearer,
        session,
        version,
        alive,
    } = connection
    else {
        return Err(UpstreamError::Protocol("not an HTTP connection".into()));
    };
    let mut request = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(message.to_string());
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", version);
    }
    let response = request.send().await.map_err(|e| {
        if e.is_connect() {
            UpstreamError::Unavailable(e.to_string())
        } else {
            alive.store(false, Ordering::Release);
            UpstreamError::Lost(e.to_string())
        }
    })?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND && session.is_some() {
        // The server forgot the session: reconnect next time.
        alive.store(false, Ordering::Release);
        return Err(UpstreamError::Lost("the upstream session ended".into()));
    }
    if !status.is_success() {
        return Err(UpstreamError::Unavailable(format!("HTTP {status}")));
    }
    let assigned = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if status == reqwest::StatusCode::ACCEPTED || message.get("id").is_none() {
        return Ok((None, assigned));
    }
    let want = message.get("id").cloned();
    let mut body = Vec::new();
    let mut scanned = 0;
    let mut stream = response;
    while let Some(chunk) = stream
        .chunk()
        .await
        .map_err(|e| UpstreamError::Lost(e.to_string()))?
    {
        if body.len() + chunk.len() > MAX_MESSAGE {
            return Err(UpstreamError::Protocol("the answer is too large".into()));
        }
        body.extend_from_slice(&chunk);
        if !is_sse {
            continue;
        }
        let (events, consumed) = sse_events(&body[scanned..]);
        scanned += consumed;
        for event in events {
            if event.get("id") == want.as_ref()
                && (event.get("result").is_some() || event.get("error").is_some())
            {
                return Ok((Some(event), assigned));
            }
            if let Some(listeners) = listeners
                && event.get("method").is_some()
                && !route(listeners, &event, want.as_ref().and_then(Value::as_u64))
                && let Some(id) = event.get("id")
            {
                // A request nobody takes is refused, so the server does not wait for it.
                let refusal = json!({ "jsonrpc": "2.0", "id": id,
                    "error": { "code": -32601, "message": "not supported by this client" } });
                let _ = Box::pin(http_exchange(connection, &refusal, None)).await;
            }
        }
    }
    if is_sse {
        return Err(UpstreamError::Lost(
            "the stream ended without a response".into(),
        ));
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|_| UpstreamError::Protocol("the answer is not JSON".into()))?;
    Ok((Some(value), assigned))
}

/// The JSON messages of the complete SSE events at the start of `body`, and how many bytes those
/// events took (the rest is an event still arriving).
fn sse_events(body: &[u8]) -> (Vec<Value>, usize) {
    let mut events = Vec::new();
    let mut consumed = 0;
    loop {
        let rest = &body[consumed..];
        // An event ends at a blank line; lines may end in CRLF (SSE allows CR, LF and CRLF).
        let end = [&b"\r\n\r\n"[..], b"\n\n"]
            .iter()
            .filter_map(|sep| {
                rest.windows(sep.len())
                    .position(|w| w == *sep)
                    .map(|at| at + sep.len())
            })
            .min();
        let Some(end) = end else {
            return (events, consumed);
        };
        let event = String::from_utf8_lossy(&rest[..end]);
        let data: String = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect::<Vec<_>>()
            .join("\n");
        if let Ok(value) = serde_json::from_str::<Value>(&data) {
            events.push(value);
        }
        consumed += end;
    }
}

/// The process's stderr as log lines (each cut at 4 KiB), so its output stays in `aip serve`'s log.
async fn log_stderr(name: String, stderr: tokio::process::ChildStderr) {
    let mut reader = BufReader::new(stderr);
    loop {
        let mut line = Vec::new();
        match (&mut reader).take(4096).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                tracing::info!(upstream = %name, "{}", text.trim_end());
            }
        }
    }
}

/// Reads the process's stdout: responses to their waiters, `ping` answered, other server requests
/// refused. At the end (exit, oversized or broken output) every waiter learns the connection is lost.
async fn read_stdio(
    stdout: tokio::process::ChildStdout,
    connection: std::sync::Weak<Connection>,
    (pending, listeners): (Pending, Listeners),
    alive: Arc<AtomicBool>,
) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        let read = (&mut reader)
            .take(MAX_MESSAGE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) if line.len() > MAX_MESSAGE => break,
            Ok(_) => {}
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let id = message.get("id").cloned();
        match (message.get("method").and_then(Value::as_str), id) {
            // A request of the server for the calling client: relayed by the call it belongs to.
            (Some(_), Some(_)) if route(&listeners, &message, None) => {}
            // Another request from the server.
            (Some(method), Some(id)) => {
                let answer = if method == "ping" {
                    json!({ "jsonrpc": "2.0", "id": id, "result": {} })
                } else {
                    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": "not supported by this client" } })
                };
                if let Some(Connection::Stdio { stdin, .. }) = connection.upgrade().as_deref() {
                    let mut text = answer.to_string();
                    text.push('\n');
                    let _ = stdin.lock().await.write_all(text.as_bytes()).await;
                }
            }
            // A notification: to the request it belongs to, if any.
            (Some(_), None) => {
                route(&listeners, &message, None);
            }
            (None, Some(Value::Number(n))) => {
                let waiter = n.as_u64().and_then(|n| {
                    pending
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(&n)
                });
                if let (Some(waiter), Some(n)) = (waiter, n.as_u64()) {
                    let _ = waiter.send(result_of(message, n));
                }
            }
            _ => {}
        }
    }
    alive.store(false, Ordering::Release);
    let waiters: Vec<_> = pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .drain()
        .collect();
    for (_, waiter) in waiters {
        let _ = waiter.send(Err(UpstreamError::Lost("the process exited".into())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_complete_sse_events_are_read_and_the_rest_waits() {
        let body = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n";
        let (events, consumed) = sse_events(body);
        assert_eq!(events.len(), 2);
        assert_eq!(events[1], json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
        assert_eq!(consumed, body.len());
        let (events, consumed) = sse_events(&body[..body.len() - 1]);
        assert_eq!(events.len(), 1);
        assert!(consumed < body.len() - 1);
        let crlf = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n";
        assert_eq!(sse_events(crlf).0.len(), 1);
    }

    #[test]
    fn notifications_reach_the_request_they_belong_to() {
        let listeners: Listeners = Arc::default();
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        listeners.lock().unwrap().insert(7, tx);
        let progress = json!({"method": "notifications/progress", "params": {"progressToken": 7, "progress": 1}});
        route(&listeners, &progress, None);
        route(
            &listeners,
            &json!({"method": "notifications/progress", "params": {"progressToken": 8}}),
            None,
        );
        let log =
            json!({"method": "notifications/message", "params": {"level": "info", "data": "x"}});
        // Over stdio a log message goes to the only request in flight.
        route(&listeners, &log, None);
        assert_eq!(rx.try_recv().unwrap(), progress);
        assert_eq!(rx.try_recv().unwrap(), log);
        assert!(rx.try_recv().is_err());
        let (tx2, mut rx2) = tokio::sync::mpsc::channel(4);
        listeners.lock().unwrap().insert(9, tx2);
        // Two in flight: a message naming no request reaches neither; one from request 9's stream does.
        route(&listeners, &log, None);
        route(&listeners, &log, Some(9));
        assert!(rx.try_recv().is_err());
        assert_eq!(rx2.try_recv().unwrap(), log);
    }
}
