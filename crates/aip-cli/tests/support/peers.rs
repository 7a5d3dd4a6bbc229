//! Helpers for tests and benches that run `aip serve` nodes as peers: node key files and capability
//! entries written as TOML.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// Writes a node key file in the `aip keys generate` format (mode 0600); returns its did:key.
pub fn key_file(path: &Path, key: &ed25519_dalek::SigningKey) -> String {
    use std::os::unix::fs::PermissionsExt;
    let did = aip_core::signing::did_key(&key.verifying_key());
    let file = json!({ "kty": "OKP", "crv": "Ed25519", "d": URL_SAFE_NO_PAD.encode(key.to_bytes()),
                       "x": URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes()), "did": did });
    std::fs::write(path, file.to_string()).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    did
}

/// A JSON value as a TOML inline value (keys always quoted, nulls left out).
pub fn toml(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let members: Vec<String> = map
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("{} = {}", Value::String(k.clone()), toml(v)))
                .collect();
            format!("{{ {} }}", members.join(", "))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

/// A `[[capabilities]]` entry `id` with `contract` and `input_schema`, served by `peer`'s `remote`
/// capability (with `scope`, or the default).
pub fn routed(
    id: &str,
    contract: &Value,
    input_schema: &Value,
    peer: &str,
    remote: &str,
    scope: Option<&str>,
) -> String {
    let mut handler = json!({ "type": "peer", "peer": peer, "capability": remote });
    if let Some(scope) = scope {
        handler["scope"] = json!(scope);
    }
    format!(
        "[[capabilities]]\nid = \"{id}\"\nname = \"{id}\"\nkind = \"tool\"\ninput_schema = {}\ncontract = {}\nhandler = {}\n\n",
        toml(input_schema),
        toml(contract),
        toml(&handler)
    )
}
