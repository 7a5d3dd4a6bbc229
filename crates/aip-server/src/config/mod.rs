//! Server configuration: one TOML file plus `AIP_*` environment overrides (docs/configuration.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::Deserialize;
use serde_json::Value;

pub mod a2a;
pub mod callbacks;
pub mod channels;
mod error;
mod limits;
pub mod mcp;
pub mod mcp_upstreams;
pub mod nats;
pub mod peers;
pub mod retention;
pub mod webhooks;
pub use error::{
    ConfigError, Order, malformed, ordered, rejected, unreachable, within, within_usize,
};
pub use limits::{Limits, RateConfig};

/// Top-level keys that environment variables may override (`AIP_<KEY>`, nested with `__`).
const TOP_LEVEL_KEYS: &[&str] = &[
    "listen",
    "data_dir",
    "database",
    "nats",
    "allowed_hosts",
    "allowed_origins",
    "demo_capabilities",
    "agent",
    "limits",
    "admin",
    "shutdown",
    "principals",
    "approval_policies",
    "security",
    "capabilities",
    "console",
    "resources",
    "resource_root",
    "callbacks",
    "delegation",
    "peers",
    "mcp",
    "mcp_upstreams",
    "webhooks",
    "a2a",
    "a2a_remotes",
];

/// The whole configuration of `aip serve`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Socket address to listen on.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Directory holding the SQLite database and the admin token.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// The node's Ed25519 key file (`aip keys generate` format, mode 0600); unset:
    /// `<data_dir>/node.key`, created on first start. Its did:key is the manifest agent's `did`.
    #[serde(default)]
    pub node_key_file: Option<PathBuf>,
    /// Store location: `postgres://…` for a database several nodes share, or a SQLite path /
    /// `sqlite://path`. Unset: `<data_dir>/aip.sqlite` (docs/storage.md).
    #[serde(default)]
    pub database: Option<String>,
    /// The native NATS binding (spec 20.4); off unless `nats.url` is set.
    #[serde(default)]
    pub nats: nats::NatsConfig,
    /// Accepted `Host` header names (DNS-rebinding guard). Empty: loopback names when listening on
    /// loopback, any host otherwise.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` header values. A request carrying any other `Origin` is refused.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Whether the built-in `cap:demo:*` capabilities are admitted.
    #[serde(default = "yes")]
    pub demo_capabilities: bool,
    /// The provider principal advertised in the manifest.
    #[serde(default)]
    pub agent: AgentConfig,
    /// Size, count and time bounds.
    #[serde(default)]
    pub limits: Limits,
    /// The built-in admin principal.
    #[serde(default)]
    pub admin: AdminConfig,
    /// How a signal stops the node.
    #[serde(default)]
    pub shutdown: ShutdownConfig,
    /// Principals allowed to call the server, each with its bearer token reference.
    #[serde(default)]
    pub principals: Vec<PrincipalConfig>,
    /// Tenant approval policies: named sets of a tenant's approvers that approval rules can name
    /// (`tenant_policy` leaves and selectors, spec 12.1).
    #[serde(default)]
    pub approval_policies: Vec<TenantApprovalPolicy>,
    /// Envelope signature and replay settings (spec 22.2, 22.3).
    #[serde(default)]
    pub security: SecurityConfig,
    /// Capabilities beyond the demo ones, each bound to a handler.
    #[serde(default)]
    pub capabilities: Vec<CapabilityConfig>,
    /// Serve the web console at `/console/`. Unset: off, except that `aip serve` without a config
    /// file on a loopback address turns it on (the no-config demo).
    #[serde(default)]
    pub console: Option<bool>,
    /// Development settings that let requests in without credentials (`mcp.dev_principal`) are
    /// allowed: set by `aip serve --insecure-dev` or the no-config demo, never by a file or the
    /// environment, so a deployed configuration cannot turn them on by itself.
    #[serde(skip)]
    pub insecure_dev: bool,
    /// Readable resources (spec 9.7), each with its read policy and content.
    #[serde(default)]
    pub resources: Vec<ResourceConfig>,
    /// Directory that file resources are read from; a file resolving outside it stops startup.
    #[serde(default)]
    pub resource_root: Option<PathBuf>,
    /// Callback policy (spec 17): which targets actions may name and how deliveries are made.
    #[serde(default)]
    pub callbacks: callbacks::CallbacksConfig,
    /// Conversation and channel message policy (spec 15).
    #[serde(default)]
    pub channels: channels::ChannelsConfig,
    /// How long events and chunks are kept (spec 16.2).
    #[serde(default)]
    pub retention: retention::RetentionConfig,
    /// Delegation policy (spec 14): this node's trust domain and chain limits.
    #[serde(default)]
    pub delegation: peers::DelegationConfig,
    /// Peer nodes, pinned by their did:key (spec 14.2).
    #[serde(default)]
    pub peers: Vec<peers::PeerConfig>,
    /// The MCP compatibility profile (spec 21.1) at `/mcp`.
    #[serde(default)]
    pub mcp: mcp::McpConfig,
    /// Upstream MCP servers whose tools are offered as governed capabilities.
    #[serde(default)]
    pub mcp_upstreams: Vec<mcp_upstreams::UpstreamConfig>,
    /// Signed webhook subscriptions (spec 21.3) at `/aip/v1/webhooks/{id}`.
    #[serde(default)]
    pub webhooks: Vec<webhooks::SubscriptionConfig>,
    /// The A2A compatibility profile (spec 21.2) at `/a2a`, with the agent card.
    #[serde(default)]
    pub a2a: a2a::A2aConfig,
    /// Remote A2A agents whose skills are offered as governed capabilities (outbound A2A).
    #[serde(default)]
    pub a2a_remotes: Vec<a2a::RemoteConfig>,
}

/// A declared resource: the manifest `Resource` fields (`id`, `name`, `kind`, `capability_id`,
/// `description`, `mime_type`, `tenant_id`, `access`, `expires_at`) and exactly one content source.
#[derive(Debug, Clone, Deserialize)]
pub struct ResourceConfig {
    /// Inline text content.
    #[serde(default)]
    pub text: Option<String>,
    /// A file under `resource_root`, by relative path.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// A sync, read-only capability that produces the content at each read (run as the reader).
    #[serde(default)]
    pub produced_by: Option<String>,
    /// The manifest `Resource` object.
    #[serde(flatten)]
    pub resource: serde_json::Map<String, Value>,
}

/// A tenant approval policy: who of `tenant` counts as this policy's approvers. Membership comes only
/// from this file (the trusted resolver of spec 12.1), never from a request.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantApprovalPolicy {
    /// Policy id, named by rules as `{ operator = "tenant_policy", policy_id = "<id>" }`; the bare
    /// `tenant_policy` selector names `default`.
    pub id: String,
    /// The tenant whose principals it counts.
    pub tenant: String,
    /// Principals (by id) in the policy.
    #[serde(default)]
    pub principals: Vec<String>,
    /// Principals holding one of these roles are in the policy.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Principals in one of these groups are in the policy.
    #[serde(default)]
    pub groups: Vec<String>,
}

impl TenantApprovalPolicy {
    /// Whether `caller` (of any tenant) is one of this policy's approvers.
    pub fn includes(&self, caller: &aip_runtime::Caller) -> bool {
        caller.tenant == self.tenant
            && (self.principals.contains(&caller.id)
                || caller.roles.iter().any(|r| self.roles.contains(r))
                || caller.groups.iter().any(|g| self.groups.contains(g)))
    }
}

/// The provider principal (manifest `agent`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Principal id.
    #[serde(default = "default_agent_id")]
    pub id: String,
    /// Display name.
    #[serde(default = "default_agent_name")]
    pub name: String,
}

/// The built-in admin principal, whose token lives in `<data_dir>/admin.token`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Whether the admin principal exists (and its token file is created on first start).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Tenant of the admin principal.
    #[serde(default = "default_tenant")]
    pub tenant: String,
    /// With the demo capabilities on: create `approver-1` and `approver-2` (role `approver`, tokens
    /// in `<data_dir>/approver-N.token`) so `cap:demo:transfer` can be approved.
    #[serde(default = "yes")]
    pub demo_approvers: bool,
}

/// `[shutdown]`: the graceful drain on the first SIGTERM/SIGINT (a second exits at once).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownConfig {
    /// How long running handlers get to finish and commit, ms (0..=3600000).
    #[serde(default = "default_grace_ms")]
    pub grace_ms: u64,
    /// How long a running mutation gets, ms (at least `grace_ms`, at most 3600000; unset: twice
    /// `grace_ms`): released unfinished it would settle as an uncertain outcome, so the drain
    /// waits longer for it than for work a restarted node can simply run again.
    #[serde(default)]
    pub mutation_grace_ms: Option<u64>,
}

impl ShutdownConfig {
    /// The wait for a running mutation, ms.
    pub fn mutation_grace_ms(&self) -> u64 {
        self.mutation_grace_ms
            .unwrap_or_else(|| self.grace_ms.saturating_mul(2).min(MAX_GRACE_MS))
    }
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self {
            grace_ms: default_grace_ms(),
            mutation_grace_ms: None,
        }
    }
}

fn default_grace_ms() -> u64 {
    30_000
}

/// Longest `shutdown.grace_ms`: an hour.
const MAX_GRACE_MS: u64 = 3_600_000;

/// One authenticated caller. Its tenant and scopes are authority; request bodies never are (22.6).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalConfig {
    /// Principal id.
    pub id: String,
    /// Principal kind (spec 8.1).
    #[serde(default = "default_kind")]
    pub kind: aip_core::PrincipalKind,
    /// Tenant the principal belongs to.
    #[serde(default = "default_tenant")]
    pub tenant: String,
    /// Granted scopes (see docs/configuration.md).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Lowercase hex SHA-256 of the bearer token.
    pub token_sha256: Option<String>,
    /// A file holding the bearer token (read once at start).
    pub token_file: Option<PathBuf>,
    /// The external account this principal's work runs under (spec 8.3): the scope of idempotency keys
    /// of capabilities with `key_scope = "external_account"`. Absent: such keys are refused.
    #[serde(default)]
    pub external_account: Option<aip_runtime::caller::ExternalAccount>,
    /// Roles the principal holds: approval authority (spec 12.1). Only this directory grants it.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Groups the principal belongs to (approval authority, spec 12.1).
    #[serde(default)]
    pub groups: Vec<String>,
}

/// Signed-envelope policy (spec 22.2, 22.3).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityConfig {
    /// Refuse unsigned envelopes.
    #[serde(default)]
    pub require_signed_envelopes: bool,
    /// Largest accepted distance between `sent_at` and the server clock, in milliseconds.
    #[serde(default = "default_skew_ms")]
    pub max_clock_skew_ms: u64,
    /// How long a claimed message id stays claimed, in milliseconds.
    #[serde(default = "default_replay_window_ms")]
    pub replay_window_ms: u64,
    /// did:key signers and the principal each one speaks for.
    #[serde(default)]
    pub trusted_signers: Vec<TrustedSigner>,
    /// Authentication refusals are audited at most once per (source, reason) and window, with the
    /// count of refusals the event stands for (spec 18.3), in milliseconds.
    #[serde(default = "default_refusal_audit_window_ms")]
    pub refusal_audit_window_ms: u64,
}

/// Binds a did:key to a configured principal (spec 22.2: the verifier binds the DID to a principal).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedSigner {
    /// `did:key:z...` of an Ed25519 key.
    pub did: String,
    /// Id of a configured principal.
    pub principal: String,
}

/// A capability entry: its manifest fields plus the handler that implements it.
#[derive(Debug, Clone, Deserialize)]
pub struct CapabilityConfig {
    /// The handler bound to this capability.
    pub handler: HandlerConfig,
    /// Approval tiers checked before the contract's own `approval` policy: the first whose `when`
    /// matches the input decides (spec 12.1).
    #[serde(default)]
    pub approval_tiers: Vec<ApprovalTierConfig>,
    /// Roles that may not approve this capability's actions, whichever tier applies (separation of
    /// duties, spec 12.1); a principal holding one is refused with `aip.policy.separation_of_duties`.
    #[serde(default)]
    pub approval_excluded_roles: Vec<String>,
    /// Operator choices about how the capability is authorized.
    #[serde(default)]
    pub policy: CapabilityPolicyConfig,
    /// The manifest `Capability` object (id, name, kind, input_schema, output_schema, risk, contract...).
    #[serde(flatten)]
    pub capability: serde_json::Map<String, Value>,
}

/// `[capabilities.policy]`: authorization choices the operator states explicitly.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityPolicyConfig {
    /// Run a high-stakes capability (risk `critical`, or financial, identity, medical or legal
    /// effects) on an invoke scope alone, without any approval (spec 22.5); the manifest's
    /// governance lists it under `allowed_without_approval`.
    #[serde(default)]
    pub allow_without_approval: bool,
}

/// One approval tier of a configured capability.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalTierConfig {
    /// A comparison over the input, such as `amount_minor >= 100000`; absent: every input.
    #[serde(default)]
    pub when: Option<String>,
    /// The approval policy (spec 12.1's `ApprovalPolicy`: `required`, `approver_selector`, `rule`,
    /// `minimum_distinct_principals`, `separation_of_duties`, `ttl_ms`, `evidence_requirements`,
    /// `policy_version`, `reason`).
    pub policy: Value,
}

/// Handler kinds a capability can be bound to from configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum HandlerConfig {
    /// POST the action and its trusted context to `url`.
    Http {
        /// Absolute `https://` URL (or `http://` inside a protected local boundary, spec 22.4).
        url: String,
        /// Per-call timeout in milliseconds.
        #[serde(default = "default_http_timeout_ms")]
        timeout_ms: u64,
        /// PEM bundle of private CAs trusted for this URL, beside the system's roots.
        #[serde(default)]
        ca_file: Option<PathBuf>,
        /// Where reconciliations of unknown outcomes are asked (spec 13.6); required when the
        /// capability's transaction contract lists `reconcile`.
        #[serde(default)]
        reconcile_url: Option<String>,
        /// How long a plan of this capability stays committable (spec 13.3), ms; default 15 min.
        #[serde(default)]
        plan_ttl_ms: Option<u64>,
    },
    /// Delegate each action to a configured peer (spec 14): the peer runs `capability`.
    Peer {
        /// The `[[peers]]` name (it needs a `url`).
        peer: String,
        /// The capability id at the peer.
        capability: String,
        /// The scope delegated with each child; default `invoke:<capability>`.
        #[serde(default)]
        scope: Option<String>,
        /// `http` or `nats`; default: the peer's `url`, else its `nats_prefix`.
        #[serde(default)]
        transport: Option<String>,
    },
}

/// Largest `security.max_clock_skew_ms`: beyond 15 minutes a replayed envelope stays fresh too
/// long (spec 22.3).
pub const MAX_CLOCK_SKEW_MS: u64 = 15 * 60 * 1000;

/// Largest `security.refusal_audit_window_ms`: a longer window would hide a flood for too long.
pub const MAX_REFUSAL_WINDOW_MS: u64 = 60 * 60 * 1000;

impl Config {
    /// Load from an optional TOML file, then apply `AIP_*` environment overrides.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let config: Config = Self::sources(file)?.extract().map_err(Box::new)?;
        config.check()?;
        Ok(config)
    }

    /// The file (if any) merged under the `AIP_*` environment, before extraction and range checks.
    fn sources(file: Option<&Path>) -> Result<Figment, ConfigError> {
        let mut figment = Figment::new();
        if let Some(file) = file {
            if !file.is_file() {
                return Err(ConfigError::FileNotFound {
                    path: file.to_path_buf(),
                });
            }
            figment = figment.merge(Toml::file(file));
        }
        figment = figment.merge(Env::prefixed("AIP_").split("__").filter(|key| {
            // Keys are not lowercased yet at this point of the chain.
            let first = key
                .as_str()
                .split('.')
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            TOP_LEVEL_KEYS.contains(&first.as_str())
        }));
        Ok(figment)
    }

    /// Spec 22.3: freshness needs a bounded skew, and a replay window that covers it (a message
    /// id forgotten while its `sent_at` is still fresh could be replayed).
    fn check_security(&self) -> Result<(), ConfigError> {
        within(
            "shutdown.grace_ms",
            self.shutdown.grace_ms,
            0..=MAX_GRACE_MS,
        )?;
        if let Some(mutation_grace) = self.shutdown.mutation_grace_ms {
            within(
                "shutdown.mutation_grace_ms",
                mutation_grace,
                0..=MAX_GRACE_MS,
            )?;
            ordered(
                "shutdown.mutation_grace_ms",
                mutation_grace,
                Order::AtLeast,
                "shutdown.grace_ms",
                self.shutdown.grace_ms,
            )?;
        }
        let s = &self.security;
        within(
            "security.max_clock_skew_ms",
            s.max_clock_skew_ms,
            1..=MAX_CLOCK_SKEW_MS,
        )?;
        ordered(
            "security.replay_window_ms",
            s.replay_window_ms,
            Order::AtLeast,
            "security.max_clock_skew_ms",
            s.max_clock_skew_ms,
        )?;
        within(
            "security.refusal_audit_window_ms",
            s.refusal_audit_window_ms,
            100..=MAX_REFUSAL_WINDOW_MS,
        )?;
        // The node's security log is a reserved tenant: no principal may be in it.
        let reserved = aip_runtime::NODE_LOG_TENANT;
        let taken = std::iter::once(("admin.tenant".to_owned(), &self.admin.tenant))
            .chain(
                self.principals
                    .iter()
                    .map(|p| (format!("principals[{}].tenant", p.id), &p.tenant)),
            )
            .chain(
                self.approval_policies
                    .iter()
                    .map(|p| (format!("approval_policies[{}].tenant", p.id), &p.tenant)),
            )
            .find(|(_, tenant)| *tenant == reserved);
        if let Some((key, _)) = taken {
            return Err(ConfigError::Reserved {
                key,
                value: reserved.into(),
                why: "the node's security log",
            });
        }
        Ok(())
    }

    /// Range checks that serde cannot express.
    pub fn check(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::HashSet::new();
        for p in &self.approval_policies {
            let key = format!("approval_policies[{}]", p.id);
            within_usize(format!("{key}.id length"), p.id.len(), 1..=128)?;
            if p.tenant.is_empty() {
                return Err(malformed(format!("{key}.tenant"), "", "a tenant id"));
            }
            if p.principals.is_empty() && p.roles.is_empty() && p.groups.is_empty() {
                return Err(ConfigError::Needs {
                    key,
                    needs: "principals, roles or groups",
                    why: "a policy without members approves nothing",
                });
            }
            if !seen.insert((p.tenant.as_str(), p.id.as_str())) {
                return Err(ConfigError::Duplicate {
                    key: format!("approval_policies (tenant {})", p.tenant),
                    id: p.id.clone(),
                });
            }
        }
        self.check_security()?;
        self.limits.check()?;
        if let Some(database) = &self.database
            && database.trim().is_empty()
        {
            return Err(malformed(
                "database",
                database,
                "a postgres:// URL or a SQLite path",
            ));
        }
        self.nats.check()?;
        self.callbacks.check()?;
        self.channels.check()?;
        self.retention.check()?;
        peers::check(&self.delegation, &self.peers)?;
        for p in &self.principals {
            if p.id.is_empty() {
                return Err(malformed("principals[].id", "", "a non-empty principal id"));
            }
            if let Some(account) = &p.external_account
                && (account.system.is_empty() || account.id.is_empty())
            {
                return Err(ConfigError::Needs {
                    key: format!("principals[{}].external_account", p.id),
                    needs: "a non-empty system and id",
                    why: "it scopes idempotency keys (spec 8.3)",
                });
            }
            if p.token_sha256.is_some() == p.token_file.is_some() {
                return Err(ConfigError::ExactlyOne {
                    key: format!("principals[{}]", p.id),
                    options: &["token_sha256", "token_file"],
                });
            }
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: default_listen(),
            data_dir: default_data_dir(),
            node_key_file: None,
            database: None,
            nats: nats::NatsConfig::default(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            demo_capabilities: true,
            agent: AgentConfig::default(),
            limits: Limits::default(),
            admin: AdminConfig::default(),
            shutdown: ShutdownConfig::default(),
            principals: Vec::new(),
            approval_policies: Vec::new(),
            security: SecurityConfig::default(),
            capabilities: Vec::new(),
            console: None,
            insecure_dev: false,
            resources: Vec::new(),
            resource_root: None,
            callbacks: callbacks::CallbacksConfig::default(),
            channels: channels::ChannelsConfig::default(),
            retention: retention::RetentionConfig::default(),
            delegation: peers::DelegationConfig::default(),
            peers: Vec::new(),
            mcp: mcp::McpConfig::default(),
            mcp_upstreams: Vec::new(),
            webhooks: Vec::new(),
            a2a: a2a::A2aConfig::default(),
            a2a_remotes: Vec::new(),
        }
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            id: default_agent_id(),
            name: default_agent_name(),
        }
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            tenant: default_tenant(),
            demo_approvers: true,
        }
    }
}

impl Default for SecurityConfig {
    fn default() -> Self {
        Self {
            require_signed_envelopes: false,
            max_clock_skew_ms: default_skew_ms(),
            replay_window_ms: default_replay_window_ms(),
            trusted_signers: Vec::new(),
            refusal_audit_window_ms: default_refusal_audit_window_ms(),
        }
    }
}

/// `true`, for the `#[serde(default)]` of switches that are on unless turned off (every section).
fn yes() -> bool {
    true
}
fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7700))
}
fn default_data_dir() -> PathBuf {
    PathBuf::from("./aip-data")
}
fn default_agent_id() -> String {
    "agent:aip-local".into()
}
fn default_agent_name() -> String {
    "aip local runtime".into()
}

/// The tenant an entry belongs to unless it names one (every section).
fn default_tenant() -> String {
    aip_runtime::caller::DEFAULT_TENANT.into()
}
fn default_kind() -> aip_core::PrincipalKind {
    aip_core::PrincipalKind::Service
}
fn default_skew_ms() -> u64 {
    300_000
}
fn default_replay_window_ms() -> u64 {
    600_000
}
fn default_refusal_audit_window_ms() -> u64 {
    10_000
}
fn default_http_timeout_ms() -> u64 {
    10_000
}

#[cfg(test)]
mod tests;
