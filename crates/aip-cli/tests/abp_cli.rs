//! End-to-end tests of `aip abp ...` against the binary.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use abp::digest::{Digest, Domain};
use abp::json::{DecodeBounds, Value};

const GOLDEN_SHA256_HEX: &str = "85db2fe2b704e4de71d0ebeaaf0aa4529b2f448e710bc003f11e093deaa05aaa";

fn corpus_dir() -> Option<PathBuf> {
    let shared = match std::env::var("AIP_SHARED_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    let d = shared.join("abp-conformance");
    d.join("index.json").is_file().then_some(d)
}

fn aip(args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sha256_hex(b: &[u8]) -> String {
    use std::fmt::Write;
    // Plain SHA-256 through the library's digest type.
    Digest::plain(b)
        .as_bytes()
        .iter()
        .fold(String::new(), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

fn copy_corpus(src: &Path, name: &str) -> PathBuf {
    let dst = std::env::temp_dir().join(format!("aip-abp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    for (rel, bytes) in abp::conformance::read_dir(src).unwrap() {
        let p = dst.join(&rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    dst
}

#[test]
fn conformance_prints_the_exact_report_and_exits_zero() {
    let Some(dir) = corpus_dir() else {
        println!("SKIP: abp-conformance corpus not found");
        return;
    };
    let (code, stdout, _) = aip(&["abp", "conformance", "--corpus", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(stdout.len(), 196);
    assert_eq!(sha256_hex(&stdout), GOLDEN_SHA256_HEX);
    assert!(!stdout.ends_with(b"\n"));
}

#[test]
fn bad_usage_and_integrity_failures_exit_two_with_nothing_on_stdout() {
    let (code, stdout, _) = aip(&["abp", "conformance"]);
    assert_eq!((code, stdout.len()), (2, 0));
    let (code, _, err) = aip(&["abp", "conformance", "--corpus", "/nonexistent/corpus"]);
    assert_eq!(code, 2);
    assert!(err.contains("corpus unreadable"));
    let Some(dir) = corpus_dir() else {
        println!("SKIP: abp-conformance corpus not found");
        return;
    };
    let extra = copy_corpus(&dir, "extra");
    std::fs::write(extra.join(".stray"), b"x").unwrap();
    let (code, stdout, err) = aip(&["abp", "conformance", "--corpus", extra.to_str().unwrap()]);
    assert_eq!((code, stdout.len()), (2, 0));
    assert!(
        err.contains("corpus integrity failure: :corpus_file_set_mismatch"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(extra);
}

/// Re-seal a corpus after editing one case file: file hash, corpus digest and canonical index bytes.
fn reseal(dir: &Path, rel: &str, new_bytes: &[u8]) {
    std::fs::write(dir.join(rel), new_bytes).unwrap();
    let index_bytes = std::fs::read(dir.join("index.json")).unwrap();
    let Value::Object(mut index) = abp::json::decode(&index_bytes, &DecodeBounds::MAX).unwrap()
    else {
        panic!()
    };
    let files: Vec<Value> = index
        .get("files")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|f| {
            let Value::Object(mut f) = f.clone() else {
                panic!()
            };
            if f.get("path").and_then(Value::as_str) == Some(rel) {
                f.insert(
                    "sha256_base64url",
                    Value::string(abp::base64url::encode(Digest::plain(new_bytes).as_bytes())),
                );
            }
            Value::Object(f)
        })
        .collect();
    index.insert("files", Value::Array(files));
    let digest = Digest::compute(
        Domain::CorpusIndex,
        &abp::jcs::encode(&Value::Object(index.without(&["corpus_digest"]))),
    );
    index.insert("corpus_digest", Value::string(digest.to_tagged()));
    std::fs::write(
        dir.join("index.json"),
        abp::jcs::encode(&Value::Object(index)),
    )
    .unwrap();
}

#[test]
fn a_flipped_expected_code_turns_the_run_red_with_exit_one() {
    let Some(dir) = corpus_dir() else {
        println!("SKIP: abp-conformance corpus not found");
        return;
    };
    let work = copy_corpus(&dir, "flip");
    let rel = "cases/json-decode.json";
    let text = std::fs::read_to_string(work.join(rel)).unwrap();
    let flipped = text.replacen(
        "\"code\":\"duplicate_member\"",
        "\"code\":\"trailing_bytes\"",
        1,
    );
    assert_ne!(text, flipped);
    reseal(&work, rel, flipped.as_bytes());
    let (code, stdout, _) = aip(&["abp", "conformance", "--corpus", work.to_str().unwrap()]);
    let report = abp::json::decode(&stdout, &DecodeBounds::MAX).unwrap();
    assert_eq!(code, 1);
    assert_eq!(report.get("disagreed").and_then(Value::as_int), Some(1));
    assert_eq!(report.get("agreement"), Some(&Value::Bool(false)));
    let _ = std::fs::remove_dir_all(work);
}

fn case_text(dir: &Path, file: &str, id: &str) -> String {
    let bytes = std::fs::read(dir.join("cases").join(file)).unwrap();
    let v = abp::json::decode(&bytes, &DecodeBounds::MAX).unwrap();
    let cases = v.get("cases").and_then(Value::as_array).unwrap();
    let c = cases
        .iter()
        .find(|c| c.get("id").and_then(Value::as_str) == Some(id))
        .unwrap();
    c.get("input")
        .and_then(|i| i.get("text"))
        .and_then(Value::as_str)
        .unwrap()
        .to_owned()
}

#[test]
fn verify_digest_and_canonicalize_report_evidence_and_typed_errors() {
    let Some(dir) = corpus_dir() else {
        println!("SKIP: abp-conformance corpus not found");
        return;
    };
    let tmp = std::env::temp_dir().join(format!("aip-abp-verify-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let bp = tmp.join("bp.json");
    let dp = tmp.join("dp.json");
    std::fs::write(
        &bp,
        case_text(&dir, "blueprint-decode.json", "blueprint-decode-valid"),
    )
    .unwrap();
    std::fs::write(
        &dp,
        case_text(&dir, "deployment-decode.json", "deployment-decode-valid"),
    )
    .unwrap();
    let (code, stdout, _) = aip(&[
        "abp",
        "verify",
        "--blueprint",
        bp.to_str().unwrap(),
        "--deployment",
        dp.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let ev = abp::json::decode(&stdout, &DecodeBounds::MAX).unwrap();
    let nv = ev.get("not_verified").and_then(Value::as_array).unwrap();
    assert!(
        nv.contains(&Value::string("tenancy")) && nv.contains(&Value::string("evaluation_truth"))
    );
    assert!(
        ev.get("effective_bounds")
            .and_then(Value::as_object)
            .is_some()
    );

    // The golden pair is signed by keys the host did not supply: a typed denial, exit 1.
    let golden_b = dir.join("vectors/blueprint-golden.json");
    let golden_d = dir.join("vectors/deployment-golden.json");
    let (code, _, err) = aip(&[
        "abp",
        "verify",
        "--blueprint",
        golden_b.to_str().unwrap(),
        "--deployment",
        golden_d.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("signature_key_unsupported"), "{err}");
    let (code, _, _) = aip(&[
        "abp",
        "verify",
        "--blueprint",
        "/nonexistent",
        "--deployment",
        dp.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    let (code, _, _) = aip(&[
        "abp",
        "verify",
        "--blueprint",
        bp.to_str().unwrap(),
        "--deployment",
        dp.to_str().unwrap(),
        "--key",
        "nokey",
    ]);
    assert_eq!(code, 2);

    let (code, stdout, _) = aip(&["abp", "digest", golden_d.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(
        String::from_utf8(stdout).unwrap().trim_end(),
        "sha-256:tWFr0caS0AWFJd2UcB9gZv3kNjIUP8xZ08WWM_h8xgo"
    );
    let (code, stdout, _) = aip(&["abp", "digest", bp.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(
        String::from_utf8(stdout).unwrap().trim_end(),
        "sha-256:b1Aw4cU5AbV9k8bdbZkRCsySDHGpTAwB-aQm57Wh7B8"
    );

    let raw = tmp.join("raw.json");
    std::fs::write(&raw, "{ \"b\" : 1.0, \"a\" : [1e22] }").unwrap();
    let (code, stdout, _) = aip(&["abp", "canonicalize", raw.to_str().unwrap()]);
    assert_eq!(
        (code, stdout.as_slice()),
        (0, br#"{"a":[1e+22],"b":1}"#.as_slice())
    );
    std::fs::write(&raw, r#"{"a":1,"a":2}"#).unwrap();
    let (code, _, err) = aip(&["abp", "canonicalize", raw.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("duplicate_member"));
    let _ = std::fs::remove_dir_all(tmp);
}
