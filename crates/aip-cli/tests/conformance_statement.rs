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

/// A JUnit report (nextest's shape) with a passing case per test, except `leave_out` (absent) and
/// `skipped` (its output a `SKIP:` notice).
fn junit(tests: &[&str], leave_out: &str, skipped: &str) -> String {
    let mut cases = String::new();
    for test in tests.iter().filter(|t| **t != leave_out) {
        // <crate>::<binary>::<fn> for integration tests: classname `<crate>::<binary>`.
        let (class, name) = if test.split("::").nth(1).is_some_and(|b| {
            workspace()
                .join("crates")
                .join(test.split("::").next().unwrap())
                .join("tests")
                .join(format!("{b}.rs"))
                .exists()
        }) {
            let mut parts = test.splitn(3, "::");
            let (k, b, f) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            (format!("{k}::{b}"), f.to_owned())
        } else {
            let (k, rest) = test.split_once("::").unwrap();
            (k.to_owned(), rest.to_owned())
        };
        let out = if *test == skipped {
            "SKIP: AIP_TEST_NATS_URL is not set"
        } else {
            "ok"
        };
        cases.push_str(&format!(
            "<testcase name=\"{name}\" classname=\"{class}\"><system-out>{out}</system-out></testcase>\n"
        ));
    }
    format!(
        "<?xml version=\"1.0\"?>\n<testsuites name=\"nextest-run\" tests=\"{}\" failures=\"0\" errors=\"0\"><testsuite name=\"all\">\n{cases}</testsuite></testsuites>\n",
        tests.len()
    )
}

#[test]
fn the_report_passes_a_run_where_every_claimed_test_passed_and_fails_one_missing_or_skipped() {
    let statement: Value =
        serde_json::from_str(&aip(&["conformance", "statement", "--json"])).unwrap();
    let tests: Vec<&str> = statement["classes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["claimed"] == true)
        .flat_map(|c| c["evidence"].as_array().unwrap())
        .map(|e| e.as_str().unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let report = |xml: String| {
        let path = dir.path().join("junit.xml");
        std::fs::write(&path, xml).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_aip"))
            .args(["conformance", "report", "--check", "--json", "--junit"])
            .arg(&path)
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), json)
    };
    let (code, full) = report(junit(&tests, "", ""));
    assert_eq!(code, Some(0), "{full}");
    assert_eq!(full["every_claim_stands"], true);
    let (first, last) = (tests[0], tests[tests.len() - 1]);
    let (code, missing) = report(junit(&tests, first, ""));
    assert_eq!(code, Some(1), "{missing}");
    assert_eq!(missing["classes"][0]["stands"], false);
    assert_eq!(missing["classes"][0]["tests"][0]["outcome"], "not run");
    let (code, skipped) = report(junit(&tests, "", last));
    assert_eq!(code, Some(1), "{skipped}");
    // A report that is not JUnit is a usage error, not a verdict.
    let (code, _) = {
        let path = dir.path().join("junit.xml");
        std::fs::write(&path, "{}").unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_aip"))
            .args(["conformance", "report", "--junit"])
            .arg(&path)
            .output()
            .unwrap();
        (out.status.code(), ())
    };
    assert_eq!(code, Some(2));
}
