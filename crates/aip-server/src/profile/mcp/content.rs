//! MCP content blocks and native message parts, both ways: an upstream tool's content (text,
//! image, audio, embedded resource, resource link) becomes the action result's message parts, and
//! a result's parts become the content blocks of `tools/call`, as far as the negotiated version
//! has them (audio from 2025-03-26, resource links from 2025-06-18; older versions get text).

use aip_core::MessagePart;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::Version;

/// Upstream content blocks as native parts; a block of an unknown type is kept as a JSON part.
pub fn to_parts(content: &[Value]) -> Vec<MessagePart> {
    content.iter().filter_map(to_part).collect()
}

fn to_part(block: &Value) -> Option<MessagePart> {
    let text = |k: &str| block.get(k).and_then(Value::as_str);
    let part = match text("type")? {
        "text" => json!({ "type": "text", "text": text("text")? }),
        "image" => {
            json!({ "type": "image", "data": text("data")?, "mime_type": text("mimeType")? })
        }
        "audio" => {
            json!({ "type": "audio", "data": text("data")?, "mime_type": text("mimeType")? })
        }
        "resource" => {
            let r = block.get("resource")?;
            let uri = r.get("uri").and_then(Value::as_str)?;
            let mime = r.get("mimeType").and_then(Value::as_str);
            let data = match (
                r.get("blob").and_then(Value::as_str),
                r.get("text").and_then(Value::as_str),
            ) {
                (Some(blob), _) => blob.to_owned(),
                (None, Some(text)) => STANDARD.encode(text),
                (None, None) => return None,
            };
            let fallback = if r.get("text").is_some() {
                "text/plain"
            } else {
                "application/octet-stream"
            };
            json!({ "type": "file", "url": uri, "data": data, "mime_type": mime.unwrap_or(fallback),
                    "filename": file_name(uri) })
        }
        "resource_link" => {
            let uri = text("uri")?;
            json!({ "type": "file", "url": uri,
                    "mime_type": text("mimeType").unwrap_or("application/octet-stream"),
                    "filename": text("name").map_or_else(|| file_name(uri), str::to_owned) })
        }
        _ => json!({ "type": "json", "data": block }),
    };
    serde_json::from_value(part).ok()
}

/// The last path segment of a URI (or the URI), as a file name.
fn file_name(uri: &str) -> String {
    uri.rsplit('/')
        .find(|s| !s.is_empty())
        .unwrap_or(uri)
        .to_owned()
}

/// Native parts as `tools/call` content blocks for `version`.
pub fn to_blocks(parts: &[MessagePart], version: Version) -> Vec<Value> {
    parts.iter().map(|p| to_block(p, version)).collect()
}

fn to_block(part: &MessagePart, version: Version) -> Value {
    let as_text = |part: &MessagePart| json!({ "type": "text", "text": serde_json::to_string(part).unwrap_or_default() });
    match part {
        MessagePart::Text { text, .. } => json!({ "type": "text", "text": text }),
        MessagePart::Image {
            data: Some(data),
            mime_type,
            ..
        } => {
            json!({ "type": "image", "data": data, "mimeType": mime_type })
        }
        MessagePart::Audio {
            data: Some(data),
            mime_type,
            ..
        } if version >= Version::V2025_03_26 => {
            json!({ "type": "audio", "data": data, "mimeType": mime_type })
        }
        MessagePart::File {
            data: Some(data),
            mime_type,
            url,
            filename,
            ..
        } => {
            let uri = url
                .clone()
                .unwrap_or_else(|| format!("aip:file/{filename}"));
            // Text stays text when it decodes as UTF-8; anything else is a blob.
            let text = mime_type
                .starts_with("text/")
                .then(|| {
                    STANDARD
                        .decode(data)
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok())
                })
                .flatten();
            let resource = match text {
                Some(text) => json!({ "uri": uri, "mimeType": mime_type, "text": text }),
                None => json!({ "uri": uri, "mimeType": mime_type, "blob": data }),
            };
            json!({ "type": "resource", "resource": resource })
        }
        MessagePart::File {
            data: None,
            url: Some(url),
            mime_type,
            filename,
            ..
        } if version >= Version::V2025_06_18 => {
            json!({ "type": "resource_link", "uri": url, "name": filename, "mimeType": mime_type })
        }
        MessagePart::Json { data, .. } => json!({ "type": "text", "text": data.to_string() }),
        other => as_text(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_blocks_round_trip_through_native_parts() {
        let blocks = vec![
            json!({ "type": "text", "text": "hello" }),
            json!({ "type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png" }),
            json!({ "type": "audio", "data": "UklGRg==", "mimeType": "audio/wav" }),
            json!({ "type": "resource", "resource": { "uri": "test://doc", "mimeType": "text/plain", "text": "body" } }),
            json!({ "type": "resource", "resource": { "uri": "test://bin", "mimeType": "application/pdf", "blob": "JVBERi0=" } }),
            json!({ "type": "resource_link", "uri": "https://x.example/a.csv", "name": "a.csv", "mimeType": "text/csv" }),
        ];
        let parts = to_parts(&blocks);
        assert_eq!(parts.len(), 6);
        assert_eq!(to_blocks(&parts, Version::V2025_11_25), blocks);
    }

    #[test]
    fn older_versions_get_text_for_blocks_they_do_not_have() {
        let parts = to_parts(&[
            json!({ "type": "audio", "data": "UklGRg==", "mimeType": "audio/wav" }),
            json!({ "type": "resource_link", "uri": "https://x.example/a.csv", "name": "a.csv" }),
        ]);
        let blocks = to_blocks(&parts, Version::V2024_11_05);
        assert!(blocks.iter().all(|b| b["type"] == "text"), "{blocks:?}");
        assert_eq!(to_blocks(&parts, Version::V2025_03_26)[0]["type"], "audio");
    }

    #[test]
    fn a_malformed_block_is_dropped_and_an_unknown_one_kept_as_json() {
        let parts = to_parts(&[
            json!({ "type": "image" }),
            json!({ "type": "future", "x": 1 }),
        ]);
        assert_eq!(parts.len(), 1);
        assert!(matches!(parts[0], MessagePart::Json { .. }));
    }
}
