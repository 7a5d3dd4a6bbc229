//! Assembling `aip serve`: store, capability admission, runtime, HTTP binding.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use aip_core::{Capability, SideEffect};
use aip_runtime::approval::ApprovalTier;
use aip_runtime::approval::predicate::Predicate;
use aip_runtime::handler::http::{HttpHandler, HttpHandlerConfig};
use aip_runtime::registry::{CapabilityEntry, Registry, agent_principal};
use aip_runtime::{ActionHandler, Mode, Runtime, RuntimeConfig, SignaturePolicy};
use aip_store::Store;
use axum::Router;
use serde_json::json;

use crate::auth::{ADMIN_TOKEN_FILE, AuthIndex};
use crate::config::{Config, ConfigError, HandlerConfig, malformed, rejected, within};
use crate::http::{AppState, ReadyCheck, RequestGuard, metrics_handle, router};

/// File name of the SQLite database inside the data directory.
pub const DATABASE_FILE: &str = "aip.sqlite";

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Authentication setup failed (token files).
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthSetupError),
    /// The store could not be opened or migrated.
    #[error("storage: {0}")]
    Store(#[from] aip_store::StoreError),
    /// A capability could not be admitted.
    #[error(transparent)]
    Admission(#[from] aip_runtime::registry::AdmissionError),
    /// Configuration is inconsistent.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Recovery of unfinished work failed.
    #[error("recovery: {0}")]
    Recovery(#[from] aip_runtime::RuntimeError),
    /// The NATS binding could not start.
    #[error(transparent)]
    Nats(#[from] crate::nats::NatsError),
    /// Binding or serving failed.
    #[error("listen: {0}")]
    Io(#[from] std::io::Error),
    /// The node key could not be loaded or created.
    #[error(transparent)]
    Identity(#[from] crate::identity::IdentityError),
    /// The store is another process's, or the node id could not be established.
    #[error(transparent)]
    Boot(#[from] crate::boot::BootError),
}

/// A started server: its router and runtime (for tests that embed it).
pub struct Server {
    /// The HTTP application.
    pub router: Router,
    /// The runtime behind it.
    pub runtime: Arc<Runtime>,
    /// Configured principals (shared with the NATS binding).
    pub auth: Arc<AuthIndex>,
    /// The node's `did:key` (the manifest agent's `did`).
    pub node_did: String,
    /// Where the NATS binding puts its requester for delegations to peers over NATS.
    pub peer_requester: aip_runtime::handler::peer::RequesterSlot,
    /// The node's open streams, which shutdown waits for.
    pub open_streams: Arc<crate::overload::OpenStreams>,
    /// The embedded store's exclusive lock, held as long as the server.
    _store_lock: Option<crate::boot::StoreLock>,
}

/// Open the store, admit capabilities, recover, and build the router.
pub async fn build(config: &Config) -> Result<Server, ServeError> {
    std::fs::create_dir_all(&config.data_dir)?;
    let auth = AuthIndex::from_config(config)?;
    let (store, store_lock) = open_store(config).await?;
    let boot = aip_runtime::BootIdentity {
        node_id: Some(crate::boot::node_id(&config.data_dir)?),
        store_exclusive: store_lock.is_some(),
    };
    let identity = crate::identity::NodeIdentity::load_or_create(
        &config.data_dir,
        config.node_key_file.as_deref(),
    )?;
    let mut agent = agent_principal(&config.agent.id, &config.agent.name);
    agent.did = Some(identity.did().to_owned());
    agent.trust_domain = Some(config.delegation.trust_domain.clone());
    let node = crate::peers::NodeSelf {
        key: Arc::new(identity.signing_key().clone()),
        agent: agent.clone(),
        nats: Arc::default(),
    };
    let mut entries = if config.demo_capabilities {
        aip_runtime::handler::demo::demo_capabilities(Arc::clone(&store))
    } else {
        Vec::new()
    };
    for entry in &config.capabilities {
        entries.push(configured_capability(entry, config, &node)?);
    }
    // Upstream tools' requests for the calling MCP client go through this relay.
    let relay = Arc::new(crate::profile::mcp::relay::Relay::default());
    let upstreams =
        crate::profile::mcp::upstream::capabilities(&config.mcp_upstreams, Arc::clone(&relay))
            .await?;
    entries.extend(upstreams.capabilities);
    entries.extend(crate::profile::a2a::remote::capabilities(&config.a2a_remotes).await?);
    check_tenant_policies(config, &entries)?;
    let registry = Registry::admit(entries)?;
    // Every capability's MCP tool name is checked with the capabilities (spec 9.2: all or nothing).
    let prompts = crate::profile::mcp::resources::load_prompts(
        &config.mcp.prompts,
        config.resource_root.as_deref(),
    )?;
    let mcp_tools = if config.mcp.enabled {
        let tools = crate::profile::mcp::ToolIndex::build(registry.all().map(|c| &c.capability))
            .map_err(|e| rejected("mcp (tool names)", e))?;
        let templates =
            crate::profile::mcp::templates::check(&config.mcp.resource_templates, |id| {
                registry.get(id).map(|c| &c.capability)
            })?;
        Some((tools, templates))
    } else {
        None
    };
    let webhooks = crate::profile::webhook::Webhooks::build(
        &config.webhooks,
        config.limits.max_body_bytes,
        |id| registry.get(id).map(|c| &c.capability),
        |id| auth.principal(id).is_some(),
    )?;
    let a2a = if config.a2a.enabled {
        let state = crate::profile::a2a::A2aState::new(
            config.a2a.clone(),
            (
                config.agent.name.clone(),
                format!(
                    "{} (an AIP 1.0 runtime; its capabilities as skills)",
                    config.agent.name
                ),
            ),
            config.limits.max_action_timeout_ms,
            registry.all().map(|c| &c.capability),
        )?
        .with_push(config.callbacks.policy().enabled);
        Some(Arc::new(state))
    } else {
        None
    };
    let mut resources = configured_resources(config, |id| registry.get(id).map(|c| &c.capability))?;
    resources.extend(upstreams.resources);
    aip_runtime::resource::check_resources(&resources, |id| registry.get(id).is_some())
        .map_err(|e| rejected("resources", e))?;
    let mut trusted_signers = HashMap::new();
    for signer in &config.security.trusted_signers {
        if auth.principal(&signer.principal).is_none() {
            return Err(ConfigError::Unknown {
                key: format!("security.trusted_signers[{}].principal", signer.did),
                kind: "principal",
                name: signer.principal.clone(),
            }
            .into());
        }
        aip_core::signing::verifying_key_from_did(&signer.did).map_err(|_| {
            malformed(
                "security.trusted_signers[].did",
                &signer.did,
                "an Ed25519 did:key",
            )
        })?;
        trusted_signers.insert(signer.did.clone(), signer.principal.clone());
    }
    // A peer's key speaks for its peer principal (spec 14.2).
    for peer in &config.peers {
        trusted_signers.insert(peer.did.clone(), peer.principal_id());
    }
    let limits = &config.limits;
    let runtime_config = RuntimeConfig {
        agent,
        default_timeout_ms: limits.default_action_timeout_ms,
        max_timeout_ms: limits.max_action_timeout_ms,
        max_list_limit: limits.max_list_limit,
        default_list_limit: limits.default_list_limit,
        max_wait_ms: limits.max_wait_ms,
        async_workers: limits.async_workers,
        lease_ms: limits.lease_ms,
        max_attempts: limits.job_max_attempts,
        signatures: SignaturePolicy {
            require_signed: config.security.require_signed_envelopes,
            max_skew_ms: config.security.max_clock_skew_ms,
            replay_window_ms: config.security.replay_window_ms,
            trusted_signers,
        },
        decode_limits: aip_core::Limits {
            max_bytes: limits.max_body_bytes,
            ..aip_core::Limits::default()
        },
        manifest_limits: json!({ "max_body_bytes": limits.max_body_bytes, "max_list_limit": limits.max_list_limit, "max_wait_ms": limits.max_wait_ms }),
        profiles: profiles(config),
        directory: auth.directory(),
        principals: {
            let mut all = auth.callers();
            all.extend(webhooks.callers().map(|c| (c.id.clone(), c.clone())));
            all
        },
        resources,
        reconcile_after_ms: limits.reconcile_after_ms,
        callbacks: config.callbacks.policy(),
        channels: config.channels.policy(),
        retention: config.retention.policy(&config.data_dir),
        delegation: crate::peers::policy(&config.delegation, &config.peers),
        node_key: Some(Arc::clone(&node.key)),
        refusals: aip_runtime::RefusalPolicy {
            window_ms: config.security.refusal_audit_window_ms,
            admin_tenant: config.admin.tenant.clone(),
        },
        boot,
        rates: limits.rates()?,
        read_rates: limits.read_rates()?,
        quotas: limits.quotas()?,
    };
    let oauth = match config.mcp.oauth.clone().filter(|_| config.mcp.enabled) {
        Some(oauth) => Some(Arc::new(
            crate::profile::mcp::oauth::OAuth::new(oauth, |id| auth.principal(id).cloned())
                .map_err(|e| rejected("mcp.oauth", e))?,
        )),
        None => None,
    };
    let dev_principal = match &config.mcp.dev_principal {
        Some(id) => Some(dev_principal(config, id, &auth)?),
        None => None,
    };
    let runtime = Runtime::new(Arc::clone(&store), registry, runtime_config);
    runtime.start().await?;
    if a2a.is_some() {
        runtime.register_delivery_renderer(
            crate::profile::a2a::push::PUSH_PROFILE,
            Arc::new(crate::profile::a2a::push::PushRenderer),
        );
    }
    // Upstream MCP servers' resource lists stay current while the node runs.
    for refresher in upstreams.refreshers {
        tokio::spawn(refresher.run(Arc::clone(&runtime)));
    }
    let auth = Arc::new(auth);
    let metrics = metrics_handle();
    // An info metric (always 1) that names what this node runs on, for dashboards and operators.
    metrics::gauge!(
        "aip_node_info",
        "backend" => store.backend().as_str(),
        "version" => env!("CARGO_PKG_VERSION"),
    )
    .set(1.0);
    let open_streams = Arc::new(crate::overload::OpenStreams::new(limits.max_open_streams));
    let state = AppState {
        auth: Arc::clone(&auth),
        guard: Arc::new(RequestGuard::from_config(config)),
        ready: Arc::new(crate::overload::SharedReady::new(Arc::new(StoreReady(
            store,
        )))),
        metrics,
        runtime: Arc::clone(&runtime),
        streaming: crate::sse::StreamLimits {
            heartbeat: std::time::Duration::from_millis(limits.stream_heartbeat_ms),
            send_timeout: std::time::Duration::from_millis(limits.stream_send_timeout_ms),
            buffer_events: limits.stream_buffer_events,
            max_frame_bytes: limits.max_body_bytes,
            ws_max_streams: limits.ws_max_streams,
        },
        open_streams: Arc::clone(&open_streams),
        oauth: oauth.clone(),
        mcp_dev_principal: dev_principal,
    };
    let mut routes = crate::overload::time_out(
        crate::routes::aip_routes(),
        std::time::Duration::from_millis(limits.request_timeout_ms),
    );
    let mut public = crate::profile::mcp::public_routes(oauth);
    if !webhooks.is_empty() {
        public = public.merge(crate::profile::webhook::routes(Arc::new(webhooks)));
    }
    if let Some(a2a) = a2a {
        public = public.merge(crate::profile::a2a::public_routes(Arc::clone(&a2a)));
        routes = routes.merge(crate::profile::a2a::routes(a2a));
    }
    if let Some((tools, templates)) = mcp_tools {
        let mcp = crate::profile::mcp::McpState::new(
            tools,
            limits.max_action_timeout_ms,
            prompts,
            templates,
            relay,
        );
        routes = routes.merge(crate::profile::mcp::routes(Arc::new(mcp)));
    }
    let routes = crate::overload::read_body_within(
        routes,
        std::time::Duration::from_millis(limits.body_read_timeout_ms),
        limits.max_body_bytes,
    );
    let router = router(
        state,
        (routes, public),
        (limits.max_body_bytes, limits.max_in_flight_requests),
        config.console.unwrap_or(false),
    );
    Ok(Server {
        router,
        runtime,
        auth,
        node_did: identity.did().to_owned(),
        peer_requester: Arc::clone(&node.nats),
        open_streams,
        _store_lock: store_lock,
    })
}

/// The profiles of the bindings this configuration enables (spec 23.3): each binding module names
/// the profiles it serves.
pub fn profiles(config: &Config) -> Vec<aip_core::ProfileId> {
    let mut profiles: Vec<aip_core::ProfileId> = crate::http::PROFILES
        .iter()
        .map(|p| aip_core::ProfileId::new(*p))
        .collect();
    if config.mcp.enabled {
        profiles.push(aip_core::ProfileId::new(crate::profile::mcp::PROFILE));
    }
    if config.a2a.enabled {
        profiles.push(aip_core::ProfileId::new(crate::profile::a2a::PROFILE));
    }
    if !config.webhooks.is_empty() {
        profiles.push(aip_core::ProfileId::new(crate::profile::webhook::PROFILE));
    }
    if config.nats.url.is_some() {
        profiles.extend(
            crate::nats::PROFILES
                .iter()
                .map(|p| aip_core::ProfileId::new(*p)),
        );
    }
    profiles
}

/// The principal `[mcp] dev_principal` names, if this start may let requests without credentials
/// act as it: only with `--insecure-dev` (or the no-config demo), on a loopback address, and when it
/// is the only configured principal, so no real identity sits behind an unauthenticated door (a
/// local reverse proxy makes every remote request look local). Logs a warning at every start.
fn dev_principal(
    config: &Config,
    id: &str,
    auth: &crate::auth::AuthIndex,
) -> Result<aip_runtime::Caller, ServeError> {
    // It lets requests without credentials in: each condition keeps that door local and empty.
    let needs = |needs: &'static str, why: &'static str| {
        Err(ConfigError::Needs {
            key: format!("mcp.dev_principal ({id})"),
            needs,
            why,
        }
        .into())
    };
    if !config.insecure_dev {
        return needs(
            "aip serve --insecure-dev",
            "it lets requests without credentials in (development only)",
        );
    }
    if !config.listen.ip().is_loopback() {
        return needs(
            "a loopback listen address",
            "it lets requests without credentials in",
        );
    }
    if let Some(other) = config.principals.iter().find(|p| p.id != id) {
        return Err(ConfigError::Exclusive {
            key: format!("mcp.dev_principal ({id}) beside principal {}", other.id),
            other: "any principal but the development one",
        }
        .into());
    }
    let caller = auth
        .principal(id)
        .cloned()
        .ok_or_else(|| ConfigError::Unknown {
            key: "mcp.dev_principal".into(),
            kind: "principal",
            name: id.into(),
        })?;
    tracing::warn!(
        principal = id,
        "INSECURE: mcp.dev_principal is on: MCP requests without an Authorization header act as {id} (--insecure-dev; never in production)"
    );
    Ok(caller)
}

/// `aip serve`: build, bind, print where (never the token), serve until a signal.
pub async fn run(config: Config) -> Result<(), ServeError> {
    let server = build(&config).await?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let nats = crate::nats::start(
        &config,
        Arc::clone(&server.auth),
        Arc::clone(&server.runtime),
        &server.peer_requester,
    )
    .await?;
    println!("aip serve: listening on http://{addr}");
    if config.console.unwrap_or(false) {
        println!("aip serve: console at http://{addr}/console/");
    }
    if let Some(nats) = &nats {
        println!(
            "aip serve: NATS ({}) serving {} in queue group {}",
            crate::nats::PROFILE,
            nats.subscription,
            config.nats.queue_group
        );
    }
    if config.admin.enabled {
        println!(
            "aip serve: admin bearer token in {} (send it as `Authorization: Bearer <token>`)",
            config.data_dir.join(ADMIN_TOKEN_FILE).display()
        );
    }
    if crate::auth::demo_approvers_enabled(&config) {
        for id in crate::auth::DEMO_APPROVERS {
            println!(
                "aip serve: demo approver {id} (role approver) token in {}",
                config.data_dir.join(format!("{id}.token")).display()
            );
        }
    }
    println!(
        "aip serve: node identity {} (key in {})",
        server.node_did,
        config
            .node_key_file
            .clone()
            .unwrap_or_else(|| config.data_dir.join(crate::identity::NODE_KEY_FILE))
            .display()
    );
    match &config.database {
        Some(location) => println!(
            "aip serve: {} store at {}; data in {}",
            server.runtime.store().backend().as_str(),
            redact_location(location),
            config.data_dir.display()
        ),
        None => println!(
            "aip serve: data in {}",
            config.data_dir.join(DATABASE_FILE).display()
        ),
    }
    let served = crate::http::serve(
        listener,
        server.router,
        Arc::clone(&server.runtime),
        crate::http::Grace {
            all: std::time::Duration::from_millis(config.shutdown.grace_ms),
            mutations: std::time::Duration::from_millis(config.shutdown.mutation_grace_ms()),
        },
        (
            crate::listener::ConnectionLimits {
                max_connections: config.limits.max_connections,
                header_read_timeout: std::time::Duration::from_millis(
                    config.limits.header_read_timeout_ms,
                ),
            },
            Arc::clone(&server.open_streams),
        ),
    )
    .await;
    // After a shutdown the binding drains its subscription; after a failure it is just dropped.
    if let (Some(nats), Ok(())) = (nats, &served) {
        nats.finish().await;
    }
    server.runtime.shutdown();
    // The writer commits what is queued (the drain's last releases, the refusal counts) before
    // the process exits.
    server.runtime.store().close().await;
    Ok(served?)
}

/// The configured store: `database` when set (PostgreSQL URL or SQLite path), else the embedded
/// SQLite file in the data directory. A SQLite store is locked for this process first (with the
/// lock it returns): two processes never run one embedded store's work.
async fn open_store(
    config: &Config,
) -> Result<(Arc<dyn Store>, Option<crate::boot::StoreLock>), ServeError> {
    let sqlite = match &config.database {
        Some(location)
            if location.starts_with("postgres://") || location.starts_with("postgresql://") =>
        {
            return Ok((aip_store::open(location).await?, None));
        }
        Some(location) => {
            let path = location.strip_prefix("sqlite://").unwrap_or(location);
            if path.is_empty() {
                return Err(aip_store::StoreError::InvalidInput("empty SQLite path").into());
            }
            std::path::PathBuf::from(path)
        }
        None => config.data_dir.join(DATABASE_FILE),
    };
    let lock = crate::boot::lock_store(&sqlite)?;
    let store: Arc<dyn Store> = Arc::new(aip_store::SqliteStore::open(&sqlite).await?);
    Ok((store, Some(lock)))
}

/// A store location fit for logs: any `user:password@` part of a URL is dropped.
fn redact_location(location: &str) -> String {
    match location.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
            let host = host.split_once('?').map_or(host, |(host, _)| host);
            format!("{scheme}://{host}")
        }
        None => location.to_owned(),
    }
}

/// The configured resources with their content: inline text, or a file under `resource_root`.
fn configured_resources<'a>(
    config: &Config,
    capability: impl Fn(&str) -> Option<&'a aip_core::Capability>,
) -> Result<Vec<aip_runtime::resource::ResourceEntry>, ServeError> {
    use aip_runtime::resource::{ResourceContent, ResourceEntry};
    config
        .resources
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut resource: aip_core::Resource = serde_json::from_value(
                serde_json::Value::Object(r.resource.clone()),
            )
            .map_err(|source| ConfigError::Entry {
                key: format!("resources[{i}]"),
                source,
            })?;
            match (&r.text, &r.file, &r.produced_by) {
                (None, None, Some(producer)) => {
                    let key = format!("resources[{}].produced_by", resource.id);
                    let found = capability(producer).ok_or_else(|| ConfigError::Unknown {
                        key: key.clone(),
                        kind: "capability",
                        name: producer.clone(),
                    })?;
                    if !aip_runtime::resource::may_produce(found) {
                        return Err(malformed(
                            key,
                            producer,
                            "a sync capability with only read side effects",
                        )
                        .into());
                    }
                    // Who may not invoke the producer cannot see the resource (spec 9.7).
                    match &resource.capability_id {
                        Some(owner) if owner.as_str() != producer => {
                            return Err(malformed(
                                key,
                                producer,
                                "the resource's own capability_id",
                            )
                            .into());
                        }
                        _ => resource.capability_id = Some(found.id.clone()),
                    }
                    Ok(ResourceEntry {
                        resource,
                        content: ResourceContent::Produced(found.id.clone()),
                    })
                }
                (Some(text), None, None) => Ok(ResourceEntry {
                    resource,
                    content: ResourceContent::Inline(vec![aip_core::MessagePart::Text {
                        text: text.clone(),
                        format: None,
                    }]),
                }),
                (None, Some(file), None) => {
                    let key = format!("resources[{}].file", resource.id);
                    let root =
                        config
                            .resource_root
                            .as_deref()
                            .ok_or_else(|| ConfigError::Needs {
                                key: key.clone(),
                                needs: "resource_root",
                                why: "file resources are read only from under it",
                            })?;
                    ResourceEntry::file(resource, root, file).map_err(|e| rejected(key, e).into())
                }
                _ => Err(ConfigError::ExactlyOne {
                    key: format!("resources[{}]", resource.id),
                    options: &["text", "file", "produced_by"],
                }
                .into()),
            }
        })
        .collect()
}

/// Every tenant approval policy an approval rule names must be defined for some tenant: a rule no
/// one can ever satisfy is a configuration error, not a capability that waits forever.
fn check_tenant_policies(config: &Config, entries: &[CapabilityEntry]) -> Result<(), ServeError> {
    for entry in entries {
        let contract_policy = entry
            .capability
            .contract
            .as_ref()
            .and_then(|c| c.approval.as_ref());
        let policies = entry
            .approval_tiers
            .iter()
            .map(|t| &t.policy)
            .chain(contract_policy);
        for policy in policies {
            for id in aip_runtime::approval::tenant_policy_ids(policy) {
                if !config.approval_policies.iter().any(|p| p.id == id) {
                    return Err(ConfigError::Unknown {
                        key: format!("capabilities[{}] approval policy", entry.capability.id),
                        kind: "tenant policy ([[approval_policies]])",
                        name: id.to_owned(),
                    }
                    .into());
                }
            }
        }
    }
    Ok(())
}

fn configured_capability(
    entry: &crate::config::CapabilityConfig,
    config: &Config,
    node: &crate::peers::NodeSelf,
) -> Result<CapabilityEntry, ServeError> {
    let capability: Capability = serde_json::from_value(serde_json::Value::Object(
        entry.capability.clone(),
    ))
    .map_err(|source| ConfigError::Entry {
        key: format!(
            "capabilities[{}]",
            entry
                .capability
                .get("id")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?")
        ),
        source,
    })?;
    let approval_tiers = entry
        .approval_tiers
        .iter()
        .enumerate()
        .map(|(i, tier)| {
            let key = |k: &str| format!("capabilities[{}].approval_tiers[{i}].{k}", capability.id);
            let when = tier
                .when
                .as_deref()
                .map(Predicate::parse)
                .transpose()
                .map_err(|e| rejected(key("when"), e))?;
            let policy = serde_json::from_value(tier.policy.clone()).map_err(|source| {
                ConfigError::Entry {
                    key: key("policy"),
                    source,
                }
            })?;
            Ok(ApprovalTier { when, policy })
        })
        .collect::<Result<Vec<_>, ServeError>>()?;
    let handler: Arc<dyn ActionHandler> = match &entry.handler {
        HandlerConfig::Http {
            url,
            timeout_ms,
            ca_file,
            reconcile_url,
            plan_ttl_ms,
        } => {
            let contract = capability.contract.as_ref();
            // Conservative (spec 9.4): without a contract the call is assumed to have side effects.
            let mutation =
                contract.is_none_or(|c| c.side_effects.iter().any(|e| *e != SideEffect::Read));
            let modes = contract_modes(&capability);
            let extra_roots_pem = match ca_file {
                Some(path) => {
                    Some(
                        std::fs::read(path).map_err(|source| ConfigError::Unreadable {
                            key: format!("capabilities[{}].handler.ca_file", capability.id),
                            path: path.clone(),
                            source,
                        })?,
                    )
                }
                None => None,
            };
            let transactions =
                http_transactions(&capability, reconcile_url.as_deref(), *plan_ttl_ms)?;
            let config = HttpHandlerConfig {
                url: url.clone(),
                timeout: Duration::from_millis(*timeout_ms),
                mutation,
                modes,
                extra_roots_pem,
                transactions,
                reconcile_url: reconcile_url.clone(),
            };
            Arc::new(
                HttpHandler::new(config)
                    .map_err(|e| rejected(format!("capabilities[{}].handler", capability.id), e))?,
            )
        }
        HandlerConfig::Peer {
            peer,
            capability: remote,
            scope,
            transport,
        } => crate::peers::handler(
            &capability,
            (peer, remote, scope.as_deref(), transport.as_deref()),
            &config.peers,
            node,
            contract_modes(&capability),
        )?,
    };
    Ok(CapabilityEntry {
        capability,
        handler,
        approval_tiers,
        approval_excluded_roles: entry.approval_excluded_roles.clone(),
        allow_without_approval: entry.policy.allow_without_approval,
    })
}

/// The modes a configured capability's contract declares (sync and async; streaming needs a
/// handler that streams); without a contract, both.
fn contract_modes(capability: &Capability) -> BTreeSet<Mode> {
    let mut modes = BTreeSet::new();
    match capability.contract.as_ref() {
        Some(c) => {
            if c.execution.supports_sync {
                modes.insert(Mode::Sync);
            }
            if c.execution.supports_async {
                modes.insert(Mode::Async);
            }
        }
        None => {
            modes.insert(Mode::Sync);
            modes.insert(Mode::Async);
        }
    }
    modes
}

/// The transaction support of an `http` capability (spec 13): what its contract declares, which
/// the configured service is taken to execute; `reconcile` needs a `reconcile_url`, and a
/// `reconcile_url` needs a transaction contract, so neither is advertised or configured in vain.
fn http_transactions(
    capability: &aip_core::Capability,
    reconcile_url: Option<&str>,
    plan_ttl_ms: Option<u64>,
) -> Result<Option<aip_runtime::TransactionSupport>, ServeError> {
    let key = |k: &str| format!("capabilities[{}].handler.{k}", capability.id);
    let Some(contract) = capability
        .contract
        .as_ref()
        .and_then(|c| c.transaction.as_ref())
    else {
        if reconcile_url.is_some() || plan_ttl_ms.is_some() {
            return Err(ConfigError::Needs {
                key: key("reconcile_url or plan_ttl_ms"),
                needs: "a transaction contract (contract.transaction)",
                why: "neither is configured in vain",
            }
            .into());
        }
        return Ok(None);
    };
    let modes: BTreeSet<aip_core::TransactionMode> =
        contract.supported_modes.iter().copied().collect();
    if modes.contains(&aip_core::TransactionMode::Reconcile) && reconcile_url.is_none() {
        return Err(ConfigError::Needs {
            key: format!("capabilities[{}].contract.transaction", capability.id),
            needs: "the handler's reconcile_url",
            why: "the transaction contract lists reconcile",
        }
        .into());
    }
    let ttl = plan_ttl_ms.unwrap_or(aip_runtime::DEFAULT_PLAN_TTL_MS);
    within(key("plan_ttl_ms"), ttl, 1..=aip_runtime::MAX_PLAN_TTL_MS)?;
    Ok(Some(aip_runtime::TransactionSupport {
        modes,
        dry_run_fidelity: contract.dry_run_fidelity,
        plan_ttl_ms: ttl,
    }))
}

struct StoreReady(Arc<dyn Store>);

#[async_trait::async_trait]
impl ReadyCheck for StoreReady {
    async fn check(&self) -> Result<(), String> {
        self.0.ping().await.map_err(|e| {
            format!(
                "{} unavailable: {} ({e})",
                self.0.backend().as_str(),
                e.code()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_capability_naming_an_undefined_tenant_policy_stops_startup_with_its_id() {
        let dir = std::env::temp_dir().join(format!("aip-app-policy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut capability = aip_runtime::handler::demo::transfer_capability();
        capability["id"] = serde_json::json!("cap:pay:send");
        capability["contract"]["execution"]["supports_cancel"] = serde_json::json!(false);
        capability["handler"] =
            serde_json::json!({ "type": "http", "url": "http://127.0.0.1:9/send" });
        capability["approval_tiers"] = serde_json::json!([{ "policy": {
            "required": true, "approver_selector": { "type": "tenant_policy" },
        } }]);
        let mut config = Config {
            data_dir: dir.clone(),
            demo_capabilities: false,
            ..Config::default()
        };
        config
            .capabilities
            .push(serde_json::from_value(capability).unwrap());
        let err = build(&config).await.err().expect("startup must fail");
        let text = err.to_string();
        assert!(
            text.contains("cap:pay:send") && text.contains("\"default\""),
            "{text}"
        );
        config
            .approval_policies
            .push(crate::config::TenantApprovalPolicy {
                id: "default".into(),
                tenant: "default".into(),
                principals: vec!["admin".into()],
                roles: vec![],
                groups: vec![],
            });
        if let Err(e) = build(&config).await {
            panic!("{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn store_locations_are_logged_without_credentials_or_options() {
        assert_eq!(
            redact_location("postgres://u:secret@db.example:5432/aip?sslmode=require"),
            "postgres://db.example:5432/aip"
        );
        assert_eq!(redact_location("postgres://db/aip"), "postgres://db/aip");
        assert_eq!(redact_location("data/aip.db"), "data/aip.db");
    }
}
