//! Step 7: the idempotency reservation (spec 9.5), reserved by the store in the admission
//! transaction itself. Every key scope stays inside the caller's tenant (spec 22.6).

use aip_core::{IdempotencyCollisionBehavior, IdempotencyKeyScope, IdempotencyRequirement};
use aip_store::{CollisionBehavior, IdempotencyClaim};

use crate::admission::ActionRequest;
use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::registry::AdmittedCapability;

/// Reservations live this long unless the contract says otherwise.
pub const DEFAULT_IDEMPOTENCY_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// Longest accepted key, in bytes.
const MAX_KEY_BYTES: usize = 256;

/// The reservation to make, if the action carries a key the contract accepts.
pub(crate) fn claim(
    capability: &AdmittedCapability,
    caller: &Caller,
    request: &ActionRequest,
    now_ms: i64,
) -> Result<Option<IdempotencyClaim>, RuntimeError> {
    let contract = capability.idempotency();
    let key = request.key();
    let (contract, key) = match (contract, key) {
        (Some(contract), None) if contract.requirement == IdempotencyRequirement::Required => {
            return Err(RuntimeError::IdempotencyKeyRequired);
        }
        (None, Some(_)) => return Err(RuntimeError::IdempotencyUnsupported),
        (Some(contract), Some(key)) => (contract, key),
        (_, None) => return Ok(None),
    };
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(RuntimeError::InvalidInput(format!(
            "idempotency_key must be 1..={MAX_KEY_BYTES} bytes"
        )));
    }
    let ttl = contract.ttl_ms.unwrap_or(DEFAULT_IDEMPOTENCY_TTL_MS);
    Ok(Some(IdempotencyClaim {
        scope: scope(contract.key_scope, caller, request)?,
        key: key.to_owned(),
        input_hash: input_hash(request),
        behavior: match contract.collision_behavior {
            IdempotencyCollisionBehavior::ReturnOriginalResult => {
                CollisionBehavior::ReturnOriginalResult
            }
            IdempotencyCollisionBehavior::RejectConflict => CollisionBehavior::RejectConflict,
            IdempotencyCollisionBehavior::RevalidateInputHash => {
                CollisionBehavior::RevalidateInputHash
            }
        },
        expires_at_ms: now_ms.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)),
    }))
}

/// The canonical input hash of an invocation: capability and input (spec 9.5).
pub(crate) fn input_hash(request: &ActionRequest) -> String {
    aip_core::canonical::canonical_hash(&serde_json::json!({
        "capability_id": request.action.capability_id,
        "input": request.action.input,
    }))
}

/// The reservation scope of a key. `external_account` uses the caller's configured external
/// account and fails closed without one.
fn scope(
    scope: IdempotencyKeyScope,
    caller: &Caller,
    request: &ActionRequest,
) -> Result<String, RuntimeError> {
    let action = &request.action;
    Ok(match scope {
        IdempotencyKeyScope::Action => format!(
            "action\n{}\n{}\n{}",
            caller.tenant, action.capability_id, action.id
        ),
        IdempotencyKeyScope::Capability => {
            format!("capability\n{}\n{}", caller.tenant, action.capability_id)
        }
        IdempotencyKeyScope::Principal => format!("principal\n{}\n{}", caller.tenant, caller.id),
        IdempotencyKeyScope::Tenant => format!("tenant\n{}", caller.tenant),
        IdempotencyKeyScope::ExternalAccount => {
            let account = caller
                .external_account
                .as_ref()
                .ok_or(RuntimeError::ExternalAccountUnbound)?;
            // Lengths first, so that no choice of system and id can alias another pair.
            format!(
                "external_account\n{}\n{}:{}\n{}",
                caller.tenant,
                account.system.len(),
                account.system,
                account.id
            )
        }
    })
}
