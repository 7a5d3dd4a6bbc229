//! Locating the read-only shared inputs (COMMON.md): `$AIP_SHARED_DIR`, else the workspace root's
//! sibling `shared/`.
#![allow(dead_code)]

use std::path::PathBuf;

/// The shared directory, or `None` (the caller prints `SKIP:` and returns).
pub fn shared_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("AIP_SHARED_DIR") {
        let p = PathBuf::from(d);
        return p.is_dir().then_some(p);
    }
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while dir.pop() {
        if dir.join("Cargo.lock").is_file() {
            let shared = dir.parent()?.join("shared");
            return shared.is_dir().then_some(shared);
        }
    }
    None
}

/// The conformance corpus directory, or `None`.
pub fn corpus_dir() -> Option<PathBuf> {
    let d = shared_dir()?.join("abp-conformance");
    d.join("index.json").is_file().then_some(d)
}
