//! `aip callbacks`: a client of a running server's callback delivery routes (`/aip/v1/callbacks`,
//! spec 17): list and show deliveries with their attempts, and re-drive a dead-lettered one.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use crate::client::{
    Client, Failure, ServerArgs, list_query, print_fields, print_json, print_rows, segment, text,
};

/// `aip callbacks ...`
#[derive(Debug, Subcommand)]
pub enum CallbacksCommand {
    /// List the callback deliveries you may see, oldest first.
    #[command(
        after_help = "Examples:\n  aip callbacks list --status dead_lettered\n  aip callbacks list --action act_123 --json"
    )]
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// `pending`, `running`, `delivered`, `failed`, `dead_lettered`, or `any`.
        #[arg(long, default_value = "any")]
        status: String,
        /// Only the deliveries of this action.
        #[arg(long)]
        action: Option<String>,
        /// At most this many.
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Show one delivery with its policy and every attempt.
    #[command(after_help = "Example: aip callbacks show 0193…")]
    Show {
        /// Delivery id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Queue a failed or dead-lettered delivery again, under the same delivery id (needs the
    /// `callbacks:redrive` scope).
    #[command(after_help = "Example: aip callbacks redrive 0193…")]
    Redrive {
        /// Delivery id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Runs one `aip callbacks` command.
pub fn run(command: CallbacksCommand) -> ExitCode {
    crate::client::run("callbacks", execute(command))
}

async fn execute(command: CallbacksCommand) -> Result<(), Failure> {
    match command {
        CallbacksCommand::List {
            server,
            status,
            action,
            limit,
        } => {
            let client = Client::new(&server)?;
            let query = list_query(
                status,
                &[
                    ("action_id", action),
                    ("limit", limit.map(|l| l.to_string())),
                ],
            );
            let list = client.get("/aip/v1/callbacks", &query).await?;
            if server.json {
                print_json(&list);
            } else {
                print_table(list["deliveries"].as_array().map_or(&[][..], Vec::as_slice));
            }
            Ok(())
        }
        CallbacksCommand::Show { id, server } => {
            let client = Client::new(&server)?;
            let view = client
                .get(&format!("/aip/v1/callbacks/{}", segment(&id)?), &[])
                .await?;
            if server.json {
                print_json(&view);
            } else {
                print_detail(&view);
            }
            Ok(())
        }
        CallbacksCommand::Redrive { id, server } => {
            let client = Client::new(&server)?;
            let view = client
                .post(
                    &format!("/aip/v1/callbacks/{}/redrive", segment(&id)?),
                    &json!({}),
                )
                .await?;
            if server.json {
                print_json(&view);
            } else {
                println!("{id}: delivery is now {}", text(&view["status"]));
            }
            Ok(())
        }
    }
}

fn print_table(deliveries: &[Value]) {
    if deliveries.is_empty() {
        println!("no callback deliveries");
        return;
    }
    let rows: Vec<[String; 6]> = deliveries
        .iter()
        .map(|d| {
            [
                text(&d["delivery_id"]),
                text(&d["status"]),
                text(&d["action_id"]),
                d["attempts"].as_array().map_or(0, Vec::len).to_string(),
                text(&d["policy"]["target"]["target"]),
                text(&d["last_error"]),
            ]
        })
        .collect();
    print_rows(
        [
            "DELIVERY",
            "STATUS",
            "ACTION",
            "ATTEMPTS",
            "TARGET",
            "LAST ERROR",
        ],
        &rows,
    );
}

fn print_detail(d: &Value) {
    print_fields(&[
        ("delivery", text(&d["delivery_id"])),
        ("status", text(&d["status"])),
        ("action", text(&d["action_id"])),
        (
            "message",
            format!("{} {}", text(&d["message_type"]), text(&d["message_id"])),
        ),
        ("profile", text(&d["policy"]["target"]["profile"])),
        ("target", text(&d["policy"]["target"]["target"])),
        ("max attempts", text(&d["policy"]["max_attempts"])),
        ("next attempt", text(&d["next_attempt_at"])),
        ("leased by", text(&d["leased_by"])),
        ("last error", text(&d["last_error"])),
        ("dead letter reason", text(&d["dead_letter_reason"])),
        ("created", text(&d["created_at"])),
        ("completed", text(&d["completed_at"])),
    ]);
    for a in d["attempts"].as_array().map_or(&[][..], Vec::as_slice) {
        println!(
            "attempt {:<11} {} .. {}  {}",
            text(&a["attempt"]),
            text(&a["started_at"]),
            text(&a["finished_at"]),
            a["error"].as_str().unwrap_or("ok")
        );
    }
}
