//! Tagged digests (spec 5): `SHA-256(separator || 0x00 || bytes)`, written `sha-256:<base64url>`.

use sha2::{Digest as _, Sha256};

use crate::base64url;
use crate::error::{Code, Error, Result};

/// The eight domain separators (spec 5 and notes 2).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Domain {
    /// Blueprint content digest.
    BlueprintContent,
    /// Deployment content digest.
    DeploymentContent,
    /// Federation envelope, receipt binding and terminal commitment.
    FederationEnvelope,
    /// Signature input.
    Signature,
    /// A registry schema pin (notes 2).
    ExtensionSchema,
    /// The registry digest (notes 2).
    ExtensionRegistry,
    /// The conformance report.
    ConformanceReport,
    /// The corpus index.
    CorpusIndex,
}

impl Domain {
    /// All eight domains.
    pub const ALL: [Domain; 8] = [
        Domain::BlueprintContent,
        Domain::DeploymentContent,
        Domain::FederationEnvelope,
        Domain::Signature,
        Domain::ExtensionSchema,
        Domain::ExtensionRegistry,
        Domain::ConformanceReport,
        Domain::CorpusIndex,
    ];

    /// The separator after `agent-blueprint-protocol/`.
    pub fn separator(self) -> &'static str {
        match self {
            Domain::BlueprintContent => "blueprint-content",
            Domain::DeploymentContent => "deployment-content",
            Domain::FederationEnvelope => "federation-envelope",
            Domain::Signature => "signature",
            Domain::ExtensionSchema => "extension-schema",
            Domain::ExtensionRegistry => "extension-registry",
            Domain::ConformanceReport => "conformance-report",
            Domain::CorpusIndex => "corpus-index",
        }
    }

    /// Look a domain up by its corpus name (`blueprint_content`) or its separator.
    pub fn from_name(name: &str) -> Option<Domain> {
        Domain::ALL
            .into_iter()
            .find(|d| d.separator() == name || d.separator().replace('-', "_") == name)
    }
}

/// A SHA-256 digest value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The domain-separated digest of `bytes`.
    pub fn compute(domain: Domain, bytes: &[u8]) -> Digest {
        let mut h = Sha256::new();
        h.update(b"agent-blueprint-protocol/");
        h.update(domain.separator().as_bytes());
        h.update([0u8]);
        h.update(bytes);
        Digest(h.finalize().into())
    }

    /// Plain SHA-256 without a separator (the corpus per-file hashes, notes 2).
    pub fn plain(bytes: &[u8]) -> Digest {
        Digest(Sha256::digest(bytes).into())
    }

    /// Parse the tagged wire form; an unknown algorithm denies `digest_algorithm_unsupported`,
    /// anything else malformed `digest_encoding_invalid`.
    pub fn parse_tagged(text: &str) -> Result<Digest> {
        let invalid = || Error::new(Code::DigestEncodingInvalid, "digest");
        let (alg, body) = text.split_once(':').ok_or_else(invalid)?;
        if alg != "sha-256" {
            let well_formed = !alg.is_empty()
                && alg
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            return Err(if well_formed {
                Error::new(Code::DigestAlgorithmUnsupported, "digest")
            } else {
                invalid()
            });
        }
        if body.len() != 43 {
            return Err(invalid());
        }
        let bytes = base64url::decode(body).map_err(|_| invalid())?;
        let arr: [u8; 32] = bytes.try_into().map_err(|_| invalid())?;
        Ok(Digest(arr))
    }

    /// The tagged wire form.
    pub fn to_tagged(&self) -> String {
        format!("sha-256:{}", base64url::encode(&self.0))
    }

    /// The raw digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// Verify that `declared` is the `domain` digest of `bytes` (`digest_mismatch` otherwise).
pub fn verify_content(domain: Domain, bytes: &[u8], declared: &str) -> Result<Digest> {
    let declared = Digest::parse_tagged(declared)?;
    let actual = Digest::compute(domain, bytes);
    if declared != actual {
        return Err(Error::new(Code::DigestMismatch, "content_digest"));
    }
    Ok(actual)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_tagged_vector_recomputes() {
        let d = Digest::compute(Domain::BlueprintContent, b"corpus");
        assert_eq!(
            d.to_tagged(),
            "sha-256:CG8BHw0q9hF5FhRk8qCw4jZoiQW1ww92s4Soo9enBYQ"
        );
        assert!(verify_content(Domain::BlueprintContent, b"corpus", &d.to_tagged()).is_ok());
        let e = verify_content(Domain::BlueprintContent, b"corpur", &d.to_tagged())
            .expect_err("tamper");
        assert_eq!(e.code, Code::DigestMismatch);
    }

    #[test]
    fn domains_separate_and_malformed_tags_deny() {
        let all: std::collections::HashSet<_> = Domain::ALL
            .iter()
            .map(|d| Digest::compute(*d, b"x"))
            .collect();
        assert_eq!(all.len(), 8);
        assert_eq!(
            Digest::parse_tagged("not-a-tagged-digest")
                .expect_err("x")
                .code,
            Code::DigestEncodingInvalid
        );
        assert_eq!(
            Digest::parse_tagged("sha-512:abc").expect_err("x").code,
            Code::DigestAlgorithmUnsupported
        );
        assert_eq!(
            Digest::parse_tagged("sha-256:abc").expect_err("x").code,
            Code::DigestEncodingInvalid
        );
        assert_eq!(
            Domain::from_name("blueprint_content"),
            Some(Domain::BlueprintContent)
        );
    }
}
