//! End-to-end tests of the wire-model commands against the `aip` binary.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn aip(args: &[&str], stdin: Option<&[u8]>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("aip-wire-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn envelope() -> Value {
    json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": "msg_1",
        "sent_at": "2026-07-14T08:30:00Z",
        "body": {"action": {"id": "act_1", "capability_id": "cap:x", "input": {"a": 1}, "mode": "sync"}}
    })
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
    p.to_str().unwrap().to_owned()
}

#[test]
fn validate_prints_valid_or_typed_errors_and_exits_0_1_or_2() {
    let d = tmp("validate");
    let good = write(&d, "good.json", &envelope());
    let mut bad = envelope();
    bad["body"]["action"]["timeout_ms"] = json!(0);
    bad["sent_at"] = json!("soon");
    let bad = write(&d, "bad.json", &bad);

    let (code, out, _) = aip(&["validate", &good], None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("good.json: valid"));

    let (code, out, _) = aip(&["validate", &good, &bad], None);
    assert_eq!(code, 1);
    assert!(
        out.contains("aip.semantic.invalid_timestamp (permanent) at `/sent_at`"),
        "{out}"
    );
    assert!(
        out.contains("aip.semantic.zero_timeout (permanent) at `/body/action/timeout_ms`"),
        "{out}"
    );

    let (code, _, err) = aip(&["validate", &good, "/nonexistent/x.json"], None);
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = aip(&["validate", "--kind", "no_such_schema", &good], None);
    assert_eq!(code, 2);
    let (code, _, _) = aip(&["validate"], None);
    assert_eq!(code, 2);
}

#[test]
fn validate_reads_stdin_and_checks_other_kinds_by_schema_stem() {
    let body = json!({"action_id": "act_1", "status": "cached"});
    let (code, out, _) = aip(
        &["validate", "--kind", "ack", "-"],
        Some(body.to_string().as_bytes()),
    );
    assert_eq!((code, out.trim()), (0, "-: valid"));
    let (code, out, _) = aip(
        &["validate", "--kind", "ack", "-"],
        Some(br#"{"action_id":"a","status":"maybe"}"#),
    );
    assert_eq!(code, 1);
    assert!(
        out.contains("aip.envelope.schema_violation (permanent) at `/status`"),
        "{out}"
    );
    let (code, out, _) = aip(&["validate", "-"], Some(b"{not json"));
    assert_eq!(code, 1);
    assert!(out.contains("aip.envelope.malformed_json"), "{out}");
}

#[test]
fn schema_export_writes_the_52_files_with_aip_dev_ids() {
    let d = tmp("export");
    let (code, out, err) = aip(&["schema", "export", d.to_str().unwrap()], None);
    assert_eq!(code, 0, "{out}{err}");
    let files: Vec<_> = std::fs::read_dir(&d).unwrap().collect();
    assert_eq!(files.len(), 52);
    let s: Value =
        serde_json::from_slice(&std::fs::read(d.join("action_status.schema.json")).unwrap())
            .unwrap();
    assert_eq!(
        s["$id"],
        "https://aip.dev/schemas/aip/action_status.schema.json"
    );
}

#[test]
fn a_generated_key_signs_an_envelope_that_verifies_to_its_did_and_tampering_fails() {
    let d = tmp("sign");
    let key = d.join("key.json");
    let (code, did, _) = aip(&["keys", "generate", "--out", key.to_str().unwrap()], None);
    assert_eq!(code, 0);
    let did = did.trim().to_owned();
    assert!(did.starts_with("did:key:z6Mk"), "{did}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let env = write(&d, "env.json", &envelope());
    let (code, signed, err) = aip(
        &["envelope", "sign", "--key", key.to_str().unwrap(), &env],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = aip(&["envelope", "verify", "-"], Some(signed.as_bytes()));
    assert_eq!((code, out.trim()), (0, did.as_str()));

    let mut tampered: Value = serde_json::from_str(&signed).unwrap();
    tampered["body"]["action"]["input"]["a"] = json!(2);
    let (code, out, _) = aip(
        &["envelope", "verify", "-"],
        Some(tampered.to_string().as_bytes()),
    );
    assert_eq!(code, 1);
    assert!(out.contains("aip.signature.invalid"), "{out}");
    let (code, out, _) = aip(&["envelope", "verify", &env], None);
    assert_eq!(code, 1);
    assert!(out.contains("aip.signature.missing_security"), "{out}");
}

#[test]
fn receipts_verify_prints_the_root_or_the_first_broken_link() {
    use aip_core::receipts::ChainBuilder;
    use aip_core::*;
    let mut b = ChainBuilder::new("chain_1");
    for i in 0..3 {
        b.push(Receipt {
            id: ReceiptId::new(format!("rcpt_{i}")),
            receipt_type: ReceiptType::ToolExecuted,
            actor: Principal {
                id: PrincipalId::new("svc"),
                kind: PrincipalKind::Service,
                display_name: None,
                trust_domain: None,
                did: None,
                external_refs: vec![],
                delegated_authority: vec![],
                auth_context: None,
            },
            occurred_at: Timestamp::now(),
            correlation_id: None,
            data: Some(json!({"i": i})),
            previous_hash: None,
            hash: None,
        });
    }
    let chain = serde_json::to_value(b.finish()).unwrap();
    let d = tmp("receipts");
    let good = write(&d, "chain.json", &chain);
    let (code, out, _) = aip(&["receipts", "verify", &good], None);
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        format!("ok {}", chain["root_hash"].as_str().unwrap())
    );

    let mut broken = chain.clone();
    broken["receipts"][1]["data"]["i"] = json!(7);
    let bad = write(&d, "broken.json", &broken);
    let (code, out, _) = aip(&["receipts", "verify", &bad], None);
    assert_eq!(code, 1);
    assert!(
        out.contains("aip.receipt.hash_mismatch") && out.contains("at receipt 1"),
        "{out}"
    );
    let (code, _, _) = aip(&["receipts", "verify", "/nonexistent"], None);
    assert_eq!(code, 2);
}
