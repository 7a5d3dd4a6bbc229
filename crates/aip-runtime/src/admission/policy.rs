//! Step 8: policy and approval evaluation (spec 11.3 step 8, 12). The runtime asks one
//! [`PolicyGate`] per action, after the request is otherwise admissible and before anything is
//! written. The default gate, [`ApprovalGate`], allows what the configured scopes allow (checked at
//! lookup) and asks for an approval when the capability's approval tiers require one for this input;
//! [`ScopePolicy`] is for embedders without approvals: it refuses approval-gated capabilities.

use async_trait::async_trait;

use aip_core::Action;

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::handler::Mode;
use crate::registry::AdmittedCapability;

/// What a policy decision is about: the authenticated caller, the admitted capability and the
/// action, all already validated.
#[derive(Debug, Clone, Copy)]
pub struct PolicySubject<'a> {
    /// The authenticated caller.
    pub caller: &'a Caller,
    /// The capability the action invokes.
    pub capability: &'a AdmittedCapability,
    /// The action, its input schema-valid.
    pub action: &'a Action,
    /// The admitted mode.
    pub mode: Mode,
}

/// A decision that lets the action be admitted; a refusal is a [`RuntimeError`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PolicyDecision {
    /// Admit the action now.
    Allow {
        /// What allowed it, recorded in the `policy_decision` receipt.
        basis: String,
    },
    /// Admit the action to wait durably for an approval under `policy` (spec 12.2).
    RequireApproval {
        /// The policy that applies to this action; its snapshot is stored with the approval.
        policy: Box<aip_core::ApprovalPolicy>,
        /// Roles that may not approve it (separation of duties beyond the wire policy); stored and
        /// hashed with the snapshot.
        excluded_roles: Vec<String>,
    },
}

/// Decides whether an otherwise admissible action may be admitted (spec 11.3 step 8).
#[async_trait]
pub trait PolicyGate: Send + Sync + 'static {
    /// The decision for `subject`, or the typed refusal. Must not write anything a refusal would
    /// leave behind: admission commits only after every step passed.
    async fn evaluate(&self, subject: &PolicySubject<'_>) -> Result<PolicyDecision, RuntimeError>;
}

/// A gate for runtimes that must not hold actions for approval: configured scopes decide (checked
/// at lookup); approval-gated capabilities are refused with `aip.policy.approval_unavailable`
/// (fail closed). Install it with `Runtime::with_policy`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScopePolicy;

#[async_trait]
impl PolicyGate for ScopePolicy {
    async fn evaluate(&self, subject: &PolicySubject<'_>) -> Result<PolicyDecision, RuntimeError> {
        if subject.capability.requires_approval() {
            return Err(RuntimeError::ApprovalUnavailable);
        }
        Ok(PolicyDecision::Allow {
            basis: "configured scopes".into(),
        })
    }
}

/// The default gate: configured scopes decide (checked at lookup); an input that falls under a
/// required approval tier waits for an approval (spec 12).
#[derive(Debug, Default, Clone, Copy)]
pub struct ApprovalGate;

#[async_trait]
impl PolicyGate for ApprovalGate {
    async fn evaluate(&self, subject: &PolicySubject<'_>) -> Result<PolicyDecision, RuntimeError> {
        Ok(
            match subject.capability.approval_for(&subject.action.input) {
                Some(policy) => PolicyDecision::RequireApproval {
                    policy: Box::new(policy.clone()),
                    excluded_roles: subject.capability.approval_excluded_roles.clone(),
                },
                None => PolicyDecision::Allow {
                    basis: "configured scopes".into(),
                },
            },
        )
    }
}
