//! MCP resources and prompts (spec 21.1). Resources are the native resources (spec 9.7) under their
//! read policy: `resources/list` and `resources/read` call the same runtime reads as
//! `resource_list_request` and `resource_read_request`, so a resource the caller may not list does
//! not exist for it. A resource's URI is its AIP id. Prompts are the templates configured under
//! `[[mcp.prompts]]` (text, images, embedded resources), their `{{argument}}` placeholders filled
//! from `prompts/get`.

use std::sync::Arc;

use aip_core::{MessagePart, ResourceListRequest, ResourceReadRequest};
use aip_runtime::{Caller, Runtime, RuntimeError};
use serde_json::{Map, Value, json};

use super::Version;
use super::rpc::{INTERNAL_ERROR, INVALID_PARAMS};
use super::tools::CallOutcome;

pub use crate::config::mcp::{
    PromptArgument, PromptConfig, PromptImage, PromptMessage, PromptResource,
};
use crate::config::{ConfigError, malformed, rejected, within, within_usize};

/// MCP: the resource does not exist (for this caller).
pub(super) const RESOURCE_NOT_FOUND: i64 = -32002;
/// Resources per `resources/list` page.
const PAGE: u32 = 100;
/// Longest argument value substituted into a prompt.
const MAX_ARGUMENT_BYTES: usize = 16 * 1024;

/// `resources/list`.
pub async fn list(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    version: Version,
    params: &Map<String, Value>,
) -> CallOutcome {
    let request = ResourceListRequest {
        capability_id: None,
        kind: None,
        cursor: params
            .get("cursor")
            .and_then(Value::as_str)
            .map(str::to_owned),
        limit: Some(PAGE),
        tenant_id: None,
    };
    let page = runtime
        .read_resources(caller, &request)
        .await
        .map_err(|e| match e {
            RuntimeError::InvalidCursor | RuntimeError::InvalidQuery(_) => {
                (INVALID_PARAMS, "invalid cursor".to_owned())
            }
            other => (INTERNAL_ERROR, other.to_string()),
        })?;
    let full = page.resources.len() == PAGE as usize;
    let resources: Vec<Value> = page
        .resources
        .iter()
        .map(|r| {
            let mut item = json!({ "uri": r.id, "name": r.name });
            if let Some(d) = &r.description {
                item["description"] = json!(d);
            }
            if let Some(m) = &r.mime_type {
                item["mimeType"] = json!(m);
            }
            if version >= Version::V2025_06_18 {
                item["title"] = json!(r.name);
            }
            item
        })
        .collect();
    let mut result = json!({ "resources": resources });
    if let Some(cursor) = page.cursor.filter(|_| full) {
        result["nextCursor"] = json!(cursor);
    }
    Ok(result)
}

/// `resources/read`: text parts as `text`, inline binary parts as base64 `blob`.
pub async fn read(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Map<String, Value>,
) -> CallOutcome {
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "uri is required".to_owned()));
    };
    let request = ResourceReadRequest {
        resource_id: uri.to_owned(),
        tenant_id: None,
        version: None,
        accept: Vec::new(),
    };
    let read = runtime
        .read_resource(caller, &request)
        .await
        .map_err(|e| match e {
            RuntimeError::NotFound(_) => (RESOURCE_NOT_FOUND, format!("Resource not found: {uri}")),
            other => (INTERNAL_ERROR, other.to_string()),
        })?;
    let mime = read.resource.mime_type.clone();
    let contents: Vec<Value> = read
        .content
        .iter()
        .map(|part| {
            let mut item = json!({ "uri": uri });
            match part {
                MessagePart::Text { text, .. } => item["text"] = json!(text),
                other => {
                    let value = serde_json::to_value(other).unwrap_or(Value::Null);
                    match value.get("data").and_then(Value::as_str) {
                        Some(data) => item["blob"] = json!(data),
                        None => item["text"] = json!(value.to_string()),
                    }
                    if let Some(m) = value.get("mime_type") {
                        item["mimeType"] = m.clone();
                    }
                }
            }
            if item.get("mimeType").is_none()
                && let Some(m) = &mime
            {
                item["mimeType"] = json!(m);
            }
            item
        })
        .collect();
    Ok(json!({ "contents": contents }))
}

/// Largest prompt image, bytes.
const MAX_PROMPT_IMAGE: usize = 1024 * 1024;

/// The prompts as served: every check of [`check_prompts`], and each image file read (under
/// `root`, bounded) into base64 data, so `prompts/get` touches no file.
pub fn load_prompts(
    prompts: &[PromptConfig],
    root: Option<&std::path::Path>,
) -> Result<Vec<PromptConfig>, ConfigError> {
    use base64::Engine as _;
    check_prompts(prompts)?;
    let mut loaded = prompts.to_vec();
    for prompt in &mut loaded {
        let key = |k: &str| format!("mcp.prompts[{}].messages[].image{k}", prompt.name);
        for message in &mut prompt.messages {
            let Some(image) = message.image.as_mut() else {
                continue;
            };
            let bytes = match (&image.data, &image.file) {
                (Some(data), None) => base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map_err(|e| rejected(key(".data"), e))?,
                (None, Some(file)) => {
                    let root = root.ok_or_else(|| ConfigError::Needs {
                        key: key(".file"),
                        needs: "resource_root",
                        why: "image files are read under it",
                    })?;
                    if file.is_absolute()
                        || file
                            .components()
                            .any(|c| matches!(c, std::path::Component::ParentDir))
                    {
                        return Err(malformed(
                            key(".file"),
                            &file.display().to_string(),
                            "a relative path under resource_root",
                        ));
                    }
                    let path = root.join(file);
                    let unreadable = |source| ConfigError::Unreadable {
                        key: key(".file"),
                        path: path.clone(),
                        source,
                    };
                    let size = std::fs::metadata(&path).map_err(unreadable)?.len();
                    within(key(".file size"), size, 0..=MAX_PROMPT_IMAGE as u64)?;
                    std::fs::read(&path).map_err(unreadable)?
                }
                _ => {
                    return Err(ConfigError::ExactlyOne {
                        key: key(""),
                        options: &["data", "file"],
                    });
                }
            };
            within_usize(key(" size"), bytes.len(), 0..=MAX_PROMPT_IMAGE)?;
            image.data = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            image.file = None;
        }
    }
    Ok(loaded)
}

/// Why the prompt configuration is refused; `aip serve` does not start.
pub fn check_prompts(prompts: &[PromptConfig]) -> Result<(), ConfigError> {
    let mut names = std::collections::BTreeSet::new();
    for p in prompts {
        let key = |k: &str| format!("mcp.prompts[{}].{k}", p.name);
        if p.name.is_empty() {
            return Err(malformed("mcp.prompts[].name", "", "a non-empty name"));
        }
        if !names.insert(p.name.as_str()) {
            return Err(ConfigError::Duplicate {
                key: "mcp.prompts[].name".into(),
                id: p.name.clone(),
            });
        }
        within_usize(key("messages length"), p.messages.len(), 1..=usize::MAX)?;
        if let Some(m) = p
            .messages
            .iter()
            .find(|m| m.role != "user" && m.role != "assistant")
        {
            return Err(malformed(
                key("messages[].role"),
                &m.role,
                "user or assistant",
            ));
        }
        if p.messages.iter().any(|m| {
            usize::from(m.text.is_some())
                + usize::from(m.image.is_some())
                + usize::from(m.resource.is_some())
                != 1
        }) {
            return Err(ConfigError::ExactlyOne {
                key: key("messages[]"),
                options: &["text", "image", "resource"],
            });
        }
    }
    Ok(())
}

/// `prompts/list`.
pub fn prompts_list(prompts: &[PromptConfig], version: Version) -> Value {
    let items: Vec<Value> = prompts
        .iter()
        .map(|p| {
            let arguments: Vec<Value> = p
                .arguments
                .iter()
                .map(|a| {
                    let mut argument = json!({ "name": a.name, "required": a.required });
                    if let Some(d) = &a.description {
                        argument["description"] = json!(d);
                    }
                    argument
                })
                .collect();
            let mut item = json!({ "name": p.name, "arguments": arguments });
            if let Some(d) = &p.description {
                item["description"] = json!(d);
            }
            if version >= Version::V2025_06_18
                && let Some(title) = &p.title
            {
                item["title"] = json!(title);
            }
            item
        })
        .collect();
    json!({ "prompts": items })
}

/// `prompts/get`: the messages with every placeholder filled; a missing required argument, an
/// unknown one, or a non-string value is refused.
pub fn prompts_get(prompts: &[PromptConfig], params: &Map<String, Value>) -> CallOutcome {
    let invalid = |m: String| Err((INVALID_PARAMS, m));
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return invalid("name is required".into());
    };
    let Some(prompt) = prompts.iter().find(|p| p.name == name) else {
        return invalid(format!("unknown prompt: {name}"));
    };
    let empty = Map::new();
    let given = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(a)) => a,
        Some(_) => return invalid("arguments must be an object".into()),
    };
    let mut values = Vec::new();
    for (key, value) in given {
        if !prompt.arguments.iter().any(|a| &a.name == key) {
            return invalid(format!("unknown argument {key}"));
        }
        match value.as_str() {
            Some(v) if v.len() <= MAX_ARGUMENT_BYTES => values.push((key.as_str(), v)),
            _ => return invalid(format!("argument {key} must be a string of at most 16 KiB")),
        }
    }
    if let Some(missing) = prompt
        .arguments
        .iter()
        .find(|a| a.required && !given.contains_key(&a.name))
    {
        return invalid(format!("missing argument {}", missing.name));
    }
    let fill = |template: &str| {
        let mut text = template.to_owned();
        for argument in &prompt.arguments {
            let value = values
                .iter()
                .find(|(k, _)| *k == argument.name)
                .map_or("", |(_, v)| v);
            text = text.replace(&format!("{{{{{}}}}}", argument.name), value);
        }
        text
    };
    let messages: Vec<Value> = prompt
        .messages
        .iter()
        .map(|m| {
            let content = match (&m.text, &m.image, &m.resource) {
                (Some(text), _, _) => json!({ "type": "text", "text": fill(text) }),
                (None, Some(image), _) => json!({ "type": "image",
                    "data": image.data.as_deref().unwrap_or_default(), "mimeType": image.mime_type }),
                (None, None, Some(resource)) => {
                    let mut embedded = json!({ "uri": fill(&resource.uri), "text": fill(&resource.text) });
                    if let Some(mime) = &resource.mime_type {
                        embedded["mimeType"] = json!(mime);
                    }
                    json!({ "type": "resource", "resource": embedded })
                }
                // Refused at startup (check_prompts).
                (None, None, None) => json!({ "type": "text", "text": "" }),
            };
            json!({ "role": m.role, "content": content })
        })
        .collect();
    let mut result = json!({ "messages": messages });
    if let Some(d) = &prompt.description {
        result["description"] = json!(d);
    }
    Ok(result)
}

/// Most values one completion answers (the MCP limit).
const MAX_COMPLETIONS: usize = 100;

/// `completion/complete` for a prompt argument: its configured values that start with the typed
/// value (case-insensitive), at most 100. Resource templates are not served, so a `ref/resource`
/// is refused.
pub fn complete(prompts: &[PromptConfig], params: &Map<String, Value>) -> CallOutcome {
    let invalid = |m: String| Err((INVALID_PARAMS, m));
    let reference = params.get("ref").and_then(Value::as_object);
    let (kind, name) = match reference {
        Some(r) => (
            r.get("type").and_then(Value::as_str),
            r.get("name").and_then(Value::as_str),
        ),
        None => return invalid("ref is required".into()),
    };
    let name = match (kind, name) {
        (Some("ref/prompt"), Some(name)) => name,
        (Some("ref/resource"), _) => {
            return invalid("this server has no resource templates to complete".into());
        }
        _ => return invalid("ref must be a ref/prompt with a name".into()),
    };
    let Some(prompt) = prompts.iter().find(|p| p.name == name) else {
        return invalid(format!("unknown prompt: {name}"));
    };
    let argument = params.get("argument").and_then(Value::as_object);
    let (Some(argument_name), Some(typed)) = (
        argument.and_then(|a| a.get("name")).and_then(Value::as_str),
        argument
            .and_then(|a| a.get("value"))
            .and_then(Value::as_str),
    ) else {
        return invalid("argument needs a name and a string value".into());
    };
    if typed.len() > MAX_ARGUMENT_BYTES {
        return invalid("argument value is longer than 16 KiB".into());
    }
    let Some(known) = prompt.arguments.iter().find(|a| a.name == argument_name) else {
        return invalid(format!("prompt {name} has no argument {argument_name}"));
    };
    let typed = typed.to_lowercase();
    let matching: Vec<&String> = known
        .values
        .iter()
        .filter(|v| v.to_lowercase().starts_with(&typed))
        .collect();
    let values: Vec<&String> = matching.iter().take(MAX_COMPLETIONS).copied().collect();
    Ok(json!({ "completion": {
        "values": values, "total": matching.len(), "hasMore": matching.len() > MAX_COMPLETIONS } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> PromptConfig {
        PromptConfig {
            name: "review".into(),
            title: None,
            description: Some("Review code".into()),
            arguments: vec![PromptArgument {
                name: "code".into(),
                description: None,
                required: true,
                values: vec!["parse()".into(), "Park()".into(), "run()".into()],
            }],
            messages: vec![
                PromptMessage {
                    role: "user".into(),
                    text: Some("Review {{code}} please".into()),
                    ..PromptMessage::default()
                },
                PromptMessage {
                    role: "user".into(),
                    resource: Some(PromptResource {
                        uri: "file:///{{code}}".into(),
                        mime_type: Some("text/plain".into()),
                        text: "the code: {{code}}".into(),
                    }),
                    ..PromptMessage::default()
                },
                PromptMessage {
                    role: "assistant".into(),
                    image: Some(PromptImage {
                        mime_type: "image/png".into(),
                        data: Some("iVBORw0KGgo=".into()),
                        file: None,
                    }),
                    ..PromptMessage::default()
                },
            ],
        }
    }

    #[test]
    fn a_prompt_fills_its_placeholders_and_refuses_missing_or_unknown_arguments() {
        let prompts = [prompt()];
        let args = |v: Value| v.as_object().unwrap().clone();
        let got = prompts_get(
            &prompts,
            &args(json!({"name": "review", "arguments": {"code": "x()"}})),
        )
        .unwrap();
        assert_eq!(got["messages"][0]["content"]["text"], "Review x() please");
        assert_eq!(
            got["messages"][1]["content"],
            json!({"type": "resource", "resource": {"uri": "file:///x()", "mimeType": "text/plain", "text": "the code: x()"}})
        );
        assert_eq!(
            got["messages"][2]["content"],
            json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})
        );
        let mut two = prompt();
        two.messages[0].image = two.messages[2].image.clone();
        assert!(
            check_prompts(&[two]).is_err(),
            "text and image in one message"
        );
        let mut escaping = prompt();
        escaping.messages[2].image = Some(PromptImage {
            mime_type: "image/png".into(),
            data: None,
            file: Some("../secret.png".into()),
        });
        assert!(load_prompts(&[escaping], Some(std::path::Path::new("/tmp"))).is_err());
        assert!(prompts_get(&prompts, &args(json!({"name": "review"}))).is_err());
        assert!(
            prompts_get(
                &prompts,
                &args(json!({"name": "review", "arguments": {"code": "a", "x": "b"}}))
            )
            .is_err()
        );
        assert!(prompts_get(&prompts, &args(json!({"name": "nope"}))).is_err());
        assert!(check_prompts(&[prompt(), prompt()]).is_err());
    }

    #[test]
    fn completion_offers_the_configured_values_that_start_with_what_was_typed() {
        let prompts = [prompt()];
        let ask = |v: Value| complete(&prompts, v.as_object().unwrap());
        let got = ask(json!({"ref": {"type": "ref/prompt", "name": "review"},
                             "argument": {"name": "code", "value": "PAR"}}))
        .unwrap();
        assert_eq!(
            got["completion"],
            json!({"values": ["parse()", "Park()"], "total": 2, "hasMore": false})
        );
        for bad in [
            json!({"ref": {"type": "ref/resource", "uri": "x://{id}"}, "argument": {"name": "id", "value": ""}}),
            json!({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "code", "value": ""}}),
            json!({"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "other", "value": ""}}),
            json!({"ref": {"type": "ref/prompt", "name": "review"}}),
        ] {
            assert!(ask(bad.clone()).is_err(), "{bad}");
        }
    }
}
