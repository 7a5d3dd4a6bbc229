//! Envelope authenticity and replay protection (spec 11.3 step 2, 22.2-22.3): `sent_at` skew on every
//! envelope, signature and signer binding on signed ones, and a durable claim of each signed message
//! id for the replay window.

pub mod rate;
pub mod refusals;

use aip_core::Envelope;
use aip_store::ReplayClaim;
use serde_json::Value;

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

impl Runtime {
    /// The caller an envelope speaks for: the transport's, unchanged for an unsigned envelope (when
    /// the policy allows those), or with the verified signer as issuer. `raw` is the JSON as
    /// received, which the signature covers.
    pub(crate) async fn authenticate_envelope(
        &self,
        caller: &Caller,
        envelope: &Envelope,
        raw: &Value,
    ) -> Result<Caller, RuntimeError> {
        let policy = &self.config().signatures;
        let now = now_ms();
        // Spec 22.3: the skew bound holds for every envelope, so a captured unsigned request cannot be
        // replayed later either (its message id is not claimed; idempotency and the action id guard
        // actions).
        let sent = envelope
            .sent_at
            .unix_millis()
            .ok_or(RuntimeError::ClockSkew)?;
        if now.saturating_sub(sent).unsigned_abs() > policy.max_skew_ms {
            return Err(RuntimeError::ClockSkew);
        }
        if envelope.security.is_none() {
            if policy.require_signed {
                return Err(RuntimeError::Signature(
                    "this runtime requires signed envelopes",
                ));
            }
            return Ok(caller.clone());
        }
        let signer = aip_core::signing::verify_value(raw)
            .map_err(|_| RuntimeError::Signature("signature does not verify"))?;
        let bound = policy
            .trusted_signers
            .get(&signer.did)
            .ok_or(RuntimeError::Signature("signer is not trusted"))?;
        if *bound != caller.id {
            return Err(RuntimeError::Signature(
                "signer is bound to another principal than the bearer token",
            ));
        }
        let retain = now.saturating_add(
            i64::try_from(policy.replay_window_ms.saturating_add(policy.max_skew_ms))
                .unwrap_or(i64::MAX),
        );
        let scope = format!("signed:{}", signer.did);
        match self
            .store()
            .claim_message_id(&scope, envelope.message_id.as_str(), now, retain)
            .await?
        {
            ReplayClaim::Claimed => {}
            _ => return Err(RuntimeError::Replay),
        }
        let mut verified = caller.clone();
        verified.issuer = signer.did;
        Ok(verified)
    }
}
