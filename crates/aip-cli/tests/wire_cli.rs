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

/// A sealed chain of `n` receipts as `aip-core` writes it.
fn chain(n: usize) -> Value {
    use aip_core::chain::ChainBuilder;
    let mut b = ChainBuilder::new("chain_1");
    for i in 0..n {
        b.push(receipt(i));
    }
    serde_json::to_value(b.finish()).unwrap()
}

fn receipt(i: usize) -> aip_core::Receipt {
    use aip_core::*;
    Receipt {
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
    }
}

#[test]
fn receipts_verify_prints_the_root_or_the_first_broken_link() {
    let chain = chain(3);
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

/// A key file from `aip keys generate` in `dir` (a temp dir: keys are never committed) and its did.
fn generate_key(dir: &Path) -> (String, String) {
    let key = dir.join("key.json");
    let key = key.to_str().unwrap().to_owned();
    let (code, did, err) = aip(&["keys", "generate", "--out", &key], None);
    assert_eq!(code, 0, "{err}");
    (key, did.trim().to_owned())
}

/// `env` signed by `aip envelope sign`, exactly as the binary printed it.
fn sign(dir: &Path, key: &str, env: &Value) -> String {
    let file = write(dir, "unsigned.json", env);
    let (code, signed, err) = aip(&["envelope", "sign", "--key", key, &file], None);
    assert_eq!(code, 0, "{err}");
    signed.trim().to_owned()
}

/// `aip validate [--kind K] -` on `doc`: (exit code, stdout).
fn validate_stdin(kind: &str, doc: &[u8]) -> (i32, String) {
    let (code, out, _) = aip(&["validate", "--kind", kind, "-"], Some(doc));
    (code, out.trim().to_owned())
}

fn wrap(message_type: &str, key: &str, body: Value) -> Value {
    let mut env = envelope();
    env["message_type"] = json!(message_type);
    env["body"] = json!({ key: body });
    env
}

fn status(chain: &Value) -> Value {
    json!({"action_id": "act_1", "state": "completed", "updated_at": "2026-07-14T08:30:00Z",
           "receipt_chain": chain})
}

#[test]
fn a_signed_envelope_validates_and_names_its_signer() {
    let d = tmp("validate-signed");
    let (key, did) = generate_key(&d);
    let signed = sign(&d, &key, &envelope());
    let (code, out) = validate_stdin("envelope", signed.as_bytes());
    assert_eq!(
        (code, out.as_str()),
        (0, format!("-: valid, signed by {did}").as_str())
    );
    // An unsigned envelope is still valid, with no signer named.
    let (code, out) = validate_stdin("envelope", envelope().to_string().as_bytes());
    assert_eq!((code, out.as_str()), (0, "-: valid"));
}

#[test]
fn a_signed_envelope_with_one_body_byte_changed_is_invalid_with_aip_signature_invalid() {
    let d = tmp("validate-tampered");
    let (key, _) = generate_key(&d);
    let signed = sign(&d, &key, &envelope());
    assert_eq!(signed.matches(r#""a":1"#).count(), 1, "{signed}");
    let tampered = signed.replace(r#""a":1"#, r#""a":2"#);
    let (code, out) = validate_stdin("envelope", tampered.as_bytes());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with("-: invalid: aip.signature.invalid (auth) at `/security/signature`"),
        "{out}"
    );
    assert!(!out.contains(&key), "{out}");
}

#[test]
fn a_security_did_that_is_not_an_ed25519_did_key_is_invalid() {
    let d = tmp("validate-did");
    let (key, _) = generate_key(&d);
    let signed: Value = serde_json::from_str(&sign(&d, &key, &envelope())).unwrap();
    for did in [
        "did:web:example.com",
        "did:key:z0OIl",
        "did:key:z6LSbysY2xFMRpGMhb7tFTLMpeuPRaqaWM1yECx2AtzE3KCc",
        "",
    ] {
        let mut env = signed.clone();
        env["security"]["did"] = json!(did);
        let (code, out) = validate_stdin("envelope", env.to_string().as_bytes());
        assert_eq!(code, 1, "{did}: {out}");
        assert!(
            out.contains("aip.signature.invalid_did (auth) at `/security/did`"),
            "{did}: {out}"
        );
    }
    // A `security` member without a signature fails closed too.
    let mut env = envelope();
    env["security"] = json!({"did": signed["security"]["did"]});
    let (code, out) = validate_stdin("envelope", env.to_string().as_bytes());
    assert_eq!(code, 1);
    assert!(out.contains("aip.signature.missing_signature"), "{out}");
}

#[test]
fn an_envelope_carrying_a_valid_receipt_chain_validates() {
    let c = chain(3);
    let docs = [
        wrap("aip.audit.v1.receipt_chain", "receipt_chain", c.clone()),
        wrap(
            "aip.lifecycle.v1.action_status",
            "action_status",
            status(&c),
        ),
        wrap(
            "aip.lifecycle.v1.action_list",
            "action_list",
            json!({"actions": [status(&c), status(&chain(1))], "total_size": 2}),
        ),
        wrap(
            "aip.audit.v1.audit_query_result",
            "audit_query_result",
            json!({"events": [], "receipt_chains": [c, chain(2)]}),
        ),
    ];
    for (doc, n) in docs.iter().zip([1, 1, 2, 2]) {
        let (code, out) = validate_stdin("envelope", doc.to_string().as_bytes());
        let chains = if n == 1 { "chain" } else { "chains" };
        assert_eq!(
            (code, out),
            (0, format!("-: valid, {n} receipt {chains} verified")),
            "{doc}"
        );
    }
    // Other kinds are checked too, and a signed envelope names both.
    let (code, out) = validate_stdin("action_status", status(&c).to_string().as_bytes());
    assert_eq!(
        (code, out.as_str()),
        (0, "-: valid, 1 receipt chain verified")
    );
    let d = tmp("validate-signed-chain");
    let (key, did) = generate_key(&d);
    let signed = sign(&d, &key, &docs[1]);
    let (code, out) = validate_stdin("envelope", signed.as_bytes());
    assert_eq!(
        (code, out),
        (
            0,
            format!("-: valid, signed by {did}, 1 receipt chain verified")
        )
    );
}

#[test]
fn a_changed_receipt_or_a_broken_previous_hash_is_invalid_with_the_receipt_code_and_pointer() {
    use aip_core::ReceiptChain;
    use aip_core::chain::seal;

    let mut changed = chain(3);
    changed["receipts"][1]["data"]["i"] = json!(7);
    let env = wrap(
        "aip.audit.v1.receipt_chain",
        "receipt_chain",
        changed.clone(),
    );
    let (code, out) = validate_stdin("envelope", env.to_string().as_bytes());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with(
            "-: invalid: aip.receipt.hash_mismatch (permanent) at `/body/receipt_chain/receipts/1`"
        ),
        "{out}"
    );

    let mut relinked: ReceiptChain = serde_json::from_value(chain(3)).unwrap();
    seal(&mut relinked.receipts[2], Some("00"));
    let relinked = serde_json::to_value(relinked).unwrap();
    let cases = [
        (
            wrap(
                "aip.lifecycle.v1.action_status",
                "action_status",
                status(&relinked),
            ),
            "aip.receipt.broken_link",
            "/body/action_status/receipt_chain/receipts/2",
        ),
        (
            wrap(
                "aip.lifecycle.v1.action_list",
                "action_list",
                json!({"actions": [status(&chain(2)), status(&changed)], "total_size": 2}),
            ),
            "aip.receipt.hash_mismatch",
            "/body/action_list/actions/1/receipt_chain/receipts/1",
        ),
        (
            wrap(
                "aip.audit.v1.audit_query_result",
                "audit_query_result",
                json!({"events": [], "receipt_chains": [chain(1), relinked]}),
            ),
            "aip.receipt.broken_link",
            "/body/audit_query_result/receipt_chains/1/receipts/2",
        ),
    ];
    for (env, code_str, pointer) in cases {
        let (code, out) = validate_stdin("envelope", env.to_string().as_bytes());
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains(&format!("{code_str} (permanent) at `{pointer}`")),
            "{out}"
        );
    }
    let (code, out) = validate_stdin("action_status", status(&changed).to_string().as_bytes());
    assert_eq!(code, 1);
    assert!(
        out.contains("aip.receipt.hash_mismatch (permanent) at `/receipt_chain/receipts/1`"),
        "{out}"
    );
}

#[test]
fn the_signature_is_checked_before_the_receipt_chains() {
    let d = tmp("validate-order");
    let (key, _) = generate_key(&d);
    let mut changed = chain(2);
    changed["receipts"][0]["data"]["i"] = json!(9);
    let env = wrap("aip.audit.v1.receipt_chain", "receipt_chain", changed);
    // Signed over the broken chain: the signature holds, so the chain decides.
    let signed = sign(&d, &key, &env);
    let (code, out) = validate_stdin("envelope", signed.as_bytes());
    assert_eq!(code, 1);
    assert!(out.contains("aip.receipt.hash_mismatch"), "{out}");
    // Tampered after signing: the signature fails first.
    let mut tampered: Value = serde_json::from_str(&signed).unwrap();
    tampered["body"]["receipt_chain"]["chain_id"] = json!("chain_2");
    let (code, out) = validate_stdin("envelope", tampered.to_string().as_bytes());
    assert_eq!(code, 1);
    assert!(out.contains("aip.signature.invalid"), "{out}");
}

#[test]
fn an_action_whose_approval_is_not_approved_is_invalid_and_an_approved_one_is_valid() {
    let with_decision = |decision: &str| {
        let mut env = envelope();
        env["body"]["action"]["approval"] = json!({
            "approval_id": "apr_1", "decision": decision, "approver": {"id": "user:a", "kind": "human"},
            "decided_at": "2026-07-14T08:30:00Z"
        });
        env.to_string()
    };
    let (code, out) = validate_stdin("envelope", with_decision("approved").as_bytes());
    assert_eq!((code, out.as_str()), (0, "-: valid"));
    for decision in ["denied", "expired", "revoked"] {
        let (code, out) = validate_stdin("envelope", with_decision(decision).as_bytes());
        assert_eq!(code, 1, "{decision}: {out}");
        assert!(
            out.contains(
                "aip.semantic.approval_not_approved (permanent) at `/body/action/approval/decision`"
            ),
            "{decision}: {out}"
        );
    }
    // `rejected` is not a decision kind of spec 12.4 at all: the schema layer refuses it.
    let (code, out) = validate_stdin("envelope", with_decision("rejected").as_bytes());
    assert_eq!(code, 1);
    assert!(
        out.contains(
            "aip.envelope.schema_violation (permanent) at `/body/action/approval/decision`"
        ),
        "{out}"
    );
}
