//! The `aip` binary: one entry point for the runtime, the validators and the ABP tools.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod abp;
mod serve;

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
    }
}
