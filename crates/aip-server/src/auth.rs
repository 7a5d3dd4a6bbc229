//! Transport authentication: bearer tokens resolved to configured principals (spec 22.4-22.6).

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use aip_runtime::Caller;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::config::Config;

/// File name of the admin token inside the data directory.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
/// Principal id of the built-in admin.
pub const ADMIN_PRINCIPAL: &str = "admin";

/// Maps SHA-256(token) to the principal it authenticates. Tokens themselves are never kept.
#[derive(Debug, Clone, Default)]
pub struct AuthIndex {
    by_hash: HashMap<[u8; 32], Caller>,
    /// Peer principals by their node did:key: reachable only by a verified signature.
    peers: HashMap<String, Caller>,
}

/// Why authentication state could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthSetupError {
    /// A token file could not be read or created.
    #[error("token file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A token file is readable by group or others.
    #[error("token file {0} must not be readable by group or others (chmod 600)")]
    Permissions(PathBuf),
    /// A configured hash is not 64 lowercase hex digits, or a token file is empty.
    #[error("principal {0}: token must be a non-empty file or a 64-digit hex SHA-256")]
    BadToken(String),
    /// Two principals share a token.
    #[error("principals {0} and {1} share a bearer token")]
    Duplicate(String, String),
}

impl AuthIndex {
    /// Build the index from configuration, creating the admin token on first start.
    pub fn from_config(config: &Config) -> Result<Self, AuthSetupError> {
        let mut index = Self::default();
        if config.admin.enabled {
            let path = ensure_admin_token(&config.data_dir)?;
            let caller = Caller {
                id: ADMIN_PRINCIPAL.into(),
                kind: aip_core::PrincipalKind::Human,
                tenant: config.admin.tenant.clone(),
                scopes: vec![aip_runtime::scope::SCOPE_ALL.into()],
                issuer: "bearer".into(),
                external_account: None,
                roles: Vec::new(),
                groups: Vec::new(),
                approval_policies: Vec::new(),
            };
            index.insert_with(
                hash_of(read_token_file(&path, ADMIN_PRINCIPAL)?.as_bytes()),
                caller,
                &config.approval_policies,
            )?;
        }
        if demo_approvers_enabled(config) {
            for id in DEMO_APPROVERS {
                let path = ensure_token_file(&config.data_dir, &format!("{id}.token"))?;
                let caller = Caller {
                    id: (*id).into(),
                    kind: aip_core::PrincipalKind::Human,
                    tenant: config.admin.tenant.clone(),
                    scopes: vec![
                        "invoke:cap:demo:*".into(),
                        aip_runtime::scope::SCOPE_ESCALATION_RESOLVE.into(),
                    ],
                    issuer: "bearer".into(),
                    external_account: None,
                    roles: vec![DEMO_APPROVER_ROLE.into()],
                    groups: Vec::new(),
                    approval_policies: Vec::new(),
                };
                index.insert_with(
                    hash_of(read_token_file(&path, id)?.as_bytes()),
                    caller,
                    &config.approval_policies,
                )?;
            }
        }
        for p in &config.principals {
            let hash = match (&p.token_sha256, &p.token_file) {
                (Some(hex_hash), None) => {
                    parse_hash(hex_hash).ok_or_else(|| AuthSetupError::BadToken(p.id.clone()))?
                }
                (None, Some(file)) => hash_of(read_token_file(file, &p.id)?.as_bytes()),
                _ => return Err(AuthSetupError::BadToken(p.id.clone())),
            };
            let caller = Caller {
                id: p.id.clone(),
                kind: p.kind,
                tenant: p.tenant.clone(),
                scopes: p.scopes.clone(),
                issuer: "bearer".into(),
                external_account: p.external_account.clone(),
                roles: p.roles.clone(),
                groups: p.groups.clone(),
                approval_policies: Vec::new(),
            };
            index.insert_with(hash, caller, &config.approval_policies)?;
        }
        for peer in &config.peers {
            index.peers.insert(peer.did.clone(), peer.caller());
        }
        Ok(index)
    }

    /// Resolve an `Authorization` header value; `None` for anything but a known bearer token.
    pub fn authenticate(&self, authorization: &str) -> Option<&Caller> {
        let token = authorization
            .strip_prefix("Bearer ")
            .or_else(|| authorization.strip_prefix("bearer "))?;
        self.by_hash.get(&hash_of(token.trim().as_bytes()))
    }

    /// The configured principal with this id, for binding a verified signer to it (spec 22.2).
    pub fn principal(&self, id: &str) -> Option<&Caller> {
        self.by_hash
            .values()
            .chain(self.peers.values())
            .find(|c| c.id == id)
    }

    /// Whether no peer is configured (then every request needs a bearer token).
    pub fn has_no_peers(&self) -> bool {
        self.peers.is_empty()
    }

    /// The peer whose node key is `did` (spec 14.2): its requests carry no bearer token, only its
    /// signature, which the runtime verifies.
    pub fn peer(&self, did: &str) -> Option<&Caller> {
        self.peers.get(did)
    }

    /// Every principal this index authenticates (by bearer token or as a peer), by id.
    pub fn callers(&self) -> HashMap<String, Caller> {
        self.by_hash
            .values()
            .chain(self.peers.values())
            .map(|c| (c.id.clone(), c.clone()))
            .collect()
    }

    /// The principal directory as the approval resolver sees it (spec 12.1): each configured
    /// principal's resolver keys, by id.
    pub fn directory(&self) -> HashMap<String, Vec<String>> {
        self.by_hash
            .values()
            .map(|c| (c.id.clone(), c.resolver_keys()))
            .collect()
    }

    /// Inserts `caller` counted in each of `policies` that includes it.
    fn insert_with(
        &mut self,
        hash: [u8; 32],
        mut caller: Caller,
        policies: &[crate::config::TenantApprovalPolicy],
    ) -> Result<(), AuthSetupError> {
        caller.approval_policies = policies
            .iter()
            .filter(|p| p.includes(&caller))
            .map(|p| p.id.clone())
            .collect();
        if let Some(existing) = self.by_hash.get(&hash) {
            return Err(AuthSetupError::Duplicate(existing.id.clone(), caller.id));
        }
        self.by_hash.insert(hash, caller);
        Ok(())
    }
}

/// Principals the no-config start creates so the approval flow of `cap:demo:transfer` can be
/// tried: each holds role [`DEMO_APPROVER_ROLE`] and a token in `<data_dir>/<id>.token`.
pub const DEMO_APPROVERS: &[&str] = &["approver-1", "approver-2"];
/// The role `cap:demo:transfer` asks its approvers to hold.
pub const DEMO_APPROVER_ROLE: &str = "approver";

/// Whether this configuration creates the demo approvers: the demo capabilities and the built-in
/// admin are on, and `admin.demo_approvers` was not turned off.
pub fn demo_approvers_enabled(config: &Config) -> bool {
    config.demo_capabilities && config.admin.enabled && config.admin.demo_approvers
}

/// Path of the admin token, creating it (random, mode 0600) when absent. The token is never printed.
pub fn ensure_admin_token(data_dir: &Path) -> Result<PathBuf, AuthSetupError> {
    ensure_token_file(data_dir, ADMIN_TOKEN_FILE)
}

/// Path of the token file `name` in `data_dir`, creating it (random, mode 0600) when absent.
pub fn ensure_token_file(data_dir: &Path, name: &str) -> Result<PathBuf, AuthSetupError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| AuthSetupError::Io { path, source }
    };
    std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
    let path = data_dir.join(name);
    if path.exists() {
        return Ok(path);
    }
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(|e| AuthSetupError::Io {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    let token = format!(
        "aip_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    );
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(io(&path))?;
    file.write_all(token.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io(&path))?;
    Ok(path)
}

fn read_token_file(path: &Path, principal: &str) -> Result<String, AuthSetupError> {
    let meta = std::fs::metadata(path).map_err(|source| AuthSetupError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(AuthSetupError::Permissions(path.to_path_buf()));
    }
    let text = std::fs::read_to_string(path).map_err(|source| AuthSetupError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let token = text.trim().to_owned();
    if token.is_empty() {
        return Err(AuthSetupError::BadToken(principal.to_owned()));
    }
    Ok(token)
}

fn hash_of(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

fn parse_hash(hex_hash: &str) -> Option<[u8; 32]> {
    if hex_hash.len() != 64 || hex_hash.chars().any(|c| c.is_ascii_uppercase()) {
        return None;
    }
    hex::decode(hex_hash).ok()?.try_into().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::PrincipalConfig;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("aip-auth-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_admin_token_is_created_once_with_mode_0600_and_authenticates() {
        let dir = temp_dir("admin");
        let config = Config {
            data_dir: dir.clone(),
            ..Config::default()
        };
        let index = AuthIndex::from_config(&config).unwrap();
        let path = dir.join(ADMIN_TOKEN_FILE);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let token = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            index.authenticate(&format!("Bearer {token}")).unwrap().id,
            ADMIN_PRINCIPAL
        );
        AuthIndex::from_config(&config).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), token);
    }

    #[test]
    fn a_wrong_or_missing_bearer_token_authenticates_nobody() {
        let mut config = Config {
            data_dir: temp_dir("wrong"),
            ..Config::default()
        };
        config.principals.push(PrincipalConfig {
            id: "svc".into(),
            kind: aip_core::PrincipalKind::Service,
            tenant: "t".into(),
            scopes: vec![],
            token_sha256: Some(hex::encode(hash_of(b"secret"))),
            token_file: None,
            external_account: None,
            roles: Vec::new(),
            groups: Vec::new(),
        });
        let index = AuthIndex::from_config(&config).unwrap();
        assert_eq!(index.authenticate("Bearer secret").unwrap().id, "svc");
        assert!(index.authenticate("Bearer secreT").is_none());
        assert!(index.authenticate("Basic secret").is_none());
    }

    #[test]
    fn a_group_readable_token_file_is_refused() {
        let dir = temp_dir("perm");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tok");
        std::fs::write(&file, "t0ken").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            read_token_file(&file, "p"),
            Err(AuthSetupError::Permissions(_))
        ));
    }

    #[test]
    fn tenant_approval_policies_count_only_their_own_tenants_members_by_id_role_or_group() {
        let mut config = Config {
            data_dir: temp_dir("policies"),
            ..Config::default()
        };
        for (id, tenant, roles, groups) in [
            ("ann", "acme", vec![], vec![]),
            ("bo", "acme", vec!["cfo"], vec![]),
            ("cy", "acme", vec![], vec!["treasury"]),
            ("dee", "other", vec!["cfo"], vec![]),
            ("eve", "acme", vec!["clerk"], vec![]),
        ] {
            config.principals.push(PrincipalConfig {
                id: id.into(),
                kind: aip_core::PrincipalKind::Human,
                tenant: tenant.into(),
                scopes: vec![],
                token_sha256: Some(hex::encode(hash_of(id.as_bytes()))),
                token_file: None,
                external_account: None,
                roles: roles.into_iter().map(str::to_owned).collect(),
                groups: groups.into_iter().map(str::to_owned).collect(),
            });
        }
        config
            .approval_policies
            .push(crate::config::TenantApprovalPolicy {
                id: "finance".into(),
                tenant: "acme".into(),
                principals: vec!["ann".into()],
                roles: vec!["cfo".into()],
                groups: vec!["treasury".into()],
            });
        config.check().unwrap();
        let index = AuthIndex::from_config(&config).unwrap();
        let member = |id: &str| {
            index
                .principal(id)
                .unwrap()
                .resolver_keys()
                .contains(&"tenant_policy:finance".to_owned())
        };
        assert!(member("ann") && member("bo") && member("cy"));
        assert!(
            !member("dee"),
            "another tenant's cfo is not in acme's policy"
        );
        assert!(!member("eve"));
        assert!(index.directory()["bo"].contains(&"tenant_policy:finance".to_owned()));
        // Empty or duplicated policies stop startup.
        let mut twice = config.clone();
        twice
            .approval_policies
            .push(twice.approval_policies[0].clone());
        assert!(twice.check().is_err());
        let mut empty = config;
        empty.approval_policies[0].principals.clear();
        empty.approval_policies[0].roles.clear();
        empty.approval_policies[0].groups.clear();
        assert!(empty.check().is_err());
    }
}
