//! MCP resource templates backed by capabilities: `[[mcp.resource_templates]]` names a URI
//! template (`test://orders/{id}`) and a read-only capability. Reading a URI that matches runs the
//! capability as a sync native action of the reader, with the template's variables as its input
//! (admission, scopes, receipts and the read model as for any call), and answers its output as the
//! resource's content. A reader that may not invoke the capability finds no such resource.

use std::sync::Arc;

use aip_core::Capability;
use aip_runtime::{Caller, Runtime, RuntimeError};
use serde_json::{Map, Value, json};

use super::Version;
use super::resources::RESOURCE_NOT_FOUND;
use super::rpc::INTERNAL_ERROR;
use super::tools::CallOutcome;
use crate::config::ConfigError;
pub use crate::config::mcp::TemplateConfig;

/// Longest template.
const MAX_TEMPLATE: usize = 512;
/// Most variables in one template.
const MAX_VARIABLES: usize = 8;
/// Longest value a variable may take from a URI.
const MAX_VALUE: usize = 1024;

/// A template split into literal text and variables, in order.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Variable(String),
}

/// A checked template.
#[derive(Debug, Clone)]
pub struct Template {
    config: TemplateConfig,
    pieces: Vec<Piece>,
}

/// Why a URI template is not RFC 6570 level 1 as this profile serves it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// Empty or longer than `MAX_TEMPLATE`.
    #[error("a template has 1 to {MAX_TEMPLATE} characters")]
    Length,
    /// A `{` without its `}`.
    #[error("an unclosed {{")]
    Unclosed,
    /// A `}` without its `{`.
    #[error("an unopened }}")]
    Unopened,
    /// A variable name outside `[A-Za-z0-9_]+`.
    #[error("variable {0:?} is not [A-Za-z0-9_]+")]
    Variable(String),
    /// Two variables with no literal text between them (their split would be ambiguous).
    #[error("two variables need literal text between them")]
    Adjacent,
    /// No variable, or more than `MAX_VARIABLES`.
    #[error("1 to {MAX_VARIABLES} variables")]
    Variables,
}

fn parse(template: &str) -> Result<Vec<Piece>, TemplateError> {
    if template.is_empty() || template.len() > MAX_TEMPLATE {
        return Err(TemplateError::Length);
    }
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            pieces.push(Piece::Text(rest[..open].to_owned()));
        }
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or(TemplateError::Unclosed)?;
        let name = &after[..close];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(TemplateError::Variable(name.to_owned()));
        }
        if matches!(pieces.last(), Some(Piece::Variable(_))) {
            return Err(TemplateError::Adjacent);
        }
        pieces.push(Piece::Variable(name.to_owned()));
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err(TemplateError::Unopened);
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_owned()));
    }
    let variables = pieces
        .iter()
        .filter(|p| matches!(p, Piece::Variable(_)))
        .count();
    if variables == 0 || variables > MAX_VARIABLES {
        return Err(TemplateError::Variables);
    }
    Ok(pieces)
}

impl Template {
    /// The variables `uri` gives this template, if it matches.
    fn matches(&self, uri: &str) -> Option<Map<String, Value>> {
        let mut values = Map::new();
        let mut rest = uri;
        let mut pieces = self.pieces.iter().peekable();
        while let Some(piece) = pieces.next() {
            match piece {
                Piece::Text(text) => rest = rest.strip_prefix(text.as_str())?,
                Piece::Variable(name) => {
                    let end = match pieces.peek() {
                        Some(Piece::Text(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || value.len() > MAX_VALUE || value.contains('/') {
                        return None;
                    }
                    values.insert(name.clone(), json!(value));
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(values)
    }
}

/// Checks the configured templates against the admitted capabilities (`capability` finds one by
/// id): each capability must exist, run sync and only read.
pub fn check<'a>(
    configs: &[TemplateConfig],
    capability: impl Fn(&str) -> Option<&'a Capability>,
) -> Result<Vec<Template>, ConfigError> {
    let mut templates = Vec::new();
    for config in configs {
        let key = |k: &str| format!("mcp.resource_templates[{}].{k}", config.uri_template);
        let pieces = parse(&config.uri_template)
            .map_err(|e| crate::config::rejected(key("uri_template"), e))?;
        let Some(found) = capability(&config.capability) else {
            return Err(ConfigError::Unknown {
                key: key("capability"),
                kind: "capability",
                name: config.capability.clone(),
            });
        };
        if !aip_runtime::resource::may_produce(found) {
            return Err(ConfigError::Needs {
                key: key("capability"),
                needs: "a capability that runs sync with only read side effects",
                why: "a resource read must not change anything",
            });
        }
        templates.push(Template {
            config: config.clone(),
            pieces,
        });
    }
    Ok(templates)
}

/// `resources/templates/list`: every template whose capability the caller may invoke.
pub fn list(templates: &[Template], caller: &Caller, version: Version) -> Value {
    let items: Vec<Value> = templates
        .iter()
        .filter(|t| caller.may_invoke(&t.config.capability))
        .map(|t| {
            let mut item = json!({ "uriTemplate": t.config.uri_template, "name": t.config.name,
                                   "mimeType": mime(t) });
            if let Some(d) = &t.config.description {
                item["description"] = json!(d);
            }
            if version >= Version::V2025_06_18 {
                item["title"] = json!(t.config.name);
            }
            item
        })
        .collect();
    json!({ "resourceTemplates": items })
}

fn mime(template: &Template) -> &str {
    template
        .config
        .mime_type
        .as_deref()
        .unwrap_or("application/json")
}

/// `resources/read` of a URI no declared resource has: the first template it matches (that the
/// caller may invoke) runs its capability; no match is -32002.
pub async fn read(
    runtime: &Arc<Runtime>,
    templates: &[Template],
    caller: &Caller,
    uri: &str,
) -> CallOutcome {
    let not_found = || Err((RESOURCE_NOT_FOUND, format!("Resource not found: {uri}")));
    let Some((template, input)) = templates
        .iter()
        .filter(|t| caller.may_invoke(&t.config.capability))
        .find_map(|t| t.matches(uri).map(|input| (t, input)))
    else {
        return not_found();
    };
    let capability = aip_core::CapabilityId::new(template.config.capability.clone());
    let text = match runtime
        .produce_content(caller, &capability, Value::Object(input), uri)
        .await
    {
        Ok(text) => text,
        Err(RuntimeError::NotFound(_)) => return not_found(),
        Err(err) => {
            let error = err.to_protocol_error();
            return Err((INTERNAL_ERROR, format!("{}: {}", error.code, error.message)));
        }
    };
    Ok(json!({ "contents": [{ "uri": uri, "mimeType": mime(template), "text": text }] }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(uri: &str) -> Template {
        Template {
            config: TemplateConfig {
                uri_template: uri.into(),
                name: "t".into(),
                description: None,
                mime_type: None,
                capability: "cap:x".into(),
            },
            pieces: parse(uri).unwrap(),
        }
    }

    #[test]
    fn a_template_matches_whole_uris_and_binds_its_variables() {
        let t = template("test://template/{id}/data");
        assert_eq!(
            t.matches("test://template/123/data"),
            Some(json!({"id": "123"}).as_object().unwrap().clone())
        );
        for other in [
            "test://template/123/data/x",
            "test://template//data",
            "test://template/1/2/data",
            "test://other/123/data",
        ] {
            assert_eq!(t.matches(other), None, "{other}");
        }
        let two = template("db://{table}/rows/{row}");
        assert_eq!(
            two.matches("db://users/rows/7"),
            Some(
                json!({"table": "users", "row": "7"})
                    .as_object()
                    .unwrap()
                    .clone()
            )
        );
        for bad in [
            "",
            "x://{}",
            "x://{a}{b}",
            "x://{a",
            "x://a}",
            "x://plain",
            "x://{a-b}",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_known_sync_read_only_capability_may_back_a_template() {
        let capability = |id: &str, effect: &str| -> Capability {
            serde_json::from_value(json!({
            "id": id, "name": id, "kind": "tool", "input_schema": { "type": "object" },
            "contract": {
                "side_effects": [effect],
                "idempotency": { "requirement": "optional", "collision_behavior": "return_original_result", "key_scope": "principal" },
                "execution": { "supports_sync": true, "supports_async": false, "supports_streaming": false, "supports_cancel": false,
                               "supports_retry": true, "expected_completion": "sync", "retry_safety": "safe" },
                "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
            }
        }))
        .unwrap()
        };
        let (read, write) = (capability("cap:r", "read"), capability("cap:w", "write"));
        let find = |id: &str| [&read, &write].into_iter().find(|c| c.id.as_str() == id);
        let config = |capability: &str| TemplateConfig {
            uri_template: "x://{id}".into(),
            name: "x".into(),
            description: None,
            mime_type: None,
            capability: capability.into(),
        };
        assert!(check(&[config("cap:r")], find).is_ok());
        assert!(check(&[config("cap:w")], find).is_err());
        assert!(check(&[config("cap:none")], find).is_err());
    }
}
