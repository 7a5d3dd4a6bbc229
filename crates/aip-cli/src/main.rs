//! The `aip` binary: one entry point for the runtime, the validators and the ABP tools.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod abp;
mod approvals;
mod call;
mod callbacks;
mod client;
mod conformance;
mod escalations;
mod ops;
mod retention;
mod serve;
mod settlement;
mod transactions;
mod wire;

/// AIP 1.0 runtime and ABP verification tools.
#[derive(Debug, Parser)]
#[command(name = "aip", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Each subcommand lives in its own module; `main` only dispatches.
#[derive(Debug, Subcommand)]
enum Command {
    /// Print this build's version and the protocol revisions it implements.
    Versions,
    /// Agent Blueprint Protocol tools: conformance, verify, digest, canonicalize.
    #[command(subcommand)]
    Abp(abp::AbpCommand),
    /// Run the AIP runtime over native HTTP on the embedded SQLite store.
    Serve(serve::ServeArgs),
    /// Validate AIP envelopes or bodies offline (spec 6.4); exit 0 valid, 1 invalid, 2 usage/unreadable.
    Validate(wire::ValidateArgs),
    /// AIP JSON Schemas generated from the wire types.
    #[command(subcommand)]
    Schema(wire::SchemaCommand),
    /// Ed25519 keys for signed envelopes (spec 22.2).
    #[command(subcommand)]
    Keys(wire::KeysCommand),
    /// Sign or verify native envelopes (spec 22.2).
    #[command(subcommand)]
    Envelope(wire::EnvelopeCommand),
    /// Verify receipt chains (spec 18.2).
    #[command(subcommand)]
    Receipts(wire::ReceiptsCommand),
    /// Evidence archives written by retention: verify one.
    #[command(subcommand)]
    Retention(retention::RetentionCommand),
    /// The approver's tool: list, show, approve, deny or revoke approvals on a running server.
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// The escalation desk's tool: list, show or resolve escalations on a running server.
    #[command(subcommand)]
    Escalations(escalations::EscalationsCommand),
    /// Dry-run, plan, commit, reconcile, compensate or show transactions on a running server.
    #[command(subcommand)]
    Transactions(transactions::TransactionsCommand),
    /// Callback deliveries on a running server: list, show, re-drive a dead-lettered one.
    #[command(subcommand)]
    Callbacks(callbacks::CallbacksCommand),
    /// Settlement batches on a running server: close one (signed, receipt-linked) or show one.
    #[command(subcommand)]
    Settlement(settlement::SettlementCommand),
    /// Invoke a capability on a running server and print its result (or follow its stream).
    Call(call::CallArgs),
    /// List, show or cancel actions on a running server.
    #[command(subcommand)]
    Actions(ops::ActionsCommand),
    /// Read (or follow, resuming after drops) your event feed or one action's events.
    Events(ops::EventsArgs),
    /// The capabilities, profiles and governance a running server advertises to you.
    Manifest(ops::ManifestArgs),
    /// List sessions on a running server.
    #[command(subcommand)]
    Sessions(ops::SessionsCommand),
    /// The conformance statement of spec 24.1 for this build and a configuration.
    #[command(subcommand)]
    Conformance(conformance::ConformanceCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Versions => {
            println!("aip-cli {}", env!("CARGO_PKG_VERSION"));
            println!("protocols: AIP 1.0, ABP 0.x");
            ExitCode::SUCCESS
        }
        Command::Abp(cmd) => abp::run(cmd),
        Command::Serve(args) => serve::run(args),
        Command::Validate(args) => wire::validate(&args),
        Command::Schema(cmd) => wire::schema(&cmd),
        Command::Keys(cmd) => wire::keys(&cmd),
        Command::Envelope(cmd) => wire::envelope(&cmd),
        Command::Receipts(cmd) => wire::receipts(&cmd),
        Command::Retention(cmd) => retention::run(cmd),
        Command::Approvals(cmd) => approvals::run(cmd),
        Command::Escalations(cmd) => escalations::run(cmd),
        Command::Transactions(cmd) => transactions::run(cmd),
        Command::Callbacks(cmd) => callbacks::run(cmd),
        Command::Settlement(cmd) => settlement::run(cmd),
        Command::Call(args) => call::run(args),
        Command::Actions(cmd) => ops::actions(cmd),
        Command::Events(args) => ops::events(args),
        Command::Manifest(args) => ops::manifest(args),
        Command::Sessions(cmd) => ops::sessions(cmd),
        Command::Conformance(cmd) => conformance::run(cmd),
    }
}
