//! The semantic layer (spec 6.4 "message-specific semantic validation"): cross-field MUSTs that the
//! JSON Schemas cannot express, checked after the schema layer on fully typed values.
//!
//! Every type implements [`Validate`], which walks its members and applies the rules of
//! [`crate::rules`]; a [`Checker`] tracks the JSON pointer so each [`Violation`] names the member.

use crate::rules::Rule;

/// A type whose decoded values can be checked against the spec's semantic rules.
pub trait Validate {
    /// Reports every violation in `self` (and its members) to `v`.
    fn validate(&self, v: &mut Checker);
}

/// One broken semantic rule: which rule, where (RFC 6901 JSON pointer), and a human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule that failed.
    pub rule: Rule,
    /// JSON pointer of the offending member, relative to the validated root.
    pub pointer: String,
    /// Human-readable explanation; not an API.
    pub message: String,
}

/// Collects violations while walking a value; bounded so hostile input cannot make it allocate
/// without limit.
#[derive(Debug)]
pub struct Checker {
    path: Vec<Seg>,
    violations: Vec<Violation>,
    max: usize,
    /// Pointers of the receipt chains walked, kept only when asked for: the walk is the one place
    /// that knows which members are typed chains (see [`crate::chain::embedded_chains`]).
    chains: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
enum Seg {
    Key(&'static str),
    Index(usize),
}

impl Default for Checker {
    fn default() -> Self {
        Self::new()
    }
}

impl Checker {
    /// A checker that keeps at most 64 violations.
    pub fn new() -> Self {
        Self::with_capacity(64)
    }

    /// A checker that keeps at most `max` violations (at least one).
    pub fn with_capacity(max: usize) -> Self {
        Self {
            path: Vec::new(),
            violations: Vec::new(),
            max: max.max(1),
            chains: None,
        }
    }

    /// A checker that also records where each receipt chain is.
    pub(crate) fn locating_chains() -> Self {
        let mut c = Self::new();
        c.chains = Some(Vec::new());
        c
    }

    /// Notes that a receipt chain sits at the current pointer (a no-op unless locating chains).
    pub(crate) fn receipt_chain_here(&mut self) {
        if self.chains.is_some() {
            let pointer = self.pointer();
            self.chains.get_or_insert_with(Vec::new).push(pointer);
        }
    }

    /// The receipt-chain pointers recorded by a [`Checker::locating_chains`] walk.
    pub(crate) fn into_chains(self) -> Vec<String> {
        self.chains.unwrap_or_default()
    }

    /// A checker whose pointers start under `prefix` (e.g. `/body/action`).
    pub fn at(prefix: &[&'static str]) -> Self {
        let mut c = Self::new();
        c.path.extend(prefix.iter().map(|k| Seg::Key(k)));
        c
    }

    /// Validates `value` and returns its violations.
    pub fn check<T: Validate + ?Sized>(value: &T) -> Vec<Violation> {
        let mut c = Self::new();
        value.validate(&mut c);
        c.violations
    }

    /// Runs `f` with `name` pushed on the pointer.
    pub fn field(&mut self, name: &'static str, f: impl FnOnce(&mut Self)) {
        self.path.push(Seg::Key(name));
        f(self);
        self.path.pop();
    }

    /// Runs `f` with array index `i` pushed on the pointer.
    pub fn index(&mut self, i: usize, f: impl FnOnce(&mut Self)) {
        self.path.push(Seg::Index(i));
        f(self);
        self.path.pop();
    }

    /// Validates every element of a sequence.
    pub fn each<T: Validate>(&mut self, items: &[T]) {
        for (i, item) in items.iter().enumerate() {
            self.index(i, |v| item.validate(v));
        }
    }

    /// Records a violation of `rule` at the current pointer.
    pub fn report(&mut self, rule: Rule, message: impl Into<String>) {
        if self.violations.len() < self.max {
            let pointer = self.pointer();
            self.violations.push(Violation {
                rule,
                pointer,
                message: message.into(),
            });
        }
    }

    /// Records a violation of `rule` at member `name` of the current object.
    pub fn report_at(&mut self, name: &'static str, rule: Rule, message: impl Into<String>) {
        self.field(name, |v| v.report(rule, message));
    }

    /// The current JSON pointer (RFC 6901).
    pub fn pointer(&self) -> String {
        let mut p = String::new();
        for seg in &self.path {
            p.push('/');
            match seg {
                Seg::Key(k) => p.push_str(&k.replace('~', "~0").replace('/', "~1")),
                Seg::Index(i) => p.push_str(&i.to_string()),
            }
        }
        p
    }

    /// Whether any violation was recorded.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// The violations recorded so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Consumes the checker, returning its violations.
    pub fn into_violations(self) -> Vec<Violation> {
        self.violations
    }
}

impl<T: Validate> Validate for Box<T> {
    fn validate(&self, v: &mut Checker) {
        (**self).validate(v);
    }
}
