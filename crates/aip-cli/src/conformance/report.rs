//! `aip conformance report`: the statement of spec 24.1 checked against a test run. The statement
//! names the tests behind each claimed class; this reads the run's JUnit report (what
//! `cargo nextest run` writes, `.config/nextest.toml`) and says, per class, whether every one of
//! those tests ran and passed in it. A test that failed, was absent from the run, was ignored, or
//! returned early after its `SKIP:` notice (a service or `../shared` missing) does not back a claim:
//! the class is then reported as not standing, and `--check` exits non-zero.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};

/// A JUnit report larger than this is refused rather than read: the whole suite's report with every
/// test's output kept is a few MiB.
pub const MAX_REPORT_BYTES: u64 = 64 * 1024 * 1024;

/// What the run says about one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Ran to the end and passed.
    Passed,
    /// Failed or errored.
    Failed,
    /// Passed only by returning early after a `SKIP:` notice: nothing was proven.
    Skipped,
    /// Absent from the run, or ignored.
    NotRun,
}

impl Outcome {
    /// The word the report uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
            Outcome::NotRun => "not run",
        }
    }
}

/// Why a JUnit report could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The report's path.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_REPORT_BYTES`].
    #[error("{path}: larger than {MAX_REPORT_BYTES} bytes")]
    TooLarge {
        /// The report's path.
        path: String,
    },
    /// Not XML, or not a JUnit `<testsuites>` document.
    #[error("not a JUnit report: {0}")]
    Malformed(String),
}

/// One test run, as its JUnit report gives it.
#[derive(Debug, Default)]
pub struct Run {
    /// `<testsuites tests=..>`: the number of tests run.
    pub tests: u64,
    /// `<testsuites failures=..>` plus `errors=..`.
    pub failed: u64,
    /// Each test by `<classname>::<name>` (nextest: `<crate>::<binary>::<fn>`, or
    /// `<crate>::<module path>::<fn>` for a library's unit tests).
    pub cases: HashMap<String, Outcome>,
}

impl Run {
    /// Reads a JUnit report from a file, bounded by [`MAX_REPORT_BYTES`].
    pub fn read(path: &Path) -> Result<Run, ReportError> {
        let shown = path.display().to_string();
        let io = |source| ReportError::Io {
            path: shown.clone(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_REPORT_BYTES {
            return Err(ReportError::TooLarge { path: shown });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Run::parse(&text)
    }

    /// Parses a JUnit report.
    pub fn parse(text: &str) -> Result<Run, ReportError> {
        let doc =
            roxmltree::Document::parse(text).map_err(|e| ReportError::Malformed(e.to_string()))?;
        let root = doc.root_element();
        if root.tag_name().name() != "testsuites" {
            return Err(ReportError::Malformed(format!(
                "root element <{}>, expected <testsuites>",
                root.tag_name().name()
            )));
        }
        let count = |name: &str| {
            root.attribute(name)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let mut run = Run {
            tests: count("tests"),
            failed: count("failures") + count("errors"),
            cases: HashMap::new(),
        };
        for case in root.descendants().filter(|n| n.has_tag_name("testcase")) {
            let (Some(class), Some(name)) = (case.attribute("classname"), case.attribute("name"))
            else {
                continue;
            };
            let child = |tag: &str| case.children().any(|c| c.has_tag_name(tag));
            let outcome = if child("failure") || child("error") {
                Outcome::Failed
            } else if child("skipped") {
                Outcome::NotRun
            } else if case
                .children()
                .filter(|c| c.has_tag_name("system-out") || c.has_tag_name("system-err"))
                .filter_map(|c| c.text())
                .any(|out| out.lines().any(|l| l.trim_start().starts_with("SKIP:")))
            {
                Outcome::Skipped
            } else {
                Outcome::Passed
            };
            let key = format!("{class}::{name}");
            // A test listed twice (a retried one) counts by its worst outcome.
            let entry = run.cases.entry(key).or_insert(outcome);
            if outcome != Outcome::Passed {
                *entry = outcome;
            }
        }
        Ok(run)
    }

    /// What the run says about `test`.
    pub fn outcome(&self, test: &str) -> Outcome {
        self.cases.get(test).copied().unwrap_or(Outcome::NotRun)
    }
}

/// The statement checked against `run`: each class with `claimed` (the statement's claim),
/// `stands` (claimed and every test behind it passed in this run) and each test's outcome.
pub fn report(statement: &Value, run: &Run, source: &str) -> Value {
    let classes: Vec<Value> = statement["classes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let claimed = c["claimed"] == true;
            let tests: Vec<Value> = c["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|e| claimed && e.contains("::"))
                .map(|t| json!({ "test": t, "outcome": run.outcome(t).as_str() }))
                .collect();
            let stands = claimed
                && !tests.is_empty()
                && tests
                    .iter()
                    .all(|t| t["outcome"] == Outcome::Passed.as_str());
            json!({ "class": c["class"], "claimed": claimed, "stands": stands, "tests": tests })
        })
        .collect();
    let standing = classes
        .iter()
        .all(|c| c["claimed"] != true || c["stands"] == true);
    json!({
        "implementation": statement["implementation"],
        "revision": statement["test_suite"]["revision"],
        "junit": source,
        "run": { "tests": run.tests, "failed": run.failed },
        "every_claim_stands": standing,
        "classes": classes,
    })
}

/// The report as Markdown.
pub fn markdown(r: &Value) -> String {
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    let mut out = String::from("# AIP 1.0 conformance report\n\n");
    out.push_str(&format!(
        "Implementation: {} {} at revision `{}`, checked against `{}` ({} tests run, {} failed).\n\n",
        text(&r["implementation"]["name"]),
        text(&r["implementation"]["version"]),
        text(&r["revision"]),
        text(&r["junit"]),
        r["run"]["tests"],
        r["run"]["failed"],
    ));
    out.push_str(if r["every_claim_stands"] == true {
        "Every claimed class is backed by passing tests in this run.\n\n"
    } else {
        "**Not every claimed class is backed by this run**: a test behind it failed, did not run, or skipped.\n\n"
    });
    out.push_str("| class | claimed | stands | tests |\n|---|---|---|---|\n");
    for c in r["classes"].as_array().into_iter().flatten() {
        let tests: Vec<String> = c["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| format!("`{}`: {}", text(&t["test"]), text(&t["outcome"])))
            .collect();
        let yes = |v: &Value| if *v == true { "yes" } else { "no" };
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            text(&c["class"]),
            yes(&c["claimed"]),
            yes(&c["stands"]),
            tests.join("<br>")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const JUNIT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="5" failures="1" errors="0">
  <testsuite name="aip-cli::serve_e2e" tests="3" failures="1" errors="0">
    <testcase name="passes" classname="aip-cli::serve_e2e"><system-out>ok</system-out></testcase>
    <testcase name="fails" classname="aip-cli::serve_e2e"><failure type="test failure"/></testcase>
    <testcase name="skips" classname="aip-cli::serve_e2e"><system-err>SKIP: AIP_TEST_NATS_URL unset</system-err></testcase>
  </testsuite>
  <testsuite name="aip-server" tests="2" failures="0" errors="0">
    <testcase name="http::tests::unit" classname="aip-server"/>
    <testcase name="http::tests::ignored" classname="aip-server"><skipped/></testcase>
  </testsuite>
</testsuites>"#;

    fn statement(evidence: &[&str]) -> Value {
        json!({
            "implementation": { "name": "aip", "version": "0" },
            "test_suite": { "revision": "abc" },
            "classes": [
                { "class": "A", "claimed": true, "evidence": evidence },
                { "class": "B", "claimed": false, "evidence": ["not claimed: reason"] },
            ],
        })
    }

    #[test]
    fn each_test_gets_the_outcome_the_junit_report_gives_it() {
        let run = Run::parse(JUNIT).unwrap();
        assert_eq!((run.tests, run.failed), (5, 1));
        assert_eq!(run.outcome("aip-cli::serve_e2e::passes"), Outcome::Passed);
        assert_eq!(run.outcome("aip-cli::serve_e2e::fails"), Outcome::Failed);
        assert_eq!(run.outcome("aip-cli::serve_e2e::skips"), Outcome::Skipped);
        assert_eq!(
            run.outcome("aip-server::http::tests::unit"),
            Outcome::Passed
        );
        assert_eq!(
            run.outcome("aip-server::http::tests::ignored"),
            Outcome::NotRun
        );
        assert_eq!(run.outcome("aip-cli::serve_e2e::absent"), Outcome::NotRun);
    }

    #[test]
    fn a_claim_stands_only_when_every_test_behind_it_passed() {
        let run = Run::parse(JUNIT).unwrap();
        let ok = report(
            &statement(&[
                "aip-cli::serve_e2e::passes",
                "aip-server::http::tests::unit",
            ]),
            &run,
            "j.xml",
        );
        assert_eq!(ok["every_claim_stands"], true);
        assert_eq!(ok["classes"][0]["stands"], true);
        assert_eq!(ok["classes"][1]["stands"], false);
        for bad in [
            "aip-cli::serve_e2e::fails",
            "aip-cli::serve_e2e::skips",
            "aip-cli::serve_e2e::absent",
            "aip-server::http::tests::ignored",
        ] {
            let r = report(
                &statement(&["aip-cli::serve_e2e::passes", bad]),
                &run,
                "j.xml",
            );
            assert_eq!(r["every_claim_stands"], false, "{bad}");
            assert!(markdown(&r).contains(&format!("`{bad}`: ")), "{bad}");
        }
        // A claimed class that names no test does not stand either.
        let r = report(&statement(&[]), &run, "j.xml");
        assert_eq!(r["every_claim_stands"], false);
    }

    #[test]
    fn a_document_that_is_not_a_junit_report_is_refused() {
        assert!(matches!(
            Run::parse("<html/>"),
            Err(ReportError::Malformed(_))
        ));
        assert!(matches!(
            Run::parse("not xml"),
            Err(ReportError::Malformed(_))
        ));
    }
}
