//! Upstream MCP servers as governed capabilities (`[[mcp_upstreams]]`): each allowed tool of a
//! server `aip serve` starts (stdio) or reaches (Streamable HTTP) becomes a capability, so calls go
//! through admission, idempotency, approvals, receipts and the read model like any other. The
//! contract is conservative unless the operator overrides it per tool (spec 9.4): a tool is a
//! mutation with external effects, not cancellable, not retried, and an interrupted call is an
//! uncertain outcome.

pub mod client;
mod handler;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aip_core::{Capability, IdempotencyRequirement, RiskLevel, SideEffect};
use aip_runtime::registry::CapabilityEntry;
use serde_json::{Value, json};

use client::{Endpoint, Upstream};

pub use crate::config::mcp_upstreams::{ToolOverride, UpstreamConfig};
use crate::config::{ConfigError, rejected, unreachable, within};

/// The capabilities and resources the upstream servers offer.
#[derive(Default)]
pub struct Offered {
    /// One capability per allowed tool, and each resource reader.
    pub capabilities: Vec<CapabilityEntry>,
    /// The servers' resources, produced by their readers.
    pub resources: Vec<aip_runtime::resource::ResourceEntry>,
    /// What keeps each server's resource list current.
    pub refreshers: Vec<ResourceRefresher>,
}

/// Re-lists one upstream's resources while the node runs and replaces the runtime's copy: added
/// resources appear, removed ones are gone (404 like any unknown resource). A failed listing keeps
/// the last good list.
pub struct ResourceRefresher {
    upstream: Arc<Upstream>,
    name: String,
    reader_id: aip_core::CapabilityId,
    every: Duration,
}

impl ResourceRefresher {
    /// Runs until `shutdown`.
    pub async fn run(self, runtime: Arc<aip_runtime::Runtime>) {
        let prefix = resource_prefix(&self.name);
        loop {
            tokio::select! {
                () = runtime.stopped() => return,
                () = tokio::time::sleep(self.every) => {}
            }
            let listed = match self.upstream.list_resources().await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(upstream = %self.name, error = %e, "resources/list failed; the last list stays");
                    continue;
                }
            };
            let replaced = resource_entries(&self.name, &self.reader_id, &listed)
                .map_err(|e| e.to_string())
                .and_then(|entries| {
                    runtime
                        .replace_resources(&prefix, entries)
                        .map_err(|e| e.to_string())
                });
            match replaced {
                Ok(true) => tracing::info!(upstream = %self.name, "upstream resources changed"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(upstream = %self.name, error = %e, "upstream resources refused; the last list stays");
                }
            }
        }
    }
}

/// The AIP resource id prefix of an upstream's resources.
fn resource_prefix(name: &str) -> String {
    format!("mcp:{name}:")
}

/// The capability suffix of an upstream's resource reader.
const RESOURCE_READER: &str = "resource_read";

/// Connects every upstream and returns its tools as capabilities. An upstream that cannot be
/// reached, a listed tool it does not offer, or a tool whose schema cannot be admitted stops
/// startup with a message naming it.
pub async fn capabilities(
    configs: &[UpstreamConfig],
    relay: Arc<super::relay::Relay>,
) -> Result<Offered, ConfigError> {
    let mut offered = Offered::default();
    for config in configs {
        let key = |k: &str| format!("mcp_upstreams[{}]{k}", config.name);
        let endpoint = endpoint(config)?;
        let upstream = Upstream::new(config.name.clone(), endpoint);
        let tools = upstream
            .list_tools()
            .await
            .map_err(|e| unreachable(key(""), e))?;
        let by_name: BTreeMap<&str, &Value> = tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(|n| (n, t)))
            .collect();
        let wanted: Vec<&str> = match &config.tools {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => by_name.keys().copied().collect(),
        };
        if let Some(unknown) = config
            .overrides
            .keys()
            .find(|k| !wanted.contains(&k.as_str()))
        {
            return Err(ConfigError::Unknown {
                key: key(".overrides"),
                kind: "offered tool",
                name: unknown.clone(),
            });
        }
        let prefix = config
            .capability_prefix
            .clone()
            .unwrap_or_else(|| format!("cap:mcp:{}:", config.name));
        for name in wanted {
            let tool = by_name.get(name).ok_or_else(|| ConfigError::Unknown {
                key: key(".tools"),
                kind: "tool of the server",
                name: name.to_owned(),
            })?;
            let overrides = config.overrides.get(name).cloned().unwrap_or_default();
            let (mut capability, mutation) = capability(&prefix, tool, &overrides)
                .map_err(|e| rejected(key(&format!(".tools[{name}]")), e))?;
            // A streaming call carries the tool's progress and log notifications as chunks.
            if let Some(contract) = capability.contract.as_mut() {
                contract.execution.supports_streaming = true;
            }
            let handler = handler::ToolHandler {
                upstream: Arc::clone(&upstream),
                tool: name.to_owned(),
                mutation,
                timeout: Duration::from_millis(config.call_timeout_ms),
                relay: Some(Arc::clone(&relay)),
            };
            offered.capabilities.push(CapabilityEntry::from((
                capability,
                Arc::new(handler) as Arc<dyn aip_runtime::handler::ActionHandler>,
            )));
        }
        if config.resources {
            resources(config, &prefix, &upstream, &mut offered).await?;
        }
    }
    Ok(offered)
}

/// The upstream's resources as AIP resources, and the read-only capability that reads them.
async fn resources(
    config: &UpstreamConfig,
    prefix: &str,
    upstream: &Arc<Upstream>,
    offered: &mut Offered,
) -> Result<(), ConfigError> {
    let name = &config.name;
    let key = |k: &str| format!("mcp_upstreams[{name}]{k}");
    if config
        .tools
        .as_ref()
        .is_some_and(|t| t.iter().any(|t| t == RESOURCE_READER))
    {
        return Err(ConfigError::Reserved {
            key: key(".tools"),
            value: RESOURCE_READER.into(),
            why: "the capability that reads the server's resources",
        });
    }
    within(
        key(".resources_refresh_secs"),
        config.resources_refresh_secs,
        1..=86_400,
    )?;
    let listed = upstream
        .list_resources()
        .await
        .map_err(|e| unreachable(key(""), e))?;
    let reader_tool = json!({ "name": RESOURCE_READER,
        "title": format!("Read a resource of {name}"),
        "description": format!("Reads one resource of the upstream MCP server {name} (resources/read)."),
        "inputSchema": { "type": "object", "properties": { "resource_id": { "type": "string" } },
                         "required": ["resource_id"] } });
    let read_only = ToolOverride {
        side_effects: Some(vec![SideEffect::Read]),
        risk: Some(RiskLevel::Low),
        ..ToolOverride::default()
    };
    let (mut reader, _) =
        capability(prefix, &reader_tool, &read_only).map_err(|e| rejected(key(".resources"), e))?;
    if let Some(contract) = reader.contract.as_mut() {
        // Read as the reader's own sync action (spec 9.7 produced content).
        contract.execution.supports_async = false;
        contract.execution.expected_completion = aip_core::ExpectedCompletionMode::Sync;
    }
    let reader_id = reader.id.clone();
    let id_prefix = resource_prefix(name);
    offered.resources.extend(
        resource_entries(name, &reader_id, &listed).map_err(|e| rejected(key(".resources"), e))?,
    );
    offered.refreshers.push(ResourceRefresher {
        upstream: Arc::clone(upstream),
        name: name.clone(),
        reader_id: reader_id.clone(),
        every: Duration::from_secs(config.resources_refresh_secs),
    });
    let handler = handler::ResourceHandler {
        reader: handler::ToolHandler {
            upstream: Arc::clone(upstream),
            tool: "resources/read".into(),
            mutation: false,
            timeout: Duration::from_millis(config.call_timeout_ms),
            relay: None,
        },
        id_prefix,
    };
    offered.capabilities.push(CapabilityEntry::from((
        reader,
        Arc::new(handler) as Arc<dyn aip_runtime::handler::ActionHandler>,
    )));
    Ok(())
}

/// An upstream's listed resources as AIP resources produced by its reader `reader_id`.
fn resource_entries(
    name: &str,
    reader_id: &aip_core::CapabilityId,
    listed: &[Value],
) -> Result<Vec<aip_runtime::resource::ResourceEntry>, ResourceListError> {
    use aip_runtime::resource::{ResourceContent, ResourceEntry};
    let id_prefix = resource_prefix(name);
    listed
        .iter()
        .map(|item| {
            let Some(uri) = item.get("uri").and_then(Value::as_str) else {
                return Err(ResourceListError::NoUri);
            };
            let id = format!("{id_prefix}{uri}");
            if id.len() > 256 {
                return Err(ResourceListError::IdTooLong(uri.to_owned()));
            }
            let text = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_owned);
            let resource: aip_core::Resource = serde_json::from_value(json!({
                "id": id,
                "name": text("title").or_else(|| text("name")).unwrap_or_else(|| uri.to_owned()),
                "kind": "mcp.resource",
                "capability_id": reader_id,
                "description": text("description"),
                "mime_type": text("mimeType"),
                "access": { "public": true },
            }))
            .map_err(|source| ResourceListError::Resource {
                uri: uri.to_owned(),
                source,
            })?;
            Ok(ResourceEntry {
                resource,
                content: ResourceContent::Produced(reader_id.clone()),
            })
        })
        .collect()
}

fn endpoint(config: &UpstreamConfig) -> Result<Endpoint, ConfigError> {
    match (&config.command, &config.url) {
        (Some(command), None) => Ok(Endpoint::Stdio {
            command: command.clone(),
            args: config.args.clone(),
            env: config.env.clone().into_iter().collect(),
            cwd: config.cwd.clone(),
        }),
        (None, Some(url)) => {
            let bearer = match &config.bearer_token_file {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .map_err(|source| ConfigError::Unreadable {
                            key: format!("mcp_upstreams[{}].bearer_token_file", config.name),
                            path: path.clone(),
                            source,
                        })?
                        .trim()
                        .to_owned(),
                ),
                None => None,
            };
            Ok(Endpoint::Http {
                url: url.clone(),
                bearer,
            })
        }
        _ => Err(ConfigError::ExactlyOne {
            key: format!("mcp_upstreams[{}]", config.name),
            options: &["command (stdio)", "url (HTTP)"],
        }),
    }
}

/// Why a tool (or a tool-shaped remote A2A skill) cannot be offered as a capability.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The server lists the tool without an input schema.
    #[error("the tool has no inputSchema")]
    NoInputSchema,
    /// What the tool and its overrides make is not an admissible capability (its id, its schema).
    #[error("{0}")]
    Capability(#[source] serde_json::Error),
}

/// Why a server's resource list cannot be offered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResourceListError {
    /// A listed resource has no `uri`.
    #[error("a listed resource has no uri")]
    NoUri,
    /// The resource's id (`mcp:<name>:<uri>`) would be longer than an id may be.
    #[error("resource {0} makes an id longer than 256 characters")]
    IdTooLong(String),
    /// The listed resource does not decode as a manifest resource.
    #[error("resource {uri}: {source}")]
    Resource {
        /// Its URI.
        uri: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// The capability of one upstream tool (or a tool-shaped remote A2A skill), and whether it is a
/// mutation.
pub(crate) fn capability(
    prefix: &str,
    tool: &Value,
    o: &ToolOverride,
) -> Result<(Capability, bool), ToolError> {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
    let input_schema = tool
        .get("inputSchema")
        .cloned()
        .ok_or(ToolError::NoInputSchema)?;
    let output_schema = tool
        .get("outputSchema")
        .filter(|s| s.get("type").and_then(Value::as_str) == Some("object"))
        .cloned();
    let side_effects = o
        .side_effects
        .clone()
        .unwrap_or_else(|| vec![SideEffect::Write, SideEffect::ExternalNetwork]);
    let mutation = side_effects.iter().any(|e| *e != SideEffect::Read);
    let requirement = o.idempotency.unwrap_or(IdempotencyRequirement::Unsupported);
    let mut contract = json!({
        "side_effects": side_effects,
        "idempotency": { "requirement": requirement, "collision_behavior": "reject_conflict", "key_scope": "principal" },
        "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false,
                       "supports_cancel": !mutation, "supports_retry": !mutation, "expected_completion": "any",
                       "retry_safety": if mutation { "unsafe" } else { "safe" } },
        "data": { "sensitivity": o.sensitivity.unwrap_or(aip_core::DataSensitivity::Unknown), "contains_pii": false, "redaction_required": false },
    });
    if let Some(approval) = &o.approval {
        contract["approval"] = approval.clone();
    }
    let mut value = json!({
        "id": format!("{prefix}{name}"),
        "name": tool.get("title").and_then(Value::as_str).unwrap_or(name),
        "kind": "tool",
        "risk": o.risk.unwrap_or(RiskLevel::Medium),
        "input_schema": input_schema,
        "contract": contract,
    });
    if let Some(description) = tool.get("description").and_then(Value::as_str) {
        value["description"] = json!(description.chars().take(4096).collect::<String>());
    }
    if let Some(output) = output_schema {
        value["output_schema"] = output;
    }
    // The MCP tool name `/mcp` serves it under (checked like every tool name at startup).
    if let Some(mcp_name) = &o.mcp_name {
        value["bindings"] = json!([{ "profile": super::PROFILE, "tool": mcp_name }]);
    }
    let capability: Capability = serde_json::from_value(value).map_err(ToolError::Capability)?;
    Ok((capability, mutation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_tool_is_a_mutation_unless_its_operator_says_it_only_reads() {
        let tool = json!({"name": "forecast", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}});
        let (cap, mutation) = capability("cap:w:", &tool, &ToolOverride::default()).unwrap();
        assert!(mutation, "a server's own hints are not trusted");
        assert_eq!(cap.id.as_str(), "cap:w:forecast");
        let read = ToolOverride {
            side_effects: Some(vec![SideEffect::Read]),
            ..ToolOverride::default()
        };
        let (cap, mutation) = capability("cap:w:", &tool, &read).unwrap();
        assert!(!mutation);
        assert!(cap.contract.unwrap().execution.supports_cancel);
    }

    #[tokio::test]
    async fn an_upstream_refused_at_startup_names_the_key_it_breaks() {
        let entry = |extra: &str| -> UpstreamConfig {
            let text = format!("name = \"w\"\n{extra}");
            figment::Figment::from(figment::providers::Toml::string(&text))
                .extract()
                .unwrap()
        };
        use figment::providers::Format as _;
        let relay = Arc::new(super::super::relay::Relay::default());
        let cases = [
            ("", "mcp_upstreams[w]"),
            (
                "command = \"x\"\nurl = \"http://127.0.0.1:1/mcp\"",
                "mcp_upstreams[w]",
            ),
            (
                "url = \"http://127.0.0.1:1/mcp\"\nbearer_token_file = \"/nonexistent/t\"",
                "mcp_upstreams[w].bearer_token_file",
            ),
            // Nothing listens there: the server cannot be reached.
            ("url = \"http://127.0.0.1:1/mcp\"", "mcp_upstreams[w]"),
        ];
        for (extra, key) in cases {
            let refused = capabilities(&[entry(extra)], Arc::clone(&relay)).await;
            let err = refused.err().unwrap();
            assert_eq!(err.key(), Some(key), "{extra}: {err}");
        }
        let unreachable = capabilities(&[entry("url = \"http://127.0.0.1:1/mcp\"")], relay).await;
        assert!(matches!(
            unreachable.err(),
            Some(ConfigError::Unreachable { .. })
        ));
    }
}
