//! Capability admission and the manifest (spec 9): a capability is visible only together with an admitted
//! handler whose declared support matches its contract, and the whole set is admitted at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use aip_core::{
    Capability, CapabilityContract, Checker, IdempotencyRequirement, Manifest, ManifestFilter,
    Principal, PrincipalId, PrincipalKind, ProfileId, SideEffect,
};
use serde_json::{Value, json};

use aip_schema::capability::{CapabilitySchema, SchemaBounds, SchemaError};

use crate::approval::ApprovalTier;

use crate::caller::Caller;
use crate::handler::{ActionHandler, Mode};

/// One admitted capability: its manifest entry, compiled schemas and handler.
pub struct AdmittedCapability {
    /// The manifest entry, as advertised: it states only what this runtime honours (a transaction
    /// contract it cannot execute is not advertised).
    pub capability: Capability,
    /// The bound handler.
    pub handler: Arc<dyn ActionHandler>,
    /// Compiled input schema (spec 11.3 step 4), within the bounds of spec 22.8.
    pub input_schema: CapabilitySchema,
    /// Compiled output schema, validated before `completed` (spec 11.7).
    pub output_schema: Option<CapabilitySchema>,
    /// The approval tiers, first match wins; the contract's `approval` policy is the last (spec 12.1).
    pub approval_tiers: Vec<ApprovalTier>,
    /// Roles that may not approve this capability's actions, whichever tier applies (sorted).
    pub approval_excluded_roles: Vec<String>,
    /// The operator stated that this high-stakes capability runs without any approval (spec 22.5):
    /// shown in the manifest's governance.
    pub allow_without_approval: bool,
}

/// A capability to admit: its manifest entry, its handler, and approval tiers evaluated before the
/// contract's own `approval` policy.
pub struct CapabilityEntry {
    /// The manifest entry.
    pub capability: Capability,
    /// The handler.
    pub handler: Arc<dyn ActionHandler>,
    /// Stricter (or looser) policies for inputs that match their condition.
    pub approval_tiers: Vec<ApprovalTier>,
    /// Roles that may not approve, whichever tier applies (separation of duties, spec 12.1).
    pub approval_excluded_roles: Vec<String>,
    /// Admit a capability that [`needs_approval_policy`] without one: an explicit operator choice.
    pub allow_without_approval: bool,
}

impl From<(Capability, Arc<dyn ActionHandler>)> for CapabilityEntry {
    fn from((capability, handler): (Capability, Arc<dyn ActionHandler>)) -> Self {
        CapabilityEntry {
            capability,
            handler,
            approval_tiers: Vec::new(),
            approval_excluded_roles: Vec::new(),
            allow_without_approval: false,
        }
    }
}

impl std::fmt::Debug for AdmittedCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmittedCapability")
            .field("id", &self.capability.id)
            .finish_non_exhaustive()
    }
}

impl AdmittedCapability {
    /// Whether the contract (or, without one, the handler) allows `mode`.
    pub fn supports_mode(&self, mode: Mode) -> bool {
        match &self.capability.contract {
            Some(c) => match mode {
                Mode::Sync => c.execution.supports_sync,
                Mode::Async => c.execution.supports_async,
                Mode::Streaming => c.execution.supports_streaming,
            },
            None => self.handler.support().modes.contains(&mode),
        }
    }

    /// Whether cancellation is both declared and implemented.
    pub fn supports_cancel(&self) -> bool {
        self.capability
            .contract
            .as_ref()
            .is_some_and(|c| c.execution.supports_cancel)
            && self.handler.support().cancellable
    }

    /// The idempotency requirement; `unsupported` without a contract (conservative, spec 9.4).
    pub fn idempotency(&self) -> Option<&aip_core::IdempotencyContract> {
        self.capability
            .contract
            .as_ref()
            .map(|c| &c.idempotency)
            .filter(|c| c.requirement != IdempotencyRequirement::Unsupported)
    }

    /// The transaction contract the runtime executes for this capability (spec 13), if any: it is
    /// advertised only when the handler executes it.
    pub fn transaction_contract(&self) -> Option<&aip_core::TransactionContract> {
        self.capability
            .contract
            .as_ref()
            .and_then(|c| c.transaction.as_ref())
    }

    /// Whether some input of the capability needs an approval before dispatch (spec 12).
    pub fn requires_approval(&self) -> bool {
        self.approval_tiers.iter().any(|t| t.policy.required)
    }

    /// The approval policy `input` falls under, if it needs one: the first tier that matches.
    pub fn approval_for(&self, input: &Value) -> Option<&aip_core::ApprovalPolicy> {
        self.approval_tiers
            .iter()
            .find(|t| t.when.as_ref().is_none_or(|w| w.matches(input)))
            .map(|t| &t.policy)
            .filter(|p| p.required)
    }
}

/// The admitted capability set, immutable once built (atomic admission, spec 9.2).
#[derive(Debug, Default)]
pub struct Registry {
    by_id: BTreeMap<String, Arc<AdmittedCapability>>,
}

/// Why a capability could not be admitted; the server refuses to start rather than advertise it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdmissionError {
    /// The capability entry does not decode as a manifest `Capability`.
    #[error("capability {id}: {reason}")]
    Invalid {
        /// The capability id (or `?`).
        id: String,
        /// What is wrong.
        reason: String,
    },
    /// Two entries share an id (spec 9.1).
    #[error("capability {0} is declared twice")]
    Duplicate(String),
    /// The handler's declared support does not match the contract (spec 9.2).
    #[error("capability {id}: handler does not match the contract: {reason}")]
    Mismatch {
        /// The capability id.
        id: String,
        /// What does not match.
        reason: String,
    },
    /// A critical capability, or one with financial, identity, medical or legal effects, has no
    /// approval policy and the operator did not state that it runs without one (spec 22.5, 9.6).
    #[error(
        "capability {id}: {why} needs an approval policy (approval_tiers or the contract's \
         approval), or `policy.allow_without_approval = true` to run it on an invoke scope alone"
    )]
    Ungoverned {
        /// The capability id.
        id: String,
        /// What makes it high-stakes.
        why: String,
    },
}

impl Registry {
    /// Admit every capability or none, with schemas bounded by [`SchemaBounds::default`].
    pub fn admit<E: Into<CapabilityEntry>>(
        entries: impl IntoIterator<Item = E>,
    ) -> Result<Self, AdmissionError> {
        Self::admit_entries(
            entries.into_iter().map(Into::into).collect(),
            &SchemaBounds::default(),
        )
    }

    /// Admit every capability or none, compiling their schemas within `bounds` (spec 22.8) and
    /// checking that this runtime can enforce their approval policies (spec 12.1).
    pub fn admit_entries(
        entries: Vec<CapabilityEntry>,
        bounds: &SchemaBounds,
    ) -> Result<Self, AdmissionError> {
        let mut by_id = BTreeMap::new();
        for entry in entries {
            let CapabilityEntry {
                mut capability,
                handler,
                approval_tiers,
                mut approval_excluded_roles,
                allow_without_approval,
            } = entry;
            let id = capability.id.as_str().to_owned();
            let violations = Checker::check(&capability);
            if let Some(v) = violations.first() {
                return Err(AdmissionError::Invalid {
                    id,
                    reason: format!("{}: {}", v.pointer, v.message),
                });
            }
            check_contract(&id, capability.contract.as_ref(), handler.as_ref())?;
            let input_schema = CapabilitySchema::compile_input(&capability.input_schema, bounds)
                .map_err(|e| schema_error(&id, "input", &e))?;
            let output_schema = capability
                .output_schema
                .as_ref()
                .map(|s| {
                    CapabilitySchema::compile(s, bounds)
                        .map_err(|e| schema_error(&id, "output", &e))
                })
                .transpose()?;
            check_transactions(&id, &mut capability, handler.as_ref())?;
            // A stated per-call price must be one the settlement can charge (spec 18.4).
            if let Err(reason) = crate::settlement::per_call(capability.cost.as_ref()) {
                return Err(AdmissionError::Invalid { id, reason });
            }
            let approval_tiers = approval_tiers_of(&id, &mut capability, approval_tiers)?;
            approval_excluded_roles.sort();
            approval_excluded_roles.dedup();
            if approval_excluded_roles.len() > 64
                || approval_excluded_roles
                    .iter()
                    .any(|r| r.is_empty() || r.len() > 128)
            {
                return Err(AdmissionError::Invalid {
                    id,
                    reason: "approval_excluded_roles: at most 64 role names of 1..=128 characters"
                        .into(),
                });
            }
            let admitted = AdmittedCapability {
                capability,
                handler,
                input_schema,
                output_schema,
                approval_tiers,
                approval_excluded_roles,
                allow_without_approval,
            };
            if let Some(why) = needs_approval_policy(&admitted.capability)
                && !admitted.requires_approval()
                && !admitted.allow_without_approval
            {
                return Err(AdmissionError::Ungoverned { id, why });
            }
            if by_id.insert(id.clone(), Arc::new(admitted)).is_some() {
                return Err(AdmissionError::Duplicate(id));
            }
        }
        check_compensators(&by_id)?;
        Ok(Self { by_id })
    }

    /// Every admitted capability, in id order.
    pub fn all(&self) -> impl Iterator<Item = &Arc<AdmittedCapability>> {
        self.by_id.values()
    }

    /// The admitted capability with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<AdmittedCapability>> {
        self.by_id.get(id)
    }

    /// The manifest as `caller` may see it, narrowed by an optional 9.8 filter: the capabilities it
    /// may invoke, with their approval requirements (9.4: `requires_human_approval`, the contract's
    /// policy, and in `governance.approval_tiers` the stricter tiers by input), and exactly the
    /// profiles this node serves (`ours`, spec 23.3).
    pub fn manifest(
        &self,
        agent: &Principal,
        caller: &Caller,
        limits: Value,
        filter: Option<&ManifestFilter>,
        (ours, requested_profiles): (&[ProfileId], &[ProfileId]),
    ) -> Manifest {
        let ours = ours.to_vec();
        let mut wanted: Vec<&ProfileId> = requested_profiles.iter().collect();
        if let Some(f) = filter {
            wanted.extend(f.profiles.iter());
        }
        let profile_match = wanted.is_empty() || wanted.iter().any(|p| ours.contains(p));
        let visible: Vec<&Arc<AdmittedCapability>> = self
            .by_id
            .values()
            .filter(|c| profile_match && caller.may_invoke(c.capability.id.as_str()))
            .filter(|c| filter.is_none_or(|f| matches_filter(c, f)))
            .collect();
        let tiers: serde_json::Map<String, Value> = visible
            .iter()
            .filter(|c| c.approval_tiers.len() > 1)
            .map(|c| {
                let tiers = c
                    .approval_tiers
                    .iter()
                    .map(ApprovalTier::describe)
                    .collect();
                (c.capability.id.as_str().to_owned(), Value::Array(tiers))
            })
            .collect();
        let mut manifest = base_manifest(agent.clone(), ours);
        manifest.capabilities = visible.iter().map(|c| c.capability.clone()).collect();
        // The approval messages this runtime serves (spec 12, 16.3), so a client knows it may
        // decide and read approvals here before it holds one.
        let policy_messages: Vec<&str> = crate::dispatch::SERVED
            .iter()
            .map(|t| t.as_str())
            .filter(|t| t.starts_with("aip.policy."))
            .collect();
        let escalation_messages: Vec<&str> = crate::dispatch::SERVED
            .iter()
            .map(|t| t.as_str())
            .filter(|t| t.starts_with("aip.core.v1.escalation"))
            .collect();
        let transaction_messages: Vec<&str> = crate::dispatch::SERVED
            .iter()
            .map(|t| t.as_str())
            .filter(|t| t.starts_with("aip.transaction."))
            .collect();
        let mut governance = json!({
            "approval_messages": policy_messages,
            "escalation_messages": escalation_messages,
            "transaction_messages": transaction_messages,
        });
        if !tiers.is_empty() {
            governance["approval_tiers"] = Value::Object(tiers);
        }
        let excluded: serde_json::Map<String, Value> = visible
            .iter()
            .filter(|c| !c.approval_excluded_roles.is_empty())
            .map(|c| {
                (
                    c.capability.id.as_str().to_owned(),
                    json!(c.approval_excluded_roles),
                )
            })
            .collect();
        if !excluded.is_empty() {
            governance["approval_excluded_roles"] = Value::Object(excluded);
        }
        // High-stakes capabilities the operator runs without approval, said where clients look.
        let ungoverned: Vec<&str> = visible
            .iter()
            .filter(|c| {
                c.allow_without_approval
                    && !c.requires_approval()
                    && needs_approval_policy(&c.capability).is_some()
            })
            .map(|c| c.capability.id.as_str())
            .collect();
        if !ungoverned.is_empty() {
            governance["allowed_without_approval"] = json!(ungoverned);
        }
        manifest.governance = Some(governance);
        manifest.limits = Some(limits);
        manifest.security =
            Some(json!({ "authentication": ["bearer"], "signatures": ["ed25519-did-key"] }));
        manifest
    }
}

/// Why `capability` may not run on an invoke scope alone (spec 22.5: authorization weighs risk
/// and side effects): `critical` risk, or an effect on money, identity, health or legal standing.
pub fn needs_approval_policy(capability: &Capability) -> Option<String> {
    if capability.risk == Some(aip_core::RiskLevel::Critical) {
        return Some("risk `critical`".into());
    }
    let effects = capability.contract.as_ref()?.side_effects.iter();
    let grave: Vec<&SideEffect> = effects
        .filter(|e| {
            matches!(
                e,
                SideEffect::Financial
                    | SideEffect::Identity
                    | SideEffect::Medical
                    | SideEffect::Legal
            )
        })
        .collect();
    let first = grave.first()?;
    let name = serde_json::to_value(first)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    Some(format!("the side effect `{name}`"))
}

/// The provider principal of the manifest.
pub fn agent_principal(id: &str, name: &str) -> Principal {
    Principal {
        id: PrincipalId::new(id),
        kind: PrincipalKind::Agent,
        display_name: Some(name.to_owned()),
        trust_domain: None,
        did: None,
        external_refs: Vec::new(),
        delegated_authority: Vec::new(),
        auth_context: None,
    }
}

fn base_manifest(agent: Principal, profiles: Vec<ProfileId>) -> Manifest {
    Manifest {
        manifest_version: "aip-manifest/v1".into(),
        agent,
        capabilities: Vec::new(),
        profiles,
        resources: Vec::new(),
        channels: Vec::new(),
        security: None,
        governance: None,
        limits: None,
        compatibility: None,
        extensions: None,
    }
}

fn matches_filter(c: &AdmittedCapability, f: &ManifestFilter) -> bool {
    let cap = &c.capability;
    if !f.capability_ids.is_empty() && !f.capability_ids.contains(&cap.id) {
        return false;
    }
    if !f.risk.is_empty() && !cap.risk.is_some_and(|r| f.risk.contains(&r)) {
        return false;
    }
    if !f.side_effects.is_empty() {
        // Only capabilities whose every declared effect was asked for; no contract means unknown effects.
        let Some(contract) = &cap.contract else {
            return false;
        };
        if !contract
            .side_effects
            .iter()
            .all(|e| f.side_effects.contains(e))
        {
            return false;
        }
    }
    if f.requires_approval
        .is_some_and(|wanted| c.requires_approval() != wanted)
    {
        return false;
    }
    if f.supports_streaming.is_some_and(|wanted| {
        cap.contract
            .as_ref()
            .is_some_and(|k| k.execution.supports_streaming)
            != wanted
    }) {
        return false;
    }
    if f.supports_transactions.is_some_and(|wanted| {
        cap.contract
            .as_ref()
            .is_some_and(|k| k.transaction.is_some())
            != wanted
    }) {
        return false;
    }
    if !f.resource_kinds.is_empty() && cap.kind != aip_core::CapabilityKind::Resource {
        return false;
    }
    true
}

fn check_contract(
    id: &str,
    contract: Option<&CapabilityContract>,
    handler: &dyn ActionHandler,
) -> Result<(), AdmissionError> {
    let support = handler.support();
    let mismatch = |reason: &str| AdmissionError::Mismatch {
        id: id.to_owned(),
        reason: reason.to_owned(),
    };
    let Some(contract) = contract else {
        if support.mutation {
            return Err(mismatch(
                "a handler with side effects needs a contract declaring them",
            ));
        }
        return Ok(());
    };
    let e = &contract.execution;
    for (declared, mode) in [
        (e.supports_sync, Mode::Sync),
        (e.supports_async, Mode::Async),
        (e.supports_streaming, Mode::Streaming),
    ] {
        if declared && !support.modes.contains(&mode) {
            return Err(mismatch(&format!(
                "contract declares {mode:?} mode, the handler does not implement it"
            )));
        }
    }
    if e.supports_cancel && !support.cancellable {
        return Err(mismatch(
            "contract declares cancellation, the handler cannot confirm it",
        ));
    }
    let declares_effects = contract.side_effects.iter().any(|s| *s != SideEffect::Read);
    if support.mutation && !declares_effects {
        return Err(mismatch(
            "the handler mutates but the contract declares only reads",
        ));
    }
    Ok(())
}

/// Spec 13.2, 9.4: a transaction contract is advertised only when the handler executes it, and
/// never with a mode or a dry-run fidelity beyond what the handler executes. A handler that
/// executes no transactions leaves the contract unadvertised (and transaction contexts refused);
/// one that executes some refuses to start with a contract that claims more.
fn check_transactions(
    id: &str,
    capability: &mut Capability,
    handler: &dyn ActionHandler,
) -> Result<(), AdmissionError> {
    let Some(contract) = capability.contract.as_mut() else {
        return Ok(());
    };
    let Some(declared) = contract.transaction.as_ref() else {
        return Ok(());
    };
    let Some(support) = handler.support().transactions else {
        contract.transaction = None;
        tracing::warn!(capability = %id, "transaction contract not advertised: its handler executes no transactions");
        return Ok(());
    };
    let mismatch = |reason: String| AdmissionError::Mismatch {
        id: id.to_owned(),
        reason,
    };
    if let Some(mode) = declared
        .supported_modes
        .iter()
        .find(|m| !support.modes.contains(m))
    {
        return Err(mismatch(format!(
            "contract declares transaction mode {}, the handler does not execute it",
            mode.as_str()
        )));
    }
    if declared.dry_run_fidelity > support.dry_run_fidelity {
        return Err(mismatch(format!(
            "contract declares dry-run fidelity {}, the handler executes at most {}",
            declared.dry_run_fidelity.as_str(),
            support.dry_run_fidelity.as_str()
        )));
    }
    Ok(())
}

/// Spec 13.7: a declared compensating capability must be admitted, and when compensation
/// requires approval, the compensating capability must require one.
fn check_compensators(
    by_id: &BTreeMap<String, Arc<AdmittedCapability>>,
) -> Result<(), AdmissionError> {
    for (id, admitted) in by_id {
        let Some(compensation) = admitted
            .capability
            .contract
            .as_ref()
            .and_then(|c| c.compensation.as_ref())
        else {
            continue;
        };
        let Some(compensator) = compensation.compensation_capability_id.as_ref() else {
            continue;
        };
        let invalid = |reason: String| AdmissionError::Invalid {
            id: id.clone(),
            reason,
        };
        let Some(found) = by_id.get(compensator.as_str()) else {
            return Err(invalid(format!(
                "compensating capability {compensator} is not admitted"
            )));
        };
        if compensation.requires_approval && !found.requires_approval() {
            return Err(invalid(format!(
                "compensation requires approval, but {compensator} requires none"
            )));
        }
    }
    Ok(())
}

/// The capability's approval tiers: the configured ones, then the contract's own policy as the last
/// (a contract without one and no tiers: no approval). Every policy must be one this runtime can
/// enforce; `requires_human_approval` is set from them, so the manifest says what the runtime does.
fn approval_tiers_of(
    id: &str,
    capability: &mut Capability,
    mut tiers: Vec<ApprovalTier>,
) -> Result<Vec<ApprovalTier>, AdmissionError> {
    if let Some(policy) = capability
        .contract
        .as_ref()
        .and_then(|c| c.approval.clone())
    {
        tiers.push(ApprovalTier { when: None, policy });
    }
    let invalid = |reason: String| AdmissionError::Invalid {
        id: id.to_owned(),
        reason,
    };
    for tier in &tiers {
        crate::approval::validate_policy(&tier.policy).map_err(|e| invalid(e.to_string()))?;
    }
    let required = tiers.iter().any(|t| t.policy.required);
    match capability.requires_human_approval {
        Some(true) if !required => {
            return Err(invalid(
                "requires_human_approval is set but no approval policy requires approval".into(),
            ));
        }
        _ => capability.requires_human_approval = required.then_some(true),
    }
    Ok(tiers)
}

fn schema_error(id: &str, which: &str, error: &SchemaError) -> AdmissionError {
    AdmissionError::Invalid {
        id: id.to_owned(),
        reason: format!("{which} schema: {} ({})", error, error.code()),
    }
}

impl crate::runtime::Runtime {
    /// The manifest `caller` may see (spec 9.1, 9.8), naming the profiles this node serves.
    pub fn manifest(
        &self,
        caller: &Caller,
        filter: Option<&ManifestFilter>,
        profiles: &[ProfileId],
    ) -> Manifest {
        let config = self.config();
        let mut manifest = self.registry().manifest(
            &config.agent,
            caller,
            config.manifest_limits.clone(),
            filter,
            (&config.profiles, profiles),
        );
        let kinds = filter.map_or(&[][..], |f| f.resource_kinds.as_slice());
        manifest.resources = self.manifest_resources(caller, kinds);
        if let Some(governance) = manifest.governance.as_mut() {
            governance["callbacks"] = crate::callback::manifest_entry(self);
        }
        manifest
    }
}
