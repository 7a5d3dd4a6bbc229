//! Predicates over an action's input, for approval tiers (`amount_minor >= 100000`) and decision
//! constraints: comparisons of one input member with a literal, joined by `and`. Parsed once at
//! startup (a bad predicate stops it); evaluated against the schema-valid input at admission.
//!
//! A comparison whose member is missing, or not comparable with the literal, *matches*: a tier that
//! cannot be ruled out applies (fail closed: the stricter policy, never the weaker one).

use std::cmp::Ordering;

use serde_json::Value;

/// Longest predicate text accepted.
const MAX_TEXT: usize = 512;
/// Most comparisons in one predicate.
const MAX_TERMS: usize = 16;

/// A parsed predicate: every comparison must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    text: String,
    terms: Vec<Comparison>,
}

#[derive(Debug, Clone, PartialEq)]
struct Comparison {
    path: Vec<String>,
    op: Op,
    literal: Value,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
    Ne,
}

impl Op {
    /// The operator of a decision constraint (`lte`, `gte`, ...).
    pub(crate) fn from_name(name: &str) -> Option<Op> {
        Some(match name {
            "gte" => Op::Ge,
            "gt" => Op::Gt,
            "lte" => Op::Le,
            "lt" => Op::Lt,
            "eq" => Op::Eq,
            "ne" => Op::Ne,
            _ => return None,
        })
    }
}

/// Why a predicate does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("predicate {text:?}: {reason}")]
pub struct PredicateError {
    text: String,
    reason: &'static str,
}

impl Predicate {
    /// Parses `member op literal [and member op literal ...]`: a member is a dot-separated path of
    /// `[a-z_][a-z0-9_]*` names into the input, an operator one of `>= > <= < == !=`, a literal a
    /// JSON number, string, `true`, `false` or `null`.
    pub fn parse(text: &str) -> Result<Self, PredicateError> {
        let error = |reason| PredicateError {
            text: text.chars().take(80).collect(),
            reason,
        };
        if text.len() > MAX_TEXT {
            return Err(error("longer than 512 bytes"));
        }
        let mut terms = Vec::new();
        for part in text.split(" and ") {
            if terms.len() == MAX_TERMS {
                return Err(error("more than 16 comparisons"));
            }
            let part = part.trim();
            let (path, rest) = part
                .split_once(' ')
                .ok_or(error("expected `member op literal`"))?;
            let (op, literal) = rest
                .trim_start()
                .split_once(' ')
                .ok_or(error("expected `member op literal`"))?;
            let op = match op {
                ">=" => Op::Ge,
                ">" => Op::Gt,
                "<=" => Op::Le,
                "<" => Op::Lt,
                "==" => Op::Eq,
                "!=" => Op::Ne,
                _ => return Err(error("the operator is none of >= > <= < == !=")),
            };
            let path = parse_path(path)
                .ok_or(error("a member is dot-separated [a-z_][a-z0-9_]* names"))?;
            let literal: Value = serde_json::from_str(literal.trim())
                .map_err(|_| error("the literal is not a JSON number, string, boolean or null"))?;
            if literal.is_array() || literal.is_object() {
                return Err(error(
                    "the literal is not a JSON number, string, boolean or null",
                ));
            }
            terms.push(Comparison { path, op, literal });
        }
        Ok(Predicate {
            text: text.to_owned(),
            terms,
        })
    }

    /// Whether `input` satisfies every comparison (an undecidable one counts as satisfied).
    pub fn matches(&self, input: &Value) -> bool {
        self.terms.iter().all(|t| {
            member(input, &t.path).is_none_or(|v| compare(v, t.op, &t.literal) != Some(false))
        })
    }

    /// The predicate as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn parse_path(path: &str) -> Option<Vec<String>> {
    let names: Vec<String> = path.split('.').map(str::to_owned).collect();
    let valid = names.iter().all(|n| {
        n.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
            && n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    });
    valid.then_some(names)
}

fn member<'a>(input: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(input, |v, name| v.get(name))
}

/// `value op literal`, or `None` when the two are not comparable (number with string, ...).
pub(crate) fn compare(value: &Value, op: Op, literal: &Value) -> Option<bool> {
    let ordering = match (value, literal) {
        (Value::Number(a), Value::Number(b)) => {
            // Integers compare exactly; anything else as f64.
            match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
                (Some(a), Some(b), _, _) => a.cmp(&b),
                (_, _, Some(a), Some(b)) => a.cmp(&b),
                _ => a.as_f64()?.partial_cmp(&b.as_f64()?)?,
            }
        }
        (Value::String(a), Value::String(b)) => a.cmp(b),
        (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => {
            return match op {
                Op::Eq => Some(false),
                Op::Ne => Some(true),
                _ => None,
            };
        }
    };
    Some(match op {
        Op::Ge => ordering != Ordering::Less,
        Op::Gt => ordering == Ordering::Greater,
        Op::Le => ordering != Ordering::Greater,
        Op::Lt => ordering == Ordering::Less,
        Op::Eq => ordering == Ordering::Equal,
        Op::Ne => ordering != Ordering::Equal,
    })
}

/// A member of `input` at a decision constraint's `field` (dot-separated, or a JSON pointer).
pub(crate) fn field<'a>(input: &'a Value, field: &str) -> Option<&'a Value> {
    if field.starts_with('/') {
        return input.pointer(field);
    }
    member(input, &parse_path(field)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tier_predicate_compares_input_members_with_literals() {
        let p = Predicate::parse("amount_minor >= 100000").unwrap();
        assert!(p.matches(&json!({ "amount_minor": 100000 })));
        assert!(!p.matches(&json!({ "amount_minor": 99999 })));
        let both = Predicate::parse("to.country == \"FR\" and amount_minor > 5").unwrap();
        assert!(both.matches(&json!({ "to": { "country": "FR" }, "amount_minor": 6 })));
        assert!(!both.matches(&json!({ "to": { "country": "DE" }, "amount_minor": 6 })));
    }

    #[test]
    fn a_comparison_that_cannot_be_decided_matches_so_the_stricter_tier_applies() {
        let p = Predicate::parse("amount_minor >= 100000").unwrap();
        assert!(p.matches(&json!({})), "missing member");
        assert!(
            p.matches(&json!({ "amount_minor": "lots" })),
            "not comparable"
        );
    }

    #[test]
    fn malformed_predicates_are_refused() {
        for bad in [
            "",
            "amount_minor",
            "amount_minor => 1",
            "Amount >= 1",
            "a >= [1]",
            "a >= nope",
            &format!("a >= {}", "1".repeat(600)),
        ] {
            assert!(Predicate::parse(bad).is_err(), "{bad:?}");
        }
    }
}
