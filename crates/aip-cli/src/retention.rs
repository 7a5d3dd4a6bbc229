//! `aip retention verify`: checks an evidence archive written by retention (signature by the node
//! key, every receipt chain's links and root hash) before anyone relies on it.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use aip_core::canonical::{sha256_hex, to_canonical_vec};
use aip_core::chain::HashForm;
use aip_receipt_verify::verify_document;
use aip_runtime::retention::archive::ARCHIVE_TYPE;
use clap::Subcommand;
use serde_json::Value;

/// Archives are bounded by the batch sizes of retention (5000 audit events, 500 chains).
const MAX_ARCHIVE: u64 = 512 << 20;

/// `aip retention ...`.
#[derive(Debug, Subcommand)]
pub enum RetentionCommand {
    /// Verify an evidence archive: exit 0 verified, 1 broken or unsigned when a signer is named,
    /// 2 unreadable.
    Verify {
        /// The archive file (`<archive_dir>/evidence-….json`).
        file: PathBuf,
        /// The did:key the archive must be signed by (the node's, from its manifest).
        #[arg(long)]
        signer: Option<String>,
    },
}

/// Runs a retention subcommand.
pub fn run(cmd: RetentionCommand) -> ExitCode {
    let RetentionCommand::Verify { file, signer } = cmd;
    let bytes = match read(&file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    match verify(&bytes, signer.as_deref()) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("broken: {e}");
            ExitCode::from(1)
        }
    }
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .map_err(|e| e.to_string())?
        .take(MAX_ARCHIVE + 1)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    if buf.len() as u64 > MAX_ARCHIVE {
        return Err(format!("larger than {MAX_ARCHIVE} bytes"));
    }
    Ok(buf)
}

/// The archive's verdict: a one-line summary, or what is wrong.
fn verify(bytes: &[u8], signer: Option<&str>) -> Result<String, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if doc.get("type").and_then(Value::as_str) != Some(ARCHIVE_TYPE) {
        return Err(format!("not an {ARCHIVE_TYPE} document"));
    }
    let signed_by = match doc.get("security") {
        Some(_) => {
            let s = aip_core::signing::verify_value(&doc).map_err(|e| format!("signature: {e}"))?;
            if doc.get("node").and_then(Value::as_str) != Some(s.did.as_str()) {
                return Err("signed by a key other than the node it names".into());
            }
            Some(s.did)
        }
        None => None,
    };
    match (signer, &signed_by) {
        (Some(want), Some(got)) if want != got => {
            return Err(format!("signed by {got}, not {want}"));
        }
        (Some(_), None) => return Err("unsigned".into()),
        _ => {}
    }
    let audit = doc
        .get("audit")
        .and_then(Value::as_array)
        .ok_or("no audit array")?;
    let chains = doc
        .get("receipt_chains")
        .and_then(Value::as_array)
        .ok_or("no receipt_chains array")?;
    let mut receipts = 0usize;
    for (i, entry) in chains.iter().enumerate() {
        let chain = entry
            .get("chain")
            .ok_or(format!("receipt_chains/{i}: no chain"))?;
        let verified = verify_document(&to_canonical_vec(chain), HashForm::Omit)
            .map_err(|e| format!("receipt_chains/{i}: {e}"))?;
        if chain.get("root_hash").and_then(Value::as_str) != Some(verified.root_hash.as_str()) {
            return Err(format!(
                "receipt_chains/{i}: root_hash does not match its receipts"
            ));
        }
        receipts += chain
            .get("receipts")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
    }
    Ok(format!(
        "ok {} audit events, {} receipt chains ({receipts} receipts), {}, sha256 {}",
        audit.len(),
        chains.len(),
        signed_by.map_or("unsigned".into(), |d| format!("signed by {d}")),
        sha256_hex(bytes)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_of_another_type_is_not_an_archive() {
        let err = verify(br#"{"type":"x","audit":[],"receipt_chains":[]}"#, None).unwrap_err();
        assert!(err.contains("not an aip.retention.archive.v1"), "{err}");
    }

    #[test]
    fn an_unsigned_archive_fails_when_a_signer_is_named() {
        let doc = br#"{"type":"aip.retention.archive.v1","audit":[],"receipt_chains":[]}"#;
        assert!(verify(doc, None).unwrap().starts_with("ok 0 audit events"));
        assert_eq!(verify(doc, Some("did:key:z6Mk")).unwrap_err(), "unsigned");
    }
}
