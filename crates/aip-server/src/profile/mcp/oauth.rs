//! OAuth 2.1 resource-server mode of the MCP endpoint (spec 21.1): JWT access tokens validated
//! offline against a configured issuer, audience (the MCP resource URL) and JWKS file, bound to a
//! trusted principal. `iss`, `aud`, `exp`, `nbf` and `sub` are checked and required scopes enforced;
//! the tenant and the principal come from configuration, never from the token's other claims or a
//! request. RFC 9728 metadata names the resource and its authorization server.

use std::collections::HashMap;
use std::path::PathBuf;

use aip_core::PrincipalKind;
use aip_runtime::Caller;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Value, json};

pub use crate::config::mcp::{OAuthConfig, SubjectConfig};

/// Longest access token accepted (bytes); longer ones are refused before any parsing.
const MAX_TOKEN_BYTES: usize = 8192;
/// Clock leeway for `exp` and `nbf`, seconds.
const LEEWAY_S: u64 = 30;

/// Why OAuth could not be set up; `aip serve` does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthSetupError {
    /// The JWKS file is unreadable or malformed.
    #[error("mcp.oauth.jwks_file {path}: {reason}")]
    Jwks {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A subject names a principal that is not configured.
    #[error("mcp.oauth.subjects: principal {0} is not configured")]
    UnknownPrincipal(String),
}

/// Why a token was refused: 401 (`invalid_token`) or 403 (`insufficient_scope`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a valid token for this resource.
    Invalid(String),
    /// Valid, but missing a required scope.
    InsufficientScope(String),
}

/// The validator built from configuration.
pub struct OAuth {
    config: OAuthConfig,
    keys: Vec<(Option<String>, Algorithm, DecodingKey)>,
    mapped: HashMap<String, Caller>,
}

#[derive(Debug, Deserialize)]
struct Claims {
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

impl OAuth {
    /// Loads the key set and resolves the subject mapping against the configured principals.
    pub fn new(
        config: OAuthConfig,
        principal: impl Fn(&str) -> Option<Caller>,
    ) -> Result<Self, OAuthSetupError> {
        let jwks_error = |reason: String| OAuthSetupError::Jwks {
            path: config.jwks_file.clone(),
            reason,
        };
        // The runtime's own issuer marks work the runtime admits itself; no token may claim it.
        if config.issuer == aip_runtime::caller::RUNTIME_ISSUER {
            return Err(jwks_error(format!(
                "the issuer {:?} is reserved for the runtime",
                config.issuer
            )));
        }
        let text =
            std::fs::read_to_string(&config.jwks_file).map_err(|e| jwks_error(e.to_string()))?;
        let set: JwkSet = serde_json::from_str(&text).map_err(|e| jwks_error(e.to_string()))?;
        let mut keys = Vec::new();
        for jwk in &set.keys {
            let key = DecodingKey::from_jwk(jwk).map_err(|e| jwks_error(e.to_string()))?;
            use jsonwebtoken::jwk::{AlgorithmParameters as P, KeyAlgorithm as K};
            // Asymmetric keys only: a shared secret would let anyone holding the key set mint tokens.
            let algorithm = match (&jwk.common.key_algorithm, &jwk.algorithm) {
                (Some(K::RS256) | None, P::RSA(_)) => Some(Algorithm::RS256),
                (Some(K::ES256) | None, P::EllipticCurve(_)) => Some(Algorithm::ES256),
                (Some(K::EdDSA) | None, P::OctetKeyPair(_)) => Some(Algorithm::EdDSA),
                _ => None,
            }
            .ok_or_else(|| jwks_error("a key is not an RS256, ES256 or EdDSA public key".into()))?;
            keys.push((jwk.common.key_id.clone(), algorithm, key));
        }
        if keys.is_empty() {
            return Err(jwks_error("the key set is empty".into()));
        }
        let mut mapped = HashMap::new();
        for subject in &config.subjects {
            let caller = principal(&subject.principal)
                .ok_or_else(|| OAuthSetupError::UnknownPrincipal(subject.principal.clone()))?;
            mapped.insert(subject.sub.clone(), caller);
        }
        Ok(Self {
            config,
            keys,
            mapped,
        })
    }

    /// The caller a bearer access token authenticates.
    pub fn authenticate(&self, token: &str) -> Result<Caller, Refusal> {
        let invalid = |m: &str| Refusal::Invalid(m.to_owned());
        if token.len() > MAX_TOKEN_BYTES {
            return Err(invalid("the token is too long"));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid("not a JWT"))?;
        let candidates = self.keys.iter().filter(|(kid, alg, _)| {
            *alg == header.alg && (header.kid.is_none() || kid.as_ref() == header.kid.as_ref())
        });
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_S;
        let mut last = invalid("no key of the issuer verifies this token");
        for (_, _, key) in candidates {
            match jsonwebtoken::decode::<Claims>(token, key, &validation) {
                Ok(data) => return self.caller(data.claims),
                Err(e) => {
                    use jsonwebtoken::errors::ErrorKind as K;
                    last = invalid(match e.kind() {
                        K::ExpiredSignature => "the token expired",
                        K::ImmatureSignature => "the token is not valid yet",
                        K::InvalidIssuer => "the token's issuer is not trusted here",
                        K::InvalidAudience => "the token is for another resource",
                        K::MissingRequiredClaim(_) => "the token lacks a required claim",
                        K::InvalidSignature => "no key of the issuer verifies this token",
                        _ => "the token is invalid",
                    });
                }
            }
        }
        Err(last)
    }

    fn caller(&self, claims: Claims) -> Result<Caller, Refusal> {
        let sub = claims
            .sub
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Refusal::Invalid("the token has no subject".into()))?;
        let scopes: Vec<String> = claims
            .scope
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if let Some(missing) = self
            .config
            .required_scopes
            .iter()
            .find(|r| !scopes.contains(r))
        {
            return Err(Refusal::InsufficientScope(missing.clone()));
        }
        if let Some(caller) = self.mapped.get(&sub) {
            return Ok(caller.clone());
        }
        Ok(Caller {
            id: format!("oauth:{}#{sub}", self.config.issuer),
            kind: PrincipalKind::Agent,
            tenant: self.config.tenant.clone(),
            scopes,
            issuer: self.config.issuer.clone(),
            external_account: None,
            roles: Vec::new(),
            groups: Vec::new(),
            approval_policies: Vec::new(),
        })
    }

    /// RFC 9728 protected-resource metadata.
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.config.audience,
            "authorization_servers": [self.config.issuer],
            "scopes_supported": self.config.required_scopes,
            "bearer_methods_supported": ["header"],
        })
    }

    /// The metadata URL a 401 names (`resource_metadata`): the resource's origin, then the
    /// well-known path, then the resource's path (RFC 9728 section 3.1).
    pub fn metadata_url(&self) -> String {
        let audience = self.config.audience.as_str();
        let after_scheme = audience.find("://").map_or(0, |i| i + 3);
        let (origin, path) = match audience[after_scheme..].find('/') {
            Some(i) => audience.split_at(after_scheme + i),
            None => (audience, ""),
        };
        format!("{origin}/.well-known/oauth-protected-resource{path}")
    }
}
