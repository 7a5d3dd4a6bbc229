#![allow(clippy::unwrap_used)]
//! Locating the read-only shared inputs (COMMON.md): `$AIP_SHARED_DIR`, else the workspace root's
//! sibling `shared/`.
#![allow(dead_code)]

use std::path::PathBuf;

use abp::base64url;
use abp::digest::{Digest, Domain};
use abp::federation::Envelope;
use abp::jcs;
use abp::json::{self, DecodeBounds, Object, Value};
use abp::signature::HostKey;
use ed25519_dalek::{Signer, SigningKey};

/// The shared directory, or `None` (the caller prints `SKIP:` and returns).
pub fn shared_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("AIP_SHARED_DIR") {
        let p = PathBuf::from(d);
        return p.is_dir().then_some(p);
    }
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while dir.pop() {
        if dir.join("Cargo.lock").is_file() {
            let shared = dir.parent()?.join("shared");
            return shared.is_dir().then_some(shared);
        }
    }
    None
}

/// The conformance corpus directory, or `None`.
pub fn corpus_dir() -> Option<PathBuf> {
    let d = shared_dir()?.join("abp-conformance");
    d.join("index.json").is_file().then_some(d)
}

fn obj(t: &str) -> Object {
    match json::decode(t.as_bytes(), &DecodeBounds::MAX).unwrap() {
        Value::Object(o) => o,
        _ => panic!("not an object"),
    }
}

const SIGNER: [u8; 32] = [7u8; 32];

/// The host key matching the test signer.
pub fn host_key() -> HostKey {
    let vk = SigningKey::from_bytes(&SIGNER).verifying_key();
    HostKey::from_base64url("k1", &base64url::encode(vk.as_bytes())).unwrap()
}

/// A signed terminal envelope (test-side signing; the library never signs). `edit` changes the
/// envelope before the receipt is computed and signed.
pub fn signed_envelope(edit: impl FnOnce(&mut Object)) -> Envelope {
    let digest = "sha-256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let mut e = obj(&format!(
        r#"{{"audience":"aud","authority_proof_references":[],"blueprint_digest":"{digest}","compatibility_reference":[{{"identity":"1.0.0","name":"abp"}}],"deployment_digest":"{digest}","idempotency_identity":"idem-1","identity_mapping_evidence":{{"claims":[{{"kind":"correlation","value":"x"}}]}},"input_commitment":"{digest}","issuer":"iss","recovery_handle":"r-1","resource_policy":{{"attempts":1,"concurrency":1,"cost":1,"tokens":1}},"result_classification_ceiling":{{"level":"internal","markers":[]}},"result_schema":"{digest}","subject":"sub","task_identity":"task-1","terminal_state":"completed","time_policy":{{"elapsed_ms":10}}}}"#
    ));
    edit(&mut e);
    let mut receipt = obj(&format!(
        r#"{{"checkpoint_history_commitment":"{digest}","result_digest":"{digest}"}}"#
    ));
    let mut c = Object::new();
    for k in [
        "task_identity",
        "terminal_state",
        "result_classification_ceiling",
        "compatibility_reference",
        "authority_proof_references",
    ] {
        c.insert(k, e.get(k).cloned().unwrap());
    }
    c.insert("result_digest", Value::string(digest));
    c.insert("checkpoint_history_commitment", Value::string(digest));
    let commitment = Digest::compute(Domain::FederationEnvelope, &jcs::encode(&Value::Object(c)));
    receipt.insert("terminal_commitment", Value::string(commitment.to_tagged()));
    e.insert("evidence_receipt", Value::Object(receipt.clone()));
    let binding = Digest::compute(
        Domain::FederationEnvelope,
        &jcs::encode(&Value::Object(e.clone())),
    );
    let protected = obj(r#"{"alg":"EdDSA","b64":false,"crit":["b64"],"kid":"k1"}"#);
    let attrs = obj(&format!(
        r#"{{"algorithm":"Ed25519","content_digest":"{}","created_at":"2026-01-01T00:00:00Z","key_id":"k1","purpose":"federation-envelope"}}"#,
        binding.to_tagged()
    ));
    let mut input = base64url::encode(&jcs::encode(&Value::Object(protected.clone()))).into_bytes();
    input.push(b'.');
    input.extend(jcs::encode(&Value::Object(attrs.clone())));
    let sig = SigningKey::from_bytes(&SIGNER).sign(&input);
    let mut s = Object::new();
    s.insert("protected", Value::Object(protected));
    s.insert("signed_attributes", Value::Object(attrs));
    s.insert(
        "signature",
        Value::string(base64url::encode(&sig.to_bytes())),
    );
    receipt.insert("signature", Value::Object(s));
    e.insert("evidence_receipt", Value::Object(receipt));
    Envelope::from_value(&Value::Object(e)).unwrap()
}
