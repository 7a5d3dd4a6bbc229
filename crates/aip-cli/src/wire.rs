//! AIP wire-model commands: `validate`, `schema export`, `keys generate`, `envelope sign|verify`,
//! `receipts verify`. The logic lives in `aip-core` / `aip-schema`; this module reads files, calls
//! the libraries and maps outcomes to exit codes (0 ok, 1 invalid, 2 usage or unreadable input).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use aip_core::chain::{DocumentError, EmbeddedChainError, HashForm, verify_embedded};
use aip_core::signing::{self, Ed25519SigningKey, SignatureError};
use aip_core::{DecodeError, Limits, decode_envelope_value};
use aip_receipt_verify::verify_document;
use aip_schema::SchemaFile;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

/// Largest file any of these commands reads (the decoder's own limit applies on top).
const MAX_INPUT: u64 = 16 << 20;

/// `aip validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// What the files hold: `envelope` (default) or a schema-file stem such as `action` or `manifest`.
    #[arg(long, default_value = "envelope")]
    kind: String,
    /// Files to validate; `-` reads stdin.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// `aip schema ...`.
#[derive(Debug, Subcommand)]
pub enum SchemaCommand {
    /// Write the 52 generated JSON Schemas (spec Appendix A) into DIR.
    Export {
        /// Output directory (created if missing).
        dir: PathBuf,
    },
}

/// `aip keys ...`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Generate an Ed25519 signing key; prints its did:key.
    Generate {
        /// Write the key file here (mode 0600); without it the key file JSON goes to stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// `aip envelope ...`.
#[derive(Debug, Subcommand)]
pub enum EnvelopeCommand {
    /// Validate and sign an envelope (spec 22.2); prints the signed envelope.
    Sign {
        /// Key file from `aip keys generate`.
        #[arg(long)]
        key: PathBuf,
        /// Envelope file; `-` reads stdin.
        input: PathBuf,
    },
    /// Verify an envelope's signature; prints the signer's did:key.
    Verify {
        /// Envelope file; `-` reads stdin.
        input: PathBuf,
    },
}

/// `aip receipts ...`.
#[derive(Debug, Subcommand)]
pub enum ReceiptsCommand {
    /// Verify a receipt chain (spec 18.2); prints `ok` and the root hash, or the first broken link.
    Verify {
        /// A `ReceiptChain` JSON object, or an envelope carrying `receipt_chain`; `-` reads stdin.
        file: PathBuf,
        /// Also accept receipts hashed with `"hash": null` instead of omitting `hash`.
        #[arg(long)]
        accept_null_hash_form: bool,
    },
}

/// Runs `aip validate`: per file, decode (spec 6.4), then the envelope signature (22.2), then every
/// embedded receipt chain (18.2); the first failure decides the file (fail closed).
pub fn validate(args: &ValidateArgs) -> ExitCode {
    let Some(file) = aip_schema::file(&args.kind) else {
        eprintln!(
            "error: unknown --kind `{}` (use `envelope` or a schema-file stem)",
            args.kind
        );
        return ExitCode::from(2);
    };
    let limits = Limits::default();
    let mut worst = 0u8;
    for path in &args.files {
        let name = path.display().to_string();
        let bytes = match read_input(path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{name}: error: {e}");
                worst = 2;
                continue;
            }
        };
        match check_document(file, &bytes, &limits) {
            Ok(checked) => println!("{name}: valid{checked}"),
            Err(invalid) => {
                worst = worst.max(1);
                invalid.print(&name);
            }
        }
    }
    ExitCode::from(worst)
}

/// What a valid document proved beyond decoding; `Display` is the tail of the `valid` line.
struct Checked {
    /// The verified signer's did:key (key possession only, spec 22.2).
    signer: Option<String>,
    /// How many embedded receipt chains verified.
    chains: usize,
}

impl std::fmt::Display for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(did) = &self.signer {
            write!(f, ", signed by {did}")?;
        }
        match self.chains {
            0 => Ok(()),
            1 => write!(f, ", 1 receipt chain verified"),
            n => write!(f, ", {n} receipt chains verified"),
        }
    }
}

/// The first check a document failed, in the order they run.
enum Invalid {
    Decode(DecodeError),
    Signature(SignatureError),
    Receipt(EmbeddedChainError),
}

impl Invalid {
    fn print(&self, name: &str) {
        let (code, pointer, message) = match self {
            Invalid::Decode(e) => return print_error(name, e),
            Invalid::Signature(e) => (e.code(), e.pointer().to_owned(), e.to_string()),
            Invalid::Receipt(e) => (e.code(), e.pointer(), e.error.to_string()),
        };
        println!(
            "{name}: invalid: {code} ({}) at `{pointer}`: {message}",
            code.category()
        );
    }
}

/// Decode, then (envelopes only) the signature when `security` is present, then every receipt chain
/// the decoded type carries, hashed over the JSON as received (the spec's omitted-`hash` form).
fn check_document(file: &SchemaFile, bytes: &[u8], limits: &Limits) -> Result<Checked, Invalid> {
    limits.prescan(bytes).map_err(Invalid::Decode)?;
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        Invalid::Decode(DecodeError::MalformedJson {
            message: e.to_string(),
        })
    })?;
    let chains = file
        .decode_receipt_chains(&value)
        .map_err(Invalid::Decode)?;
    // `security: null` is absent (spec 5.4); any other value must be a valid 22.2 signature.
    let signed = file.stem == "envelope" && value.get("security").is_some_and(|s| !s.is_null());
    let signer = if signed {
        let signer = signing::verify_value(&value).map_err(Invalid::Signature)?;
        Some(signer.did)
    } else {
        None
    };
    let verified = verify_embedded(&value, &chains, HashForm::Omit).map_err(Invalid::Receipt)?;
    Ok(Checked {
        signer,
        chains: verified.len(),
    })
}

fn print_error(name: &str, e: &DecodeError) {
    let violations = e.violations();
    if violations.is_empty() {
        println!(
            "{name}: invalid: {} ({}) at `{}`: {e}",
            e.code(),
            e.category(),
            e.pointer()
        );
        return;
    }
    for v in violations {
        println!(
            "{name}: invalid: {} ({}) at `{}`: {} (spec {})",
            v.rule.code(),
            e.category(),
            v.pointer,
            v.message,
            v.rule.section()
        );
    }
}

/// Runs `aip schema ...`.
pub fn schema(cmd: &SchemaCommand) -> ExitCode {
    let SchemaCommand::Export { dir } = cmd;
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("error: cannot create {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    for (name, schema) in aip_schema::generate_all() {
        let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        text.push('\n');
        if let Err(e) = std::fs::write(dir.join(&name), text) {
            eprintln!("error: cannot write {name}: {e}");
            return ExitCode::from(2);
        }
    }
    println!(
        "wrote {} schemas to {}",
        aip_schema::FILES.len(),
        dir.display()
    );
    ExitCode::SUCCESS
}

/// Runs `aip keys ...`.
pub fn keys(cmd: &KeysCommand) -> ExitCode {
    let KeysCommand::Generate { out } = cmd;
    let key = signing::generate_signing_key();
    let did = signing::did_key(&key.verifying_key());
    let file = json!({
        "kty": "OKP",
        "crv": "Ed25519",
        "d": URL_SAFE_NO_PAD.encode(key.to_bytes()),
        "x": URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes()),
        "did": did,
    });
    let text = format!("{file:#}\n");
    match out {
        Some(path) => {
            if let Err(e) = write_secret(path, text.as_bytes()) {
                eprintln!("error: cannot write {}: {e}", path.display());
                return ExitCode::from(2);
            }
            println!("{did}");
        }
        None => {
            println!("{did}");
            print!("{text}");
        }
    }
    ExitCode::SUCCESS
}

/// Runs `aip envelope ...`.
pub fn envelope(cmd: &EnvelopeCommand) -> ExitCode {
    match cmd {
        EnvelopeCommand::Sign { key, input } => sign(key, input),
        EnvelopeCommand::Verify { input } => verify(input),
    }
}

fn sign(key_path: &Path, input: &Path) -> ExitCode {
    let key = match read_key(key_path) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: {}: {e}", key_path.display());
            return ExitCode::from(2);
        }
    };
    let bytes = match read_input(input) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {}: {e}", input.display());
            return ExitCode::from(2);
        }
    };
    let mut value = match decode_envelope_value(&bytes, &Limits::default()) {
        Ok((_, v)) => v,
        Err(e) => {
            print_error(&input.display().to_string(), &e);
            return ExitCode::from(1);
        }
    };
    if let Err(e) = signing::sign_value(&mut value, &key) {
        println!("{}: {} ({})", e.code(), e, e.pointer());
        return ExitCode::from(1);
    }
    println!("{value}");
    ExitCode::SUCCESS
}

fn verify(input: &Path) -> ExitCode {
    let bytes = match read_input(input) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {}: {e}", input.display());
            return ExitCode::from(2);
        }
    };
    let value = match decode_envelope_value(&bytes, &Limits::default()) {
        Ok((_, v)) => v,
        Err(e) => {
            print_error(&input.display().to_string(), &e);
            return ExitCode::from(1);
        }
    };
    match signing::verify_value(&value) {
        Ok(signer) => {
            println!("{}", signer.did);
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("invalid: {} (auth) at `{}`: {e}", e.code(), e.pointer());
            ExitCode::from(1)
        }
    }
}

/// Runs `aip receipts ...`.
pub fn receipts(cmd: &ReceiptsCommand) -> ExitCode {
    let ReceiptsCommand::Verify {
        file,
        accept_null_hash_form,
    } = cmd;
    let bytes = match read_input(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    if let Err(e) = Limits::default().prescan(&bytes) {
        println!("invalid: {} at `{}`: {e}", e.code(), e.pointer());
        return ExitCode::from(1);
    }
    let form = if *accept_null_hash_form {
        HashForm::AcceptNull
    } else {
        HashForm::Omit
    };
    // Byte-level verification: canonical receipts are hashed straight from the file's bytes.
    match verify_document(&bytes, form) {
        Ok(v) => {
            println!("ok {}", v.root_hash);
            ExitCode::SUCCESS
        }
        Err(DocumentError::Json(e)) => {
            println!("invalid: aip.envelope.malformed_json: {e}");
            ExitCode::from(1)
        }
        Err(DocumentError::Chain(e)) => {
            println!("broken: {} {e}", e.code());
            ExitCode::from(1)
        }
    }
}

fn read_input(path: &Path) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .lock()
            .take(MAX_INPUT + 1)
            .read_to_end(&mut buf)
            .map_err(|e| e.to_string())?;
    } else {
        let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
        f.take(MAX_INPUT + 1)
            .read_to_end(&mut buf)
            .map_err(|e| e.to_string())?;
    }
    if buf.len() as u64 > MAX_INPUT {
        return Err(format!("input exceeds {MAX_INPUT} bytes"));
    }
    Ok(buf)
}

fn read_key(path: &Path) -> Result<Ed25519SigningKey, String> {
    let bytes = read_input(path)?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| format!("not a key file: {e}"))?;
    let d = v
        .get("d")
        .and_then(Value::as_str)
        .ok_or("key file has no `d` (seed)")?;
    let seed = URL_SAFE_NO_PAD
        .decode(d)
        .map_err(|e| format!("bad seed encoding: {e}"))?;
    let seed: [u8; 32] = seed
        .try_into()
        .map_err(|_| "seed must be 32 bytes".to_owned())?;
    Ok(signing::signing_key_from_seed(&seed))
}

fn write_secret(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}
