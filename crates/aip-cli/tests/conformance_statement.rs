//! The conformance statement (spec 24.1): every claimed class names tests that exist in this
//! workspace (CI runs them all, so a claim stands only on a green run), unclaimed classes name none,
//! the statement carries every member 24.1 asks for, and `docs/conformance.md` is the statement of the
//! default build.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn aip(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(args)
        // Not the developer's ./aip.toml or AIP_* settings: the default build's statement.
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The source file a `<crate>::<binary or module>::...::<fn>` test path lives in.
fn source_of(path: &str) -> (PathBuf, String) {
    let parts: Vec<&str> = path.split("::").collect();
    assert!(
        parts.len() >= 3,
        "{path}: expected <crate>::<binary>::<test>"
    );
    let krate = workspace().join("crates").join(parts[0]);
    let test = parts[parts.len() - 1].to_owned();
    let in_tests = krate.join("tests").join(format!("{}.rs", parts[1]));
    if in_tests.exists() {
        return (in_tests, test);
    }
    // A unit test: <crate>::<module>::tests::<fn> in src/<module>.rs (or src/<module>/mod.rs).
    let file = krate.join("src").join(format!("{}.rs", parts[1]));
    let file = if file.exists() {
        file
    } else {
        krate.join("src").join(parts[1]).join("mod.rs")
    };
    (file, test)
}

#[test]
fn every_claimed_class_names_tests_that_exist_and_unclaimed_ones_name_none() {
    let statement: Value =
        serde_json::from_str(&aip(&["conformance", "statement", "--json"])).unwrap();
    let classes = statement["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 14, "the 14 classes of spec 24.2");
    let mut claimed = 0;
    for class in classes {
        let name = class["class"].as_str().unwrap();
        let tests: Vec<&str> = class["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .filter(|e| e.contains("::"))
            .collect();
        if class["claimed"] == true {
            claimed += 1;
            assert!(!tests.is_empty(), "{name} is claimed without tests");
            for test in tests {
                let (file, function) = source_of(test);
                let source = std::fs::read_to_string(&file)
                    .unwrap_or_else(|e| panic!("{name}: {test}: {}: {e}", file.display()));
                assert!(
                    source.contains(&format!("fn {function}(")),
                    "{name}: {test} does not exist in {}",
                    file.display()
                );
            }
        } else if class["class"] != "Native NATS binding" {
            assert!(
                tests.is_empty(),
                "{name} is not claimed but names tests: {tests:?}"
            );
        }
    }
    // Core serialization alone is not a runtime claim (24.2): the runtime classes are claimed too.
    assert!(claimed >= 8, "{claimed}");
}

#[test]
fn the_statement_carries_every_member_of_24_1_and_the_docs_hold_the_default_builds() {
    let statement: Value =
        serde_json::from_str(&aip(&["conformance", "statement", "--json"])).unwrap();
    for member in [
        "implementation",
        "classes",
        "profiles",
        "transports",
        "schemas",
        "limits",
        "unsupported_message_types",
        "test_suite",
    ] {
        assert!(!statement[member].is_null(), "{member} missing");
    }
    assert_eq!(statement["schemas"]["files"], 52);
    assert_eq!(statement["schemas"]["digest"].as_str().unwrap().len(), 64);
    let unsupported: Vec<&str> = statement["unsupported_message_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(!unsupported.contains(&"aip.economic.v1.batch_settlement"));
    assert!(!unsupported.contains(&"aip.channel.v1.message_created"));
    assert!(!unsupported.contains(&"aip.channel.v1.conversation_updated"));
    assert!(!unsupported.contains(&"aip.agent.v1.delegation_request"));
    assert!(!unsupported.contains(&"aip.callback.v1.delivery_list_request"));
    assert!(!unsupported.contains(&"aip.transaction.v1.request"));
    assert!(!unsupported.contains(&"aip.policy.v1.approval_decision"));
    // docs/conformance.md is this statement, whatever revision it was generated at.
    let revision = statement["test_suite"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    let normalize = |text: &str, rev: &str| text.replace(rev, "REVISION");
    let printed = normalize(&aip(&["conformance", "statement"]), &revision);
    let docs = std::fs::read_to_string(workspace().join("docs/conformance.md")).unwrap();
    let docs_revision = docs
        .split("Test-suite revision: `")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .unwrap()
        .to_owned();
    assert_eq!(
        normalize(&docs, &docs_revision),
        printed,
        "docs/conformance.md is stale: regenerate it with `aip conformance statement > docs/conformance.md`"
    );
}
