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
//! - Sending: the `peer` handler (`crate::handler::peer`) delegates a capability to a peer.

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
        let scope = scope_set(entry);
        if scope.is_empty() {
            return Err(
                DelegationError::ChainInvalid(format!("entry {i} has an empty scope")).into(),
            );
        }
        if let Some(before) = &previous
            && !narrows(before, &scope)
        {
            return Err(DelegationError::ScopeWidened(i).into());
        }
        previous = Some(scope);
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

/// An entry's scope: whitespace-separated labels.
fn scope_set(entry: &DelegationEntry) -> BTreeSet<&str> {
    entry.scope.split_whitespace().collect()
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
    let wanted = format!("{}{capability}", crate::caller::SCOPE_INVOKE_PREFIX);
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
    fn delegation_ids_are_stable_per_parent_and_differ_from_it() {
        let (d1, c1) = ids_of("t1", "act_1");
        assert_eq!(ids_of("t1", "act_1"), (d1.clone(), c1.clone()));
        assert_ne!(ids_of("t2", "act_1").1, c1);
        assert_ne!(c1, "act_1");
        assert!(d1.starts_with("dlg_") && c1.starts_with("act_dlg_"));
    }
}
