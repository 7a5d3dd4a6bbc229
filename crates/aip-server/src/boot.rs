//! What a node knows of itself across restarts (spec 11, recovery): its stable node id, kept in
//! the data directory, and, on the embedded store, an exclusive lock proving that no other process
//! has the store open. With them a restarted node takes back its earlier boots' leases at once
//! instead of waiting for them to lapse.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The file holding the node id, in the data directory.
pub const NODE_ID_FILE: &str = "node.id";

/// Why the node could not establish who it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BootError {
    /// Another process holds the embedded store's lock.
    #[error("another aip process has the store {0} open (its lock file is held); stop it first")]
    StoreLocked(PathBuf),
    /// The node id file is not a node id.
    #[error("{0} does not hold a node id (1..=64 of [A-Za-z0-9-])")]
    BadNodeId(PathBuf),
    /// The lock or node id file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// The embedded store's exclusive lock, held while the value lives (the OS releases it when the
/// process dies, however it dies).
#[derive(Debug)]
pub struct StoreLock {
    _file: std::fs::File,
}

/// Locks the SQLite store at `database` for this process: `<database>.lock`, exclusively.
pub fn lock_store(database: &Path) -> Result<StoreLock, BootError> {
    let mut name = database.as_os_str().to_owned();
    name.push(".lock");
    let path = PathBuf::from(name);
    let io = |source| BootError::Io {
        path: path.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(StoreLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(BootError::StoreLocked(database.to_path_buf()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

/// The node's id: read from `<data_dir>/node.id`, or made and written there on first start.
pub fn node_id(data_dir: &Path) -> Result<String, BootError> {
    let path = data_dir.join(NODE_ID_FILE);
    let io = |source| BootError::Io {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            let valid = !id.is_empty()
                && id.len() <= 64
                && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if valid {
                Ok(id.to_owned())
            } else {
                Err(BootError::BadNodeId(path))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut raw = [0_u8; 16];
            getrandom::fill(&mut raw).map_err(|e| io(std::io::Error::other(e.to_string())))?;
            let id = format!("node-{}", hex::encode(raw));
            // Created exclusively: two first starts racing on one directory agree on one id.
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    file.write_all(format!("{id}\n").as_bytes()).map_err(io)?;
                    file.sync_all().map_err(io)?;
                    Ok(id)
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => node_id(data_dir),
                Err(e) => Err(io(e)),
            }
        }
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_store_lock_is_exclusive_and_freed_with_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("aip.sqlite");
        let held = lock_store(&db).unwrap();
        assert!(matches!(lock_store(&db), Err(BootError::StoreLocked(_))));
        drop(held);
        assert!(lock_store(&db).is_ok());
    }

    #[test]
    fn a_node_keeps_its_id_across_starts_and_refuses_a_corrupt_one() {
        let dir = tempfile::tempdir().unwrap();
        let first = node_id(dir.path()).unwrap();
        assert!(first.starts_with("node-"));
        assert_eq!(node_id(dir.path()).unwrap(), first);
        std::fs::write(dir.path().join(NODE_ID_FILE), "a/b").unwrap();
        assert!(matches!(node_id(dir.path()), Err(BootError::BadNodeId(_))));
    }
}
