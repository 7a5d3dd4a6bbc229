//! Spec 21: compatibility profiles must not introduce foreign protocol DTOs into the native core.
//! Neither the wire model (`aip-core`), the store (`aip-store`) nor the runtime depends on an MCP or
//! A2A crate, and no item in their sources is named after those protocols (doc comments may mention
//! them). The profiles live in `aip-server/src/profile/`.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

fn crate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_core_store_and_runtime_carry_no_mcp_or_a2a_types_or_dependencies() {
    for name in ["aip-core", "aip-store", "aip-runtime"] {
        let dir = crate_dir(name);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .to_lowercase();
        for foreign in ["mcp", "a2a", "rmcp"] {
            assert!(
                !manifest
                    .lines()
                    .any(|l| l.split('=').next().unwrap_or("").contains(foreign)),
                "{name} depends on a {foreign} crate"
            );
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        assert!(!files.is_empty());
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                let lower = code.to_lowercase();
                assert!(
                    !lower.contains("mcp") && !lower.contains("a2a"),
                    "{}:{}: a foreign protocol name in the core: {line}",
                    file.display(),
                    n + 1
                );
            }
        }
    }
}
