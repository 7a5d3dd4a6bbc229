//! The `[[mcp_upstreams]]` entries: upstream MCP servers whose tools are offered as governed
//! capabilities, and what an operator states about each tool's contract.

use std::collections::BTreeMap;
use std::path::PathBuf;

use aip_core::{IdempotencyRequirement, RiskLevel, SideEffect};
use serde::Deserialize;
use serde_json::Value;

/// One `[[mcp_upstreams]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Name (in messages and the default capability prefix).
    pub name: String,
    /// stdio: the program `aip serve` starts and supervises.
    #[serde(default)]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: its environment (besides `PATH` and `HOME`; nothing else is inherited).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: its working directory.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP: the server's MCP URL.
    #[serde(default)]
    pub url: Option<String>,
    /// Streamable HTTP: a file holding the bearer token to send.
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// Prefix of the capability ids; default `cap:mcp:<name>:`.
    #[serde(default)]
    pub capability_prefix: Option<String>,
    /// The tools offered; absent: every tool the server lists.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Longest a tool call may take (also bounded by the action's deadline), ms.
    #[serde(default = "default_call_timeout_ms")]
    pub call_timeout_ms: u64,
    /// Per-tool contract overrides, by tool name.
    #[serde(default)]
    pub overrides: BTreeMap<String, ToolOverride>,
    /// Offer the server's resources (`resources/list` at startup, then every
    /// `resources_refresh_secs`) as AIP resources with ids `mcp:<name>:<uri>`, read through the
    /// server by the read-only capability `<prefix>resource_read`: only principals that may
    /// invoke it see them.
    #[serde(default)]
    pub resources: bool,
    /// Seconds between re-listings of the server's resources (1..=86400).
    #[serde(default = "default_resources_refresh_secs")]
    pub resources_refresh_secs: u64,
}

fn default_resources_refresh_secs() -> u64 {
    60
}

fn default_call_timeout_ms() -> u64 {
    30_000
}

/// What an operator states about one upstream tool.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// Risk level (default `medium`).
    #[serde(default)]
    pub risk: Option<RiskLevel>,
    /// Side effects (default `["write", "external_network"]`); `["read"]` makes the tool
    /// cancellable and retryable.
    #[serde(default)]
    pub side_effects: Option<Vec<SideEffect>>,
    /// Idempotency requirement (default `unsupported`).
    #[serde(default)]
    pub idempotency: Option<IdempotencyRequirement>,
    /// An approval policy (spec 12.1 `ApprovalPolicy`) every call needs.
    #[serde(default)]
    pub approval: Option<Value>,
    /// The tool's name on this node's own `/mcp` (default: derived from the capability id).
    #[serde(default)]
    pub mcp_name: Option<String>,
    /// The sensitivity of the data it returns (default `unknown`: nobody declared it, so its
    /// outputs are treated as sensitive, spec 9.6).
    #[serde(default)]
    pub sensitivity: Option<aip_core::DataSensitivity>,
}
