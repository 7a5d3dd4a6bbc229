//! Identity-exact compatibility (spec 10): a range expression, a missing entry or a duplicate denies.

use std::collections::HashSet;

use crate::deployment::Deployment;
use crate::error::{Code, Error, Result};
use crate::json::Value;

/// One exact build identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `package`, `build`, `adapter` or `extension`.
    pub kind: String,
    /// The identity's name.
    pub name: String,
    /// An exact version.
    pub version: String,
    /// A tagged digest.
    pub digest: String,
}

impl Identity {
    /// Read an identity object with four string members.
    pub fn from_value(v: &Value) -> Option<Identity> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(Identity {
            kind: s("kind")?,
            name: s("name")?,
            version: s("version")?,
            digest: s("digest")?,
        })
    }
}

/// Whether a version string is exact: a semver-like token with no range operator, wildcard or
/// whitespace.
pub fn version_is_exact(v: &str) -> bool {
    !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
        && !v
            .split(['.', '-', '+'])
            .any(|seg| seg.is_empty() || seg.eq_ignore_ascii_case("x"))
}

/// Verify observed identities against the manifest, identity-exact.
pub fn verify(deployment: &Deployment, observed: &[Identity]) -> Result<()> {
    let declared = deployment.build_identities();
    let mut seen = HashSet::new();
    for o in observed {
        if !version_is_exact(&o.version) {
            return Err(Error::with_detail(
                Code::CompatibilityIdentityInexact,
                "build_identities",
                o.name.clone(),
            ));
        }
        if !seen.insert(o.name.as_str()) {
            return Err(Error::with_detail(
                Code::CompatibilityDuplicateEntry,
                "build_identities",
                o.name.clone(),
            ));
        }
        let entry = declared.iter().find(|d| d.name == o.name).ok_or_else(|| {
            Error::with_detail(
                Code::CompatibilityEntryMissing,
                "build_identities",
                o.name.clone(),
            )
        })?;
        if entry != o {
            return Err(Error::with_detail(
                Code::CompatibilityIdentityInexact,
                "build_identities",
                o.name.clone(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_wildcards_are_inexact() {
        assert!(version_is_exact("0.1.0"));
        assert!(version_is_exact("0.1.0-dev.abc"));
        for v in ["*", "~> 1", "^1.0", ">=1", "1.x", "1..2", ""] {
            assert!(!version_is_exact(v), "{v}");
        }
    }
}
