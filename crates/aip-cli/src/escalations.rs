//! `aip escalations`: the escalation desk's tool, a client of a running server's escalation routes
//! (`/aip/v1/escalations`, spec 12.7). Resolving an escalation never decides an approval: use
//! `aip approvals` for that.

use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::client::{
    Client, Failure, ServerArgs, list_query, print_fields, print_json, print_rows, segment, text,
};

/// `aip escalations ...`
#[derive(Debug, Subcommand)]
pub enum EscalationsCommand {
    /// List the escalations you may see (open ones unless --status says otherwise).
    #[command(
        after_help = "Examples:\n  aip escalations list\n  aip escalations list --status any --kind handoff --json"
    )]
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// `open`, `approved`, `rejected`, `modified`, `handoff_completed`, `expired`,
        /// `cancelled`, or `any`.
        #[arg(long, default_value = "open")]
        status: String,
        /// `approval`, `input`, `handoff` or `policy_exception`.
        #[arg(long)]
        kind: Option<String>,
        /// At most this many.
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Show one escalation with its resolution.
    #[command(after_help = "Example: aip escalations show msg_123")]
    Show {
        /// Escalation id (the raising envelope's message id).
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Resolve an open escalation with one of its allowed decisions.
    ///
    /// Example: `aip escalations resolve msg_… --decision modify --result '{"amount_minor": 900}'`
    Resolve {
        /// Escalation id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
        /// The decision.
        #[arg(long, value_enum)]
        decision: Decision,
        /// The modified payload or result (JSON; `modify` needs it).
        #[arg(long, value_name = "JSON")]
        result: Option<String>,
    },
}

/// The five escalation decisions (spec 12.7).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Decision {
    /// Approve the work.
    Approve,
    /// Reject it.
    Reject,
    /// Modify it (with --result).
    Modify,
    /// Take it over.
    Handoff,
    /// Cancel it.
    Cancel,
}

impl Decision {
    /// The resolution status the decision records.
    fn status(self) -> &'static str {
        match self {
            Decision::Approve => "approved",
            Decision::Reject => "rejected",
            Decision::Modify => "modified",
            Decision::Handoff => "handoff_completed",
            Decision::Cancel => "cancelled",
        }
    }
}

/// Runs one `aip escalations` command.
pub fn run(command: EscalationsCommand) -> ExitCode {
    crate::client::run("escalations", execute(command))
}

async fn execute(command: EscalationsCommand) -> Result<(), Failure> {
    match command {
        EscalationsCommand::List {
            server,
            status,
            kind,
            limit,
        } => {
            let client = Client::new(&server)?;
            let query = list_query(
                status,
                &[("kind", kind), ("limit", limit.map(|l| l.to_string()))],
            );
            let list = client.get("/aip/v1/escalations", &query).await?;
            if server.json {
                print_json(&list);
            } else {
                print_table(
                    list["escalations"]
                        .as_array()
                        .map_or(&[][..], Vec::as_slice),
                );
            }
            Ok(())
        }
        EscalationsCommand::Show { id, server } => {
            let client = Client::new(&server)?;
            let view = client
                .get(&format!("/aip/v1/escalations/{}", segment(&id)?), &[])
                .await?;
            if server.json {
                print_json(&view);
            } else {
                print_detail(&view);
            }
            Ok(())
        }
        EscalationsCommand::Resolve {
            id,
            server,
            decision,
            result,
        } => {
            let client = Client::new(&server)?;
            let mut body = json!({ "status": decision.status() });
            if let Some(result) = result {
                let value: Value = serde_json::from_str(&result)
                    .map_err(|e| Failure::Usage(format!("--result is not JSON: {e}")))?;
                body["result"] = value;
            }
            let view = client
                .post(
                    &format!("/aip/v1/escalations/{}/resolution", segment(&id)?),
                    &body,
                )
                .await?;
            if server.json {
                print_json(&view);
            } else {
                println!("{id}: escalation is now {}", text(&view["status"]));
            }
            Ok(())
        }
    }
}

fn print_table(escalations: &[Value]) {
    if escalations.is_empty() {
        println!("no escalations");
        return;
    }
    let rows: Vec<[String; 6]> = escalations
        .iter()
        .map(|e| {
            [
                text(&e["escalation_id"]),
                text(&e["status"]),
                text(&e["escalation"]["kind"]),
                text(&e["requester"]),
                text(&e["expires_at"]),
                text(&e["escalation"]["reason"]),
            ]
        })
        .collect();
    print_rows(
        [
            "ESCALATION",
            "STATUS",
            "KIND",
            "REQUESTER",
            "EXPIRES",
            "REASON",
        ],
        &rows,
    );
}

fn print_detail(view: &Value) {
    let e = &view["escalation"];
    let allowed = match e["allowed_decisions"].as_array() {
        Some(list) if !list.is_empty() => list.iter().map(text).collect::<Vec<_>>().join(", "),
        _ => "approve, reject, modify, handoff, cancel".into(),
    };
    print_fields(&[
        ("escalation", text(&view["escalation_id"])),
        ("status", text(&view["status"])),
        ("kind", text(&e["kind"])),
        ("requester", text(&view["requester"])),
        ("reason", text(&e["reason"])),
        ("risk", text(&e["risk"])),
        ("allowed", allowed),
        ("form", text(&e["form"])),
        ("expires", text(&view["expires_at"])),
        (
            "resolved by",
            text(&view["resolution"]["resolved_by"]["id"]),
        ),
        ("result", text(&view["resolution"]["result"])),
    ]);
}
