//! The byte-level receipt-chain verifier agrees with the reference path (parse, canonicalise,
//! `verify_chain_value`): same verdict, same root, same first broken link, on random chains —
//! canonical and not (member order, whitespace, escapes, number spellings), unicode member names
//! whose UTF-8 and UTF-16 orders differ, both hash forms, tampering, and corrupted bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aip_core::chain::{
    DocumentError, HashForm, receipt_value_hash, receipt_value_hash_null_form, root_hash,
    verify_document_reference,
};
use aip_receipt_verify::{verify_document, verify_document_fast, verify_document_fast_split};
use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

/// How a value is written: all `false` is the canonical form.
#[derive(Debug, Clone, Copy, Default)]
struct Style {
    reverse_members: bool,
    spaces: bool,
    escape_non_ascii: bool,
    escape_slash: bool,
    upper_hex_controls: bool,
    exponent_floats: bool,
}

impl Style {
    fn canonical(self) -> bool {
        !(self.reverse_members
            || self.spaces
            || self.escape_non_ascii
            || self.escape_slash
            || self.upper_hex_controls
            || self.exponent_floats)
    }
}

fn emit_str(s: &str, st: Style, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                if st.upper_hex_controls {
                    out.push_str(&format!("\\u{:04X}", c as u32));
                } else {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                }
            }
            '/' if st.escape_slash => out.push_str("\\/"),
            c if !c.is_ascii() && st.escape_non_ascii => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn emit(v: &Value, st: Style, out: &mut String) {
    let sep = if st.spaces { ", " } else { "," };
    let colon = if st.spaces { " : " } else { ":" };
    match v {
        Value::Object(m) => {
            out.push('{');
            let mut members: Vec<(&String, &Value)> = m.iter().collect();
            if st.reverse_members {
                members.reverse();
            }
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                emit_str(k, st, out);
                out.push_str(colon);
                emit(v, st, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                emit(v, st, out);
            }
            out.push(']');
        }
        Value::String(s) => emit_str(s, st, out),
        Value::Number(n) => match n.as_f64() {
            Some(f) if st.exponent_floats && n.is_f64() => out.push_str(&format!("{f:e}")),
            _ => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// Member names, including pairs whose UTF-8 (code point) and UTF-16 orders differ
/// (U+E000 vs U+10000), escapes and control characters.
const NAMES: &[&str] = &[
    "a",
    "b",
    "id",
    "data",
    "hash_x",
    "previous",
    "é",
    "\u{e000}",
    "\u{10000}",
    "\u{ffff}z",
    "z\u{7f}",
    "k\"q",
    "back\\slash",
    "ctl\u{1}",
    "/slash",
    "tab\t",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (-1000i64..1000).prop_map(|n| json!(n)),
        prop_oneof![
            Just(1.5f64),
            Just(-0.0),
            Just(0.1),
            Just(1e300),
            Just(5e-324),
            Just(1.0),
            Just(123456789.125),
            Just(1e21),
        ]
        .prop_map(|f| Value::Number(Number::from_f64(f).unwrap())),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Value::Number(Number::from_f64(f).unwrap())),
        "[a-z/é\u{e000}\u{10000}\"\\\\\n\u{1}\u{7f} ]{0,12}".prop_map(Value::String),
        Just(Value::String("ab".repeat(32))),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(NAMES), inner), 0..4).prop_map(|ms| {
                Value::Object(ms.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

/// What to break after sealing a receipt.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    Tamper,
    BreakLink,
    DropHash,
    HashNotString,
    UpperHash,
    PreviousNull,
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        12 => Just(Fault::None),
        1 => Just(Fault::Tamper),
        1 => Just(Fault::BreakLink),
        1 => Just(Fault::DropHash),
        1 => Just(Fault::HashNotString),
        1 => Just(Fault::UpperHash),
        1 => Just(Fault::PreviousNull),
    ]
}

fn style() -> impl Strategy<Value = Style> {
    prop_oneof![
        3 => Just(Style::default()),
        1 => (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>())
            .prop_map(|(a, b, c, d, e, f)| Style {
                reverse_members: a,
                spaces: b,
                escape_non_ascii: c,
                escape_slash: d,
                upper_hex_controls: e,
                exponent_floats: f,
            }),
    ]
}

#[derive(Debug, Clone)]
struct ReceiptSpec {
    members: Vec<(&'static str, Value)>,
    null_form: bool,
    fault: Fault,
    style: Style,
    /// Only the receipt's own members out of order (a struct serialized in field order).
    reverse_top: bool,
}

fn receipt_spec() -> impl Strategy<Value = ReceiptSpec> {
    (
        prop::collection::vec((prop::sample::select(NAMES), value()), 0..5),
        prop::bool::weighted(0.2),
        fault(),
        style(),
        any::<bool>(),
    )
        .prop_map(
            |(members, null_form, fault, style, reverse_top)| ReceiptSpec {
                members,
                null_form,
                fault,
                style,
                reverse_top,
            },
        )
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum RootFault {
    None,
    Missing,
    Wrong,
    NotString,
}

#[derive(Debug, Clone)]
struct ChainSpec {
    receipts: Vec<ReceiptSpec>,
    root: RootFault,
    envelope: bool,
    top_style: Style,
    form: HashForm,
    /// Byte corruption: (position seed, replacement byte), or truncation when the byte is 0.
    corrupt: Option<(usize, u8)>,
}

fn chain_spec() -> impl Strategy<Value = ChainSpec> {
    (
        prop::collection::vec(receipt_spec(), 0..6),
        prop_oneof![
            9 => Just(RootFault::None),
            1 => Just(RootFault::Missing),
            1 => Just(RootFault::Wrong),
            1 => Just(RootFault::NotString),
        ],
        any::<bool>(),
        style(),
        prop_oneof![Just(HashForm::Omit), Just(HashForm::AcceptNull)],
        prop::option::weighted(
            0.15,
            (
                any::<usize>(),
                prop::sample::select(&b"\0 \"\\,:{}[]0aeu-/\x01\xff"[..]),
            ),
        ),
    )
        .prop_map(
            |(receipts, root, envelope, top_style, form, corrupt)| ChainSpec {
                receipts,
                root,
                envelope,
                top_style,
                form,
                corrupt,
            },
        )
}

/// Builds the document bytes; the second value says whether a valid chain is expected to be
/// taken by the fast path (no corruption).
fn build(spec: &ChainSpec) -> Vec<u8> {
    let mut texts = Vec::new();
    let mut hashes: Vec<String> = Vec::new();
    let mut prev: Option<String> = None;
    for (i, r) in spec.receipts.iter().enumerate() {
        let mut m = Map::new();
        m.insert("id".into(), json!(format!("rcpt_{i}")));
        for (k, v) in &r.members {
            if *k != "hash" && *k != "previous_hash" {
                m.insert((*k).to_owned(), v.clone());
            }
        }
        if let Some(p) = &prev {
            m.insert("previous_hash".into(), json!(p));
        }
        let mut v = Value::Object(m);
        let h = if r.null_form {
            receipt_value_hash_null_form(&v)
        } else {
            receipt_value_hash(&v)
        };
        v["hash"] = json!(h);
        match r.fault {
            Fault::None => {}
            Fault::Tamper => v["id"] = json!("tampered"),
            Fault::BreakLink => v["previous_hash"] = json!("00"),
            Fault::DropHash => {
                v.as_object_mut().unwrap().remove("hash");
            }
            Fault::HashNotString => v["hash"] = json!(7),
            Fault::UpperHash => v["hash"] = json!(h.to_uppercase()),
            Fault::PreviousNull => v["previous_hash"] = Value::Null,
        }
        let mut t = String::new();
        if r.reverse_top && r.style.canonical() {
            t.push('{');
            for (j, (k, m)) in v.as_object().unwrap().iter().rev().enumerate() {
                if j > 0 {
                    t.push(',');
                }
                emit_str(k, r.style, &mut t);
                t.push(':');
                emit(m, r.style, &mut t);
            }
            t.push('}');
        } else {
            emit(&v, r.style, &mut t);
        }
        texts.push(t);
        hashes.push(h.clone());
        prev = Some(h);
    }
    let root = root_hash(hashes.iter().map(String::as_str));
    let st = spec.top_style;
    let (sep, colon) = if st.spaces {
        (" ,\n ", " : ")
    } else {
        (",", ":")
    };
    let mut chain = format!("{{\"chain_id\"{colon}\"c/1\"{sep}\"receipts\"{colon}[");
    chain.push_str(&texts.join(sep));
    chain.push(']');
    match spec.root {
        RootFault::None => chain.push_str(&format!("{sep}\"root_hash\"{colon}\"{root}\"")),
        RootFault::Missing => {}
        RootFault::Wrong => {
            chain.push_str(&format!("{sep}\"root_hash\"{colon}\"{}\"", "0".repeat(64)))
        }
        RootFault::NotString => chain.push_str(&format!("{sep}\"root_hash\"{colon}null")),
    }
    chain.push('}');
    let doc = if spec.envelope {
        format!(
            "{{\"aip_version\"{colon}\"1.0\"{sep}\"body\"{colon}{{\"receipt_chain\"{colon}{chain}}}{sep}\"message_type\"{colon}\"aip.core.v1.receipt_chain\"}}"
        )
    } else {
        chain
    };
    let mut bytes = doc.into_bytes();
    if let Some((pos, byte)) = spec.corrupt
        && !bytes.is_empty()
    {
        let at = pos % bytes.len();
        if byte == 0 {
            bytes.truncate(at);
        } else {
            bytes[at] = byte;
        }
    }
    bytes
}

/// A comparable outcome: the root and count, or the error's kind and first broken index.
fn outcome(r: &Result<aip_core::chain::VerifiedChain, DocumentError>) -> String {
    match r {
        Ok(v) => format!("ok {} {}", v.root_hash, v.receipts),
        Err(DocumentError::Json(e)) => format!("json {e}"),
        Err(DocumentError::Chain(e)) => format!("chain {:?} {:?} {}", e.index, e.kind, e.code()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_fast_path_and_the_reference_path_agree_on_random_chains(spec in chain_spec()) {
        let bytes = build(&spec);
        let reference = verify_document_reference(&bytes, spec.form);
        let fast = verify_document_fast(&bytes, spec.form);
        if let Some(v) = &fast {
            prop_assert_eq!(outcome(&Ok(v.clone())), outcome(&reference), "fast path said ok");
        }
        prop_assert_eq!(outcome(&verify_document(&bytes, spec.form)), outcome(&reference));
        if spec.corrupt.is_none() && reference.is_ok() {
            prop_assert!(fast.is_some(), "a valid chain must be verified by the fast path");
        }
        // Every `receipts` array hashed on a second thread: the same answer as one thread.
        prop_assert_eq!(verify_document_fast_split(&bytes, spec.form, 0), fast);
    }
}

#[test]
fn canonical_chains_take_the_fast_path_and_match_the_reference_root() {
    let (chain, root) = sealed_chain(
        50,
        |i| json!({"id": format!("r{i}"), "data": {"é": [1, -2, 1.5, "x\n\u{1}"], "\u{10000}": 1, "\u{e000}": 2}}),
    );
    let bytes = serde_json::to_vec(&chain).unwrap();
    let fast = verify_document_fast(&bytes, HashForm::Omit).expect("canonical chain");
    assert_eq!(fast.root_hash, root);
    assert_eq!(
        outcome(&Ok(fast)),
        outcome(&verify_document_reference(&bytes, HashForm::Omit))
    );
}

#[test]
fn a_chain_built_by_aip_core_takes_the_fast_path() {
    // Every optional member of the receipt and its actor set, so each nested type's order counts.
    let receipt: aip_core::Receipt = serde_json::from_value(json!({
        "id": "rcpt_1", "receipt_type": "action_accepted", "occurred_at": "2026-07-14T08:30:00Z",
        "correlation_id": "corr_1", "data": {"z": 1, "a": [2]},
        "actor": {
            "id": "service:gw", "kind": "service", "display_name": "Gateway",
            "trust_domain": "example.com", "did": "did:key:z6Mk",
            "external_refs": [{"id": "u1", "system": "crm", "type": "user"}],
            "delegated_authority": [{"principal_id": "user:1", "scopes": ["actions:read"],
                "expires_at": "2026-07-15T08:30:00Z", "reason": "on call"}],
            "auth_context": {"z": 1, "a": [2]}
        }
    }))
    .unwrap();
    let mut builder = aip_core::chain::ChainBuilder::new("chain_1");
    for _ in 0..3 {
        builder.push(receipt.clone());
    }
    let chain = builder.finish();
    let bytes = serde_json::to_vec(&chain).unwrap();
    assert_eq!(
        verify_document_fast(&bytes, HashForm::Omit).map(|v| v.root_hash),
        chain.root_hash
    );
}

#[test]
fn a_chain_large_enough_for_two_threads_verifies_and_names_its_first_broken_link() {
    let (mut chain, root) = sealed_chain(
        1500,
        |i| json!({"id": format!("r{i}"), "data": {"pad": "p".repeat(200), "n": i}}),
    );
    let bytes = serde_json::to_vec(&chain).unwrap();
    assert!(bytes.len() > 300_000);
    assert_eq!(
        verify_document_fast(&bytes, HashForm::Omit)
            .unwrap()
            .root_hash,
        root
    );
    chain["receipts"][1200]["data"]["n"] = json!(-1);
    chain["receipts"][900]["data"]["n"] = json!(-1);
    let bytes = serde_json::to_vec(&chain).unwrap();
    assert!(verify_document_fast(&bytes, HashForm::Omit).is_none());
    let Err(DocumentError::Chain(e)) = verify_document(&bytes, HashForm::Omit) else {
        panic!("tampered chain verified")
    };
    assert_eq!(
        (e.index, e.code().as_str()),
        (Some(900), "aip.receipt.hash_mismatch")
    );
}

/// A chain of `n` receipts made by `receipt` (without `hash` and `previous_hash`), sealed and
/// linked, with its root.
fn sealed_chain(n: usize, receipt: impl Fn(usize) -> Value) -> (Value, String) {
    let mut receipts = Vec::new();
    let mut hashes: Vec<String> = Vec::new();
    for i in 0..n {
        let mut v = receipt(i);
        if let Some(p) = hashes.last() {
            v["previous_hash"] = json!(p);
        }
        let h = receipt_value_hash(&v);
        v["hash"] = json!(h);
        hashes.push(h);
        receipts.push(v);
    }
    let root = root_hash(hashes.iter().map(String::as_str));
    (
        json!({"chain_id": "c", "receipts": receipts, "root_hash": root}),
        root,
    )
}

/// A canonical chain whose receipts' data holds arrays of objects that start like a receipt
/// (`{"data":`), and strings that spell receipt boundaries.
fn chain_with_receipt_like_data(n: usize) -> (Value, String) {
    sealed_chain(
        n,
        |i| json!({"data": {"items": [{"data": i}, {"data": "},{\"data\":"}, {"data": [{"data": 1}]}]}, "id": format!("r{i}")}),
    )
}

#[test]
fn receipts_holding_receipt_like_data_verify_alike_on_one_and_two_threads() {
    for n in [1, 2, 3, 7, 40] {
        let (mut chain, root) = chain_with_receipt_like_data(n);
        let bytes = serde_json::to_vec(&chain).unwrap();
        for at in [0, 1, bytes.len() / 3, bytes.len()] {
            let split = verify_document_fast_split(&bytes, HashForm::Omit, at);
            assert_eq!(
                split.map(|v| (v.root_hash, v.receipts)),
                Some((root.clone(), n))
            );
        }
        chain["receipts"][n - 1]["data"]["items"][0]["data"] = json!(-1);
        let bytes = serde_json::to_vec(&chain).unwrap();
        assert_eq!(verify_document_fast_split(&bytes, HashForm::Omit, 0), None);
        let Err(DocumentError::Chain(e)) = verify_document(&bytes, HashForm::Omit) else {
            panic!("tampered chain verified")
        };
        assert_eq!(
            (e.index, e.code().as_str()),
            (Some(n - 1), "aip.receipt.hash_mismatch")
        );
    }
}

#[test]
fn null_form_receipts_verify_on_the_fast_path_only_when_accepted() {
    let mut v = json!({"id": "r0", "z": 1});
    let h = receipt_value_hash_null_form(&v);
    v["hash"] = json!(h);
    let root = root_hash([h.as_str()]);
    let bytes =
        serde_json::to_vec(&json!({"chain_id": "c", "receipts": [v], "root_hash": root})).unwrap();
    assert!(verify_document_fast(&bytes, HashForm::Omit).is_none());
    let Err(DocumentError::Chain(e)) = verify_document(&bytes, HashForm::Omit) else {
        panic!("null form accepted under Omit")
    };
    assert_eq!(e.code(), "aip.receipt.null_form_hash");
    assert_eq!(
        verify_document_fast(&bytes, HashForm::AcceptNull)
            .unwrap()
            .root_hash,
        root
    );
}

#[test]
fn bytes_that_are_not_json_are_reported_as_such() {
    for bad in [
        &b""[..],
        b"{",
        b"{\"receipts\":[]} x",
        b"\xef\xbb\xbf{}",
        b"{\"receipts\":[\"\\ud800\"]}",
    ] {
        assert!(verify_document_fast(bad, HashForm::Omit).is_none());
        assert!(matches!(
            verify_document(bad, HashForm::Omit),
            Err(DocumentError::Json(_)) | Err(DocumentError::Chain(_))
        ));
        assert_eq!(
            outcome(&verify_document(bad, HashForm::Omit)),
            outcome(&verify_document_reference(bad, HashForm::Omit))
        );
    }
}

#[test]
fn an_envelope_carrying_a_chain_is_verified_at_body_receipt_chain() {
    let mut v = json!({"id": "r0"});
    let h = receipt_value_hash(&v);
    v["hash"] = json!(h);
    let root = root_hash([h.as_str()]);
    let env = json!({"aip_version": "1.0", "body": {"receipt_chain": {"chain_id": "c", "receipts": [v], "root_hash": root}}, "receipts": 5});
    let bytes = serde_json::to_vec_pretty(&env).unwrap();
    assert_eq!(
        verify_document_fast(&bytes, HashForm::Omit)
            .unwrap()
            .root_hash,
        root
    );
}

/// A one-receipt chain whose receipt is `{<members>,"hash":H}` with H the SHA-256 of the raw bytes
/// `{<members>}`: what the fast path would compute if it took those bytes for canonical.
fn raw_sealed(members: &str) -> Vec<u8> {
    raw_sealed_chain(&[members])
}

#[test]
fn bytes_that_are_not_canonical_are_never_hashed_as_they_stand() {
    // Positive control: canonical bytes sealed this way verify on the fast path.
    for ok in [
        r#""a":1"#,
        r#""a":-12,"b":[true,false,null],"c":{"d":"e","f":0}"#,
        r#""a":"x\"\\\n\u001f\u0000é""#,
        r#""a":123456789012345678"#,
        // serde_json's spelling of a float, which the canonical form keeps.
        r#""a":1.0"#,
    ] {
        let doc = raw_sealed(ok);
        assert!(verify_document_fast(&doc, HashForm::Omit).is_some(), "{ok}");
        assert_eq!(
            outcome(&verify_document(&doc, HashForm::Omit)),
            outcome(&verify_document_reference(&doc, HashForm::Omit))
        );
    }
    // Not JSON, or JSON in another spelling than the canonical one: the raw-bytes hash must not
    // be taken, so the fast path gives up and the verdict is the reference's.
    for bad in [
        r#""a":01"#,
        r#""a":-0"#,
        r#""a":00"#,
        r#""a":1e5"#,
        r#""a":1E5"#,
        r#""a":-"#,
        r#""a":1234567890123456789012"#,
        r#""a":tru"#,
        r#""a":nul"#,
        r#""a": 1"#,
        r#""a" :1"#,
        "\"a\":\n1",
        r#""a":[1 ,2]"#,
        r#""a":{"c":1,"b":2}"#,
        r#""a":{"b":1,"b":1}"#,
        r#""a":1,"a":1"#,
        r#""a":"\u0041""#,
        r#""a":"\u001F""#,
        r#""a":"\u000a""#,
        r#""a":"\/""#,
        r#""a":"\x""#,
        r#""a":"\ud800""#,
        "\"a\":\"\u{1}\"",
        "\"a\":\"tab\there\"",
        r#""\u0061":1"#,
        r#""a":[1,]"#,
        r#""a":{"b":1,}"#,
        r#""a":[1"#,
        r#""a":"x"#,
    ] {
        let doc = raw_sealed(bad);
        assert!(
            verify_document_fast(&doc, HashForm::Omit).is_none(),
            "fast path took {bad:?}"
        );
        assert!(
            verify_document_fast_split(&doc, HashForm::Omit, 0).is_none(),
            "two-thread path took {bad:?}"
        );
        assert_eq!(
            outcome(&verify_document(&doc, HashForm::Omit)),
            outcome(&verify_document_reference(&doc, HashForm::Omit)),
            "{bad:?}"
        );
    }
    // Invalid UTF-8 inside a string.
    let mut doc = raw_sealed(r#""a":"xy""#);
    let at = doc.windows(2).position(|w| w == b"xy").unwrap();
    doc[at] = 0xff;
    assert!(verify_document_fast(&doc, HashForm::Omit).is_none());
}

/// A chain of receipts `{<members>,"hash":H[,"previous_hash":P]}`, each H the SHA-256 of the raw
/// bytes without the hash member, linked: member names must sort before `hash`.
fn raw_sealed_chain(receipts: &[&str]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut out = Vec::new();
    let mut hashes: Vec<String> = Vec::new();
    for members in receipts {
        let link = hashes
            .last()
            .map(|p| format!(",\"previous_hash\":\"{p}\""))
            .unwrap_or_default();
        let h = hex::encode(Sha256::digest(format!("{{{members}{link}}}").as_bytes()));
        out.push(format!("{{{members},\"hash\":\"{h}\"{link}}}"));
        hashes.push(h);
    }
    let root = root_hash(hashes.iter().map(String::as_str));
    format!(
        "{{\"chain_id\":\"c\",\"receipts\":[{}],\"root_hash\":\"{root}\"}}",
        out.join(",")
    )
    .into_bytes()
}

#[test]
fn a_member_that_repeats_the_receipt_before_is_reused_only_when_it_ends_where_that_one_did() {
    let base = r#""a":{"b":[1,2],"c":"x"},"d":1,"e":"same""#;
    // Canonical receipts repeating members of the one before (and every eighth receipt, where
    // changed slots are compared again): verified on the fast path.
    let many: Vec<String> = (0..20)
        .map(|i| format!(r#""a":{{"b":[1,2],"c":"x"}},"d":{},"e":"same""#, i % 3))
        .collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let doc = raw_sealed_chain(&refs);
    assert!(verify_document_fast(&doc, HashForm::Omit).is_some());
    assert!(verify_document_fast_split(&doc, HashForm::Omit, 0).is_some());
    // A later receipt whose member starts with the earlier one's bytes but goes on, or is spelled
    // differently after them: never taken for the earlier member.
    for later in [
        r#""a":{"b":[1,2],"c":"x"},"d":12,"e":"same""#,
        r#""a":{"b":[1,2],"c":"x"},"d":1.5e1,"e":"same""#,
        r#""a":{"b":[1,2],"c":"x"} ,"d":1,"e":"same""#,
        r#""a":{"b":[1,2],"c":"x"},"d":1 ,"e":"same""#,
        r#""a":{"b":[1,2],"c":"x"},"d":01,"e":"same""#,
        r#""a":{"b":[1,2],"c":"x"},"d":1,"e":"same" "#,
        r#""a":{"b":[1,2],"c":"x"},"d":1,"e":"same","e":"same""#,
        // Same length as the earlier member, other bytes.
        r#""a":{"c":"x","b":[1,2]},"d":1,"e":"same""#,
        r#""a":{"b":[1,2],"c":"x"},"d":1,"e":"sa\e""#,
    ] {
        let doc = raw_sealed_chain(&[base, base, later]);
        assert_eq!(
            verify_document_fast(&doc, HashForm::Omit).is_some(),
            verify_document_reference(&doc, HashForm::Omit).is_ok(),
            "{later}"
        );
        assert_eq!(
            outcome(&verify_document(&doc, HashForm::Omit)),
            outcome(&verify_document_reference(&doc, HashForm::Omit)),
            "{later}"
        );
    }
    // The nested chain of an envelope is another array: members are not carried over from the
    // top-level one.
    let chain = String::from_utf8(raw_sealed_chain(&[base, base])).unwrap();
    let env = format!(r#"{{"receipts":[],"body":{{"receipt_chain":{chain}}}}}"#);
    assert!(verify_document_fast(env.as_bytes(), HashForm::Omit).is_some());
}
