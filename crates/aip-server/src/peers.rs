//! Peers and delegation (spec 14): the `[delegation]` section and the `[[peers]]` entries. A peer
//! is pinned by its node did:key; its signed requests act here as the principal `peer:<name>` with
//! the tenant and scopes configured for it (nothing in a request widens them), and a capability
//! with `handler = { kind = "peer", ... }` is served by delegating to it.

use std::collections::BTreeSet;

use aip_runtime::delegation::{DelegationPolicy, Peer};

use crate::config::ConfigError;
pub use crate::config::peers::{DelegationConfig, PeerConfig, check};

/// Why a capability's peer route cannot be served (spec 14.2, 14.3).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// The peer has no address for the transport the route names (or none at all).
    #[error("peer {peer} has no {transport} address to delegate to")]
    NoAddress {
        /// The peer.
        peer: String,
        /// `http`, `nats`, or `url or nats_prefix`.
        transport: &'static str,
    },
    /// The route names a transport other than `http` and `nats`.
    #[error("transport {0:?} is not http or nats")]
    Transport(String),
    /// The route's scope does not parse as delegation labels.
    #[error("scope: {0}")]
    Scope(String),
    /// The capability's data residency leaves no region to delegate.
    #[error("its data residency allows no region")]
    NoRegion,
    /// The route delegates a region the capability's data residency prohibits.
    #[error("the route delegates region {0}, which its data residency prohibits")]
    Prohibited(String),
    /// The peer states a region the residency or the route's scope excludes.
    #[error("peer {peer} is in region {region}, which its data residency or route scope excludes")]
    Excluded {
        /// The peer.
        peer: String,
        /// The region it states.
        region: String,
    },
    /// The HTTP client for the peer could not be built.
    #[error("client: {0}")]
    Client(#[from] reqwest::Error),
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
) -> Result<std::sync::Arc<dyn aip_runtime::ActionHandler>, ConfigError> {
    let key = format!("capabilities[{}].handler", capability.id);
    let entry = peers
        .iter()
        .find(|p| p.name == peer)
        .ok_or_else(|| ConfigError::Unknown {
            key: format!("{key}.peer"),
            kind: "peer",
            name: peer.to_owned(),
        })?;
    let invalid = |e: RouteError| crate::config::rejected(key.clone(), e);
    use aip_runtime::handler::peer::PeerTransport;
    let transport = match (transport, &entry.url, &entry.nats_prefix) {
        (Some("http") | None, Some(url), _) => PeerTransport::Http(url.clone()),
        (Some("nats") | None, _, Some(prefix)) => PeerTransport::Nats {
            prefix: prefix.clone(),
            requester: std::sync::Arc::clone(&node.nats),
        },
        (Some(t @ ("http" | "nats")), _, _) => {
            return Err(invalid(RouteError::NoAddress {
                peer: peer.to_owned(),
                transport: if t == "http" { "http" } else { "nats" },
            }));
        }
        (Some(other), _, _) => {
            return Err(invalid(RouteError::Transport(other.to_owned())));
        }
        (None, None, None) => {
            return Err(invalid(RouteError::NoAddress {
                peer: peer.to_owned(),
                transport: "url or nats_prefix",
            }));
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
    .map_err(|e| invalid(e.into()))?;
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
) -> Result<String, RouteError> {
    use aip_runtime::delegation::REGION_LABEL;
    fn split_scope(
        scope: &str,
    ) -> Result<(BTreeSet<&str>, aip_runtime::delegation::Constraints<'_>), RouteError> {
        aip_runtime::delegation::split_scope(scope).map_err(RouteError::Scope)
    }
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
            return Err(RouteError::NoRegion);
        }
    }
    let (_, constraints) = split_scope(&scope)?;
    if let Some(bad) = constraints.regions.iter().find(|r| prohibited.contains(*r)) {
        return Err(RouteError::Prohibited((*bad).to_owned()));
    }
    if let Some(region) = &peer.region {
        let excluded = (!constraints.regions.is_empty()
            && !constraints.regions.contains(region.as_str()))
            || prohibited.contains(region.as_str());
        if excluded {
            return Err(RouteError::Excluded {
                peer: peer.name.clone(),
                region: region.clone(),
            });
        }
    }
    Ok(scope)
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
        assert!(
            matches!(&refused, RouteError::Excluded { region, .. } if region == "us-east"),
            "{refused}"
        );
        // A route's own regions stand, but never a prohibited one.
        assert!(
            route_scope(
                &eu,
                "cap:records",
                Some("invoke:* region:eu-north"),
                &peer(None)
            )
            .unwrap_err()
            .to_string()
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
