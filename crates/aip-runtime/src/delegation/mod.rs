//! Delegation between `aip serve` peers (spec 14, 26.3). A peer is a configured node: its did:key
//! (a URL or subject alone is never identity, 14.2), its trust domain, the local principal its
//! signed requests act as, and where it is reached.
//!
//! - Receiving (`serve`): an `aip.agent.v1.delegation_request` signed by a configured peer is
//!   checked (sender, requester, delegate, this hop's chain entry, the capability's execution
//!   contract), then its child action is admitted through the normal admission path as the peer's
//!   principal, and the answer is a `delegation_result` signed with this node's key.
//! - Every action carrying a delegation chain is checked at admission (`check_chain`): at most ten
//!   entries (or the configured lower limit), sent by the peer its last entry names, addressed to
//!   this node, no loop, each hop preserving or narrowing scope, the last scope covering the
//!   capability, no expired entry or grant, no forbidden trust domain (14.3).
//! - Tenant and data-residency policy (14.3) travels in the entries' scopes as constraint labels,
//!   `tenant:<id>` (the tenants the child may run in at the node that runs it) and `region:<name>`
//!   (the regions it may run in). Constraints only narrow: once an entry states one kind, every
//!   later entry states a non-empty subset of it. The node that runs the child checks its tenant
//!   and its own `region` against the last entry's constraints.
//! - Sending: the `peer` handler (`crate::handler::peer`) delegates a capability to a peer.

pub(crate) mod admit;
pub(crate) mod follow;
mod serve;

use std::collections::BTreeSet;

use aip_core::{Action, DelegationEntry, Principal};

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::{DelegationError, RuntimeError};
use crate::runtime::Runtime;

/// The most entries a native action's chain may hold (spec 14.3).
pub const MAX_CHAIN: usize = 10;

/// A configured peer node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Local name of the peer (routes name it).
    pub name: String,
    /// The peer node's did:key: what its signatures must verify with.
    pub did: String,
    /// The trust domain its principals belong to.
    pub trust_domain: String,
    /// The local principal its signed requests act as (its tenant and scopes bound what it may
    /// have done here).
    pub principal: String,
}

/// Delegation policy (spec 14), from trusted configuration.
#[derive(Debug, Clone)]
pub struct DelegationPolicy {
    /// This node's trust domain (stated as the requester's when it delegates).
    pub trust_domain: String,
    /// Longest accepted chain (1..=10).
    pub max_chain: usize,
    /// Oldest accepted chain entry, ms.
    pub max_chain_age_ms: u64,
    /// Trust domains no chain may pass through.
    pub forbidden_trust_domains: BTreeSet<String>,
    /// The region this node runs in, checked against a chain's `region:` constraints; a node that
    /// states none runs no child whose chain names regions.
    pub region: Option<String>,
    /// The configured peers.
    pub peers: Vec<Peer>,
}

impl Default for DelegationPolicy {
    fn default() -> Self {
        Self {
            trust_domain: "local".into(),
            max_chain: MAX_CHAIN,
            max_chain_age_ms: 86_400_000,
            forbidden_trust_domains: BTreeSet::new(),
            region: None,
            peers: Vec::new(),
        }
    }
}

impl DelegationPolicy {
    /// The peer whose key is `did`.
    pub fn peer_by_did(&self, did: &str) -> Option<&Peer> {
        self.peers.iter().find(|p| p.did == did)
    }
}

/// The ids of the delegation a parent action makes: derived from the parent, so a parent that
/// runs again (a retry, a restart, another node) re-attaches to the same child instead of making a
/// second one.
pub fn ids_of(tenant: &str, parent_action_id: &str) -> (String, String) {
    let digest =
        aip_core::canonical::sha256_hex(format!("{tenant}\n{parent_action_id}").as_bytes());
    let hex = &digest[..32];
    (format!("dlg_{hex}"), format!("act_dlg_{hex}"))
}

/// The digest a delegating node states for the capability's execution contract, and the serving
/// node checks against its own (spec 14.2 "immutable execution contract").
pub fn contract_digest(contract: Option<&aip_core::CapabilityContract>) -> String {
    let value = serde_json::to_value(contract).unwrap_or(serde_json::Value::Null);
    aip_core::canonical::sha256_hex(&aip_core::canonical::to_canonical_vec(&value))
}

/// Spec 14.3 for an action's delegation chain (admission step 6). An action without one passes.
pub(crate) fn check_chain(
    runtime: &Runtime,
    caller: &Caller,
    action: &Action,
) -> Result<(), RuntimeError> {
    let chain = &action.delegation_chain;
    if chain.is_empty() {
        return Ok(());
    }
    let policy = &runtime.config().delegation;
    if chain.len() > policy.max_chain.min(MAX_CHAIN) {
        return Err(DelegationError::ChainTooLong(policy.max_chain.min(MAX_CHAIN)).into());
    }
    // Only a configured peer, authenticated by its signature, may hand this node a chain.
    let peer = policy
        .peer_by_did(&caller.issuer)
        .filter(|p| p.principal == caller.id)
        .ok_or(DelegationError::PeerUnauthenticated)?;
    let me = &runtime.config().agent;
    let last = chain.last().ok_or(DelegationError::ChainInvalid(
        "an empty delegation chain".into(),
    ))?;
    if !names(&last.from, &peer.did)
        || last.from.trust_domain.as_deref() != Some(&peer.trust_domain)
    {
        return Err(DelegationError::PeerMismatch(
            "the chain's last hop is not from the authenticated peer".into(),
        )
        .into());
    }
    if !is_me(&last.to, me) {
        return Err(DelegationError::PeerMismatch(
            "the chain's last hop is not addressed to this node".into(),
        )
        .into());
    }
    let now = now_ms();
    let skew = i64::try_from(runtime.config().signatures.max_skew_ms).unwrap_or(i64::MAX);
    let max_age = i64::try_from(policy.max_chain_age_ms).unwrap_or(i64::MAX);
    let mut previous: Option<BTreeSet<&str>> = None;
    let mut constrained = Constraints::default();
    for (i, entry) in chain.iter().enumerate() {
        // A loop: this node already delegated, or was already delegated to, earlier in the chain.
        if is_me(&entry.from, me) || (i + 1 < chain.len() && is_me(&entry.to, me)) {
            return Err(DelegationError::Loop.into());
        }
        for principal in [&entry.from, &entry.to] {
            if let Some(domain) = &principal.trust_domain
                && policy.forbidden_trust_domains.contains(domain)
            {
                return Err(DelegationError::TrustDomainForbidden(domain.clone()).into());
            }
            if principal
                .delegated_authority
                .iter()
                .filter_map(|g| g.expires_at.as_ref())
                .any(|t| t.unix_millis().is_none_or(|ms| ms <= now))
            {
                return Err(DelegationError::Expired.into());
            }
        }
        let at = entry
            .delegated_at
            .unix_millis()
            .ok_or(DelegationError::Expired)?;
        if at > now.saturating_add(skew) || now.saturating_sub(at) > max_age {
            return Err(DelegationError::Expired.into());
        }
        let (scope, constraints) = split_scope(&entry.scope)
            .map_err(|label| DelegationError::ChainInvalid(format!("entry {i}: {label}")))?;
        if scope.is_empty() {
            return Err(
                DelegationError::ChainInvalid(format!("entry {i} has an empty scope")).into(),
            );
        }
        if !constraints.narrows(&constrained) {
            return Err(DelegationError::ScopeWidened(i).into());
        }
        constrained = constraints;
        if let Some(before) = &previous
            && !narrows(before, &scope)
        {
            return Err(DelegationError::ScopeWidened(i).into());
        }
        previous = Some(scope);
    }
    if !constrained.tenants.is_empty() && !constrained.tenants.contains(caller.tenant.as_str()) {
        return Err(DelegationError::TenantForbidden(caller.tenant.clone()).into());
    }
    if !constrained.regions.is_empty()
        && !policy
            .region
            .as_deref()
            .is_some_and(|r| constrained.regions.contains(r))
    {
        return Err(
            DelegationError::ResidencyForbidden(policy.region.clone().map_or_else(
                || "this node states no region".to_owned(),
                |r| format!("this node's region {r} is not one the chain allows"),
            ))
            .into(),
        );
    }
    let granted = previous.unwrap_or_default();
    if !covers(&granted, action.capability_id.as_str()) {
        return Err(
            DelegationError::ScopeInsufficient(action.capability_id.as_str().to_owned()).into(),
        );
    }
    // The chain's principals repeat: a did delegated to twice is a loop too.
    let mut seen = BTreeSet::new();
    for entry in chain {
        if let Some(did) = &entry.to.did
            && !seen.insert(did.as_str())
        {
            return Err(DelegationError::Loop.into());
        }
    }
    Ok(())
}

/// Whether `principal` is the node with key `did` (its `did`, or a did-named id).
fn names(principal: &Principal, did: &str) -> bool {
    principal.did.as_deref() == Some(did)
}

/// Whether `principal` is this node's agent: by its did when it names one, else by id.
pub(crate) fn is_me(principal: &Principal, me: &Principal) -> bool {
    match (&principal.did, &me.did) {
        (Some(theirs), Some(ours)) => theirs == ours,
        _ => principal.id == me.id,
    }
}

/// Prefix of a scope label naming a tenant the child may run in (spec 14.3 tenant policy).
pub const TENANT_LABEL: &str = "tenant:";
/// Prefix of a scope label naming a region the child may run in (spec 14.3 data residency).
pub const REGION_LABEL: &str = "region:";

/// The tenant and region constraints of a scope; an empty set constrains nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Constraints<'a> {
    /// Tenants the child may run in.
    pub tenants: BTreeSet<&'a str>,
    /// Regions the child may run in.
    pub regions: BTreeSet<&'a str>,
}

impl Constraints<'_> {
    /// Whether these constraints keep or narrow `before`: every kind `before` states is stated
    /// again, by a subset of it.
    fn narrows(&self, before: &Constraints<'_>) -> bool {
        let kept = |now: &BTreeSet<&str>, then: &BTreeSet<&str>| {
            then.is_empty() || (!now.is_empty() && now.is_subset(then))
        };
        kept(&self.tenants, &before.tenants) && kept(&self.regions, &before.regions)
    }
}

/// A scope's authority labels and its constraints; a constraint label without a value is refused
/// (it is returned as the error).
pub fn split_scope(scope: &str) -> Result<(BTreeSet<&str>, Constraints<'_>), String> {
    let mut authority = BTreeSet::new();
    let mut constraints = Constraints::default();
    for label in scope.split_whitespace() {
        let (set, value) = if let Some(t) = label.strip_prefix(TENANT_LABEL) {
            (&mut constraints.tenants, t)
        } else if let Some(r) = label.strip_prefix(REGION_LABEL) {
            (&mut constraints.regions, r)
        } else {
            authority.insert(label);
            continue;
        };
        if value.is_empty() {
            return Err(format!("the constraint {label:?} names nothing"));
        }
        set.insert(value);
    }
    Ok((authority, constraints))
}

/// The scope of the hop a node adds after `previous` (the entry it received, if any) with its own
/// `scope`: the constraints `previous` states are carried, narrowed by those `scope` states, so no
/// hop this node makes drops or widens them. A kind left with nothing allowed is refused with its
/// code (`tenant_forbidden`, `residency_forbidden`).
pub fn hop_scope(
    previous: Option<&DelegationEntry>,
    scope: &str,
) -> Result<String, DelegationError> {
    let Some(previous) = previous else {
        return Ok(scope.to_owned());
    };
    let (_, carried) = split_scope(&previous.scope).map_err(DelegationError::ChainInvalid)?;
    let (authority, own) = split_scope(scope).map_err(DelegationError::ChainInvalid)?;
    let merge = |carried: &BTreeSet<&str>, own: &BTreeSet<&str>| {
        let merged: BTreeSet<String> = match (carried.is_empty(), own.is_empty()) {
            (true, _) => own.iter().map(|v| (*v).to_owned()).collect(),
            (false, true) => carried.iter().map(|v| (*v).to_owned()).collect(),
            (false, false) => carried.intersection(own).map(|v| (*v).to_owned()).collect(),
        };
        if merged.is_empty() && !(carried.is_empty() && own.is_empty()) {
            Err(())
        } else {
            Ok(merged)
        }
    };
    let route = "no value is allowed both by the chain received and by this route";
    let tenants = merge(&carried.tenants, &own.tenants)
        .map_err(|()| DelegationError::TenantForbidden(route.into()))?;
    let regions = merge(&carried.regions, &own.regions)
        .map_err(|()| DelegationError::ResidencyForbidden(route.into()))?;
    let mut labels: Vec<String> = authority.iter().map(|l| (*l).to_owned()).collect();
    labels.extend(tenants.iter().map(|t| format!("{TENANT_LABEL}{t}")));
    labels.extend(regions.iter().map(|r| format!("{REGION_LABEL}{r}")));
    Ok(labels.join(" "))
}

/// Whether `next` grants nothing `before` did not: every label of `next` is covered by one of
/// `before` (`*` covers everything, `invoke:*` every invocation, `invoke:p*` the prefix).
fn narrows(before: &BTreeSet<&str>, next: &BTreeSet<&str>) -> bool {
    next.iter()
        .all(|label| before.iter().any(|b| label_covers(b, label)))
}

fn label_covers(granted: &str, wanted: &str) -> bool {
    if granted == "*" || granted == wanted {
        return true;
    }
    match granted.strip_suffix('*') {
        Some(prefix) => wanted.starts_with(prefix) && wanted != "*",
        None => false,
    }
}

/// Whether the scope labels allow invoking `capability`.
fn covers(scope: &BTreeSet<&str>, capability: &str) -> bool {
    let wanted = format!("{}{capability}", crate::scope::SCOPE_INVOKE_PREFIX);
    scope.iter().any(|label| label_covers(label, &wanted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> BTreeSet<&str> {
        s.split_whitespace().collect()
    }

    #[test]
    fn a_hop_may_keep_or_narrow_its_scope_but_never_widen_it() {
        assert!(narrows(&set("invoke:*"), &set("invoke:cap:demo:echo")));
        assert!(narrows(
            &set("invoke:cap:demo:*"),
            &set("invoke:cap:demo:echo invoke:cap:demo:book")
        ));
        assert!(narrows(
            &set("invoke:cap:demo:echo"),
            &set("invoke:cap:demo:echo")
        ));
        assert!(!narrows(&set("invoke:cap:demo:echo"), &set("invoke:*")));
        assert!(!narrows(
            &set("invoke:cap:demo:echo"),
            &set("invoke:cap:demo:echo invoke:cap:demo:book")
        ));
        assert!(!narrows(&set("invoke:cap:demo:*"), &set("*")));
        assert!(covers(&set("invoke:cap:demo:*"), "cap:demo:echo"));
        assert!(!covers(&set("invoke:cap:demo:echo"), "cap:demo:book"));
    }

    #[test]
    fn tenant_and_region_constraints_may_only_narrow_and_are_carried_by_every_hop() {
        let c = |s: &'static str| split_scope(s).unwrap().1;
        let eu = c("invoke:* region:eu region:uk");
        assert!(c("invoke:x region:eu").narrows(&eu));
        assert!(
            !c("invoke:x").narrows(&eu),
            "dropping a constraint widens it"
        );
        assert!(!c("invoke:x region:eu region:us").narrows(&eu));
        assert!(c("invoke:x tenant:t1").narrows(&c("invoke:*")));
        assert_eq!(
            split_scope("invoke:* tenant:").unwrap_err(),
            "the constraint \"tenant:\" names nothing"
        );
        let entry = |scope: &str| DelegationEntry {
            from: serde_json::from_value(serde_json::json!({ "id": "a", "kind": "agent" }))
                .unwrap(),
            to: serde_json::from_value(serde_json::json!({ "id": "b", "kind": "agent" })).unwrap(),
            scope: scope.into(),
            delegated_at: aip_core::Timestamp::now(),
        };
        let received = entry("invoke:* tenant:t1 region:eu region:uk");
        assert_eq!(
            hop_scope(Some(&received), "invoke:cap:x").unwrap(),
            "invoke:cap:x tenant:t1 region:eu region:uk"
        );
        assert_eq!(
            hop_scope(Some(&received), "invoke:cap:x region:uk region:us").unwrap(),
            "invoke:cap:x tenant:t1 region:uk"
        );
        assert_eq!(
            hop_scope(Some(&received), "invoke:cap:x region:us")
                .unwrap_err()
                .code()
                .as_str(),
            "aip.delegation.residency_forbidden"
        );
        assert_eq!(
            hop_scope(None, "invoke:cap:x region:us").unwrap(),
            "invoke:cap:x region:us"
        );
    }

    #[test]
    fn delegation_ids_are_stable_per_parent_and_differ_from_it() {
        let (d1, c1) = ids_of("t1", "act_1");
        assert_eq!(ids_of("t1", "act_1"), (d1.clone(), c1.clone()));
        assert_ne!(ids_of("t2", "act_1").1, c1);
        assert_ne!(c1, "act_1");
        assert!(d1.starts_with("dlg_") && c1.starts_with("act_dlg_"));
    }
}
