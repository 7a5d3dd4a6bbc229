//! Benchmarks: reconcile of the corpus golden pair (and of the unsigned decode-valid pair, which runs
//! every stage), and JCS encoding of a ~1 MB document against `serde_json::to_vec` of the same value
//! in the same run. Reads `../shared/abp-conformance`; prints SKIP and exits when it is absent.
#![allow(clippy::unwrap_used, missing_docs)]

use std::path::PathBuf;

use abp::json::{DecodeBounds, Value, decode};
use abp::reconcile::{ReconcileInputs, reconcile};
use std::hint::black_box;

use criterion::{Criterion, Throughput};

fn corpus_dir() -> Option<PathBuf> {
    let shared = std::env::var("AIP_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let d = shared.join("abp-conformance");
    d.join("index.json").is_file().then_some(d)
}

fn case_text(dir: &std::path::Path, file: &str, id: &str) -> Vec<u8> {
    let v = decode(
        &std::fs::read(dir.join("cases").join(file)).unwrap(),
        &DecodeBounds::MAX,
    )
    .unwrap();
    let case = v
        .get("cases")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .find(|c| c.get("id").and_then(Value::as_str) == Some(id))
        .unwrap();
    case.get("input")
        .and_then(|i| i.get("text"))
        .and_then(Value::as_str)
        .unwrap()
        .as_bytes()
        .to_vec()
}

/// A deterministic ~1 MB JSON document with nested objects, strings (some non-ASCII), integers and
/// doubles.
fn megabyte_document() -> String {
    let mut out = String::from("[");
    let mut i = 0u64;
    while out.len() < 1_000_000 {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"id":{i},"name":"agent-{i}","score":{},"ratio":{},"tags":["alpha","beta","γ-{}"],"nested":{{"flag":{},"count":{},"text":"Lorem ipsum dolor sit amet, \"consectetur\" adipiscing elit {i}","zeta":null}}}}"#,
            i as f64 * 0.37,
            1.0 / (i as f64 + 3.0),
            i % 7,
            i.is_multiple_of(2),
            i * 1_000_003 % 9_007_199
        ));
        i += 1;
    }
    out.push(']');
    out
}

fn benches(c: &mut Criterion, dir: &std::path::Path) {
    let golden_b = std::fs::read(dir.join("vectors/blueprint-golden.json")).unwrap();
    let golden_d = std::fs::read(dir.join("vectors/deployment-golden.json")).unwrap();
    let unsigned_b = case_text(dir, "blueprint-decode.json", "blueprint-decode-valid");
    let unsigned_d = case_text(dir, "deployment-decode.json", "deployment-decode-valid");
    let inputs = ReconcileInputs::default();
    assert!(
        reconcile(&unsigned_b, &unsigned_d, &inputs)
            .denial()
            .is_none()
    );
    let mut g = c.benchmark_group("reconcile");
    g.throughput(Throughput::Elements(1));
    g.bench_function("golden_pair", |b| {
        b.iter(|| reconcile(black_box(&golden_b), black_box(&golden_d), &inputs))
    });
    g.bench_function("unsigned_pair_all_stages", |b| {
        b.iter(|| reconcile(black_box(&unsigned_b), black_box(&unsigned_d), &inputs))
    });
    g.finish();

    let text = megabyte_document();
    let ours = decode(text.as_bytes(), &DecodeBounds::MAX).unwrap();
    let theirs: serde_json::Value = serde_json::from_str(&text).unwrap();
    let size = abp::jcs::encode(&ours).len() as u64;
    println!(
        "document: {} bytes text, {size} bytes canonical",
        text.len()
    );
    let mut g = c.benchmark_group("encode_1mb");
    g.throughput(Throughput::Bytes(size));
    g.bench_function("abp_jcs_encode", |b| {
        b.iter(|| abp::jcs::encode(black_box(&ours)))
    });
    g.bench_function("serde_json_to_vec", |b| {
        b.iter(|| serde_json::to_vec(black_box(&theirs)).unwrap())
    });
    g.finish();
}

fn main() {
    let Some(dir) = corpus_dir() else {
        println!("SKIP: ../shared/abp-conformance not found (set AIP_SHARED_DIR)");
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c, &dir);
    c.final_summary();
}
