//! What every client command shares: the server and token arguments, an authenticated HTTP client
//! of a running `aip serve` (bounded time and size), typed refusals and plain tables.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use aip_core::ErrorCode;
use clap::Args;
use serde_json::Value;

/// Longest wait for one answer from the server.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read from the server (and largest single streamed event).
const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// A stream silent this long (the server sends a heartbeat every 15 s by default) is dropped and
/// resumed.
const STREAM_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the server is and who is asking.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Base URL of a running `aip serve`.
    #[arg(long, env = "AIP_URL", default_value = "http://127.0.0.1:7700")]
    pub url: String,
    /// File holding your bearer token (for example `aip-data/approver-1.token`).
    #[arg(long, env = "AIP_TOKEN_FILE", value_name = "FILE")]
    pub token_file: PathBuf,
    /// Print the server's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs one client command `name` on a single-threaded runtime: exit 0 on success, 1 with the typed
/// code on a refusal, 2 on bad usage or an unreachable server.
pub fn run<F: Future<Output = Result<(), Failure>>>(name: &str, command: F) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("aip {name}: {err}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async move {
        match command.await {
            Ok(()) => ExitCode::SUCCESS,
            Err(Failure::Refused {
                status,
                code,
                message,
            }) => {
                eprintln!("aip {name}: refused ({status}) {code}: {message}");
                eprintln!("  what to do: {}", hint(&code).unwrap_or(by_status(status)));
                ExitCode::from(1)
            }
            Err(Failure::Usage(message)) => {
                eprintln!("aip {name}: {message}");
                ExitCode::from(2)
            }
            Err(Failure::Unreachable(why)) => {
                eprintln!("aip {name}: server unreachable: {why}");
                ExitCode::from(2)
            }
        }
    })
}

/// What to do about a typed refusal, for the codes a person can act on (spec 19.1). A code this
/// build does not know has no hint.
pub fn hint(code: &str) -> Option<&'static str> {
    Some(match ErrorCode::parse(code)? {
        ErrorCode::Unauthenticated => {
            "check --token-file (or AIP_TOKEN_FILE): the server does not know that token"
        }
        ErrorCode::NotFound => {
            "check the id; objects you may not read answer exactly like missing ones"
        }
        ErrorCode::CapabilityNotFound => "run `aip manifest` for the capabilities you may invoke",
        ErrorCode::ScopeDenied => {
            "your principal lacks the scope; ask the operator to grant it in the server's config"
        }
        ErrorCode::InvalidInput => {
            "the input does not match the capability's input schema (see `aip manifest --json`)"
        }
        ErrorCode::UnsupportedMode => {
            "pick a mode the capability supports (`aip manifest` lists them)"
        }
        ErrorCode::IdempotencyConflict => {
            "that idempotency key was used for another action: use a new key"
        }
        ErrorCode::IdempotencyKeyRequired => "this capability needs --idempotency-key",
        ErrorCode::DuplicateActionId => "that action id is taken: omit --id for a fresh one",
        ErrorCode::ApproverNotEligible => {
            "your principal holds no role, group or policy this approval accepts"
        }
        ErrorCode::SeparationOfDuties => "another principal must decide this approval",
        ErrorCode::ApprovalClosed | ErrorCode::EscalationClosed => {
            "it is already decided: `show` it to see how"
        }
        ErrorCode::PolicyHashMismatch => {
            "the governed action changed: `show` the approval again before deciding"
        }
        ErrorCode::ClockSkew => "this machine's clock is too far from the server's: fix the clock",
        ErrorCode::HostNotAllowed | ErrorCode::OriginNotAllowed => {
            "the server refuses this Host/Origin: use the address it is configured for"
        }
        _ => return None,
    })
}

/// What to do about a refusal without a specific hint, by its HTTP status class.
fn by_status(status: u16) -> &'static str {
    match status {
        401 => "check --token-file (or AIP_TOKEN_FILE)",
        403 => "your principal may not do this; ask the operator for the scope or role",
        404 => "check the id; objects you may not read answer exactly like missing ones",
        409 => {
            "it conflicts with the object's current state: `show` it and retry with what it says"
        }
        413 => "the request is larger than the server's limits.max_body_bytes",
        429 | 503 => "the server is busy or not ready: retry later",
        500..=599 => "the server failed; retry later and check its log",
        _ => "fix the request as the message says (`--help` shows each option)",
    }
}

/// Why a command did not succeed.
pub enum Failure {
    /// The server answered with a typed error.
    Refused {
        /// HTTP status.
        status: u16,
        /// The typed error code.
        code: String,
        /// The server's message.
        message: String,
    },
    /// Bad usage, an unreadable token or an unreadable answer.
    Usage(String),
    /// The server could not be reached (a restarting node is worth waiting for).
    Unreachable(String),
}

/// An authenticated client of one server.
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
    /// For event streams: no total timeout, a read timeout instead.
    streams: reqwest::Client,
}

impl Client {
    /// A client of `args.url` authenticated with the token in `args.token_file`.
    pub fn new(args: &ServerArgs) -> Result<Self, Failure> {
        let token = std::fs::read_to_string(&args.token_file)
            .map_err(|e| Failure::Usage(format!("token file {}: {e}", args.token_file.display())))?
            .trim()
            .to_owned();
        if token.is_empty() {
            return Err(Failure::Usage(format!(
                "token file {} is empty",
                args.token_file.display()
            )));
        }
        let base = args.url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::Usage(format!(
                "--url must be an http:// or https:// URL, not {base:?}"
            )));
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Failure::Usage(format!("http client: {e}")))?;
        let streams = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(STREAM_READ_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Failure::Usage(format!("http client: {e}")))?;
        Ok(Self {
            base,
            token,
            http,
            streams,
        })
    }

    /// `GET path?query`.
    pub async fn get(&self, path: &str, query: &[(String, String)]) -> Result<Value, Failure> {
        let request = self
            .http
            .get(format!("{}{path}", self.base))
            .query(query)
            .bearer_auth(&self.token);
        answer(request.send().await).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, Failure> {
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body);
        answer(request.send().await).await
    }
}

impl Client {
    /// `POST path` with an envelope (`application/aip+json`); the answer with its HTTP status.
    pub async fn post_envelope(&self, path: &str, envelope: &Value) -> Result<Value, Failure> {
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .header("content-type", "application/aip+json")
            .body(envelope.to_string());
        answer(request.send().await).await
    }

    /// Opens an event stream: `POST path` with `envelope`, or `GET path` resuming after
    /// `last_event_id`.
    pub async fn stream(
        &self,
        path: &str,
        envelope: Option<&Value>,
        last_event_id: Option<&str>,
    ) -> Result<Events, Failure> {
        let url = format!("{}{path}", self.base);
        let mut request = match envelope {
            Some(env) => self
                .streams
                .post(url)
                .header("content-type", "application/aip+json")
                .body(env.to_string()),
            None => self.streams.get(url),
        }
        .bearer_auth(&self.token)
        .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Failure::Unreachable(e.to_string()))?;
        let is_stream = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !response.status().is_success() || !is_stream {
            // A refusal (or a plain JSON answer): read it the usual way.
            let value = answer(Ok(response)).await?;
            return Err(Failure::Usage(format!(
                "expected an event stream, got {value}"
            )));
        }
        Ok(Events {
            response,
            buffer: Vec::new(),
        })
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Event name (`ack`, `chunk`, `done`, `result`, `error`, `heartbeat`, `message`).
    pub name: String,
    /// Resume cursor.
    pub id: Option<String>,
    /// The envelope it carries.
    pub data: Value,
}

/// An open event stream.
pub struct Events {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

/// Why a stream stopped before its end.
pub enum StreamEnd {
    /// The connection closed or went silent: resume with the last id.
    Dropped(String),
    /// The stream is unusable (oversized or undecodable event).
    Broken(String),
}

impl Events {
    /// The next event; `Ok(None)` when the server ended the stream.
    pub async fn next(&mut self) -> Result<Option<Event>, StreamEnd> {
        loop {
            if let Some(end) = find_event_end(&self.buffer) {
                let raw: Vec<u8> = self.buffer.drain(..end.1).collect();
                if let Some(event) = parse_event(&raw[..end.0])? {
                    return Ok(Some(event));
                }
                continue;
            }
            if self.buffer.len() > MAX_RESPONSE_BYTES {
                return Err(StreamEnd::Broken("an event larger than 8 MiB".into()));
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => self.buffer.extend_from_slice(&bytes),
                Ok(None) => return Ok(None),
                Err(e) => return Err(StreamEnd::Dropped(e.to_string())),
            }
        }
    }
}

/// The end of the first complete event in `buffer`: (length without the blank line, length with it).
fn find_event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    (0..buffer.len()).find_map(|i| {
        if buffer[i..].starts_with(b"\n\n") {
            Some((i, i + 2))
        } else if buffer[i..].starts_with(b"\r\n\r\n") {
            Some((i, i + 4))
        } else {
            None
        }
    })
}

fn parse_event(raw: &[u8]) -> Result<Option<Event>, StreamEnd> {
    let text =
        std::str::from_utf8(raw).map_err(|_| StreamEnd::Broken("an event is not UTF-8".into()))?;
    let (mut name, mut id, mut data) = (String::from("message"), None, String::new());
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            name = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    if data.is_empty() {
        // A comment or keep-alive.
        return Ok(None);
    }
    let data = serde_json::from_str(&data)
        .map_err(|_| StreamEnd::Broken(format!("event {name} does not carry JSON")))?;
    Ok(Some(Event { name, id, data }))
}

/// An id as one URL path segment; anything that would change the path is refused.
pub fn segment(id: &str) -> Result<&str, Failure> {
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
    {
        return Err(Failure::Usage(format!("{id:?} is not an id")));
    }
    Ok(id)
}

async fn answer(response: reqwest::Result<reqwest::Response>) -> Result<Value, Failure> {
    let response = response.map_err(|e| Failure::Unreachable(e.to_string()))?;
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| Failure::Usage(format!("reading the answer: {e}")))?;
    if bytes.len() > MAX_RESPONSE_BYTES {
        return Err(Failure::Usage("the answer is larger than 8 MiB".into()));
    }
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| {
        Failure::Usage(format!(
            "the server answered {status} with something that is not JSON"
        ))
    })?;
    if (200..300).contains(&status) {
        return Ok(value);
    }
    // REST routes answer `{"error": {...}}`; envelope routes an `aip.core.v1.error` envelope.
    let error = if value["body"]["error"]["error"].is_object() {
        &value["body"]["error"]["error"]
    } else {
        &value["error"]
    };
    Err(Failure::Refused {
        status,
        code: error["code"].as_str().unwrap_or("unknown").to_owned(),
        message: error["message"].as_str().unwrap_or("").to_owned(),
    })
}

/// Pretty JSON on stdout.
pub fn print_json(value: &Value) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(_) => println!("{value}"),
    }
}

/// A value as a table cell (`-` for null).
pub fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// The query of a list command: `status` unless `any`, then each filter that is set.
pub fn list_query(status: String, filters: &[(&str, Option<String>)]) -> Vec<(String, String)> {
    let mut query = Vec::new();
    if status != "any" {
        query.push(("status".to_owned(), status));
    }
    for (name, value) in filters {
        if let Some(v) = value {
            query.push(((*name).to_owned(), v.clone()));
        }
    }
    query
}

/// A plain table: left-aligned columns, the last one unpadded.
pub fn print_rows<const N: usize>(header: [&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N]| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == N {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header);
    for row in rows {
        line(row.each_ref().map(String::as_str));
    }
}

/// `name  value` lines, for one object.
pub fn print_fields(fields: &[(&str, String)]) {
    for (name, value) in fields {
        println!("{name:<20}{value}");
    }
}

#[cfg(test)]
mod tests {
    use super::hint;

    #[test]
    fn a_refusal_code_a_person_can_act_on_has_a_hint_and_an_unknown_code_has_none() {
        assert!(
            hint("aip.idempotency.key_required").is_some_and(|h| h.contains("--idempotency-key"))
        );
        assert!(hint("aip.transport.origin_not_allowed").is_some());
        assert_eq!(hint("aip.runtime.internal"), None);
        assert_eq!(hint("aip.no_such.code"), None);
    }
}
