//! Signed deliveries (spec 17.4 "signed payloads"). A receiver verifies a delivery like this:
//!
//! 1. pin the sending node's `did:key` (its manifest's `agent.did`, printed by `aip serve` at
//!    start) and check that the `aip-signer` header names it;
//! 2. check that `aip-delivery-timestamp` (Unix seconds) is within its clock-skew window;
//! 3. verify `aip-delivery-signature` (`v1=<base64 Ed25519 signature>`) with that key over
//!    `aip-callback-v1\n<aip-delivery-id>\n<aip-delivery-timestamp>\n<hex SHA-256 of the raw body>`;
//! 4. deduplicate on `aip-delivery-id` (stable across retries; `idempotency-key` is too).
//!
//! The body is itself an envelope signed by the same key (spec 22.2, `security.did` and
//! `security.signature`), so it stays verifiable after it is stored or forwarded.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer as _, SigningKey};

/// The delivery id (stable across retries).
pub const DELIVERY_ID: &str = "aip-delivery-id";
/// The one-based attempt number.
pub const ATTEMPT: &str = "aip-delivery-attempt";
/// Unix seconds at which this attempt was signed.
pub const TIMESTAMP: &str = "aip-delivery-timestamp";
/// `v1=<base64 signature>`.
pub const SIGNATURE: &str = "aip-delivery-signature";
/// The signer's `did:key`.
pub const SIGNER: &str = "aip-signer";
/// The delivery's idempotency key (spec 17.2).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Why a delivery signature does not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeliverySignatureError {
    /// The signer is not an Ed25519 `did:key`.
    #[error("the signer is not an Ed25519 did:key")]
    Signer,
    /// The header is not `v1=<base64 of 64 bytes>`.
    #[error("the signature header is malformed")]
    Malformed,
    /// The signature does not match.
    #[error("the signature does not verify")]
    Mismatch,
}

/// The bytes a delivery signature covers.
pub fn signing_input(delivery_id: &str, timestamp: i64, body: &[u8]) -> Vec<u8> {
    format!(
        "aip-callback-v1\n{delivery_id}\n{timestamp}\n{}",
        aip_core::canonical::sha256_hex(body)
    )
    .into_bytes()
}

/// The `aip-delivery-signature` value for one attempt.
pub fn sign(key: &SigningKey, delivery_id: &str, timestamp: i64, body: &[u8]) -> String {
    let signature = key.sign(&signing_input(delivery_id, timestamp, body));
    format!("v1={}", STANDARD.encode(signature.to_bytes()))
}

/// Verifies a delivery as its receiver would (steps 1 and 3 of the recipe; skew and
/// deduplication are the receiver's).
pub fn verify(
    signer_did: &str,
    delivery_id: &str,
    timestamp: i64,
    body: &[u8],
    header: &str,
) -> Result<(), DeliverySignatureError> {
    let key = aip_core::signing::verifying_key_from_did(signer_did)
        .map_err(|_| DeliverySignatureError::Signer)?;
    let encoded = header
        .strip_prefix("v1=")
        .filter(|s| s.len() <= 128)
        .ok_or(DeliverySignatureError::Malformed)?;
    let raw: [u8; 64] = STANDARD
        .decode(encoded)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(DeliverySignatureError::Malformed)?;
    key.verify_strict(
        &signing_input(delivery_id, timestamp, body),
        &Signature::from_bytes(&raw),
    )
    .map_err(|_| DeliverySignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_signature_verifies_and_fails_on_any_changed_part() {
        let key = aip_core::signing::generate_signing_key();
        let did = aip_core::signing::did_key(&key.verifying_key());
        let header = sign(&key, "d1", 1_700_000_000, b"{\"a\":1}");
        assert_eq!(
            verify(&did, "d1", 1_700_000_000, b"{\"a\":1}", &header),
            Ok(())
        );
        for (id, ts, body) in [
            ("d2", 1_700_000_000, &b"{\"a\":1}"[..]),
            ("d1", 1_700_000_001, &b"{\"a\":1}"[..]),
            ("d1", 1_700_000_000, &b"{\"a\":2}"[..]),
        ] {
            assert_eq!(
                verify(&did, id, ts, body, &header),
                Err(DeliverySignatureError::Mismatch)
            );
        }
        let other = aip_core::signing::generate_signing_key();
        let other_did = aip_core::signing::did_key(&other.verifying_key());
        assert_eq!(
            verify(&other_did, "d1", 1_700_000_000, b"{\"a\":1}", &header),
            Err(DeliverySignatureError::Mismatch)
        );
        assert_eq!(
            verify(&did, "d1", 1_700_000_000, b"{\"a\":1}", "v2=abc"),
            Err(DeliverySignatureError::Malformed)
        );
        assert_eq!(
            verify("did:web:x", "d1", 1, b"", &header),
            Err(DeliverySignatureError::Signer)
        );
    }
}
