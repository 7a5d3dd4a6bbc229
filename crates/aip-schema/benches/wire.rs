//! Wire-model benchmarks, each against a baseline measured in the same run:
//! - full decode (limits + parse + spec 6.4 checks + closed typed decode + semantic rules) of a
//!   ~2 KB action envelope, and the same plus the generated JSON Schema, versus
//!   `serde_json::from_slice::<Value>` of the same bytes;
//! - envelope sign and verify rates (Ed25519, canonical JSON);
//! - receipt-chain verification versus raw SHA-256 over the same bytes: the byte-level verifier
//!   (`verify_document`, what `aip receipts verify` runs) on a 100-receipt chain and on a 2000-receipt
//!   chain (large enough for the two-thread path) as `ChainBuilder` writes them (canonical), on the
//!   same 2000 receipts with their members in another order (`struct_order`: sorted and copied
//!   before hashing) and with a different actor in every receipt (`distinct_actors`: no leading
//!   block shared with the receipt before), and the reference path (parse + canonicalise). Each
//!   chain also gets a paired report printed to stdout: raw SHA-256 and the verifier alternate,
//!   round after round, and the median of the per-round ratios is given, which drifting machine
//!   load (other tenants of the host) skews far less than runs measured one after the other.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aip_core::chain::{ChainBuilder, HashForm, verify_chain_value, verify_document_reference};
use aip_core::signing::{generate_signing_key, sign_value, verify_value};
use aip_core::*;
use aip_receipt_verify::{verify_document, verify_document_fast, verify_document_fast_split};
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
    chain_bytes_with(n, |_| "service:gateway".into())
}

fn chain_bytes_with(n: u32, actor: impl Fn(u32) -> String) -> Vec<u8> {
    let mut builder = ChainBuilder::new("chain_bench");
    for i in 0..n {
        builder.push(Receipt {
            id: ReceiptId::new(format!("rcpt_{i:04}")),
            receipt_type: ReceiptType::ToolExecuted,
            actor: Principal {
                id: PrincipalId::new(actor(i)),
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

/// The same chain with every receipt's members in the order the receipt type declared them
/// before it was put in name order (what a sender that serializes structs as declared writes).
fn struct_order(bytes: &[u8]) -> Vec<u8> {
    const ORDER: [&str; 8] = [
        "id",
        "receipt_type",
        "actor",
        "occurred_at",
        "correlation_id",
        "data",
        "previous_hash",
        "hash",
    ];
    let chain: Value = serde_json::from_slice(bytes).unwrap();
    let receipts: Vec<String> = chain["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let members: Vec<String> = ORDER
                .iter()
                .filter_map(|k| r.get(*k).map(|v| format!("\"{k}\":{v}")))
                .collect();
            format!("{{{}}}", members.join(","))
        })
        .collect();
    format!(
        "{{\"chain_id\":{},\"receipts\":[{}],\"root_hash\":{}}}",
        chain["chain_id"],
        receipts.join(","),
        chain["root_hash"]
    )
    .into_bytes()
}

/// Median of the values.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Raw SHA-256 and the verifier (one thread, then two) alternating for `rounds` rounds: medians
/// and the median per-round ratio, printed.
fn paired_report(name: &str, bytes: &[u8], rounds: usize) {
    use std::time::Instant;
    let (mut raw, mut one, mut two) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        black_box(Sha256::digest(black_box(bytes)));
        raw.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        black_box(
            verify_document_fast_split(black_box(bytes), HashForm::Omit, usize::MAX).unwrap(),
        );
        one.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        black_box(verify_document_fast_split(black_box(bytes), HashForm::Omit, 0).unwrap());
        two.push(t.elapsed().as_secs_f64());
    }
    let ratio = |v: &[f64]| median(raw.iter().zip(v).map(|(r, x)| r / x).collect());
    let (r1, r2) = (ratio(&one), ratio(&two));
    let mib = |t: f64| bytes.len() as f64 / t / (1 << 20) as f64;
    println!(
        "paired {name} ({} B, {rounds} rounds): raw SHA-256 {:.0} MiB/s; one thread {:.0} MiB/s = {r1:.2}x; two threads {:.0} MiB/s = {r2:.2}x (median per-round ratios)",
        bytes.len(),
        mib(median(raw)),
        mib(median(one)),
        mib(median(two)),
    );
}

fn receipt_chain(c: &mut Criterion) {
    let cases = [
        ("", chain_bytes(100)),
        ("", chain_bytes(2000)),
        ("struct_order_", struct_order(&chain_bytes(2000))),
        (
            "distinct_actors_",
            chain_bytes_with(2000, |i| format!("service:gateway-{i:04}")),
        ),
    ];
    for (kind, bytes) in cases {
        let chain: Value = serde_json::from_slice(&bytes).unwrap();
        let n = chain["receipts"].as_array().unwrap().len();
        assert!(
            verify_document_fast(&bytes, HashForm::Omit).is_some(),
            "the fast path takes the chain"
        );
        let name = format!("receipt_chain_{kind}{n}_{}B", bytes.len());
        paired_report(&name, &bytes, if n > 1000 { 300 } else { 3000 });
        let mut g = c.benchmark_group(name);
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
