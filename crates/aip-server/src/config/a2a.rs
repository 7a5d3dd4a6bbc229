//! The `[a2a]` section (spec 21.2: the A2A endpoint and agent card) and the `[[a2a_remotes]]`
//! entries (remote A2A agents whose skills are served here as governed capabilities).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::mcp_upstreams::ToolOverride;

/// `[a2a]`: the A2A endpoint and agent card.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aConfig {
    /// Serve A2A at `/a2a` (aliases `/a2a/v1`, `/aip/v1/a2a`) and the agent card. Default on.
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// The externally visible base URL (`https://agents.example.com`) the card's interface URL is
    /// built from. Unset: `http://<the Host header of the card request>`.
    #[serde(default)]
    pub public_base_url: Option<String>,
    /// The capability a message invokes when it names none.
    #[serde(default)]
    pub default_capability: Option<String>,
    /// Capabilities listed as skills on the public card; every capability the caller may invoke is
    /// on the authenticated extended card.
    #[serde(default)]
    pub public_skills: Vec<String>,
}

impl Default for A2aConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            public_base_url: None,
            default_capability: None,
            public_skills: Vec::new(),
        }
    }
}

/// One `[[a2a_remotes]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    /// Local name (the delegation's peer, the default capability prefix).
    pub name: String,
    /// The remote's base URL: its card is `<url>/.well-known/agent-card.json`.
    pub url: String,
    /// The name the remote's card must state (pinned).
    pub agent_name: String,
    /// The card's RFC 8785 SHA-256 (lowercase hex), when the operator pins the whole card.
    #[serde(default)]
    pub card_sha256: Option<String>,
    /// A file holding the bearer token sent with every call.
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// A PEM bundle of private CAs the remote's certificate may chain to.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The remote skills offered here, by skill id.
    pub skills: Vec<String>,
    /// Prefix of the capability ids; default `cap:a2a:<name>:`.
    #[serde(default)]
    pub capability_prefix: Option<String>,
    /// Longest a call may take (also bounded by the action's deadline), ms.
    #[serde(default = "default_call_timeout_ms")]
    pub call_timeout_ms: u64,
    /// Per-skill contract overrides (risk, side effects, idempotency, approval), by skill id.
    #[serde(default)]
    pub overrides: BTreeMap<String, ToolOverride>,
}

fn default_call_timeout_ms() -> u64 {
    60_000
}
