//! Detached JWS verification (spec 6, notes 8.1): RFC 7515 + RFC 7797 (`b64:false`), EdDSA/Ed25519
//! only, `verify_strict`, small-order keys rejected, `kid` selects only among host-supplied keys.
//! The package verifies; it never signs and never accepts a private key.

use ed25519_dalek::{Signature, VerifyingKey};

use crate::base64url;
use crate::digest::Digest;
use crate::error::{Code, Error, Result};
use crate::jcs;
use crate::json::{Object, Value};

/// The purposes a signature may be pinned to (spec 6).
pub const PURPOSES: &[&str] = &["blueprint", "deployment", "federation-envelope"];

/// A host-supplied trusted Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostKey {
    key_id: String,
    key: [u8; 32],
}

impl HostKey {
    /// A key from its id and unpadded base64url bytes; anything but 32 bytes denies
    /// `signature_key_unsupported`.
    pub fn from_base64url(key_id: impl Into<String>, key: &str) -> Result<HostKey> {
        let bytes = base64url::decode(key)?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| Error::new(Code::SignatureKeyUnsupported, "key"))?;
        Ok(HostKey {
            key_id: key_id.into(),
            key,
        })
    }

    /// The key id.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }
}

/// A parsed detached JWS entry: `{protected, signature, signed_attributes}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    protected: Object,
    signed_attributes: Object,
    signature: [u8; 64],
    kid: String,
    purpose: String,
    content_digest: Digest,
    created_at: String,
}

impl Entry {
    /// Parse an entry; structural failures deny `signature_malformed`, a foreign algorithm
    /// `signature_algorithm_unsupported`.
    pub fn parse(value: &Value) -> Result<Entry> {
        let malformed =
            |what: &str| Error::new(Code::SignatureMalformed, format!("signature.{what}"));
        let o = value.as_object().ok_or_else(|| malformed("entry"))?;
        if o.len() != 3 {
            return Err(malformed("entry"));
        }
        let protected = o
            .get("protected")
            .and_then(Value::as_object)
            .ok_or_else(|| malformed("protected"))?;
        let attrs = o
            .get("signed_attributes")
            .and_then(Value::as_object)
            .ok_or_else(|| malformed("signed_attributes"))?;
        let sig_text = o
            .get("signature")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("signature"))?;
        let str_member = |obj: &Object, name: &str, what: &str| -> Result<String> {
            obj.get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| malformed(what))
        };
        if protected.len() != 4 {
            return Err(malformed("protected"));
        }
        let alg = str_member(protected, "alg", "protected.alg")?;
        let kid = str_member(protected, "kid", "protected.kid")?;
        let crit_ok = protected
            .get("crit")
            .and_then(Value::as_array)
            .is_some_and(|c| c.len() == 1 && c[0].as_str() == Some("b64"));
        if !crit_ok || protected.get("b64") != Some(&Value::Bool(false)) {
            return Err(malformed("protected"));
        }
        if attrs.len() != 5 {
            return Err(malformed("signed_attributes"));
        }
        let algorithm = str_member(attrs, "algorithm", "signed_attributes.algorithm")?;
        let digest_text = str_member(attrs, "content_digest", "signed_attributes.content_digest")?;
        let created_at = str_member(attrs, "created_at", "signed_attributes.created_at")?;
        let key_id = str_member(attrs, "key_id", "signed_attributes.key_id")?;
        let purpose = str_member(attrs, "purpose", "signed_attributes.purpose")?;
        let sig_bytes = base64url::decode(sig_text).map_err(|_| malformed("signature"))?;
        let signature: [u8; 64] = sig_bytes.try_into().map_err(|_| malformed("signature"))?;
        let content_digest =
            Digest::parse_tagged(&digest_text).map_err(|_| malformed("content_digest"))?;
        if key_id != kid || !PURPOSES.contains(&purpose.as_str()) {
            return Err(malformed("signed_attributes"));
        }
        if crate::shape::parse_timestamp_ms(&created_at).is_none() {
            return Err(malformed("signed_attributes.created_at"));
        }
        if alg != "EdDSA" || algorithm != "Ed25519" {
            return Err(Error::new(
                Code::SignatureAlgorithmUnsupported,
                "signature.protected.alg",
            ));
        }
        Ok(Entry {
            protected: protected.clone(),
            signed_attributes: attrs.clone(),
            signature,
            kid,
            purpose,
            content_digest,
            created_at,
        })
    }

    /// The RFC 7797 signing input: `BASE64URL(JCS(protected)) "." JCS(signed_attributes)` (notes 8.1).
    pub fn signing_input(&self) -> Vec<u8> {
        let mut out =
            base64url::encode(&jcs::encode(&Value::Object(self.protected.clone()))).into_bytes();
        out.push(b'.');
        out.extend(jcs::encode(&Value::Object(self.signed_attributes.clone())));
        out
    }

    /// Verify with the host key named by `kid`: no such key (or a small-order key) denies
    /// `signature_key_unsupported`, a failed check `signature_not_verified`.
    pub fn verify(&self, keys: &[HostKey]) -> Result<()> {
        let key = keys
            .iter()
            .find(|k| k.key_id == self.kid)
            .ok_or_else(|| Error::new(Code::SignatureKeyUnsupported, "signature.protected.kid"))?;
        verify_ed25519(&key.key, &self.signing_input(), &self.signature)
    }

    /// The key id.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The signed purpose.
    pub fn purpose(&self) -> &str {
        &self.purpose
    }

    /// The signed content digest.
    pub fn content_digest(&self) -> Digest {
        self.content_digest
    }

    /// The signed creation time (RFC 3339).
    pub fn created_at(&self) -> &str {
        &self.created_at
    }
}

/// Verify one Ed25519 signature with `verify_strict` (spec 6): an undecodable or small-order key
/// denies `signature_key_unsupported`, a failed check `signature_not_verified`.
pub fn verify_ed25519(key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> Result<()> {
    let vk = VerifyingKey::from_bytes(key)
        .map_err(|_| Error::new(Code::SignatureKeyUnsupported, "key"))?;
    if vk.is_weak() {
        return Err(Error::new(Code::SignatureKeyUnsupported, "key"));
    }
    vk.verify_strict(message, &Signature::from_bytes(signature))
        .map_err(|_| Error::new(Code::SignatureNotVerified, "signature"))
}

/// Parse an attestation envelope (spec 6): the signature envelope shape plus a registered `kind`
/// and a `statement_digest`. The kind registry is empty in this release, so every attestation is
/// `attestation_malformed`.
pub fn check_attestation(value: &Value) -> Result<()> {
    let malformed = || Error::new(Code::AttestationMalformed, "attestations");
    let o = value.as_object().ok_or_else(malformed)?;
    let kind = o
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(malformed)?;
    o.get("statement_digest")
        .and_then(Value::as_str)
        .and_then(|d| Digest::parse_tagged(d).ok())
        .ok_or_else(malformed)?;
    const ATTESTATION_KINDS: &[&str] = &[];
    if !ATTESTATION_KINDS.contains(&kind) {
        return Err(malformed());
    }
    Ok(())
}
