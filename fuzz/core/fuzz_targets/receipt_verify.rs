//! The byte-level receipt-chain verifier against the reference path (parse, canonicalise,
//! `verify_chain_value`): when the fast path says "verified", the reference must say so with the
//! same root, and `verify_document` must always give the reference's verdict and first broken link.
//!
//! Input: the first byte picks the hash form (bit 0), the mode (bit 1) and whether every
//! `receipts` array is also verified on two threads (scanned on one, hashed on the other; bit 4),
//! which must give the one-thread answer. With bit 5 set, mode 1 seals each piece over its raw
//! bytes instead (the hash the fast path would compute if it took them for canonical), so any
//! non-canonical or invalid spelling the scanner let through would show as a disagreement. Mode 0
//! verifies the rest
//! as a document. Mode 1 splits the rest on 0xff; every piece that is a JSON object becomes a
//! receipt, kept in the fuzzer's own spelling (member order, whitespace, escapes, numbers) with
//! `previous_hash` and `hash` spliced in, so valid chains of non-canonical receipts are explored too.
#![no_main]

use aip_core::receipts::{
    DocumentError, HashForm, VerifiedChain, receipt_value_hash, receipt_value_hash_null_form,
    root_hash, verify_document_reference,
};
use aip_receipt_verify::{verify_document, verify_document_fast, verify_document_fast_split};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};
use serde_json::Value;

fn outcome(r: &Result<VerifiedChain, DocumentError>) -> String {
    match r {
        Ok(v) => format!("ok {} {}", v.root_hash, v.receipts),
        Err(DocumentError::Json(e)) => format!("json {e}"),
        Err(DocumentError::Chain(e)) => format!("chain {:?} {:?}", e.index, e.kind),
    }
}

fn check(doc: &[u8], form: HashForm, split: bool) {
    let reference = verify_document_reference(doc, form);
    let fast = verify_document_fast(doc, form);
    if split {
        assert_eq!(verify_document_fast_split(doc, form, 0), fast, "split disagrees");
    }
    if let Some(v) = fast {
        assert_eq!(outcome(&Ok(v)), outcome(&reference), "fast path disagrees");
    }
    assert_eq!(outcome(&verify_document(doc, form)), outcome(&reference));
}

/// Splices `previous_hash` and `hash` into a receipt's own text, right after its `{`.
fn seal(text: &str, previous: Option<&str>, null_form: bool) -> Option<(String, String)> {
    let open = text.find('{')?;
    let (head, tail) = text.split_at(open + 1);
    let empty = tail.trim_start().starts_with('}');
    let prev = previous
        .map(|p| format!("\"previous_hash\":\"{p}\""))
        .unwrap_or_default();
    let join = |extra: &str| {
        let mut members: Vec<&str> = [extra, prev.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        if !empty {
            members.push("");
        }
        format!("{head}{}{tail}", members.join(","))
    };
    let unsealed = join("");
    let v: Value = serde_json::from_str(&unsealed).ok()?;
    let h = if null_form {
        receipt_value_hash_null_form(&v)
    } else {
        receipt_value_hash(&v)
    };
    Some((join(&format!("\"hash\":\"{h}\"")), h))
}

/// A chain document of the receipts' texts, with the root over their hashes.
fn chain_doc(receipts: &[String], hashes: &[String]) -> String {
    let root = root_hash(hashes.iter().map(String::as_str));
    format!(
        "{{\"chain_id\":\"c\",\"receipts\":[{}],\"root_hash\":\"{root}\"}}",
        receipts.join(",")
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let form = if mode & 1 == 1 {
        HashForm::AcceptNull
    } else {
        HashForm::Omit
    };
    if mode & 2 == 0 {
        check(rest, form, mode & 16 != 0);
        return;
    }
    let mut receipts = Vec::new();
    let mut hashes = Vec::new();
    if mode & 32 != 0 {
        for piece in rest.split(|&b| b == 0xff) {
            let Ok(text) = std::str::from_utf8(piece) else {
                continue;
            };
            let Some(inner) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) else {
                continue;
            };
            let h = hex::encode(Sha256::digest(text.as_bytes()));
            let sep = if inner.is_empty() { "" } else { "," };
            receipts.push(format!("{{{inner}{sep}\"hash\":\"{h}\"}}"));
            hashes.push(h);
        }
        check(chain_doc(&receipts, &hashes).as_bytes(), form, mode & 16 != 0);
        return;
    }
    for (i, piece) in rest.split(|&b| b == 0xff).enumerate() {
        let Ok(text) = std::str::from_utf8(piece) else {
            continue;
        };
        if !matches!(serde_json::from_str::<Value>(text), Ok(Value::Object(m)) if !m.contains_key("hash") && !m.contains_key("previous_hash"))
        {
            continue;
        }
        let Some((sealed, h)) = seal(
            text,
            hashes.last().map(String::as_str),
            mode & 4 != 0 && i % 2 == 0,
        ) else {
            continue;
        };
        receipts.push(sealed);
        hashes.push(h);
    }
    let doc = chain_doc(&receipts, &hashes);
    check(doc.as_bytes(), form, mode & 16 != 0);
    if mode & 8 != 0 {
        let env = format!("{{\"body\": {{\"receipt_chain\": {doc}}}, \"aip_version\": \"1.0\"}}");
        check(env.as_bytes(), form, mode & 16 != 0);
    }
});
