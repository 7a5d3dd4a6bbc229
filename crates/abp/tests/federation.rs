//! Federation profile behaviour beyond the corpus (spec 11): state codecs, carriers, commitment
//! verification order, freshness and issuer key sets.
#![allow(clippy::unwrap_used)]

mod common;

use abp::Code;
use abp::federation::{self, CommitmentContext, PriorReceipt};
use abp::json::{DecodeBounds, Object, Value, decode};
use common::{host_key, signed_envelope};

fn ctx() -> CommitmentContext {
    CommitmentContext {
        keys: vec![host_key()],
        ..CommitmentContext::default()
    }
}

#[test]
fn state_codecs_are_lossy_aware_and_deny_unmappable_states() {
    assert_eq!(
        federation::from_a2a_state("TASK_STATE_COMPLETED").unwrap(),
        "completed"
    );
    assert_eq!(
        federation::to_a2a_state("input_required").unwrap(),
        "TASK_STATE_INPUT_REQUIRED"
    );
    assert_eq!(
        federation::from_mcp_state("cancelled").unwrap(),
        "cancelled"
    );
    assert_eq!(federation::to_mcp_state("submitted").unwrap(), "working");
    assert_eq!(
        federation::from_a2a_state("TASK_STATE_UNSPECIFIED")
            .unwrap_err()
            .code,
        Code::FederationStateUnmappable
    );
    assert_eq!(
        federation::from_mcp_state("paused").unwrap_err().code,
        Code::FederationStateUnmappable
    );
    for crossing in ["rejected", "auth_required"] {
        assert_eq!(
            federation::to_mcp_state(crossing).unwrap_err().code,
            Code::FederationMappingConflict
        );
    }
    for s in federation::LOGICAL_STATES {
        assert_eq!(
            federation::from_a2a_state(federation::to_a2a_state(s).unwrap()).unwrap(),
            *s
        );
    }
}

#[test]
fn carriers_decode_the_envelope_under_the_registered_namespace() {
    let env = signed_envelope(|_| {});
    let body = decode(&env.canonical_bytes(), &DecodeBounds::MAX).unwrap();
    let mut meta = Object::new();
    meta.insert(federation::NAMESPACE, body);
    let mut task = Object::new();
    task.insert("metadata", Value::Object(meta.clone()));
    let decoded = federation::from_carrier(&Value::Object(task), "metadata").unwrap();
    assert_eq!(decoded.canonical_bytes(), env.canonical_bytes());
    let mut request = Object::new();
    request.insert("_meta", Value::Object(Object::new()));
    assert_eq!(
        federation::from_carrier(&Value::Object(request), "_meta")
            .unwrap_err()
            .code,
        Code::MissingRequiredField
    );
}

#[test]
fn a_valid_receipt_verifies_and_any_divergence_from_a_prior_receipt_conflicts() {
    let env = signed_envelope(|_| {});
    assert_eq!(
        federation::verify_commitment(&env, &ctx()).unwrap(),
        "task-1"
    );
    let ours = env.terminal_commitment().to_tagged();
    let mut same = ctx();
    same.prior_receipts.push(PriorReceipt {
        task_identity: "task-1".into(),
        terminal_state: "completed".into(),
        commitment: ours,
    });
    assert!(federation::verify_commitment(&env, &same).is_ok());
    let mut other_task = ctx();
    other_task.prior_receipts.push(PriorReceipt {
        task_identity: "task-2".into(),
        terminal_state: "failed".into(),
        commitment: "x".into(),
    });
    assert!(federation::verify_commitment(&env, &other_task).is_ok());
    let mut equivocation = ctx();
    equivocation.prior_receipts.push(PriorReceipt {
        task_identity: "task-1".into(),
        terminal_state: "completed".into(),
        commitment: signed_envelope(|e| {
            e.insert(
                "compatibility_reference",
                decode(
                    br#"[{"identity":"2.0.0","name":"abp"}]"#,
                    &DecodeBounds::MAX,
                )
                .unwrap(),
            )
        })
        .terminal_commitment()
        .to_tagged(),
    });
    assert_eq!(
        federation::verify_commitment(&env, &equivocation)
            .unwrap_err()
            .code,
        Code::FederationTerminalConflict
    );
}

#[test]
fn the_signature_is_checked_before_identity_and_freshness_after_conflict() {
    let env = signed_envelope(|_| {});
    let mut no_keys = ctx();
    no_keys.keys.clear();
    no_keys.audience = Some("someone-else".into());
    assert_eq!(
        federation::verify_commitment(&env, &no_keys)
            .unwrap_err()
            .code,
        Code::SignatureKeyUnsupported
    );
    let mut wrong_issuer_keys = ctx();
    wrong_issuer_keys
        .issuer_key_sets
        .push(("iss".into(), vec!["other-key".into()]));
    assert_eq!(
        federation::verify_commitment(&env, &wrong_issuer_keys)
            .unwrap_err()
            .code,
        Code::SignatureKeyUnsupported
    );
    let mut stale = ctx();
    stale.created_after = Some("2026-06-01T00:00:00Z".into());
    assert_eq!(
        federation::verify_commitment(&env, &stale)
            .unwrap_err()
            .code,
        Code::BindingAttestationStale
    );
    let mut early = ctx();
    early.created_before = Some("2025-01-01T00:00:00Z".into());
    assert_eq!(
        federation::verify_commitment(&env, &early)
            .unwrap_err()
            .code,
        Code::BindingAttestationStale
    );
    let mut subject = ctx();
    subject.subject = Some("nobody".into());
    assert_eq!(
        federation::verify_commitment(&env, &subject)
            .unwrap_err()
            .code,
        Code::AudienceMismatch
    );
}

#[test]
fn envelope_hooks_deny_cancellation_as_terminal_and_status_beside_terminal() {
    let env = signed_envelope(|_| {});
    let mut v = match decode(&env.canonical_bytes(), &DecodeBounds::MAX).unwrap() {
        Value::Object(o) => o,
        _ => unreachable!("envelopes are objects"),
    };
    v.insert("checkpoint_status", Value::string("working"));
    assert_eq!(
        federation::Envelope::from_value(&Value::Object(v.clone()))
            .unwrap_err()
            .code,
        Code::InvalidConstraint
    );
    v.insert("checkpoint_status", Value::Null);
    let v = v.without(&["checkpoint_status"]);
    let mut cancelled = v.clone();
    cancelled.insert("terminal_state", Value::string("cancelled"));
    assert_eq!(
        federation::Envelope::from_value(&Value::Object(cancelled))
            .unwrap_err()
            .code,
        Code::InvalidConstraint
    );
    let no_receipt = v.without(&["evidence_receipt"]);
    assert_eq!(
        federation::Envelope::from_value(&Value::Object(no_receipt))
            .unwrap_err()
            .code,
        Code::InvalidConstraint
    );
}
