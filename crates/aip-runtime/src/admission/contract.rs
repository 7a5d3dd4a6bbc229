//! Step 6: mode, deadline and contexts. The mode must be one the capability contract supports
//! (spec 11.1); the deadline is derived once and never extended; and every context on the action
//! that this runtime does not implement is refused, never ignored (spec 22.1): a dry run that ran
//! for real, or a delegation that is silently dropped, would be worse than a clear refusal.

use aip_core::{Action, ActionMode};

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::handler::Mode;
use crate::registry::AdmittedCapability;
use crate::runtime::Runtime;

/// What step 6 settled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Contract {
    pub(crate) mode: Mode,
    /// Admission time, epoch ms.
    pub(crate) now_ms: i64,
    /// The immutable deadline, epoch ms.
    pub(crate) deadline_ms: i64,
}

pub(crate) fn check(
    runtime: &Runtime,
    caller: &Caller,
    capability: &AdmittedCapability,
    action: &Action,
) -> Result<Contract, RuntimeError> {
    unsupported_context(runtime, caller, action)?;
    let mode = match action.mode.unwrap_or(ActionMode::Sync) {
        ActionMode::Sync => Mode::Sync,
        ActionMode::Async => Mode::Async,
        ActionMode::Streaming => Mode::Streaming,
    };
    if !capability.supports_mode(mode) {
        return Err(RuntimeError::UnsupportedMode(mode.as_str()));
    }
    let config = runtime.config();
    let timeout_ms = match action.timeout_ms {
        Some(t) if t == 0 || t > config.max_timeout_ms => {
            return Err(RuntimeError::InvalidTimeout(config.max_timeout_ms));
        }
        Some(t) => t,
        None => config.default_timeout_ms,
    };
    let now_ms = now_ms();
    Ok(Contract {
        mode,
        now_ms,
        deadline_ms: now_ms.saturating_add(i64::try_from(timeout_ms).unwrap_or(i64::MAX)),
    })
}

/// The action contexts this runtime refuses whenever they are present (a context is honoured or
/// refused with `aip.action.unsupported_context`, never dropped), in the order they are checked. README.md lists them from
/// here (a test compares the two).
pub(crate) const REFUSED_CONTEXTS: [&str; 4] =
    ["federation", "approval", "compliance", "memory_context"];

/// The first context of `action` this runtime does not implement, as a refusal. Observability
/// metadata is kept with the request; an identity context may only name the caller's own tenant
/// (a request-supplied tenant is a selector, never authority: spec 22.6).
fn unsupported_context(
    runtime: &Runtime,
    caller: &Caller,
    action: &Action,
) -> Result<(), RuntimeError> {
    // A transaction context is checked against the capability's transaction contract by
    // `crate::transaction` (a capability without one refuses it there).
    // A callback is checked against deployment policy by `crate::callback::admit`.
    crate::delegation::check_chain(runtime, caller, action)?;
    let present = [
        action.federation.is_some(),
        action.approval.is_some(),
        action.compliance.is_some(),
        action.memory_context.is_some(),
    ];
    if let Some((_, context)) = present
        .into_iter()
        .zip(REFUSED_CONTEXTS)
        .find(|(present, _)| *present)
    {
        return Err(RuntimeError::UnsupportedContext(context));
    }
    caller.check_identity_tenant(action.identity.as_ref())?;
    let Some(identity) = &action.identity else {
        return Ok(());
    };
    let only_tenant = identity.external_account.is_none()
        && identity.external_user.is_none()
        && identity.human_actor.is_none()
        && identity.service_account.is_none()
        && identity.acted_on_behalf_of.is_none()
        && identity.credential_ref.is_none()
        && identity.oauth.is_none();
    if only_tenant {
        Ok(())
    } else {
        // Delegated authority, credential mapping and on-behalf-of claims need the delegation and
        // credential features; until then they are refused rather than dropped.
        Err(RuntimeError::UnsupportedContext("identity"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_readme_lists_exactly_the_refused_contexts() {
        let readme = include_str!("../../../../README.md");
        let (_, rest) = readme
            .split_once("<!-- refused-contexts -->")
            .unwrap_or_default();
        let (listed, _) = rest
            .split_once("<!-- /refused-contexts -->")
            .unwrap_or_default();
        let listed: Vec<&str> = listed.split(", ").map(|c| c.trim_matches('`')).collect();
        assert_eq!(listed, super::REFUSED_CONTEXTS);
    }
}
