//! AIP canonical JSON (spec 5.5, 18.2, 22.2): every object's members sorted by name (byte order),
//! array order kept, compact UTF-8 output with serde_json's string and number encoding.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical bytes of a JSON value.
pub fn to_canonical_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(value, &mut out);
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
    sha256_hex(&to_canonical_vec(value))
}

fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(k, out);
                out.push(b':');
                write(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(v, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_str(s, out),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Null => out.extend_from_slice(b"null"),
    }
}

fn write_str(s: &str, out: &mut Vec<u8>) {
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
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
    fn sha256_hex_is_lowercase_hex_of_the_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
