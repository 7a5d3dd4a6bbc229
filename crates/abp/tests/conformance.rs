//! The ABP conformance corpus (spec 15) run as a test: 94/94 and the byte-exact report.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use abp::conformance::{self, Corpus, corpus::Expected, runner};

/// The golden report bytes for a fully conforming run (notes 6).
const GOLDEN: &str = r#"{"agreed":94,"agreement":true,"corpus_digest":"sha-256:sg6Fo7p8nZpJDzxFn4dXHBWgbGvEvtOk-7t3m7OT7Yo","disagreed":0,"exit_status":0,"format":"agent-blueprint-protocol-conformance-report","total":94}"#;

#[test]
fn every_corpus_case_agrees_and_the_report_is_byte_identical() {
    let Some(dir) = common::corpus_dir() else {
        println!("SKIP: ../shared/abp-conformance not found (set AIP_SHARED_DIR)");
        return;
    };
    let files = conformance::read_dir(&dir).unwrap();
    let corpus = Corpus::load(&files).unwrap();
    let outcomes = runner::run(&corpus);
    let mut per_surface: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for o in &outcomes {
        let e = per_surface.entry(o.surface.as_str()).or_default();
        e.1 += 1;
        if o.agreed {
            e.0 += 1;
        }
    }
    for (surface, (agreed, total)) in &per_surface {
        println!("{surface:32} {agreed}/{total}");
    }
    let mut failures = Vec::new();
    for (o, c) in outcomes.iter().zip(&corpus.cases) {
        if !o.agreed {
            let want = match &c.expected {
                Expected::Invalid(code) => format!("invalid {code}"),
                Expected::Valid(p) => format!("valid {p:?}"),
            };
            let got = match &o.actual {
                Ok(p) => format!("valid {p:?}"),
                Err(e) => format!("invalid {} ({})", e.code, e),
            };
            failures.push(format!("DISAGREE {}: expected {want}; got {got}", o.id));
        }
    }
    for f in &failures {
        println!("{f}");
    }
    let report = conformance::Report::new(&outcomes, corpus.corpus_digest);
    println!("{}", String::from_utf8_lossy(&report.to_bytes()));
    assert!(failures.is_empty(), "{} disagreements", failures.len());
    assert_eq!(report.to_bytes(), GOLDEN.as_bytes());
    assert_eq!(report.to_bytes().len(), 196);
}
