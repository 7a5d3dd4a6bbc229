//! Server configuration: one TOML file plus `AIP_*` environment overrides (docs/configuration.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::Deserialize;
use serde_json::Value;

mod limits;
pub use limits::RateConfig;

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
    pub nats: crate::nats::NatsConfig,
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
    pub callbacks: crate::callbacks::CallbacksConfig,
    /// Conversation and channel message policy (spec 15).
    #[serde(default)]
    pub channels: crate::channels::ChannelsConfig,
    /// How long events and chunks are kept (spec 16.2).
    #[serde(default)]
    pub retention: crate::retention::RetentionConfig,
    /// Delegation policy (spec 14): this node's trust domain and chain limits.
    #[serde(default)]
    pub delegation: crate::peers::DelegationConfig,
    /// Peer nodes, pinned by their did:key (spec 14.2).
    #[serde(default)]
    pub peers: Vec<crate::peers::PeerConfig>,
    /// The MCP compatibility profile (spec 21.1) at `/mcp`.
    #[serde(default)]
    pub mcp: crate::profile::mcp::McpConfig,
    /// Upstream MCP servers whose tools are offered as governed capabilities.
    #[serde(default)]
    pub mcp_upstreams: Vec<crate::profile::mcp::upstream::UpstreamConfig>,
    /// Signed webhook subscriptions (spec 21.3) at `/aip/v1/webhooks/{id}`.
    #[serde(default)]
    pub webhooks: Vec<crate::profile::webhook::SubscriptionConfig>,
    /// The A2A compatibility profile (spec 21.2) at `/a2a`, with the agent card.
    #[serde(default)]
    pub a2a: crate::profile::a2a::A2aConfig,
    /// Remote A2A agents whose skills are offered as governed capabilities (outbound A2A).
    #[serde(default)]
    pub a2a_remotes: Vec<crate::profile::a2a::remote::RemoteConfig>,
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

/// Bounds applied to every request (spec 16.4, 22.8).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Largest accepted request body in bytes.
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
    /// Largest list page (1..=1000).
    #[serde(default = "default_max_list_limit")]
    pub max_list_limit: u32,
    /// Page size when the client names none.
    #[serde(default = "default_list_limit")]
    pub default_list_limit: u32,
    /// Longest bounded wait in milliseconds (at most 30000).
    #[serde(default = "default_max_wait_ms")]
    pub max_wait_ms: u64,
    /// Action deadline when the action names no `timeout_ms`.
    #[serde(default = "default_action_timeout_ms")]
    pub default_action_timeout_ms: u64,
    /// Upper bound of any action deadline.
    #[serde(default = "default_max_action_timeout_ms")]
    pub max_action_timeout_ms: u64,
    /// Number of async workers claiming queued actions.
    #[serde(default = "default_workers")]
    pub async_workers: u32,
    /// Lease length of a claimed async action in milliseconds.
    #[serde(default = "default_lease_ms")]
    pub lease_ms: u64,
    /// How long after a commit's admission its outcome is first reconciled when it is then
    /// unknown (spec 13.6); 0: only on request.
    #[serde(default = "default_reconcile_after_ms")]
    pub reconcile_after_ms: u64,
    /// Claims of an action's job before it is given up (`dead_lettered`), 1..=100.
    #[serde(default = "default_job_max_attempts")]
    pub job_max_attempts: u32,
    /// Each principal's rate of admitted actions (spec 22.8); unset: unlimited.
    #[serde(default)]
    pub rate_per_principal: Option<RateConfig>,
    /// Each tenant's rate of admitted actions, all its principals together; unset: unlimited.
    #[serde(default)]
    pub rate_per_tenant: Option<RateConfig>,
    /// Rates of named principals, in place of `rate_per_principal`.
    #[serde(default)]
    pub principal_rates: std::collections::HashMap<String, RateConfig>,
    /// Rates of named tenants, in place of `rate_per_tenant`.
    #[serde(default)]
    pub tenant_rates: std::collections::HashMap<String, RateConfig>,
    /// Most unfinished actions each principal holds at once (spec 22.8); unset: unbounded.
    #[serde(default)]
    pub max_running_per_principal: Option<u32>,
    /// Most unfinished actions each tenant holds at once, all its principals together.
    #[serde(default)]
    pub max_running_per_tenant: Option<u32>,
    /// Quotas of named principals, in place of `max_running_per_principal`.
    #[serde(default)]
    pub principal_running: std::collections::HashMap<String, u32>,
    /// Quotas of named tenants, in place of `max_running_per_tenant`.
    #[serde(default)]
    pub tenant_running: std::collections::HashMap<String, u32>,
    /// Idle time after which an SSE/WebSocket stream gets a `heartbeat` event (100..=60000 ms).
    #[serde(default = "default_stream_heartbeat_ms")]
    pub stream_heartbeat_ms: u64,
    /// A stream consumer whose buffer stays full this long is disconnected (ms).
    #[serde(default = "default_stream_send_timeout_ms")]
    pub stream_send_timeout_ms: u64,
    /// Events buffered per stream connection (1..=4096).
    #[serde(default = "default_stream_buffer_events")]
    pub stream_buffer_events: usize,
    /// Requests in flight and streams followed at once per WebSocket connection (1..=4096).
    #[serde(default = "default_ws_max_streams")]
    pub ws_max_streams: usize,
    /// Actions waiting for a worker at once, every tenant together (1..=1000000; 0: unbounded); a
    /// queued admission past it is refused `aip.runtime.queue_full` (spec 22.8).
    #[serde(default = "default_max_queued_actions")]
    pub max_queued_actions: u32,
    /// Streams open at once on the node, SSE responses and WebSocket connections together
    /// (1..=1000000); a request asking for one more is refused `aip.transport.too_many_streams`.
    #[serde(default = "default_max_open_streams")]
    pub max_open_streams: usize,
    /// HTTP requests the node handles at once, every route but the probes (1..=100000); the
    /// excess is refused at once with `aip.runtime.overloaded` (spec 22.8).
    #[serde(default = "default_max_in_flight_requests")]
    pub max_in_flight_requests: usize,
    /// A native HTTP request not answered within this is answered `aip.runtime.request_timeout`
    /// (more than `max_wait_ms`, at most 3600000); an action it submitted runs on.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
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
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self {
            grace_ms: default_grace_ms(),
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

/// Why configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file or an environment override is malformed.
    #[error("configuration: {0}")]
    Parse(#[from] Box<figment::Error>),
    /// A value is out of its documented range.
    #[error("configuration: {0}")]
    Invalid(String),
    /// A key's value is outside the bound the spec section it implements allows.
    #[error("configuration: {key} {rule}")]
    OutOfBounds {
        /// The key, as written in the file (`section.key`).
        key: &'static str,
        /// The bound it breaks, with the value given.
        rule: String,
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
                return Err(ConfigError::Invalid(format!(
                    "config file {} not found",
                    file.display()
                )));
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
        if self.shutdown.grace_ms > MAX_GRACE_MS {
            return Err(ConfigError::OutOfBounds {
                key: "shutdown.grace_ms",
                rule: format!(
                    "must be within 0..={MAX_GRACE_MS} (an hour), not {}",
                    self.shutdown.grace_ms
                ),
            });
        }
        let s = &self.security;
        if s.max_clock_skew_ms == 0 || s.max_clock_skew_ms > MAX_CLOCK_SKEW_MS {
            return Err(ConfigError::OutOfBounds {
                key: "security.max_clock_skew_ms",
                rule: format!(
                    "must be within 1..={MAX_CLOCK_SKEW_MS} (15 minutes), not {}",
                    s.max_clock_skew_ms
                ),
            });
        }
        if s.replay_window_ms == 0 || s.replay_window_ms < s.max_clock_skew_ms {
            return Err(ConfigError::OutOfBounds {
                key: "security.replay_window_ms",
                rule: format!(
                    "must be > 0 and at least security.max_clock_skew_ms ({}), not {}",
                    s.max_clock_skew_ms, s.replay_window_ms
                ),
            });
        }
        if !(100..=MAX_REFUSAL_WINDOW_MS).contains(&s.refusal_audit_window_ms) {
            return Err(ConfigError::OutOfBounds {
                key: "security.refusal_audit_window_ms",
                rule: format!(
                    "must be within 100..={MAX_REFUSAL_WINDOW_MS} (an hour), not {}",
                    s.refusal_audit_window_ms
                ),
            });
        }
        // The node's security log is a reserved tenant: no principal may be in it.
        let reserved = aip_runtime::NODE_LOG_TENANT;
        if self.admin.tenant == reserved
            || self.principals.iter().any(|p| p.tenant == reserved)
            || self.approval_policies.iter().any(|p| p.tenant == reserved)
        {
            return Err(ConfigError::OutOfBounds {
                key: "principals.tenant",
                rule: format!("must not be {reserved}, the node's security log"),
            });
        }
        Ok(())
    }

    /// Range checks that serde cannot express.
    pub fn check(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::HashSet::new();
        for p in &self.approval_policies {
            if p.id.is_empty() || p.id.len() > 128 || p.tenant.is_empty() {
                return Err(ConfigError::Invalid(format!(
                    "approval_policies: {:?} needs an id of 1..=128 characters and a tenant",
                    p.id
                )));
            }
            if p.principals.is_empty() && p.roles.is_empty() && p.groups.is_empty() {
                return Err(ConfigError::Invalid(format!(
                    "approval_policies: {} (tenant {}) names no principals, roles or groups",
                    p.id, p.tenant
                )));
            }
            if !seen.insert((p.tenant.as_str(), p.id.as_str())) {
                return Err(ConfigError::Invalid(format!(
                    "approval_policies: {} is defined twice for tenant {}",
                    p.id, p.tenant
                )));
            }
        }
        self.check_security()?;
        let l = &self.limits;
        if l.max_list_limit == 0 || l.max_list_limit > 1000 {
            return Err(ConfigError::Invalid(
                "limits.max_list_limit must be within 1..=1000 (spec 16.4)".into(),
            ));
        }
        if l.default_list_limit == 0 || l.default_list_limit > l.max_list_limit {
            return Err(ConfigError::Invalid(
                "limits.default_list_limit must be within 1..=max_list_limit".into(),
            ));
        }
        if l.max_wait_ms > 30_000 {
            return Err(ConfigError::Invalid(
                "limits.max_wait_ms must be at most 30000 (spec 16.4)".into(),
            ));
        }
        if !(100..=60_000).contains(&l.stream_heartbeat_ms)
            || !(100..=600_000).contains(&l.stream_send_timeout_ms)
            || !(1..=4096).contains(&l.stream_buffer_events)
            || !(1..=4096).contains(&l.ws_max_streams)
        {
            return Err(ConfigError::Invalid(
                "limits.stream_heartbeat_ms must be 100..=60000, stream_send_timeout_ms 100..=600000, stream_buffer_events 1..=4096, ws_max_streams 1..=4096".into(),
            ));
        }
        if !(1..=100_000).contains(&l.max_in_flight_requests) {
            return Err(ConfigError::Invalid(
                "limits.max_in_flight_requests must be within 1..=100000".into(),
            ));
        }
        if !(1..=1_000_000).contains(&l.max_open_streams) {
            return Err(ConfigError::Invalid(
                "limits.max_open_streams must be within 1..=1000000".into(),
            ));
        }
        if l.request_timeout_ms <= l.max_wait_ms || l.request_timeout_ms > 3_600_000 {
            return Err(ConfigError::Invalid(
                "limits.request_timeout_ms must be more than max_wait_ms and at most 3600000"
                    .into(),
            ));
        }
        if l.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid(
                "limits.max_body_bytes must be at least 1024".into(),
            ));
        }
        if l.default_action_timeout_ms == 0 || l.default_action_timeout_ms > l.max_action_timeout_ms
        {
            return Err(ConfigError::Invalid(
                "limits.default_action_timeout_ms must be within 1..=max_action_timeout_ms".into(),
            ));
        }
        if l.async_workers == 0 || l.async_workers > 1024 {
            return Err(ConfigError::Invalid(
                "limits.async_workers must be within 1..=1024".into(),
            ));
        }
        if l.job_max_attempts == 0 || l.job_max_attempts > 100 {
            return Err(ConfigError::Invalid(
                "limits.job_max_attempts must be within 1..=100".into(),
            ));
        }
        l.rates()?;
        l.quotas()?;
        if l.reconcile_after_ms > 86_400_000 {
            return Err(ConfigError::Invalid(
                "limits.reconcile_after_ms must be at most 86400000 (0: only on request)".into(),
            ));
        }
        if l.lease_ms < 1000 {
            return Err(ConfigError::Invalid(
                "limits.lease_ms must be at least 1000".into(),
            ));
        }
        if let Some(database) = &self.database
            && database.trim().is_empty()
        {
            return Err(ConfigError::Invalid(
                "database must be a postgres:// URL or a SQLite path".into(),
            ));
        }
        self.nats.check()?;
        self.callbacks.check()?;
        self.channels.check()?;
        self.retention.check()?;
        crate::peers::check(&self.delegation, &self.peers)?;
        for p in &self.principals {
            if p.id.is_empty() {
                return Err(ConfigError::Invalid("a principal has an empty id".into()));
            }
            if let Some(account) = &p.external_account
                && (account.system.is_empty() || account.id.is_empty())
            {
                return Err(ConfigError::Invalid(format!(
                    "principal {}: external_account needs a non-empty system and id",
                    p.id
                )));
            }
            if p.token_sha256.is_some() == p.token_file.is_some() {
                return Err(ConfigError::Invalid(format!(
                    "principal {}: give exactly one of token_sha256 or token_file",
                    p.id
                )));
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
            nats: crate::nats::NatsConfig::default(),
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
            callbacks: crate::callbacks::CallbacksConfig::default(),
            channels: crate::channels::ChannelsConfig::default(),
            retention: crate::retention::RetentionConfig::default(),
            delegation: crate::peers::DelegationConfig::default(),
            peers: Vec::new(),
            mcp: crate::profile::mcp::McpConfig::default(),
            mcp_upstreams: Vec::new(),
            webhooks: Vec::new(),
            a2a: crate::profile::a2a::A2aConfig::default(),
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

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: default_max_body_bytes(),
            max_list_limit: default_max_list_limit(),
            default_list_limit: default_list_limit(),
            max_wait_ms: default_max_wait_ms(),
            default_action_timeout_ms: default_action_timeout_ms(),
            max_action_timeout_ms: default_max_action_timeout_ms(),
            async_workers: default_workers(),
            lease_ms: default_lease_ms(),
            reconcile_after_ms: default_reconcile_after_ms(),
            job_max_attempts: default_job_max_attempts(),
            rate_per_principal: None,
            rate_per_tenant: None,
            principal_rates: std::collections::HashMap::new(),
            tenant_rates: std::collections::HashMap::new(),
            max_running_per_principal: None,
            max_running_per_tenant: None,
            principal_running: std::collections::HashMap::new(),
            tenant_running: std::collections::HashMap::new(),
            stream_heartbeat_ms: default_stream_heartbeat_ms(),
            stream_send_timeout_ms: default_stream_send_timeout_ms(),
            stream_buffer_events: default_stream_buffer_events(),
            ws_max_streams: default_ws_max_streams(),
            max_in_flight_requests: default_max_in_flight_requests(),
            max_open_streams: default_max_open_streams(),
            max_queued_actions: default_max_queued_actions(),
            request_timeout_ms: default_request_timeout_ms(),
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
fn default_stream_heartbeat_ms() -> u64 {
    15_000
}

fn default_stream_send_timeout_ms() -> u64 {
    30_000
}

fn default_stream_buffer_events() -> usize {
    64
}

fn default_ws_max_streams() -> usize {
    64
}

fn default_max_in_flight_requests() -> usize {
    1024
}

fn default_max_queued_actions() -> u32 {
    100_000
}

fn default_max_open_streams() -> usize {
    10_000
}

fn default_request_timeout_ms() -> u64 {
    90_000
}

fn default_max_body_bytes() -> usize {
    1024 * 1024
}
fn default_max_list_limit() -> u32 {
    1000
}
fn default_list_limit() -> u32 {
    100
}
fn default_max_wait_ms() -> u64 {
    30_000
}
fn default_action_timeout_ms() -> u64 {
    60_000
}
fn default_max_action_timeout_ms() -> u64 {
    3_600_000
}
fn default_workers() -> u32 {
    8
}
fn default_job_max_attempts() -> u32 {
    5
}
fn default_reconcile_after_ms() -> u64 {
    10_000
}

fn default_lease_ms() -> u64 {
    30_000
}
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
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_empty_file_yields_the_documented_defaults() {
        let dir = std::env::temp_dir().join(format!("aip-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("empty.toml");
        std::fs::write(&file, "").unwrap();
        let config = Config::load(Some(&file)).unwrap();
        assert_eq!(config.listen, default_listen());
        assert_eq!(config.limits.max_list_limit, 1000);
        assert!(config.admin.enabled);
    }

    #[test]
    fn clock_skew_and_replay_window_outside_their_bounds_are_refused_naming_the_key() {
        let refused = |skew: u64, window: u64| {
            let mut config = Config::default();
            config.security.max_clock_skew_ms = skew;
            config.security.replay_window_ms = window;
            match config.check() {
                Err(ConfigError::OutOfBounds { key, .. }) => Some(key),
                Ok(()) => None,
                Err(other) => panic!("{other}"),
            }
        };
        assert_eq!(refused(300_000, 600_000), None);
        assert_eq!(refused(MAX_CLOCK_SKEW_MS, MAX_CLOCK_SKEW_MS), None);
        assert_eq!(
            refused(MAX_CLOCK_SKEW_MS + 1, 10 * MAX_CLOCK_SKEW_MS),
            Some("security.max_clock_skew_ms")
        );
        assert_eq!(refused(0, 600_000), Some("security.max_clock_skew_ms"));
        assert_eq!(refused(300_000, 0), Some("security.replay_window_ms"));
        assert_eq!(refused(300_000, 299_999), Some("security.replay_window_ms"));
    }

    #[test]
    fn a_request_timeout_not_longer_than_the_longest_wait_or_no_request_slot_is_refused() {
        let check = |max_wait_ms: u64, request_timeout_ms: u64, max_in_flight_requests: usize| {
            let mut config = Config::default();
            config.limits.max_wait_ms = max_wait_ms;
            config.limits.request_timeout_ms = request_timeout_ms;
            config.limits.max_in_flight_requests = max_in_flight_requests;
            config.check().is_ok()
        };
        assert!(check(30_000, 90_000, 1024));
        assert!(check(500, 501, 1));
        assert!(!check(30_000, 30_000, 1024));
        assert!(!check(500, 3_600_001, 1024));
        assert!(!check(500, 1000, 0));
        assert!(!check(500, 1000, 100_001));
    }

    #[test]
    fn a_list_limit_above_one_thousand_is_refused() {
        let mut config = Config::default();
        config.limits.max_list_limit = 1001;
        assert!(config.check().is_err());
    }

    #[test]
    fn a_principal_with_two_token_sources_is_refused() {
        let figment = Figment::from(Toml::string(
            "[[principals]]\nid = \"a\"\ntoken_sha256 = \"00\"\ntoken_file = \"/x\"\n",
        ));
        let config: Config = figment.extract().unwrap();
        assert!(config.check().is_err());
    }

    #[test]
    fn a_principal_may_carry_an_external_account_and_an_empty_one_is_refused() {
        let parse = |account: &str| {
            Figment::from(Toml::string(&format!(
                "[[principals]]\nid = \"a\"\ntoken_sha256 = \"00\"\nexternal_account = {account}\n"
            )))
            .extract::<Config>()
            .map_err(Box::new)
        };
        let config = parse("{ system = \"stripe\", id = \"acct_1\" }").unwrap();
        let account = config.principals[0].external_account.clone().unwrap();
        assert_eq!(
            (account.system.as_str(), account.id.as_str()),
            ("stripe", "acct_1")
        );
        assert!(
            parse("{ system = \"\", id = \"acct_1\" }")
                .unwrap()
                .check()
                .is_err()
        );
        assert!(parse("{ system = \"s\", id = \"a\", extra = 1 }").is_err());
    }

    /// Every option with an environment value different from its default and a check that it took
    /// effect. Keep in step with the options tables of docs/configuration.md (a test compares them).
    #[allow(clippy::type_complexity)]
    fn env_overrides() -> Vec<(&'static str, &'static str, fn(&Config) -> bool)> {
        let mut all: Vec<(&'static str, &'static str, fn(&Config) -> bool)> = vec![
            ("AIP_LISTEN", "0.0.0.0:8080", |c| c.listen.port() == 8080),
            ("AIP_DATA_DIR", "/srv/aip", |c| {
                c.data_dir == Path::new("/srv/aip")
            }),
            ("AIP_DATABASE", "postgres://db/aip", |c| {
                c.database.as_deref() == Some("postgres://db/aip")
            }),
            ("AIP_ALLOWED_HOSTS", "[\"api.example.com\"]", |c| {
                c.allowed_hosts == ["api.example.com"]
            }),
            (
                "AIP_ALLOWED_ORIGINS",
                "[\"https://app.example.com\"]",
                |c| c.allowed_origins == ["https://app.example.com"],
            ),
            ("AIP_DEMO_CAPABILITIES", "false", |c| !c.demo_capabilities),
            ("AIP_AGENT__ID", "agent:prod", |c| {
                c.agent.id == "agent:prod"
            }),
            ("AIP_AGENT__NAME", "prod", |c| c.agent.name == "prod"),
            ("AIP_LIMITS__MAX_BODY_BYTES", "65536", |c| {
                c.limits.max_body_bytes == 65_536
            }),
            ("AIP_LIMITS__MAX_LIST_LIMIT", "500", |c| {
                c.limits.max_list_limit == 500
            }),
            ("AIP_LIMITS__DEFAULT_LIST_LIMIT", "50", |c| {
                c.limits.default_list_limit == 50
            }),
            ("AIP_LIMITS__MAX_WAIT_MS", "10000", |c| {
                c.limits.max_wait_ms == 10_000
            }),
            ("AIP_LIMITS__DEFAULT_ACTION_TIMEOUT_MS", "5000", |c| {
                c.limits.default_action_timeout_ms == 5_000
            }),
            ("AIP_LIMITS__MAX_ACTION_TIMEOUT_MS", "7000", |c| {
                c.limits.max_action_timeout_ms == 7_000
            }),
            ("AIP_LIMITS__ASYNC_WORKERS", "3", |c| {
                c.limits.async_workers == 3
            }),
            ("AIP_LIMITS__LEASE_MS", "9000", |c| {
                c.limits.lease_ms == 9_000
            }),
            ("AIP_LIMITS__JOB_MAX_ATTEMPTS", "2", |c| {
                c.limits.job_max_attempts == 2
            }),
            ("AIP_LIMITS__STREAM_HEARTBEAT_MS", "1000", |c| {
                c.limits.stream_heartbeat_ms == 1_000
            }),
            ("AIP_LIMITS__STREAM_BUFFER_EVENTS", "8", |c| {
                c.limits.stream_buffer_events == 8
            }),
            ("AIP_LIMITS__STREAM_SEND_TIMEOUT_MS", "2000", |c| {
                c.limits.stream_send_timeout_ms == 2_000
            }),
            ("AIP_LIMITS__WS_MAX_STREAMS", "4", |c| {
                c.limits.ws_max_streams == 4
            }),
            ("AIP_LIMITS__MAX_IN_FLIGHT_REQUESTS", "16", |c| {
                c.limits.max_in_flight_requests == 16
            }),
            ("AIP_LIMITS__MAX_QUEUED_ACTIONS", "64", |c| {
                c.limits.max_queued_actions == 64
            }),
            ("AIP_LIMITS__MAX_OPEN_STREAMS", "32", |c| {
                c.limits.max_open_streams == 32
            }),
            ("AIP_LIMITS__REQUEST_TIMEOUT_MS", "45000", |c| {
                c.limits.request_timeout_ms == 45_000
            }),
            ("AIP_LIMITS__RECONCILE_AFTER_MS", "2500", |c| {
                c.limits.reconcile_after_ms == 2_500
            }),
            (
                "AIP_LIMITS__RATE_PER_PRINCIPAL",
                "{per_second=5,burst=10}",
                |c| {
                    c.limits.rate_per_principal
                        == Some(RateConfig {
                            per_second: 5,
                            burst: 10,
                        })
                },
            ),
            (
                "AIP_LIMITS__RATE_PER_TENANT",
                "{per_second=50,burst=100}",
                |c| {
                    c.limits.rate_per_tenant
                        == Some(RateConfig {
                            per_second: 50,
                            burst: 100,
                        })
                },
            ),
            (
                "AIP_LIMITS__PRINCIPAL_RATES",
                "{svc={per_second=1,burst=2}}",
                |c| {
                    c.limits.principal_rates.get("svc")
                        == Some(&RateConfig {
                            per_second: 1,
                            burst: 2,
                        })
                },
            ),
            (
                "AIP_LIMITS__TENANT_RATES",
                "{acme={per_second=3,burst=4}}",
                |c| {
                    c.limits.tenant_rates.get("acme")
                        == Some(&RateConfig {
                            per_second: 3,
                            burst: 4,
                        })
                },
            ),
            ("AIP_ADMIN__ENABLED", "false", |c| !c.admin.enabled),
            ("AIP_ADMIN__TENANT", "ops", |c| c.admin.tenant == "ops"),
            ("AIP_SHUTDOWN__GRACE_MS", "5000", |c| {
                c.shutdown.grace_ms == 5000
            }),
            (
                "AIP_PRINCIPALS",
                "[{id=\"svc\",tenant=\"t\",token_sha256=\"00\",external_account={system=\"s\",id=\"a\"}}]",
                |c| {
                    c.principals.len() == 1
                        && c.principals[0].tenant == "t"
                        && c.principals[0]
                            .external_account
                            .as_ref()
                            .is_some_and(|a| a.id == "a")
                },
            ),
            ("AIP_SECURITY__REQUIRE_SIGNED_ENVELOPES", "true", |c| {
                c.security.require_signed_envelopes
            }),
            ("AIP_SECURITY__MAX_CLOCK_SKEW_MS", "1000", |c| {
                c.security.max_clock_skew_ms == 1_000
            }),
            ("AIP_SECURITY__REPLAY_WINDOW_MS", "2000", |c| {
                c.security.replay_window_ms == 2_000
            }),
            ("AIP_SECURITY__REFUSAL_AUDIT_WINDOW_MS", "2500", |c| {
                c.security.refusal_audit_window_ms == 2_500
            }),
            (
                "AIP_SECURITY__TRUSTED_SIGNERS",
                "[{did=\"did:key:z6Mk\",principal=\"svc\"}]",
                |c| {
                    c.security.trusted_signers.len() == 1
                        && c.security.trusted_signers[0].principal == "svc"
                },
            ),
            (
                "AIP_CAPABILITIES",
                "[{id=\"cap:x\",handler={type=\"http\",url=\"https://h/x\"}}]",
                |c| c.capabilities.len() == 1 && c.capabilities[0].capability.get("id").is_some(),
            ),
            ("AIP_NATS__URL", "nats://n:4222", |c| {
                c.nats.url.as_deref() == Some("nats://n:4222")
            }),
            ("AIP_NATS__TRUST_DOMAIN", "example_com", |c| {
                c.nats.trust_domain == "example_com"
            }),
            ("AIP_NATS__SERVICE", "gateway", |c| {
                c.nats.service == "gateway"
            }),
            ("AIP_NATS__SERVICE_VERSION", "v2", |c| {
                c.nats.service_version == "v2"
            }),
            ("AIP_NATS__QUEUE_GROUP", "workers", |c| {
                c.nats.queue_group == "workers"
            }),
            ("AIP_NATS__PRINCIPAL", "svc", |c| {
                c.nats.principal.as_deref() == Some("svc")
            }),
            ("AIP_NATS__USER", "u", |c| {
                c.nats.user.as_deref() == Some("u")
            }),
            ("AIP_NATS__PASSWORD_FILE", "/run/p", |c| {
                c.nats.password_file.is_some()
            }),
            ("AIP_NATS__TOKEN_FILE", "/run/t", |c| {
                c.nats.token_file.is_some()
            }),
            ("AIP_NATS__NKEY_SEED_FILE", "/run/n", |c| {
                c.nats.nkey_seed_file.is_some()
            }),
            ("AIP_NATS__CREDENTIALS_FILE", "/run/c", |c| {
                c.nats.credentials_file.is_some()
            }),
            ("AIP_NATS__TLS_REQUIRED", "true", |c| c.nats.tls_required),
            ("AIP_NATS__TLS_CA_FILE", "/run/ca.pem", |c| {
                c.nats.tls_ca_file.is_some()
            }),
            ("AIP_NATS__TLS_CLIENT_CERT_FILE", "/run/c.pem", |c| {
                c.nats.tls_client_cert_file.is_some()
            }),
            ("AIP_NATS__TLS_CLIENT_KEY_FILE", "/run/k.pem", |c| {
                c.nats.tls_client_key_file.is_some()
            }),
            ("AIP_NATS__MAX_IN_FLIGHT", "7", |c| {
                c.nats.max_in_flight == 7
            }),
        ];
        all.extend(crate::callbacks::env_overrides());
        all.extend(crate::peers::env_overrides());
        all.push(("AIP_MCP__ENABLED", "false", |c| !c.mcp.enabled));
        all.push(("AIP_MCP__DEV_PRINCIPAL", "alice", |c| {
            c.mcp.dev_principal.as_deref() == Some("alice")
        }));
        all
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail fixes the closure's error type
    fn every_option_is_overridable_by_its_environment_variable() {
        for (var, value, took_effect) in env_overrides() {
            figment::Jail::expect_with(|jail| {
                let default = Config::sources(None).unwrap().extract::<Config>()?;
                assert!(
                    !took_effect(&default),
                    "{var}: the test value equals the default"
                );
                jail.set_env(var, value);
                let config = Config::sources(None).unwrap().extract::<Config>()?;
                assert!(took_effect(&config), "{var}={value} did not take effect");
                Ok(())
            });
        }
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail fixes the closure's error type
    fn an_environment_value_overrides_the_file_and_unrelated_aip_variables_are_ignored() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "aip.toml",
                "listen = \"127.0.0.1:9000\"\n[limits]\nlease_ms = 5000\n",
            )?;
            jail.set_env("AIP_LIMITS__LEASE_MS", "6000");
            jail.set_env("AIP_TEST_POSTGRES_URL", "postgres://elsewhere");
            let config = Config::load(Some(Path::new("aip.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(config.listen.port(), 9000);
            assert_eq!(config.limits.lease_ms, 6000);
            Ok(())
        });
    }

    #[test]
    fn docs_configuration_lists_every_environment_variable() {
        let docs = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
        )
        .unwrap();
        for (var, _, _) in env_overrides() {
            assert!(
                docs.contains(&format!("`{var}`")),
                "docs/configuration.md does not list {var}"
            );
        }
    }

    #[test]
    fn an_unknown_key_is_refused() {
        let figment = Figment::from(Toml::string("lisen = \"127.0.0.1:1\"\n"));
        assert!(figment.extract::<Config>().is_err());
    }
}
