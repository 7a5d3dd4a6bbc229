//! Compatibility profiles (spec 21): foreign protocols mapped onto the native runtime at the
//! gateway boundary. No foreign type crosses into the runtime or the store; each profile calls the
//! same runtime entry points as the native bindings.

pub mod a2a;
pub mod mcp;
pub mod webhook;

/// A stable action id for a profile's own idempotency (a webhook delivery, an A2A message): `prefix`
/// and 32 hex digits of a SHA-256 over `domain` and the length-prefixed `parts`, so the same parts
/// always give the same action and no two part lists collide.
pub(crate) fn derived_id(prefix: &str, domain: &[u8], parts: &[&str]) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(domain);
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    let hex: String = hash.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{prefix}{hex}")
}

/// Whether `capability` can be queued (its contract says `supports_async`).
pub(crate) fn supports_async(capability: &aip_core::Capability) -> bool {
    capability
        .contract
        .as_ref()
        .is_some_and(|c| c.execution.supports_async)
}

/// Whether `capability` takes idempotency keys (its contract does not say `unsupported`): a
/// profile sends its own delivery or message id as the key only then.
pub(crate) fn takes_keys(capability: &aip_core::Capability) -> bool {
    capability
        .contract
        .as_ref()
        .is_some_and(|c| c.idempotency.requirement != aip_core::IdempotencyRequirement::Unsupported)
}
