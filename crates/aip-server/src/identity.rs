//! The node's identity (spec 14.2, 22.2): a persistent Ed25519 key whose `did:key` the manifest
//! publishes as the agent's `did`, so peers can pin it (a URL is never identity). The key file is
//! the one `aip keys generate` writes (`{"kty": "OKP", "crv": "Ed25519", "d", "x", "did"}`), mode
//! 0600: created in the data directory on first start, or configured with `node_key_file`.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// File name of the generated node key inside the data directory.
pub const NODE_KEY_FILE: &str = "node.key";

/// The node's signing key and its `did:key`.
pub struct NodeIdentity {
    key: ed25519_dalek::SigningKey,
    did: String,
    path: PathBuf,
}

impl std::fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("NodeIdentity")
            .field("did", &self.did)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Why the node key could not be loaded or created; the server does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The key file could not be read or created.
    #[error("node key {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The key file is readable by group or others.
    #[error("node key {0} must not be readable by group or others (chmod 600)")]
    Permissions(PathBuf),
    /// The key file is not an Ed25519 key file, or its `x` / `did` disagree with its seed.
    #[error("node key {path}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
}

impl NodeIdentity {
    /// The configured key file, or `<data_dir>/node.key`, created on first start.
    pub fn load_or_create(
        data_dir: &Path,
        configured: Option<&Path>,
    ) -> Result<Self, IdentityError> {
        match configured {
            Some(path) => Self::load(path),
            None => {
                let path = data_dir.join(NODE_KEY_FILE);
                if !path.exists() {
                    create(&path)?;
                }
                Self::load(&path)
            }
        }
    }

    /// The node's `did:key`.
    pub fn did(&self) -> &str {
        &self.did
    }

    /// The node's signing key (outbound envelopes to peers are signed with it).
    pub fn signing_key(&self) -> &ed25519_dalek::SigningKey {
        &self.key
    }

    fn load(path: &Path) -> Result<Self, IdentityError> {
        let io = |source| IdentityError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(IdentityError::Permissions(path.to_path_buf()));
        }
        // A key file is a few hundred bytes; anything larger is not one.
        if meta.len() > 4096 {
            return Err(malformed(path, "larger than a key file"));
        }
        let text = std::fs::read(path).map_err(io)?;
        let file: Value =
            serde_json::from_slice(&text).map_err(|_| malformed(path, "not a JSON key file"))?;
        if file.get("kty").and_then(Value::as_str) != Some("OKP")
            || file.get("crv").and_then(Value::as_str) != Some("Ed25519")
        {
            return Err(malformed(path, "not an Ed25519 (OKP) key"));
        }
        let seed: [u8; 32] = file
            .get("d")
            .and_then(Value::as_str)
            .and_then(|d| URL_SAFE_NO_PAD.decode(d).ok())
            .and_then(|d| d.try_into().ok())
            .ok_or_else(|| malformed(path, "`d` is not a base64url 32-byte seed"))?;
        let key = aip_core::signing::signing_key_from_seed(&seed);
        let did = aip_core::signing::did_key(&key.verifying_key());
        let x = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
        if file
            .get("x")
            .and_then(Value::as_str)
            .is_some_and(|v| v != x)
        {
            return Err(malformed(path, "`x` is not the public key of `d`"));
        }
        if file
            .get("did")
            .and_then(Value::as_str)
            .is_some_and(|v| v != did)
        {
            return Err(malformed(path, "`did` is not the did:key of `d`"));
        }
        Ok(Self {
            key,
            did,
            path: path.to_path_buf(),
        })
    }
}

fn malformed(path: &Path, reason: &'static str) -> IdentityError {
    IdentityError::Malformed {
        path: path.to_path_buf(),
        reason,
    }
}

/// Writes a fresh key file at `path`, mode 0600, never overwriting one.
fn create(path: &Path) -> Result<(), IdentityError> {
    let io = |source| IdentityError::Io {
        path: path.to_path_buf(),
        source,
    };
    let key = aip_core::signing::generate_signing_key();
    let file = json!({
        "kty": "OKP",
        "crv": "Ed25519",
        "d": URL_SAFE_NO_PAD.encode(key.to_bytes()),
        "x": URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes()),
        "did": aip_core::signing::did_key(&key.verifying_key()),
    });
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    out.write_all(format!("{file:#}\n").as_bytes())
        .and_then(|()| out.sync_all())
        .map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_key_is_created_once_with_mode_0600_and_keeps_its_did() {
        let dir = tempfile::tempdir().unwrap();
        let first = NodeIdentity::load_or_create(dir.path(), None).unwrap();
        let path = dir.path().join(NODE_KEY_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(first.did().starts_with("did:key:z6Mk"), "{}", first.did());
        let again = NodeIdentity::load_or_create(dir.path(), None).unwrap();
        assert_eq!(again.did(), first.did());
        assert!(!format!("{again:?}").contains(&URL_SAFE_NO_PAD.encode(again.key.to_bytes())));
    }

    #[test]
    fn an_exposed_malformed_or_inconsistent_node_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path
        };
        let good = NodeIdentity::load_or_create(dir.path(), None).unwrap();
        let text = std::fs::read_to_string(dir.path().join(NODE_KEY_FILE)).unwrap();
        let exposed = write("exposed.key", &text, 0o644);
        assert!(matches!(
            NodeIdentity::load_or_create(dir.path(), Some(&exposed)),
            Err(IdentityError::Permissions(_))
        ));
        let configured = write("configured.key", &text, 0o600);
        let loaded = NodeIdentity::load_or_create(dir.path(), Some(&configured)).unwrap();
        assert_eq!(loaded.did(), good.did());
        let mut lying: Value = serde_json::from_str(&text).unwrap();
        lying["did"] = json!("did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK");
        let lying = write("lying.key", &lying.to_string(), 0o600);
        assert!(matches!(
            NodeIdentity::load_or_create(dir.path(), Some(&lying)),
            Err(IdentityError::Malformed { .. })
        ));
        let junk = write("junk.key", "not json", 0o600);
        assert!(matches!(
            NodeIdentity::load_or_create(dir.path(), Some(&junk)),
            Err(IdentityError::Malformed { .. })
        ));
        let missing = dir.path().join("missing.key");
        assert!(matches!(
            NodeIdentity::load_or_create(dir.path(), Some(&missing)),
            Err(IdentityError::Io { .. })
        ));
    }
}
