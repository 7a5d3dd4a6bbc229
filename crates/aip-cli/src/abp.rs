//! `aip abp ...`: the ABP verification tools over the `abp` library (docs/abp.md "ABP commands").

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use abp::bounds::BoundSet;
use abp::conformance;
use abp::json::{self, DecodeBounds};
use abp::reconcile::{self, ReconcileInputs};
use abp::signature::HostKey;
use abp::{blueprint::Blueprint, deployment::Deployment, jcs};
use clap::Subcommand;

/// ABP subcommands.
#[derive(Debug, Subcommand)]
pub enum AbpCommand {
    /// Run the conformance corpus; print the report (canonical JSON, no trailing newline).
    /// Exit 0 on full agreement, 1 on any disagreement, 2 on an integrity failure or bad usage.
    Conformance {
        /// The corpus directory (holds `index.json`).
        #[arg(long)]
        corpus: PathBuf,
        /// Per-case lines on stderr.
        #[arg(long)]
        verbose: bool,
    },
    /// Reconcile a Blueprint and a Deployment; print the Evidence as canonical JSON.
    /// Exit 0 when no check denied, 1 when one did, 2 on unreadable input.
    Verify {
        /// The Blueprint file.
        #[arg(long)]
        blueprint: PathBuf,
        /// The Deployment Manifest file.
        #[arg(long)]
        deployment: PathBuf,
        /// A trusted Ed25519 public key, `KID=BASE64URL` (repeatable).
        #[arg(long = "key", value_name = "KID=BASE64URL")]
        keys: Vec<String>,
        /// Host policy bounds (a JSON bound set); default: the deployment's `host_bounds`.
        #[arg(long)]
        host_bounds: Option<PathBuf>,
    },
    /// Print a Blueprint's content digest or a Deployment's deployment digest.
    Digest {
        /// The artifact file.
        file: PathBuf,
    },
    /// Print the RFC 8785 canonical bytes of a JSON file (no trailing newline).
    Canonicalize {
        /// The JSON file.
        file: PathBuf,
    },
}

/// Run one ABP subcommand.
pub fn run(cmd: AbpCommand) -> ExitCode {
    match cmd {
        AbpCommand::Conformance { corpus, verbose } => conformance_cmd(&corpus, verbose),
        AbpCommand::Verify {
            blueprint,
            deployment,
            keys,
            host_bounds,
        } => verify_cmd(&blueprint, &deployment, &keys, host_bounds.as_deref()),
        AbpCommand::Digest { file } => digest_cmd(&file),
        AbpCommand::Canonicalize { file } => canonicalize_cmd(&file),
    }
}

fn write_stdout(bytes: &[u8]) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|()| out.flush()).is_ok()
}

fn read(path: &Path) -> Result<Vec<u8>, ExitCode> {
    let too_big = std::fs::metadata(path)
        .map(|m| m.len() > DecodeBounds::MAX.bytes as u64)
        .unwrap_or(false);
    match std::fs::read(path) {
        Ok(b) if !too_big => Ok(b),
        _ => {
            eprintln!("unreadable: {}", path.display());
            Err(ExitCode::from(2))
        }
    }
}

fn conformance_cmd(dir: &Path, verbose: bool) -> ExitCode {
    let files = match conformance::read_dir(dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (report, outcomes) = match conformance::run_files(&files) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("corpus integrity failure: :{}", e.code);
            return ExitCode::from(2);
        }
    };
    if verbose {
        for o in &outcomes {
            let tag = if o.agreed { "ok" } else { "DISAGREE" };
            match &o.actual {
                Err(e) => eprintln!("{tag} {} ({})", o.id, e.code),
                Ok(_) => eprintln!("{tag} {}", o.id),
            }
        }
    }
    if !write_stdout(&report.to_bytes()) {
        return ExitCode::from(2);
    }
    ExitCode::from(report.exit_status())
}

fn verify_cmd(bp: &Path, dp: &Path, keys: &[String], host_bounds: Option<&Path>) -> ExitCode {
    let (b, d) = match (read(bp), read(dp)) {
        (Ok(b), Ok(d)) => (b, d),
        (Err(c), _) | (_, Err(c)) => return c,
    };
    let mut inputs = ReconcileInputs::default();
    for k in keys {
        let parsed = k
            .split_once('=')
            .ok_or(())
            .and_then(|(id, key)| HostKey::from_base64url(id, key).map_err(|_| ()));
        match parsed {
            Ok(key) => inputs.keys.push(key),
            Err(()) => {
                eprintln!(
                    "bad --key {k:?}: expected KID=BASE64URL of a 32-byte Ed25519 public key"
                );
                return ExitCode::from(2);
            }
        }
    }
    if let Some(path) = host_bounds {
        let bytes = match read(path) {
            Ok(b) => b,
            Err(c) => return c,
        };
        match json::decode(&bytes, &DecodeBounds::MAX)
            .and_then(|v| BoundSet::from_value(&v, "host_bounds"))
        {
            Ok(set) => inputs.host_bounds = Some(set),
            Err(e) => {
                eprintln!("bad --host-bounds: {} at {}", e.code, e.subject);
                return ExitCode::from(2);
            }
        }
    }
    let evidence = reconcile::reconcile(&b, &d, &inputs);
    if !write_stdout(&jcs::encode(&evidence.to_value())) {
        return ExitCode::from(2);
    }
    match evidence.denial() {
        Some(e) => {
            eprintln!("denied: {} at {}", e.code, e.subject);
            ExitCode::from(1)
        }
        None => ExitCode::SUCCESS,
    }
}

fn digest_cmd(path: &Path) -> ExitCode {
    let bytes = match read(path) {
        Ok(b) => b,
        Err(c) => return c,
    };
    let is_deployment = json::decode(&bytes, &DecodeBounds::MAX)
        .ok()
        .and_then(|v| v.get("deployment_digest").map(|_| ()))
        .is_some();
    let result = if is_deployment {
        Deployment::decode(&bytes, &DecodeBounds::MAX).map(|d| d.deployment_digest())
    } else {
        Blueprint::decode(&bytes, &DecodeBounds::MAX).map(|b| b.content_digest())
    };
    match result {
        Ok(d) => {
            println!("{}", d.to_tagged());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {} at {}", e.code, e.subject);
            ExitCode::from(1)
        }
    }
}

fn canonicalize_cmd(path: &Path) -> ExitCode {
    let bytes = match read(path) {
        Ok(b) => b,
        Err(c) => return c,
    };
    match json::decode(&bytes, &DecodeBounds::MAX) {
        Ok(v) => {
            if write_stdout(&jcs::encode(&v)) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            }
        }
        Err(e) => {
            eprintln!("error: {} at {}", e.code, e.subject);
            ExitCode::from(1)
        }
    }
}
