//! Signed native envelopes (spec 22.2): Ed25519 keys named by `did:key`, signatures over the
//! canonical envelope with exactly `security.signature` removed.
//!
//! Signing and verification work on the envelope JSON as sent, so explicit `null` members and
//! application members named `signature` elsewhere stay inside the signed bytes.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde_json::{Map, Value};

use crate::canonical::to_canonical_vec;
use crate::{Envelope, ProtocolError};

/// The Ed25519 key types this module signs and verifies with.
pub use ed25519_dalek::{SigningKey as Ed25519SigningKey, VerifyingKey as Ed25519VerifyingKey};

/// Multicodec prefix of an Ed25519 public key (`ed25519-pub`, varint 0xed).
const ED25519_MULTICODEC: [u8; 2] = [0xed, 0x01];
const DID_KEY_PREFIX: &str = "did:key:z";

/// Why signing or verification failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The envelope is not a JSON object.
    #[error("an envelope must be a JSON object")]
    NotAnObject,
    /// `security` is absent or not an object.
    #[error("`security` must be an object containing `did` and `signature`")]
    MissingSecurity,
    /// `security.did` is absent or not a string.
    #[error("`security.did` is missing")]
    MissingDid,
    /// `security.signature` is absent or not a string.
    #[error("`security.signature` is missing")]
    MissingSignature,
    /// The DID is not an Ed25519 `did:key`.
    #[error("invalid did:key: {0}")]
    InvalidDid(String),
    /// The signature is not standard Base64 of 64 bytes.
    #[error("signature is not standard Base64 of 64 bytes")]
    BadEncoding,
    /// The signature does not verify under the DID's key.
    #[error("signature does not verify")]
    BadSignature,
}

impl SignatureError {
    /// Stable wire code.
    pub fn code(&self) -> crate::ErrorCode {
        use crate::ErrorCode as C;
        match self {
            SignatureError::NotAnObject => C::SignatureNotAnObject,
            SignatureError::MissingSecurity => C::SignatureMissingSecurity,
            SignatureError::MissingDid => C::SignatureMissingDid,
            SignatureError::MissingSignature => C::SignatureMissingSignature,
            SignatureError::InvalidDid(_) => C::SignatureInvalidDid,
            SignatureError::BadEncoding => C::SignatureBadEncoding,
            SignatureError::BadSignature => C::SignatureInvalid,
        }
    }

    /// JSON pointer of the offending member.
    pub fn pointer(&self) -> &'static str {
        match self {
            SignatureError::NotAnObject => "",
            SignatureError::MissingSecurity => "/security",
            SignatureError::MissingDid | SignatureError::InvalidDid(_) => "/security/did",
            SignatureError::MissingSignature
            | SignatureError::BadEncoding
            | SignatureError::BadSignature => "/security/signature",
        }
    }

    /// Signature failures are authentication failures (19.1 `auth`).
    pub fn to_protocol_error(&self) -> ProtocolError {
        self.code()
            .error(self.to_string())
            .with_pointer(self.pointer())
    }
}

/// `did:key:z` + base58btc(0xed 0x01 ‖ public key).
pub fn did_key(key: &VerifyingKey) -> String {
    let mut bytes = Vec::with_capacity(34);
    bytes.extend_from_slice(&ED25519_MULTICODEC);
    bytes.extend_from_slice(key.as_bytes());
    format!("{DID_KEY_PREFIX}{}", bs58::encode(bytes).into_string())
}

/// Decodes an Ed25519 `did:key` back to its public key.
pub fn verifying_key_from_did(did: &str) -> Result<VerifyingKey, SignatureError> {
    let encoded = did.strip_prefix(DID_KEY_PREFIX).ok_or_else(|| {
        SignatureError::InvalidDid("must start with `did:key:z` (base58btc)".into())
    })?;
    if encoded.len() > 64 {
        return Err(SignatureError::InvalidDid(
            "too long for an Ed25519 key".into(),
        ));
    }
    let bytes = bs58::decode(encoded)
        .into_vec()
        .map_err(|e| SignatureError::InvalidDid(e.to_string()))?;
    let key = bytes.strip_prefix(&ED25519_MULTICODEC).ok_or_else(|| {
        SignatureError::InvalidDid("multicodec is not ed25519-pub (0xed 0x01)".into())
    })?;
    let key: [u8; 32] = key
        .try_into()
        .map_err(|_| SignatureError::InvalidDid("key must be 32 bytes".into()))?;
    VerifyingKey::from_bytes(&key)
        .map_err(|_| SignatureError::InvalidDid("not a valid Ed25519 point".into()))
}

/// A signing key from its 32-byte seed.
pub fn signing_key_from_seed(seed: &[u8; 32]) -> SigningKey {
    SigningKey::from_bytes(seed)
}

/// A fresh Ed25519 signing key from the operating system's RNG.
pub fn generate_signing_key() -> SigningKey {
    SigningKey::generate(&mut rand_core::OsRng)
}

/// The bytes that are signed (22.2 step 3): the envelope without `security.signature`, canonical.
pub fn signing_bytes(envelope: &Value) -> Result<Vec<u8>, SignatureError> {
    let mut copy = envelope.clone();
    let obj = copy.as_object_mut().ok_or(SignatureError::NotAnObject)?;
    if let Some(Value::Object(sec)) = obj.get_mut("security") {
        sec.remove("signature");
    }
    Ok(to_canonical_vec(&copy))
}

/// Signs envelope JSON in place: sets `security.did`, then `security.signature` (22.2 steps 1-5).
/// Other members of an existing `security` object are kept and signed.
pub fn sign_value(envelope: &mut Value, key: &SigningKey) -> Result<(), SignatureError> {
    let obj = envelope
        .as_object_mut()
        .ok_or(SignatureError::NotAnObject)?;
    let security = obj
        .entry("security")
        .or_insert_with(|| Value::Object(Map::new()));
    if security.is_null() {
        *security = Value::Object(Map::new());
    }
    let sec = security
        .as_object_mut()
        .ok_or(SignatureError::MissingSecurity)?;
    sec.insert("did".into(), Value::String(did_key(&key.verifying_key())));
    sec.remove("signature");
    let bytes = to_canonical_vec(envelope);
    let signature = key.sign(&bytes);
    let sig = STANDARD.encode(signature.to_bytes());
    if let Some(Value::Object(sec)) = envelope.get_mut("security") {
        sec.insert("signature".into(), Value::String(sig));
    }
    Ok(())
}

/// Signs a typed envelope, returning the signed wire JSON.
pub fn sign_envelope(envelope: &Envelope, key: &SigningKey) -> Result<Value, SignatureError> {
    let mut v = envelope.to_value();
    sign_value(&mut v, key)?;
    Ok(v)
}

/// A verified signer: key possession only; binding the DID to a principal is policy (22.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The signer's `did:key`.
    pub did: String,
    /// The signer's public key.
    pub key: VerifyingKey,
}

/// Verifies a signed envelope as received (strict Ed25519 verification).
pub fn verify_value(envelope: &Value) -> Result<Signer, SignatureError> {
    let obj = envelope.as_object().ok_or(SignatureError::NotAnObject)?;
    let sec = obj
        .get("security")
        .and_then(Value::as_object)
        .ok_or(SignatureError::MissingSecurity)?;
    let did = sec
        .get("did")
        .and_then(Value::as_str)
        .ok_or(SignatureError::MissingDid)?;
    let sig = sec
        .get("signature")
        .and_then(Value::as_str)
        .ok_or(SignatureError::MissingSignature)?;
    let key = verifying_key_from_did(did)?;
    if sig.len() > 128 {
        return Err(SignatureError::BadEncoding);
    }
    let raw = STANDARD
        .decode(sig)
        .map_err(|_| SignatureError::BadEncoding)?;
    let raw: [u8; 64] = raw.try_into().map_err(|_| SignatureError::BadEncoding)?;
    let signature = Signature::from_bytes(&raw);
    let bytes = signing_bytes(envelope)?;
    key.verify_strict(&bytes, &signature)
        .map_err(|_| SignatureError::BadSignature)?;
    Ok(Signer {
        did: did.to_owned(),
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCategory;
    use serde_json::json;

    fn envelope() -> Value {
        json!({
            "aip_version": "1.0",
            "message_type": "aip.core.v1.action",
            "message_id": "msg_1",
            "sent_at": "2026-07-14T08:30:00Z",
            "correlation_id": null,
            "body": {"action": {"id": "act_1", "capability_id": "cap:x", "input": {"signature": "app-data"}}}
        })
    }

    #[test]
    fn did_key_round_trips_and_has_the_z6mk_prefix_of_ed25519() {
        let key = generate_signing_key();
        let did = did_key(&key.verifying_key());
        assert!(did.starts_with("did:key:z6Mk"), "{did}");
        assert_eq!(verifying_key_from_did(&did).unwrap(), key.verifying_key());
    }

    #[test]
    fn a_known_did_key_decodes_to_its_rfc8032_public_key() {
        // RFC 8032 test 1 public key and its did:key (multicodec 0xed01, base58btc).
        let pk = hex::decode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
            .unwrap();
        let key = VerifyingKey::from_bytes(&pk.try_into().unwrap()).unwrap();
        let did = did_key(&key);
        assert_eq!(verifying_key_from_did(&did).unwrap(), key);
        assert!(
            verifying_key_from_did("did:key:z6LSbysY2xFMRpGMhb7tFTLMpeuPRaqaWM1yECx2AtzE3KCc")
                .is_err()
        );
        assert!(verifying_key_from_did("did:web:example.com").is_err());
    }

    #[test]
    fn a_signed_envelope_verifies_and_any_change_breaks_it() {
        let key = generate_signing_key();
        let mut v = envelope();
        sign_value(&mut v, &key).unwrap();
        let signer = verify_value(&v).unwrap();
        assert_eq!(signer.did, did_key(&key.verifying_key()));

        // An application member named `signature` is signed too (22.2).
        let mut t = v.clone();
        t["body"]["action"]["input"]["signature"] = json!("changed");
        assert_eq!(verify_value(&t), Err(SignatureError::BadSignature));
        // Dropping an explicit null changes the signed bytes.
        let mut t = v.clone();
        t.as_object_mut().unwrap().remove("correlation_id");
        assert_eq!(verify_value(&t), Err(SignatureError::BadSignature));
        // Member order does not matter.
        let reordered: Value = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
        assert!(verify_value(&reordered).is_ok());
    }

    #[test]
    fn the_signature_is_standard_base64_of_64_bytes() {
        let key = generate_signing_key();
        let mut v = envelope();
        sign_value(&mut v, &key).unwrap();
        let sig = v["security"]["signature"].as_str().unwrap();
        assert_eq!(STANDARD.decode(sig).unwrap().len(), 64);
        assert!(sig.ends_with("=="));
    }

    #[test]
    fn missing_or_malformed_security_members_get_their_own_errors() {
        let v = envelope();
        assert_eq!(verify_value(&v), Err(SignatureError::MissingSecurity));
        let mut v = envelope();
        v["security"] = json!({"signature": "AA=="});
        assert_eq!(verify_value(&v), Err(SignatureError::MissingDid));
        let key = generate_signing_key();
        let mut v = envelope();
        sign_value(&mut v, &key).unwrap();
        v["security"]["signature"] = json!("not base64!");
        assert_eq!(verify_value(&v), Err(SignatureError::BadEncoding));
        assert_eq!(
            SignatureError::BadSignature.to_protocol_error().category,
            ErrorCategory::Auth
        );
    }
}
