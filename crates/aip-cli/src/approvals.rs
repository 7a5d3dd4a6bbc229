//! `aip approvals`: the approver's tool, a client of a running server's approval routes
//! (`/aip/v1/approvals`, spec 12.4 and 16.3). Tables for people, `--json` for scripts; a refusal
//! prints its typed code and exits 1, an unreachable server or bad usage exits 2.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

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

/// `aip approvals ...`
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List the approvals you may see or decide (pending ones unless --status says otherwise).
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// `pending`, `approved`, `denied`, `expired`, `revoked`, `cancelled`, or `any`.
        #[arg(long, default_value = "pending")]
        status: String,
        /// Only approvals this principal may decide (your own inbox: your principal id).
        #[arg(long, value_name = "PRINCIPAL")]
        approver: Option<String>,
        /// At most this many.
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Show one approval with its action's status.
    Show {
        /// Approval id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Approve: the decision binds to the policy hash shown by `show`.
    Approve(DecideArgs),
    /// Deny: the governed action ends without running.
    Deny(DecideArgs),
    /// Revoke a granted approval whose action has not run yet.
    Revoke(DecideArgs),
}

/// Arguments of a decision.
#[derive(Debug, Args)]
pub struct DecideArgs {
    /// Approval id.
    pub id: String,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Why (some policies require it).
    #[arg(long)]
    pub reason: Option<String>,
    /// Stable id of this decision: sending it again is a replay, not a second decision.
    #[arg(long)]
    pub decision_id: Option<String>,
}

/// Runs one `aip approvals` command.
pub fn run(command: ApprovalsCommand) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("aip approvals: {err}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async move {
        match execute(command).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(Failure::Refused {
                status,
                code,
                message,
            }) => {
                eprintln!("aip approvals: refused ({status}) {code}: {message}");
                ExitCode::from(1)
            }
            Err(Failure::Usage(message)) => {
                eprintln!("aip approvals: {message}");
                ExitCode::from(2)
            }
        }
    })
}

/// Why a command did not succeed.
enum Failure {
    /// The server answered with a typed error.
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    /// Bad usage, an unreadable token, an unreachable server or an unreadable answer.
    Usage(String),
}

async fn execute(command: ApprovalsCommand) -> Result<(), Failure> {
    match command {
        ApprovalsCommand::List {
            server,
            status,
            approver,
            limit,
        } => {
            let client = Client::new(&server)?;
            let mut query: Vec<(String, String)> = Vec::new();
            if status != "any" {
                query.push(("status".into(), status));
            }
            if let Some(a) = approver {
                query.push(("approver".into(), a));
            }
            if let Some(l) = limit {
                query.push(("limit".into(), l.to_string()));
            }
            let list = client.get("/aip/v1/approvals", &query).await?;
            if server.json {
                print_json(&list);
            } else {
                print_table(list["approvals"].as_array().map_or(&[][..], Vec::as_slice));
            }
            Ok(())
        }
        ApprovalsCommand::Show { id, server } => {
            let client = Client::new(&server)?;
            let view = client.approval(&id).await?;
            if server.json {
                print_json(&view);
            } else {
                print_detail(&view);
            }
            Ok(())
        }
        ApprovalsCommand::Approve(args) => decide(args, "approved").await,
        ApprovalsCommand::Deny(args) => decide(args, "denied").await,
        ApprovalsCommand::Revoke(args) => decide(args, "revoked").await,
    }
}

async fn decide(args: DecideArgs, decision: &str) -> Result<(), Failure> {
    let client = Client::new(&args.server)?;
    // Bind the decision to what the approver could read: the server refuses it if the governed
    // subject no longer hashes to this.
    let seen = client.approval(&args.id).await?;
    let mut body = json!({ "decision": decision });
    if let Some(hash) = seen["request"]["policy_hash"].as_str() {
        body["policy_hash"] = json!(hash);
    }
    if let Some(reason) = &args.reason {
        body["reason"] = json!(reason);
    }
    if let Some(id) = &args.decision_id {
        body["decision_id"] = json!(id);
    }
    let view = client
        .post(
            &format!("/aip/v1/approvals/{}/decision", segment(&args.id)?),
            &body,
        )
        .await?;
    if args.server.json {
        print_json(&view);
    } else {
        println!(
            "{} {}: approval is now {}",
            args.id,
            decision,
            text(&view["status"])
        );
    }
    Ok(())
}

/// An authenticated client of one server.
struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Client {
    fn new(args: &ServerArgs) -> Result<Self, Failure> {
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

    async fn approval(&self, id: &str) -> Result<Value, Failure> {
        self.get(
            &format!("/aip/v1/approvals/{}", segment(id)?),
            &[("include_action_status".into(), "true".into())],
        )
        .await
    }

    async fn get(&self, path: &str, query: &[(String, String)]) -> Result<Value, Failure> {
        let request = self
            .http
            .get(format!("{}{path}", self.base))
            .query(query)
            .bearer_auth(&self.token);
        answer(request.send().await).await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, Failure> {
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body);
        answer(request.send().await).await
    }
}

/// An id as one URL path segment; anything that would change the path is refused.
fn segment(id: &str) -> Result<&str, Failure> {
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
    {
        return Err(Failure::Usage(format!("{id:?} is not an approval id")));
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

fn print_json(value: &Value) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(_) => println!("{value}"),
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn print_table(approvals: &[Value]) {
    if approvals.is_empty() {
        println!("no approvals");
        return;
    }
    let rows: Vec<[String; 6]> = approvals
        .iter()
        .map(|a| {
            let r = &a["request"];
            [
                text(&r["id"]),
                text(&a["status"]),
                text(&r["capability_id"]),
                text(&r["requester"]["id"]),
                text(&r["expires_at"]),
                text(&r["reason"]),
            ]
        })
        .collect();
    let header = [
        "APPROVAL",
        "STATUS",
        "CAPABILITY",
        "REQUESTER",
        "EXPIRES",
        "REASON",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header);
    for row in &rows {
        line([&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]]);
    }
}

fn print_detail(view: &Value) {
    let r = &view["request"];
    let policy = &r["policy_snapshot"];
    let fields = [
        ("approval", text(&r["id"])),
        ("status", text(&view["status"])),
        ("action", text(&r["action_id"])),
        ("action state", text(&view["action_status"]["state"])),
        ("capability", text(&r["capability_id"])),
        ("requester", text(&r["requester"]["id"])),
        ("reason", text(&r["reason"])),
        ("approvers", text(&r["approver_selector"])),
        ("rule", text(&policy["rule"])),
        (
            "distinct approvers",
            text(&policy["minimum_distinct_principals"]),
        ),
        ("expires", text(&r["expires_at"])),
        ("policy hash", text(&r["policy_hash"])),
        ("last decision", text(&view["decision"]["decision"])),
        ("decided by", text(&view["decision"]["approver"]["id"])),
    ];
    for (name, value) in fields {
        println!("{name:<20}{value}");
    }
}
