//! What every client command shares: the server and token arguments, an authenticated HTTP client
//! of a running `aip serve` (bounded time and size), typed refusals and plain tables.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

/// Longest wait for one answer from the server.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read from the server.
const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

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
                ExitCode::from(1)
            }
            Err(Failure::Usage(message)) => {
                eprintln!("aip {name}: {message}");
                ExitCode::from(2)
            }
        }
    })
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
    /// Bad usage, an unreadable token, an unreachable server or an unreadable answer.
    Usage(String),
}

/// An authenticated client of one server.
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
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
        Ok(Self { base, token, http })
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
    let response = response.map_err(|e| Failure::Usage(format!("server unreachable: {e}")))?;
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
    let error = &value["error"];
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
