//! Wire-model benchmarks, each against a baseline measured in the same run:
//! - full decode (limits + parse + spec 6.4 checks + closed typed decode + semantic rules) of a
//!   ~2 KB action envelope, and the same plus the generated JSON Schema, versus
//!   `serde_json::from_slice::<Value>` of the same bytes;
//! - envelope sign and verify rates (Ed25519, canonical JSON);
//! - receipt-chain verification versus raw SHA-256 over the same bytes: the byte-level verifier
//!   (`verify_document`, what `aip receipts verify` runs) on a 100-receipt chain and on a 2000-receipt
//!   chain (large enough for the two-thread path), and the reference path (parse + canonicalise).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aip_core::receipts::{
    ChainBuilder, HashForm, verify_chain_value, verify_document, verify_document_fast,
    verify_document_fast_split, verify_document_reference,
};
use aip_core::signing::{generate_signing_key, sign_value, verify_value};
use aip_core::*;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::hint::black_box;

/// A realistic action envelope of about 2 KB: identity, delegation chain, callback, transaction,
/// observability and a structured input.
fn action_envelope() -> Vec<u8> {
    let principal =
        |id: &str, kind: &str| json!({"id": id, "kind": kind, "trust_domain": "example.com"});
    let env = json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": "msg_0190c42f2d5a70008000000000000001",
        "sent_at": "2026-07-14T08:30:00Z",
        "correlation_id": "corr_0190c42f2d5a70008000000000000002",
        "session_id": "sess_0190c42f2d5a70008000000000000009",
        "from": principal("service:booking-client", "service"),
        "to": principal("agent:restaurant-manager", "agent"),
        "trace": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
        "body": {"action": {
            "id": "act_0190c42f2d5a70008000000000000003",
            "capability_id": "cap:restaurant:booking:create",
            "input": {
                "name": "Jordan Example",
                "party_size": 4,
                "requested_time": "2026-07-14T19:30:00+04:00",
                "notes": "Window table if possible; one guest uses a wheelchair; celebrating an anniversary.",
                "contact": {"email": "jordan@example.com", "phone": "+15555550100"},
                "preferences": ["window", "quiet", "accessible"],
                "budget": {"currency": "EUR", "max_per_person": 80}
            },
            "mode": "async",
            "idempotency_key": "booking-jordan-20260714-1930",
            "timeout_ms": 30000,
            "delegation_chain": [
                {"from": principal("human:jordan", "human"), "to": principal("agent:concierge", "agent"),
                 "scope": "bookings:create", "delegated_at": "2026-07-14T08:00:00Z"},
                {"from": principal("agent:concierge", "agent"), "to": principal("service:booking-client", "service"),
                 "scope": "bookings:create", "delegated_at": "2026-07-14T08:10:00Z"}
            ],
            "callback": {"profile": "aip-http", "target": "https://client.example.com/aip/callbacks"},
            "observability": {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"},
            "compliance": {"regimes": ["gdpr"], "data_classification": "confidential"},
            "identity": {
                "tenant": {"id": "tenant-42", "system": "example-idp"},
                "credential_ref": {"id": "cred-7", "issuer": "https://idp.example.com", "scopes": ["bookings:create"]},
                "acted_on_behalf_of": principal("human:jordan", "human")
            },
            "transaction": {"mode": "execute", "transaction_id": "txn_0190c42f2d5a70008000000000000004"}
        }}
    });
    serde_json::to_vec(&env).unwrap()
}

fn decode(c: &mut Criterion) {
    let bytes = action_envelope();
    let limits = Limits::default();
    let validators = aip_schema::Validators::new().unwrap();
    decode_envelope(&bytes, &limits).expect("the benchmark envelope is valid");
    let mut g = c.benchmark_group(format!("decode_action_envelope_{}B", bytes.len()));
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("baseline_serde_json_value", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Value>(black_box(&bytes)).unwrap()))
    });
    g.bench_function("decode_envelope_full", |b| {
        b.iter(|| black_box(decode_envelope(black_box(&bytes), &limits).unwrap()))
    });
    g.bench_function("decode_envelope_full_plus_generated_schema", |b| {
        b.iter(|| {
            let (env, value) = decode_envelope_value(black_box(&bytes), &limits).unwrap();
            assert!(validators.is_valid("envelope", &value).unwrap());
            black_box(env)
        })
    });
    g.finish();
}

fn signatures(c: &mut Criterion) {
    let value: Value = serde_json::from_slice(&action_envelope()).unwrap();
    let key = generate_signing_key();
    let mut signed = value.clone();
    sign_value(&mut signed, &key).unwrap();
    let mut g = c.benchmark_group("envelope_signature");
    g.throughput(Throughput::Elements(1));
    g.bench_function("sign", |b| {
        b.iter(|| {
            let mut v = value.clone();
            sign_value(&mut v, &key).unwrap();
            black_box(v)
        })
    });
    g.bench_function("verify", |b| {
        b.iter(|| black_box(verify_value(black_box(&signed)).unwrap()))
    });
    g.finish();
}

fn chain_bytes(n: u32) -> Vec<u8> {
    let mut builder = ChainBuilder::new("chain_bench");
    for i in 0..n {
        builder.push(Receipt {
            id: ReceiptId::new(format!("rcpt_{i:04}")),
            receipt_type: ReceiptType::ToolExecuted,
            actor: Principal {
                id: PrincipalId::new("service:gateway"),
                kind: PrincipalKind::Service,
                display_name: None,
                trust_domain: Some("example.com".into()),
                did: None,
                external_refs: vec![],
                delegated_authority: vec![],
                auth_context: None,
            },
            occurred_at: Timestamp::from_wire("2026-07-14T08:30:00Z"),
            correlation_id: Some(CorrelationId::new("corr_1")),
            data: Some(json!({"action_id": "act_1", "decision": "allow", "input_hash": "ab".repeat(32), "step": i})),
            previous_hash: None,
            hash: None,
        });
    }
    serde_json::to_vec(&builder.finish()).unwrap()
}

fn receipt_chain(c: &mut Criterion) {
    for n in [100u32, 2000] {
        let bytes = chain_bytes(n);
        let chain: Value = serde_json::from_slice(&bytes).unwrap();
        assert!(
            verify_document_fast(&bytes, HashForm::Omit).is_some(),
            "the fast path takes a canonical chain"
        );
        let mut g = c.benchmark_group(format!("receipt_chain_{n}_{}B", bytes.len()));
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function("baseline_raw_sha256", |b| {
            b.iter(|| black_box(Sha256::digest(black_box(&bytes))))
        });
        g.bench_function("verify_document_bytes", |b| {
            b.iter(|| black_box(verify_document(black_box(&bytes), HashForm::Omit).unwrap()))
        });
        g.bench_function("verify_document_bytes_one_thread", |b| {
            b.iter(|| {
                black_box(
                    verify_document_fast_split(black_box(&bytes), HashForm::Omit, usize::MAX)
                        .unwrap(),
                )
            })
        });
        g.bench_function("verify_document_bytes_two_threads", |b| {
            b.iter(|| {
                black_box(verify_document_fast_split(black_box(&bytes), HashForm::Omit, 0).unwrap())
            })
        });
        if n == 100 {
            g.bench_function("reference_parse_and_verify_chain_value", |b| {
                b.iter(|| {
                    black_box(verify_document_reference(black_box(&bytes), HashForm::Omit).unwrap())
                })
            });
            g.bench_function("verify_chain_value_preparsed", |b| {
                b.iter(|| black_box(verify_chain_value(black_box(&chain), HashForm::Omit).unwrap()))
            });
        }
        g.finish();
    }
}

criterion_group!(benches, decode, signatures, receipt_chain);
criterion_main!(benches);
