//! Approvals (spec 12): a capability's approval tiers, the policy gate that derives an approval
//! request at admission, the verification of decisions (12.4), the resume of the governed action
//! exactly once (12.5), the expiry timer, and the approval read model (16.3, 16.6).
//!
//! Authority comes only from the trusted resolver: the configured principal directory (a caller's
//! id, roles, groups and the tenant approval policies it belongs to, [`Caller::resolver_keys`]).
//! Nothing asserted in an action or a decision payload satisfies a rule. A policy naming an external
//! system or delegated authority is refused at startup: this resolver cannot verify either.

pub(crate) mod admit;
pub(crate) mod decide;
pub(crate) mod expiry;
pub mod predicate;
pub(crate) mod read;

use std::collections::BTreeSet;

use aip_core::{
    ActionId, ApprovalId, ApprovalPolicy, ApprovalRequest, ApprovalRule, ApproverSelector,
    Timestamp,
};
use aip_store::{ActionRecord, ApprovalRecord, NewApproval, StoreError};
use serde_json::{Value, json};

use crate::admission::admitted::AdmittedRequest;
use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::events::bare_principal;
use crate::registry::AdmittedCapability;
use predicate::Predicate;

/// Queue of approval expiry timers.
pub const APPROVAL_QUEUE: &str = "approvals";
/// An approval lives this long when its policy names no `ttl_ms`.
pub const DEFAULT_APPROVAL_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// Longest accepted approval TTL (30 days).
pub const MAX_APPROVAL_TTL_MS: u64 = 30 * 24 * 60 * 60 * 1000;

/// The tenant policy a bare `tenant_policy` selector names.
pub const DEFAULT_TENANT_POLICY: &str = "default";
/// Key of the stored approval request that holds the roles excluded from approving.
const EXCLUDED_ROLES_KEY: &str = "excluded_approver_roles";

/// Deepest rule nesting accepted.
const MAX_RULE_DEPTH: usize = 8;
/// Most leaves (and most distinct approvers a rule can ask for).
const MAX_RULE_LEAVES: usize = 64;

/// One tier of a capability's approval policy: when `when` matches the input (or is absent), this
/// policy decides whether and how the action is approved. The first matching tier applies.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalTier {
    /// Condition over the input; `None` always matches.
    pub when: Option<Predicate>,
    /// The policy (`required: false` means no approval for inputs this tier matches).
    pub policy: ApprovalPolicy,
}

impl ApprovalTier {
    /// The tier's policy in wire form with its condition, for the manifest.
    pub fn describe(&self) -> Value {
        json!({ "when": self.when.as_ref().map(Predicate::as_str), "policy": self.policy })
    }
}

/// Why an approval policy cannot be enforced by this runtime.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("approval policy: {0}")]
pub struct PolicyError(pub String);

/// Checks that this runtime can enforce `policy`: its authority leaves are principals, roles or
/// groups, its rule is bounded, its numbers are in range.
pub fn validate_policy(policy: &ApprovalPolicy) -> Result<(), PolicyError> {
    let error = |m: &str| Err(PolicyError(m.to_owned()));
    if policy.delegated_authority.is_some() {
        return error("delegated approval authority is not resolved by this runtime");
    }
    if policy.minimum_distinct_principals == 0
        || policy.minimum_distinct_principals > MAX_RULE_LEAVES as u32
    {
        return error("minimum_distinct_principals must be within 1..=64");
    }
    if let Some(ttl) = policy.ttl_ms
        && (ttl == 0 || ttl > MAX_APPROVAL_TTL_MS)
    {
        return error("ttl_ms must be within 1..=2592000000 (30 days)");
    }
    let rule = effective_rule(policy);
    let mut leaves = 0;
    check_rule(&rule, 1, &mut leaves)
}

fn check_rule(rule: &ApprovalRule, depth: usize, leaves: &mut usize) -> Result<(), PolicyError> {
    let error = |m: String| Err(PolicyError(m));
    if depth > MAX_RULE_DEPTH {
        return error("the rule nests deeper than 8".into());
    }
    match rule {
        ApprovalRule::All { rules, .. } | ApprovalRule::Any { rules } => {
            if rules.is_empty() {
                return error("`all` and `any` need at least one rule".into());
            }
            rules
                .iter()
                .try_for_each(|r| check_rule(r, depth + 1, leaves))
        }
        ApprovalRule::Quorum {
            required, rules, ..
        } => {
            if rules.is_empty() || *required == 0 || *required > MAX_RULE_LEAVES as u32 {
                return error("a quorum needs rules and a required count within 1..=64".into());
            }
            rules
                .iter()
                .try_for_each(|r| check_rule(r, depth + 1, leaves))
        }
        ApprovalRule::Principal { .. } | ApprovalRule::Role { .. } | ApprovalRule::Group { .. } => {
            *leaves += 1;
            if *leaves > MAX_RULE_LEAVES {
                return error("more than 64 leaves".into());
            }
            Ok(())
        }
        ApprovalRule::TenantPolicy { policy_id } => {
            if policy_id.is_empty() || policy_id.len() > 128 {
                return error("a tenant policy id must be 1..=128 characters".into());
            }
            *leaves += 1;
            if *leaves > MAX_RULE_LEAVES {
                return error("more than 64 leaves".into());
            }
            Ok(())
        }
        ApprovalRule::ExternalSystem { system } => error(format!(
            "external approval system {system:?} is not resolved by this runtime"
        )),
        ApprovalRule::DelegatedAuthority { .. } => {
            error("delegated-authority leaves are not resolved by this runtime".into())
        }
    }
}

/// The policy's authority expression: its `rule`, else its selector as one leaf.
pub(crate) fn effective_rule(policy: &ApprovalPolicy) -> ApprovalRule {
    if let Some(rule) = &policy.rule {
        return rule.clone();
    }
    match &policy.approver_selector {
        ApproverSelector::Principal { id } => ApprovalRule::Principal { id: id.clone() },
        ApproverSelector::Role { name } => ApprovalRule::Role { name: name.clone() },
        ApproverSelector::Group { name } => ApprovalRule::Group { name: name.clone() },
        // The bare selector names the tenant's default approval policy.
        ApproverSelector::TenantPolicy => ApprovalRule::TenantPolicy {
            policy_id: DEFAULT_TENANT_POLICY.into(),
        },
        ApproverSelector::ExternalSystem { system } => ApprovalRule::ExternalSystem {
            system: system.clone(),
        },
    }
}

/// The resolver key of a leaf (the same keys [`Caller::resolver_keys`] gives a principal).
fn leaf_key(rule: &ApprovalRule) -> Option<String> {
    match rule {
        ApprovalRule::Principal { id } => Some(format!("principal:{}", id.as_str())),
        ApprovalRule::Role { name } => Some(format!("role:{name}")),
        ApprovalRule::Group { name } => Some(format!("group:{name}")),
        ApprovalRule::TenantPolicy { policy_id } => Some(format!("tenant_policy:{policy_id}")),
        _ => None,
    }
}

/// The tenant approval policies a policy's rule names (the resolver must know each).
pub fn tenant_policy_ids(policy: &ApprovalPolicy) -> Vec<String> {
    approver_keys(&effective_rule(policy))
        .into_iter()
        .filter_map(|k| k.strip_prefix("tenant_policy:").map(str::to_owned))
        .collect()
}

/// Every leaf key of a rule: who may decide (the approvers' inbox index).
pub(crate) fn approver_keys(rule: &ApprovalRule) -> Vec<String> {
    let mut keys = BTreeSet::new();
    collect_keys(rule, &mut keys);
    keys.into_iter().collect()
}

fn collect_keys(rule: &ApprovalRule, keys: &mut BTreeSet<String>) {
    match rule {
        ApprovalRule::All { rules, .. }
        | ApprovalRule::Any { rules }
        | ApprovalRule::Quorum { rules, .. } => rules.iter().for_each(|r| collect_keys(r, keys)),
        leaf => {
            if let Some(key) = leaf_key(leaf) {
                keys.insert(key);
            }
        }
    }
}

/// Whether a principal holding `keys` is named by some leaf of `rule`.
pub(crate) fn eligible(rule: &ApprovalRule, keys: &[String]) -> bool {
    approver_keys(rule).iter().any(|k| keys.contains(k))
}

/// One approving principal, with its resolver keys at decision time.
#[derive(Debug, Clone)]
pub(crate) struct Vote {
    pub(crate) principal: String,
    pub(crate) keys: Vec<String>,
}

/// Whether the approving `votes` (one per principal) satisfy the policy: its rule, and its minimum
/// of distinct principals.
pub(crate) fn satisfied(policy: &ApprovalPolicy, votes: &[Vote]) -> bool {
    let distinct: BTreeSet<&str> = votes.iter().map(|v| v.principal.as_str()).collect();
    if distinct.len() < policy.minimum_distinct_principals as usize {
        return false;
    }
    let all: Vec<usize> = (0..votes.len()).collect();
    rule_satisfied(&effective_rule(policy), votes, &all, &mut Vec::new())
}

/// Whether `rule` is satisfied by the votes in `pool` not already in `used`; on success the votes
/// it consumed are appended to `used` (so `all` without decision reuse needs distinct votes).
fn rule_satisfied(
    rule: &ApprovalRule,
    votes: &[Vote],
    pool: &[usize],
    used: &mut Vec<usize>,
) -> bool {
    match rule {
        ApprovalRule::Any { rules } => rules.iter().any(|r| {
            let mut attempt = used.clone();
            let ok = rule_satisfied(r, votes, pool, &mut attempt);
            if ok {
                *used = attempt;
            }
            ok
        }),
        ApprovalRule::All {
            rules,
            allow_decision_reuse,
        } => {
            if *allow_decision_reuse {
                let mut consumed = Vec::new();
                let ok = rules.iter().all(|r| {
                    let mut own = used.clone();
                    let ok = rule_satisfied(r, votes, pool, &mut own);
                    consumed.extend(own);
                    ok
                });
                if ok {
                    used.extend(consumed);
                    used.sort_unstable();
                    used.dedup();
                }
                ok
            } else {
                all_distinct(rules, votes, pool, used)
            }
        }
        ApprovalRule::Quorum {
            required,
            rules,
            distinct_principals,
        } => {
            let mut counted: Vec<usize> = Vec::new();
            let mut principals = BTreeSet::new();
            for &i in pool.iter().filter(|i| !used.contains(i)) {
                let fits = rules
                    .iter()
                    .any(|r| rule_satisfied(r, votes, &[i], &mut Vec::new()));
                if fits && (!distinct_principals || principals.insert(votes[i].principal.as_str()))
                {
                    counted.push(i);
                }
            }
            let ok = counted.len() >= *required as usize;
            if ok {
                used.extend(counted);
            }
            ok
        }
        leaf => {
            let Some(key) = leaf_key(leaf) else {
                return false;
            };
            match pool
                .iter()
                .copied()
                .find(|i| !used.contains(i) && votes[*i].keys.contains(&key))
            {
                Some(i) => {
                    used.push(i);
                    true
                }
                None => false,
            }
        }
    }
}

/// `all` without decision reuse: each child needs votes no other child used (a small search: rules
/// and votes are bounded by the policy checks).
fn all_distinct(
    rules: &[ApprovalRule],
    votes: &[Vote],
    pool: &[usize],
    used: &mut Vec<usize>,
) -> bool {
    let Some((first, rest)) = rules.split_first() else {
        return true;
    };
    // Try the first child on each remaining vote subset it can take; the leaf picks the first free
    // matching vote, so vary the start by excluding earlier candidates.
    let free: Vec<usize> = pool.iter().copied().filter(|i| !used.contains(i)).collect();
    for skip in 0..=free.len() {
        let mut attempt = used.clone();
        attempt.extend(free.iter().take(skip));
        let before = attempt.len();
        if rule_satisfied(first, votes, pool, &mut attempt) {
            let mut taken: Vec<usize> = used.clone();
            taken.extend(attempt[before..].iter().copied());
            if all_distinct(rest, votes, pool, &mut taken) {
                *used = taken;
                return true;
            }
        }
    }
    false
}

/// The canonical policy hash of spec 12.3: the policy snapshot and the governed subject
/// (capability, canonical input hash, the trusted identity, the transaction context).
pub(crate) fn policy_hash(
    (policy, excluded_roles): (&ApprovalPolicy, &[String]),
    capability_id: &str,
    input_hash: &str,
    requester: &Caller,
    transaction: &Value,
) -> String {
    let mut hashed = json!({ "policy": policy });
    // Absent when empty: a policy without excluded roles hashes as it always did.
    if !excluded_roles.is_empty() {
        hashed[EXCLUDED_ROLES_KEY] = json!(excluded_roles);
    }
    hashed["subject"] = json!({
            "capability_id": capability_id,
            "input_hash": input_hash,
            "identity": {
                "tenant": requester.tenant,
                "principal": requester.id,
                "kind": requester.kind,
                "external_account": requester.external_account,
            },
            "transaction": transaction,
    });
    aip_core::canonical::canonical_hash(&hashed)
}

/// The approval request an admitted action waits for (spec 12.2), derived from the action and the
/// policy that applies to it: its snapshot and the policy hash over it and the governed subject are
/// stored immutably with it, so what is later approved is exactly what was admitted.
pub(crate) fn request_for(
    caller: &Caller,
    capability: &AdmittedCapability,
    action_id: &str,
    input_hash: &str,
    (policy, excluded_roles): (ApprovalPolicy, Vec<String>),
    transaction: &Value,
    now: i64,
) -> Result<NewApproval, RuntimeError> {
    let approval_id = ApprovalId::generate();
    let ttl = policy.ttl_ms.unwrap_or(DEFAULT_APPROVAL_TTL_MS);
    let expires_at_ms = now.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX));
    let capability_id = capability.capability.id.clone();
    let hash = policy_hash(
        (&policy, &excluded_roles),
        capability_id.as_str(),
        input_hash,
        caller,
        transaction,
    );
    let requester = bare_principal(&caller.id, caller.kind);
    let approvers = approver_keys(&effective_rule(&policy));
    let request = ApprovalRequest {
        id: approval_id.clone(),
        action_id: ActionId::new(action_id),
        capability_id: capability_id.clone(),
        requester: requester.clone(),
        subject: requester,
        approver_selector: policy.approver_selector.clone(),
        reason: policy
            .reason
            .clone()
            .unwrap_or_else(|| "the capability's policy requires approval".into()),
        evidence: Vec::new(),
        expires_at: Timestamp::from_unix_millis(expires_at_ms),
        policy_decision_id: None,
        identity: None,
        policy_snapshot: Some(policy),
        policy_hash: Some(hash.clone()),
        operator: None,
        risk: capability.capability.risk,
        governed_value: None,
    };
    let mut stored = serde_json::to_value(&request)
        .map_err(|e| RuntimeError::Storage(StoreError::Corrupt(e.to_string())))?;
    if !excluded_roles.is_empty() {
        stored[EXCLUDED_ROLES_KEY] = json!(excluded_roles);
    }
    Ok(NewApproval {
        approval_id: approval_id.as_str().to_owned(),
        tenant: caller.tenant.clone(),
        action_id: action_id.to_owned(),
        capability: capability_id.as_str().to_owned(),
        requester: caller.id.clone(),
        policy_hash: hash,
        expires_at_ms,
        created_at_ms: now,
        request: stored,
        approvers,
    })
}

/// A stored approval as it was created: the wire request, its policy snapshot, and the roles the
/// capability excludes from approving (the wire policy cannot carry them; they are stored beside the
/// request and hashed with the policy).
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) request: ApprovalRequest,
    pub(crate) policy: ApprovalPolicy,
    pub(crate) excluded_roles: Vec<String>,
}

/// The stored approval's [`Snapshot`]; a stored request that does not decode is corruption.
pub(crate) fn stored_request(record: &ApprovalRecord) -> Result<Snapshot, RuntimeError> {
    let corrupt = |what: String| RuntimeError::Storage(StoreError::Corrupt(what));
    let mut stored = record.request.clone();
    let excluded = stored
        .as_object_mut()
        .and_then(|o| o.remove(EXCLUDED_ROLES_KEY));
    let excluded_roles: Vec<String> = match excluded {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v).map_err(|e| {
            corrupt(format!(
                "approval {} excluded roles: {e}",
                record.approval_id
            ))
        })?,
    };
    let request: ApprovalRequest = serde_json::from_value(stored)
        .map_err(|e| corrupt(format!("approval {}: {e}", record.approval_id)))?;
    let policy = request.policy_snapshot.clone().ok_or_else(|| {
        corrupt(format!(
            "approval {} has no policy snapshot",
            record.approval_id
        ))
    })?;
    Ok(Snapshot {
        request,
        policy,
        excluded_roles,
    })
}

/// Whether the stored approval still governs exactly the stored action: its policy hash recomputed
/// from its snapshot and the action's canonical input hash and identity (spec 12.3, 12.5).
pub(crate) fn governs(
    record: &ApprovalRecord,
    snapshot: &Snapshot,
    action: &ActionRecord,
) -> Result<bool, RuntimeError> {
    let Some(stored_hash) = action.input_hash.as_deref() else {
        return Ok(false);
    };
    let admitted = AdmittedRequest::of(action)?;
    let input = &admitted.action.input;
    // The input hash is recomputed from the stored input, not trusted from its column.
    let input_hash = aip_core::canonical::canonical_hash(&json!({
        "capability_id": action.capability,
        "input": input,
    }));
    let requester = admitted.requester(action);
    Ok(action.action_id == record.action_id
        && action.capability == record.capability
        && input_hash == stored_hash
        && policy_hash(
            (&snapshot.policy, &snapshot.excluded_roles),
            &action.capability,
            &input_hash,
            &requester,
            admitted.transaction.as_ref().unwrap_or(&Value::Null),
        ) == record.policy_hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(value: Value) -> ApprovalPolicy {
        serde_json::from_value(value).unwrap()
    }

    fn vote(principal: &str, roles: &[&str]) -> Vote {
        let mut keys = vec![format!("principal:{principal}")];
        keys.extend(roles.iter().map(|r| format!("role:{r}")));
        Vote {
            principal: principal.into(),
            keys,
        }
    }

    #[test]
    fn a_quorum_counts_distinct_principals_only() {
        let p = policy(json!({
            "required": true, "approver_selector": { "type": "role", "name": "approver" },
            "rule": { "operator": "quorum", "required": 2, "rules": [{ "operator": "role", "name": "approver" }] },
        }));
        assert!(!satisfied(&p, &[vote("a", &["approver"])]));
        assert!(!satisfied(
            &p,
            &[vote("a", &["approver"]), vote("a", &["approver"])]
        ));
        assert!(!satisfied(
            &p,
            &[vote("a", &["approver"]), vote("b", &["other"])]
        ));
        assert!(satisfied(
            &p,
            &[vote("a", &["approver"]), vote("b", &["approver"])]
        ));
    }

    #[test]
    fn all_without_reuse_needs_a_distinct_vote_for_each_rule() {
        let p = policy(json!({
            "required": true, "approver_selector": { "type": "role", "name": "x" },
            "rule": { "operator": "all", "rules": [{ "operator": "role", "name": "finance" }, { "operator": "role", "name": "legal" }] },
        }));
        assert!(!satisfied(&p, &[vote("a", &["finance", "legal"])]));
        assert!(satisfied(
            &p,
            &[vote("a", &["finance", "legal"]), vote("b", &["legal"])]
        ));
        let reuse = policy(json!({
            "required": true, "approver_selector": { "type": "role", "name": "x" },
            "rule": { "operator": "all", "allow_decision_reuse": true, "rules": [{ "operator": "role", "name": "finance" }, { "operator": "role", "name": "legal" }] },
        }));
        assert!(satisfied(&reuse, &[vote("a", &["finance", "legal"])]));
    }

    #[test]
    fn the_minimum_of_distinct_principals_holds_beside_the_rule() {
        let p = policy(json!({
            "required": true, "approver_selector": { "type": "role", "name": "approver" },
            "minimum_distinct_principals": 2,
        }));
        assert!(!satisfied(&p, &[vote("a", &["approver"])]));
        assert!(satisfied(
            &p,
            &[vote("a", &["approver"]), vote("b", &["approver"])]
        ));
    }

    #[test]
    fn policies_this_resolver_cannot_enforce_are_refused() {
        for bad in [
            json!({ "required": true, "approver_selector": { "type": "external_system", "system": "x" } }),
            json!({ "required": true, "approver_selector": { "type": "role", "name": "a" }, "rule": { "operator": "tenant_policy", "policy_id": "" } }),
            json!({ "required": true, "approver_selector": { "type": "role", "name": "a" }, "minimum_distinct_principals": 0 }),
            json!({ "required": true, "approver_selector": { "type": "role", "name": "a" }, "ttl_ms": 0 }),
            json!({ "required": true, "approver_selector": { "type": "role", "name": "a" }, "rule": { "operator": "any", "rules": [] } }),
        ] {
            assert!(validate_policy(&policy(bad.clone())).is_err(), "{bad}");
        }
        for good in [
            json!({ "required": true, "approver_selector": { "type": "group", "name": "ops" } }),
            json!({ "required": true, "approver_selector": { "type": "tenant_policy" } }),
        ] {
            assert!(validate_policy(&policy(good.clone())).is_ok(), "{good}");
        }
    }

    #[test]
    fn tenant_policy_authority_is_the_directory_membership_it_names() {
        let p = policy(json!({
            "required": true, "approver_selector": { "type": "role", "name": "x" },
            "rule": { "operator": "any", "rules": [
                { "operator": "tenant_policy", "policy_id": "finance" },
                { "operator": "role", "name": "cfo" },
            ] },
        }));
        assert_eq!(tenant_policy_ids(&p), ["finance"]);
        let member = Vote {
            principal: "a".into(),
            keys: vec!["principal:a".into(), "tenant_policy:finance".into()],
        };
        assert!(satisfied(&p, &[member]));
        assert!(!satisfied(&p, &[vote("b", &["finance"])]));
        let bare =
            policy(json!({ "required": true, "approver_selector": { "type": "tenant_policy" } }));
        assert_eq!(tenant_policy_ids(&bare), [DEFAULT_TENANT_POLICY]);
    }
}
