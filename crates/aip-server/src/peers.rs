//! Peers and delegation (spec 14): the `[delegation]` section and the `[[peers]]` entries. A peer
//! is pinned by its node did:key; its signed requests act here as the principal `peer:<name>` with
//! the tenant and scopes configured for it (nothing in a request widens them), and a capability
//! with `handler = { kind = "peer", ... }` is served by delegating to it.

use std::collections::BTreeSet;

use aip_runtime::Caller;
use aip_runtime::delegation::{DelegationPolicy, MAX_CHAIN, Peer};
use serde::Deserialize;

use crate::config::{ConfigError, malformed, within, within_usize};

/// `[delegation]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationConfig {
    /// This node's trust domain (stated with its requests to peers, and checked by them).
    #[serde(default = "default_trust_domain")]
    pub trust_domain: String,
    /// Longest delegation chain accepted (1..=10).
    #[serde(default = "default_max_chain")]
    pub max_chain: usize,
    /// Oldest chain entry accepted, ms (1..=604800000).
    #[serde(default = "default_max_chain_age_ms")]
    pub max_chain_age_ms: u64,
    /// Trust domains no accepted chain may pass through.
    #[serde(default)]
    pub forbidden_trust_domains: Vec<String>,
    /// The region this node runs in (`[a-z0-9-]`, 1..=64): a delegated child whose chain names
    /// regions runs here only when this is one of them (spec 14.3).
    #[serde(default)]
    pub region: Option<String>,
}

impl Default for DelegationConfig {
    fn default() -> Self {
        Self {
            trust_domain: default_trust_domain(),
            max_chain: default_max_chain(),
            max_chain_age_ms: default_max_chain_age_ms(),
            forbidden_trust_domains: Vec::new(),
            region: None,
        }
    }
}

fn default_trust_domain() -> String {
    DelegationPolicy::default().trust_domain
}
fn default_max_chain() -> usize {
    MAX_CHAIN
}
fn default_max_chain_age_ms() -> u64 {
    DelegationPolicy::default().max_chain_age_ms
}

/// One `[[peers]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// Local name (`[a-z0-9_-]`, 1..=64): routes name it; its requests act as `peer:<name>`.
    pub name: String,
    /// The peer node's did:key (its manifest `agent.did`).
    pub did: String,
    /// The trust domain the peer states (its `[delegation] trust_domain`).
    pub trust_domain: String,
    /// The peer's native HTTP base URL, for delegating to it.
    #[serde(default)]
    pub url: Option<String>,
    /// The peer's NATS service subject prefix (`aip.v1.<trust-domain>.<service>.<version>`), for
    /// delegating to it over NATS (this node needs `nats.url`).
    #[serde(default)]
    pub nats_prefix: Option<String>,
    /// The tenant the peer's requests act in here.
    #[serde(default = "default_tenant")]
    pub tenant: String,
    /// What the peer may do here (e.g. `["invoke:cap:demo:echo"]`); empty: nothing.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The region the peer states (its `[delegation] region`): a route whose delegated regions
    /// exclude it is refused at startup (spec 14.3).
    #[serde(default)]
    pub region: Option<String>,
}

fn default_tenant() -> String {
    "default".into()
}

impl PeerConfig {
    /// The principal the peer's signed requests act as.
    pub fn principal_id(&self) -> String {
        format!("peer:{}", self.name)
    }

    /// That principal as a caller.
    pub fn caller(&self) -> Caller {
        Caller {
            id: self.principal_id(),
            kind: aip_core::PrincipalKind::Agent,
            tenant: self.tenant.clone(),
            scopes: self.scopes.clone(),
            issuer: self.did.clone(),
            external_account: None,
            roles: Vec::new(),
            groups: Vec::new(),
            approval_policies: Vec::new(),
        }
    }
}

/// Range and identity checks of the section and the peers.
pub fn check(delegation: &DelegationConfig, peers: &[PeerConfig]) -> Result<(), ConfigError> {
    within_usize("delegation.max_chain", delegation.max_chain, 1..=MAX_CHAIN)?;
    within(
        "delegation.max_chain_age_ms",
        delegation.max_chain_age_ms,
        1..=604_800_000,
    )?;
    within_usize(
        "delegation.trust_domain length",
        delegation.trust_domain.len(),
        1..=253,
    )?;
    const REGION: &str = "1..=64 of [a-z0-9-]";
    let region_ok = |r: &str| {
        !r.is_empty()
            && r.len() <= 64
            && r.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if let Some(r) = &delegation.region
        && !region_ok(r)
    {
        return Err(malformed("delegation.region", r, REGION));
    }
    let mut names = BTreeSet::new();
    let mut dids = BTreeSet::new();
    for p in peers {
        let key = |k: &str| format!("peers[{}].{k}", p.name);
        if let Some(r) = &p.region
            && !region_ok(r)
        {
            return Err(malformed(key("region"), r, REGION));
        }
        let name_ok = !p.name.is_empty()
            && p.name.len() <= 64
            && p.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !name_ok {
            return Err(malformed("peers[].name", &p.name, "1..=64 of [a-z0-9_-]"));
        }
        if aip_core::signing::verifying_key_from_did(&p.did).is_err() {
            return Err(malformed(key("did"), &p.did, "an Ed25519 did:key"));
        }
        if p.trust_domain.is_empty() {
            return Err(malformed(key("trust_domain"), "", "a trust domain"));
        }
        if let Some(url) = &p.url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            return Err(malformed(key("url"), url, "an http(s) URL"));
        }
        if !names.insert(p.name.as_str()) {
            return Err(ConfigError::Duplicate {
                key: "peers[].name".into(),
                id: p.name.clone(),
            });
        }
        if !dids.insert(p.did.as_str()) {
            return Err(ConfigError::Duplicate {
                key: "peers[].did".into(),
                id: p.did.clone(),
            });
        }
    }
    Ok(())
}

/// The runtime's policy.
pub fn policy(delegation: &DelegationConfig, peers: &[PeerConfig]) -> DelegationPolicy {
    DelegationPolicy {
        trust_domain: delegation.trust_domain.clone(),
        max_chain: delegation.max_chain,
        max_chain_age_ms: delegation.max_chain_age_ms,
        forbidden_trust_domains: delegation.forbidden_trust_domains.iter().cloned().collect(),
        region: delegation.region.clone(),
        peers: peers.iter().map(peer).collect(),
    }
}

/// The runtime's view of one peer.
pub fn peer(p: &PeerConfig) -> Peer {
    Peer {
        name: p.name.clone(),
        did: p.did.clone(),
        trust_domain: p.trust_domain.clone(),
        principal: p.principal_id(),
    }
}

/// This node as a delegating peer: its key, its agent principal, and the slot its NATS connection
/// fills once up (routes over NATS use it).
pub struct NodeSelf {
    /// The node key.
    pub key: std::sync::Arc<ed25519_dalek::SigningKey>,
    /// The node's agent principal (did and trust domain set).
    pub agent: aip_core::Principal,
    /// This node's NATS requester, once connected.
    pub nats: aip_runtime::handler::peer::RequesterSlot,
}

/// The handler of a capability served by a peer: `(peer, remote capability, scope, transport)`;
/// the transport defaults to the peer's `url`, else its `nats_prefix`.
pub fn handler(
    capability: &aip_core::Capability,
    (peer, remote, scope, transport): (&str, &str, Option<&str>, Option<&str>),
    peers: &[PeerConfig],
    node: &NodeSelf,
    modes: BTreeSet<aip_runtime::Mode>,
) -> Result<std::sync::Arc<dyn aip_runtime::ActionHandler>, String> {
    let invalid = |what: String| format!("capability {}: {what}", capability.id);
    let entry = peers
        .iter()
        .find(|p| p.name == peer)
        .ok_or_else(|| invalid(format!("peer {peer} is not configured")))?;
    use aip_runtime::handler::peer::PeerTransport;
    let transport = match (transport, &entry.url, &entry.nats_prefix) {
        (Some("http") | None, Some(url), _) => PeerTransport::Http(url.clone()),
        (Some("nats") | None, _, Some(prefix)) => PeerTransport::Nats {
            prefix: prefix.clone(),
            requester: std::sync::Arc::clone(&node.nats),
        },
        (Some(t @ ("http" | "nats")), _, _) => {
            return Err(invalid(format!(
                "peer {peer} has no {t} address to delegate to"
            )));
        }
        (Some(other), _, _) => {
            return Err(invalid(format!("transport {other:?} is not http or nats")));
        }
        (None, None, None) => {
            return Err(invalid(format!(
                "peer {peer} has no url or nats_prefix to delegate to"
            )));
        }
    };
    let scope = route_scope(capability, remote, scope, entry).map_err(invalid)?;
    let route = aip_runtime::handler::peer::PeerRoute {
        peer: self::peer(entry),
        transport,
        capability: remote.to_owned(),
        scope,
        contract_digest: aip_runtime::delegation::contract_digest(capability.contract.as_ref()),
        modes,
        mutation: capability.contract.as_ref().is_none_or(|c| {
            c.side_effects
                .iter()
                .any(|e| *e != aip_core::SideEffect::Read)
        }),
    };
    let handler = aip_runtime::handler::peer::PeerHandler::new(
        route,
        std::sync::Arc::clone(&node.key),
        node.agent.clone(),
    )
    .map_err(|e| invalid(e.to_string()))?;
    Ok(std::sync::Arc::new(handler))
}

/// The scope a route delegates (default `invoke:<remote>`), with the capability's data residency
/// (spec 9.6, 14.3): a route naming no region delegates the capability's allowed regions (less its
/// prohibited ones) as `region:` constraints, so the peer and every later hop enforce them. A route
/// whose regions leave nothing, or exclude the region the peer states, is refused.
fn route_scope(
    capability: &aip_core::Capability,
    remote: &str,
    scope: Option<&str>,
    peer: &PeerConfig,
) -> Result<String, String> {
    use aip_runtime::delegation::{REGION_LABEL, split_scope};
    let mut scope = scope.map_or_else(
        || format!("{}{remote}", aip_runtime::scope::SCOPE_INVOKE_PREFIX),
        str::to_owned,
    );
    let residency = capability
        .contract
        .as_ref()
        .and_then(|c| c.data.residency.as_ref());
    let prohibited: BTreeSet<&str> = residency
        .map(|r| r.prohibited_regions.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let stated = split_scope(&scope)?.1.regions.len();
    if stated == 0
        && let Some(allowed) = residency.map(|r| &r.allowed_regions)
        && !allowed.is_empty()
    {
        for region in allowed.iter().filter(|r| !prohibited.contains(r.as_str())) {
            scope.push(' ');
            scope.push_str(REGION_LABEL);
            scope.push_str(region);
        }
        if split_scope(&scope)?.1.regions.is_empty() {
            return Err("its data residency allows no region".into());
        }
    }
    let (_, constraints) = split_scope(&scope)?;
    if let Some(bad) = constraints.regions.iter().find(|r| prohibited.contains(*r)) {
        return Err(format!(
            "the route delegates region {bad}, which its data residency prohibits"
        ));
    }
    if let Some(region) = &peer.region {
        let excluded = (!constraints.regions.is_empty()
            && !constraints.regions.contains(region.as_str()))
            || prohibited.contains(region.as_str());
        if excluded {
            return Err(format!(
                "peer {} is in region {region}, which its data residency or route scope excludes",
                peer.name
            ));
        }
    }
    Ok(scope)
}

/// The `AIP_DELEGATION__*` and `AIP_PEERS` variables with a non-default value and a check that it
/// took effect (the configuration tests run them with the others).
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(crate) fn env_overrides() -> Vec<(
    &'static str,
    &'static str,
    fn(&crate::config::Config) -> bool,
)> {
    vec![
        ("AIP_DELEGATION__TRUST_DOMAIN", "a.example", |c| {
            c.delegation.trust_domain == "a.example"
        }),
        ("AIP_DELEGATION__MAX_CHAIN", "4", |c| {
            c.delegation.max_chain == 4
        }),
        ("AIP_DELEGATION__MAX_CHAIN_AGE_MS", "60000", |c| {
            c.delegation.max_chain_age_ms == 60_000
        }),
        ("AIP_DELEGATION__REGION", "eu-west", |c| {
            c.delegation.region.as_deref() == Some("eu-west")
        }),
        (
            "AIP_DELEGATION__FORBIDDEN_TRUST_DOMAINS",
            "[\"evil.example\"]",
            |c| c.delegation.forbidden_trust_domains == ["evil.example"],
        ),
        (
            "AIP_PEERS",
            "[{name=\"b\",did=\"did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK\",trust_domain=\"b.example\"}]",
            |c| c.peers.len() == 1 && c.peers[0].name == "b",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str, did: &str) -> PeerConfig {
        PeerConfig {
            name: name.into(),
            did: did.into(),
            trust_domain: "b.example".into(),
            url: None,
            nats_prefix: None,
            tenant: default_tenant(),
            scopes: Vec::new(),
            region: None,
        }
    }

    #[test]
    fn a_peer_needs_a_did_key_a_plain_name_and_is_configured_once() {
        let did =
            aip_core::signing::did_key(&aip_core::signing::generate_signing_key().verifying_key());
        let d = DelegationConfig::default();
        assert!(check(&d, &[peer("b", &did)]).is_ok());
        assert!(check(&d, &[peer("B!", &did)]).is_err());
        assert!(check(&d, &[peer("b", "https://b.example")]).is_err());
        assert!(check(&d, &[peer("b", &did), peer("c", &did)]).is_err());
        let far = DelegationConfig {
            max_chain: 11,
            ..DelegationConfig::default()
        };
        assert!(check(&far, &[]).is_err());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod residency_tests {
    use super::*;

    fn capability(residency: serde_json::Value) -> aip_core::Capability {
        serde_json::from_value(serde_json::json!({
            "id": "cap:b:records", "name": "Records on b", "kind": "tool", "input_schema": { "type": "object" },
            "contract": {
                "side_effects": ["read"],
                "idempotency": { "requirement": "optional", "collision_behavior": "reject_conflict", "key_scope": "principal" },
                "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": false,
                               "supports_retry": true, "expected_completion": "any", "retry_safety": "safe" },
                "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false, "residency": residency },
            },
        }))
        .unwrap()
    }

    fn peer(region: Option<&str>) -> PeerConfig {
        PeerConfig {
            name: "b".into(),
            did: String::new(),
            trust_domain: "b.example".into(),
            url: None,
            nats_prefix: None,
            tenant: "default".into(),
            scopes: Vec::new(),
            region: region.map(str::to_owned),
        }
    }

    #[test]
    fn a_route_delegates_its_capabilitys_data_residency_and_refuses_a_peer_outside_it() {
        let eu = capability(
            serde_json::json!({ "allowed_regions": ["eu-west", "eu-north"], "prohibited_regions": ["eu-north"] }),
        );
        assert_eq!(
            route_scope(&eu, "cap:records", None, &peer(None)).unwrap(),
            "invoke:cap:records region:eu-west"
        );
        assert_eq!(
            route_scope(&eu, "cap:records", None, &peer(Some("eu-west"))).unwrap(),
            "invoke:cap:records region:eu-west"
        );
        let refused = route_scope(&eu, "cap:records", None, &peer(Some("us-east"))).unwrap_err();
        assert!(refused.contains("us-east"), "{refused}");
        // A route's own regions stand, but never a prohibited one.
        assert!(
            route_scope(
                &eu,
                "cap:records",
                Some("invoke:* region:eu-north"),
                &peer(None)
            )
            .unwrap_err()
            .contains("prohibits")
        );
        let nowhere = capability(
            serde_json::json!({ "allowed_regions": ["eu-north"], "prohibited_regions": ["eu-north"] }),
        );
        assert!(route_scope(&nowhere, "cap:records", None, &peer(None)).is_err());
        // Without residency, the route's scope is delegated as written.
        let free = capability(serde_json::Value::Null);
        assert_eq!(
            route_scope(
                &free,
                "cap:records",
                Some("invoke:cap:records tenant:acme"),
                &peer(Some("us-east"))
            )
            .unwrap(),
            "invoke:cap:records tenant:acme"
        );
    }
}
