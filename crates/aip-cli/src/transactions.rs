//! `aip transactions`: transactions (spec 13) on a running server. Each step is an
//! `aip.transaction.v1.request` through the same admission as every action; `show` reads the durable
//! view. A commit names only its plan: the capability and the input are the plan's.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use crate::client::{Client, Failure, ServerArgs, print_fields, print_json, segment, text};

/// `aip transactions ...`
#[derive(Debug, Subcommand)]
pub enum TransactionsCommand {
    /// Show a transaction: by id, or with --plan / --action by a plan or action id.
    #[command(
        after_help = "Examples:\n  aip transactions show txn_123 --result\n  aip transactions show plan_456 --plan --json"
    )]
    Show {
        /// Transaction id (or plan id with --plan, action id with --action).
        id: String,
        #[command(flatten)]
        server: ServerArgs,
        /// `id` is a plan id.
        #[arg(long, conflicts_with = "action")]
        plan: bool,
        /// `id` is an action id.
        #[arg(long)]
        action: bool,
        /// Include the current step's result.
        #[arg(long)]
        result: bool,
        /// Include the current step's receipt chain.
        #[arg(long)]
        receipts: bool,
    },
    /// Dry-run a capability: what the operation would do, committing nothing.
    #[command(
        after_help = "Example: aip transactions dry-run cap:demo:payment --input '{\"amount_minor\": 2500, \"to\": \"acct:shop\"}'"
    )]
    DryRun {
        /// Capability id.
        capability: String,
        #[command(flatten)]
        server: ServerArgs,
        /// The input (JSON, or @FILE).
        #[arg(long, default_value = "{}")]
        input: String,
        /// Join this transaction (it must not be planned yet).
        #[arg(long)]
        transaction: Option<String>,
    },
    /// Plan an operation: a durable plan a later commit must match.
    #[command(
        after_help = "Example: aip transactions plan cap:demo:payment --input '{\"amount_minor\": 2500, \"to\": \"acct:shop\"}'"
    )]
    Plan {
        /// Capability id.
        capability: String,
        #[command(flatten)]
        server: ServerArgs,
        /// The input (JSON, or @FILE).
        #[arg(long, default_value = "{}")]
        input: String,
        /// Name the transaction (a fresh id otherwise).
        #[arg(long)]
        transaction: Option<String>,
    },
    /// Commit a plan (capability and input are the plan's).
    #[command(after_help = "Example: aip transactions commit plan_456 --idempotency-key pay-1")]
    Commit {
        /// Plan id.
        plan: String,
        #[command(flatten)]
        server: ServerArgs,
        /// The input, when the plan withheld its snapshot (JSON, or @FILE).
        #[arg(long)]
        input: Option<String>,
        /// An idempotency key for the commit.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Ask the provider about a commit whose outcome is unknown.
    #[command(after_help = "Example: aip transactions reconcile txn_123")]
    Reconcile {
        /// Transaction id.
        transaction: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Compensate a committed operation with its declared compensating capability.
    #[command(
        after_help = "Example: aip transactions compensate act_789 --transaction txn_123 --capability cap:demo:refund --idempotency-key refund-1"
    )]
    Compensate {
        /// The committed action.
        action: String,
        #[command(flatten)]
        server: ServerArgs,
        /// Its transaction.
        #[arg(long)]
        transaction: String,
        /// The compensating capability its contract names.
        #[arg(long)]
        capability: String,
        /// The compensation's input (JSON, or @FILE).
        #[arg(long, default_value = "{}")]
        input: String,
        /// The compensation's own idempotency key.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
}

/// Runs one `aip transactions` command.
pub fn run(command: TransactionsCommand) -> ExitCode {
    crate::client::run("transactions", execute(command))
}

async fn execute(command: TransactionsCommand) -> Result<(), Failure> {
    match command {
        TransactionsCommand::Show {
            id,
            server,
            plan,
            action,
            result,
            receipts,
        } => {
            let client = Client::new(&server)?;
            let path = match (plan, action) {
                (true, _) => format!("/aip/v1/transactions/by-plan/{}", segment(&id)?),
                (_, true) => format!("/aip/v1/transactions/by-action/{}", segment(&id)?),
                _ => format!("/aip/v1/transactions/{}", segment(&id)?),
            };
            let query = vec![
                ("include_result".to_owned(), result.to_string()),
                ("include_receipts".to_owned(), receipts.to_string()),
            ];
            let view = client.get(&path, &query).await?;
            if server.json {
                print_json(&view);
            } else {
                print_view(&view);
            }
            Ok(())
        }
        TransactionsCommand::DryRun {
            capability,
            server,
            input,
            transaction,
        } => opening_step("dry_run", &server, &capability, &input, transaction).await,
        TransactionsCommand::Plan {
            capability,
            server,
            input,
            transaction,
        } => opening_step("plan", &server, &capability, &input, transaction).await,
        TransactionsCommand::Commit {
            plan,
            server,
            input,
            idempotency_key,
        } => {
            let client = Client::new(&server)?;
            let view = client
                .get(
                    &format!("/aip/v1/transactions/by-plan/{}", segment(&plan)?),
                    &[],
                )
                .await?;
            let planned = &view["plan"];
            let input = match input {
                Some(input) => crate::call::read_input(&input)?,
                None => match planned.get("input_snapshot") {
                    Some(snapshot) if !snapshot.is_null() => snapshot.clone(),
                    _ => {
                        return Err(Failure::Usage(
                            "the plan withheld its input: pass it with --input".into(),
                        ));
                    }
                },
            };
            let context = json!({ "mode": "commit", "transaction_id": planned["transaction_id"], "plan_id": plan });
            let capability = text(&planned["capability_id"]);
            step(&server, &capability, input, context, idempotency_key).await
        }
        TransactionsCommand::Reconcile {
            transaction,
            server,
        } => {
            let client = Client::new(&server)?;
            let view = client
                .get(
                    &format!("/aip/v1/transactions/{}", segment(&transaction)?),
                    &[],
                )
                .await?;
            // The transaction's own capability: the plan's, else the current step's.
            let capability = match view["plan"]["capability_id"].as_str() {
                Some(c) => c.to_owned(),
                None => text(&view["capability_id"]),
            };
            let context = json!({ "mode": "reconcile", "transaction_id": transaction });
            step(&server, &capability, json!({}), context, None).await
        }
        TransactionsCommand::Compensate {
            action,
            server,
            transaction,
            capability,
            input,
            idempotency_key,
        } => {
            let context = json!({ "mode": "compensate", "transaction_id": transaction, "compensation_for": action });
            step(
                &server,
                &capability,
                crate::call::read_input(&input)?,
                context,
                idempotency_key,
            )
            .await
        }
    }
}

/// A dry run or a plan: `capability` with `input`, in `transaction` or a fresh one.
async fn opening_step(
    mode: &str,
    server: &ServerArgs,
    capability: &str,
    input: &str,
    transaction: Option<String>,
) -> Result<(), Failure> {
    let context = json!({ "mode": mode, "transaction_id": transaction });
    step(
        server,
        capability,
        crate::call::read_input(input)?,
        context,
        None,
    )
    .await
}

/// Sends one `aip.transaction.v1.request` as the signed-in principal and prints its result (or the
/// ack of a step that waits, for example for an approval).
async fn step(
    server: &ServerArgs,
    capability: &str,
    input: Value,
    mut context: Value,
    idempotency_key: Option<String>,
) -> Result<(), Failure> {
    let client = Client::new(server)?;
    let me = client.get("/aip/v1/whoami", &[]).await?;
    let transaction_id = match context["transaction_id"].as_str() {
        Some(id) => id.to_owned(),
        None => aip_core::generate_with_prefix("txn_"),
    };
    context["transaction_id"] = json!(transaction_id);
    let mut action = json!({
        "id": aip_core::generate_with_prefix("act_"), "capability_id": capability, "input": input,
        "transaction": context,
    });
    if let Some(key) = idempotency_key {
        action["idempotency_key"] = json!(key);
    }
    let envelope = json!({
        "aip_version": "1.0",
        "message_type": "aip.transaction.v1.request",
        "message_id": aip_core::generate_with_prefix("msg_"),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "transaction_request": {
            "transaction_id": transaction_id, "action": action,
            "requested_by": { "id": me["id"], "kind": me["kind"] },
        } },
    });
    let reply = client.post_envelope("/aip/v1/messages", &envelope).await?;
    if server.json {
        print_json(&reply);
        return Ok(());
    }
    let result = &reply["body"]["transaction_result"];
    if result.is_null() {
        let ack = &reply["body"]["ack"];
        println!(
            "{}: {} ({})",
            text(&ack["action_id"]),
            text(&ack["status"]),
            text(&ack["reason"])
        );
        return Ok(());
    }
    print_fields(&[
        ("transaction", text(&result["transaction_id"])),
        ("action", text(&result["action_id"])),
        ("status", text(&result["status"])),
        ("plan", text(&result["plan"]["plan_id"])),
        ("expires", text(&result["plan"]["expires_at"])),
        (
            "operation",
            text(&result["provider_operation"]["operation_id"]),
        ),
        // A plan's output repeats the plan: its provider quote is what is new.
        (
            "output",
            text(match result["result"]["output"].get("quote") {
                Some(quote) if result["status"] == "planned" => quote,
                _ => &result["result"]["output"],
            }),
        ),
        ("error", text(&result["error"]["code"])),
    ]);
    if result["status"] == "failed" || result["status"] == "outcome_unknown" {
        return Err(Failure::Refused {
            status: 200,
            code: text(&result["error"]["code"]),
            message: text(&result["error"]["message"]),
        });
    }
    Ok(())
}

fn print_view(view: &Value) {
    print_fields(&[
        ("transaction", text(&view["transaction_id"])),
        ("status", text(&view["status"])),
        ("capability", text(&view["capability_id"])),
        ("current step", text(&view["transaction"]["mode"])),
        ("action", text(&view["action_id"])),
        ("plan", text(&view["plan"]["plan_id"])),
        ("plan expires", text(&view["plan"]["expires_at"])),
        ("needs approval", text(&view["plan"]["approval_required"])),
        ("updated", text(&view["updated_at"])),
        ("output", text(&view["result"]["output"])),
        ("error", text(&view["result"]["error"]["code"])),
    ]);
}
