//! The conformance report (notes 6): JCS of exactly seven members, no per-case entries, no digest.

use crate::conformance::runner::Outcome;
use crate::digest::Digest;
use crate::jcs;
use crate::json::{Object, Value};

/// The report format string.
pub const FORMAT: &str = "agent-blueprint-protocol-conformance-report";

/// A conformance report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Cases run.
    pub total: usize,
    /// Cases that agreed.
    pub agreed: usize,
    /// Cases that disagreed.
    pub disagreed: usize,
    /// The loader's recomputed corpus identity.
    pub corpus_digest: Digest,
}

impl Report {
    /// Summarize outcomes.
    pub fn new(outcomes: &[Outcome], corpus_digest: Digest) -> Report {
        let agreed = outcomes.iter().filter(|o| o.agreed).count();
        Report {
            total: outcomes.len(),
            agreed,
            disagreed: outcomes.len() - agreed,
            corpus_digest,
        }
    }

    /// `total > 0 && disagreed == 0`: an empty run never agrees (no vacuous green).
    pub fn agreement(&self) -> bool {
        self.total > 0 && self.disagreed == 0
    }

    /// 0 on agreement, else 1.
    pub fn exit_status(&self) -> u8 {
        if self.agreement() { 0 } else { 1 }
    }

    /// The wire bytes: one line of canonical JSON, no trailing newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut o = Object::new();
        o.insert("format", Value::string(FORMAT));
        o.insert("agreement", Value::Bool(self.agreement()));
        o.insert("exit_status", Value::int(i64::from(self.exit_status())));
        o.insert("total", Value::int(self.total as i64));
        o.insert("agreed", Value::int(self.agreed as i64));
        o.insert("disagreed", Value::int(self.disagreed as i64));
        o.insert(
            "corpus_digest",
            Value::string(self.corpus_digest.to_tagged()),
        );
        jcs::encode(&Value::Object(o))
    }
}
