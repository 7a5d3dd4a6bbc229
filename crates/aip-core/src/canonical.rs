//! AIP canonical JSON (spec 5.5, 18.2, 22.2): every object's members sorted by name (byte order),
//! array order kept, compact UTF-8 output with serde_json's string and number encoding.
//!
//! The writer streams into any [`std::io::Write`] sink, so hashing (receipts, input hashes) feeds
//! SHA-256 directly without building the canonical bytes or cloning the value first.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical bytes of a JSON value.
pub fn to_canonical_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    // Writing into a Vec cannot fail.
    let _ = write_canonical(value, &mut out);
    out
}

/// Canonical text of a JSON value.
pub fn to_canonical_string(value: &Value) -> String {
    // The writer emits only serde_json-encoded strings, numbers and ASCII punctuation: valid UTF-8.
    String::from_utf8(to_canonical_vec(value)).unwrap_or_default()
}

/// Canonical bytes of any serializable value.
pub fn canonical_of<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    Ok(to_canonical_vec(&serde_json::to_value(value)?))
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Lowercase hex SHA-256 of a value's canonical bytes (e.g. a governed input hash, spec 9.5, 13.3).
pub fn canonical_hash(value: &Value) -> String {
    canonical_hash_with(value, None, None)
}

/// Lowercase hex SHA-256 of the canonical bytes of an object with its top-level member `skip`
/// removed, and — when `replace` is given — set to `replace` instead (spec 18.2 hashing forms).
pub fn canonical_hash_with(value: &Value, skip: Option<&str>, replace: Option<&Value>) -> String {
    let mut h = Sha256::new();
    // Sha256's io::Write never fails.
    let _ = match (value, skip) {
        (Value::Object(map), Some(name)) => write_object(
            map.iter()
                .filter(|(k, _)| k.as_str() != name)
                .map(|(k, v)| (k.as_str(), v))
                .chain(replace.map(|r| (name, r))),
            &mut h,
        ),
        _ => write_canonical(value, &mut h),
    };
    hex::encode(h.finalize())
}

/// Streams the canonical form of `value` into `out`.
pub fn write_canonical<W: Write>(value: &Value, out: &mut W) -> std::io::Result<()> {
    match value {
        Value::Object(map) => write_object(map.iter().map(|(k, v)| (k.as_str(), v)), out),
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_canonical(v, out)?;
            }
            out.write_all(b"]")
        }
        Value::String(s) => serde_json::to_writer(&mut *out, s).map_err(std::io::Error::other),
        Value::Number(n) => serde_json::to_writer(&mut *out, n).map_err(std::io::Error::other),
        Value::Bool(true) => out.write_all(b"true"),
        Value::Bool(false) => out.write_all(b"false"),
        Value::Null => out.write_all(b"null"),
    }
}

fn write_object<'a, W: Write>(
    members: impl Iterator<Item = (&'a str, &'a Value)>,
    out: &mut W,
) -> std::io::Result<()> {
    let mut members: Vec<(&str, &Value)> = members.collect();
    // serde_json's default map is already ordered by key bytes; sort only when it is not.
    if !members.is_sorted_by(|a, b| a.0.as_bytes() <= b.0.as_bytes()) {
        members.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    }
    out.write_all(b"{")?;
    for (i, (k, v)) in members.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, k).map_err(std::io::Error::other)?;
        out.write_all(b":")?;
        write_canonical(v, out)?;
    }
    out.write_all(b"}")
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_members_recursively_and_keeps_array_order() {
        let v = json!({"b": 1, "a": {"z": [3, 1, {"y": true, "x": null}], "c": "é\n"}});
        assert_eq!(
            to_canonical_string(&v),
            r#"{"a":{"c":"é\n","z":[3,1,{"x":null,"y":true}]},"b":1}"#
        );
    }

    #[test]
    fn canonical_bytes_do_not_depend_on_input_member_order() {
        let a: Value = serde_json::from_str(r#"{"x":1,"y":[{"q":1,"p":2}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "y" : [ {"p":2, "q":1} ], "x" : 1 }"#).unwrap();
        assert_eq!(to_canonical_vec(&a), to_canonical_vec(&b));
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
    }

    #[test]
    fn streamed_hashes_equal_hashes_of_the_canonical_bytes() {
        let v = json!({"z": 1, "hash": "h", "a": [1.5, "x", null], "m": {"b": true, "a": false}});
        let mut without = v.clone();
        without.as_object_mut().unwrap().remove("hash");
        assert_eq!(
            canonical_hash_with(&v, Some("hash"), None),
            sha256_hex(&to_canonical_vec(&without))
        );
        let mut nulled = v.clone();
        nulled["hash"] = Value::Null;
        assert_eq!(
            canonical_hash_with(&v, Some("hash"), Some(&Value::Null)),
            sha256_hex(&to_canonical_vec(&nulled))
        );
        assert_eq!(canonical_hash(&v), sha256_hex(&to_canonical_vec(&v)));
    }

    #[test]
    fn sha256_hex_is_lowercase_hex_of_the_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
