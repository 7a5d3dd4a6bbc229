//! `aip approvals`: the approver's tool, a client of a running server's approval routes
//! (`/aip/v1/approvals`, spec 12.4 and 16.3). Tables for people, `--json` for scripts; a refusal
//! prints its typed code and exits 1, an unreachable server or bad usage exits 2.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::client::{
    Client, Failure, ServerArgs, list_query, print_fields, print_json, print_rows, segment, text,
};

/// `aip approvals ...`
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List the approvals you may see or decide (pending ones unless --status says otherwise).
    #[command(
        after_help = "Examples:\n  aip approvals list --token-file aip-data/approver-1.token\n  aip approvals list --status any --json"
    )]
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
    #[command(after_help = "Example: aip approvals show appr_123")]
    Show {
        /// Approval id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Approve: the decision binds to the policy hash shown by `show`.
    #[command(
        after_help = "Example: aip approvals approve appr_123 --reason 'beneficiary checked' --decision-id d-1"
    )]
    Approve(DecideArgs),
    /// Deny: the governed action ends without running.
    #[command(after_help = "Example: aip approvals deny appr_123 --reason 'unknown beneficiary'")]
    Deny(DecideArgs),
    /// Revoke a granted approval whose action has not run yet.
    #[command(after_help = "Example: aip approvals revoke appr_123 --reason 'granted by mistake'")]
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
    crate::client::run("approvals", execute(command))
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
            let query = list_query(
                status,
                &[
                    ("approver", approver),
                    ("limit", limit.map(|l| l.to_string())),
                ],
            );
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
            let view = approval(&client, &id).await?;
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
    let seen = approval(&client, &args.id).await?;
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
            "{}: {} recorded; the approval is now {}",
            args.id,
            decision,
            text(&view["status"])
        );
    }
    Ok(())
}

/// One approval with its action's status.
async fn approval(client: &Client, id: &str) -> Result<Value, Failure> {
    client
        .get(
            &format!("/aip/v1/approvals/{}", segment(id)?),
            &[("include_action_status".into(), "true".into())],
        )
        .await
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
    print_rows(
        [
            "APPROVAL",
            "STATUS",
            "CAPABILITY",
            "REQUESTER",
            "EXPIRES",
            "REASON",
        ],
        &rows,
    );
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
    print_fields(&fields);
}
