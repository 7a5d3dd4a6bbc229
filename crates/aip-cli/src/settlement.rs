//! `aip settlement`: a client of a running server's settlement routes (`/aip/v1/settlements`, spec
//! 18.4): close a batch of every completed, unsettled priced action, or show one. Both print the
//! signed batch envelope and its receipt chain, which `aip envelope verify` and `aip receipts
//! verify` check offline.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use crate::client::{Client, Failure, ServerArgs, print_json, segment, text};

/// `aip settlement ...`
#[derive(Debug, Subcommand)]
pub enum SettlementCommand {
    /// Close a batch: settle every completed action of a priced capability not settled yet (needs
    /// the `settlement:close` scope). Closing the same id again shows the recorded batch.
    #[command(after_help = "Example: aip settlement close --id 2026-12 --json > batch.json")]
    Close {
        /// Batch id (1..=128 visible ASCII characters), for example the billing period.
        #[arg(long)]
        id: String,
        /// Settlement model; `per_call` is the one this runtime settles.
        #[arg(long, default_value = "per_call")]
        model: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show a recorded batch with its receipt chain.
    #[command(after_help = "Example: aip settlement show 2026-12 --json")]
    Show {
        /// Batch id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Runs one `aip settlement` command.
pub fn run(command: SettlementCommand) -> ExitCode {
    crate::client::run("settlement", execute(command))
}

async fn execute(command: SettlementCommand) -> Result<(), Failure> {
    let (view, json_out) = match command {
        SettlementCommand::Close { id, model, server } => {
            let client = Client::new(&server)?;
            let view = client
                .post("/aip/v1/settlements", &json!({ "id": id, "model": model }))
                .await?;
            (view, server.json)
        }
        SettlementCommand::Show { id, server } => {
            let client = Client::new(&server)?;
            let view = client
                .get(&format!("/aip/v1/settlements/{}", segment(&id)?), &[])
                .await?;
            (view, server.json)
        }
    };
    if json_out {
        print_json(&view);
    } else {
        print_summary(&view);
    }
    Ok(())
}

fn print_summary(view: &Value) {
    let batch = &view["envelope"]["body"]["batch_settlement"];
    let records = batch["records"].as_array().map_or(0, Vec::len);
    println!(
        "batch {} ({}): {records} actions settled, signed by {}",
        text(&batch["id"]),
        text(&batch["model"]),
        text(&view["envelope"]["security"]["did"])
    );
    let receipt = &view["receipt_chain"]["receipts"][0]["data"];
    for total in receipt["totals"].as_array().map_or(&[][..], Vec::as_slice) {
        println!(
            "  {}: {} {} (minor units)",
            text(&total["account"]),
            text(&total["amount_minor"]),
            text(&total["currency"])
        );
    }
    println!(
        "receipt chain root {}",
        text(&view["receipt_chain"]["root_hash"])
    );
}
