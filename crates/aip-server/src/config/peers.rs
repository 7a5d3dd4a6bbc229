//! The `[delegation]` section and the `[[peers]]` entries (spec 14): this node's trust domain and
//! chain limits, and the peers pinned by their did:key.

use std::collections::BTreeSet;

use aip_runtime::Caller;
use aip_runtime::delegation::{DelegationPolicy, MAX_CHAIN};
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
    #[serde(default = "super::default_tenant")]
    pub tenant: String,
    /// What the peer may do here (e.g. `["invoke:cap:demo:echo"]`); empty: nothing.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The region the peer states (its `[delegation] region`): a route whose delegated regions
    /// exclude it is refused at startup (spec 14.3).
    #[serde(default)]
    pub region: Option<String>,
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
            tenant: super::super::default_tenant(),
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
