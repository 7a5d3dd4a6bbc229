//! Bounded predicates (spec 12: `predicate_*`): a small boolean AST over declared port paths.

use crate::error::{Code, Error, Result};
use crate::json::Value;

/// Maximum AST nodes in one predicate.
pub const MAX_PREDICATE_NODES: usize = 64;

const BOOLEAN_OPS: &[&str] = &["and", "or", "not"];
const COMPARISON_OPS: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge", "exists"];

/// Check a predicate: known operators, paths rooted at one of `ports`, at most
/// [`MAX_PREDICATE_NODES`] nodes.
pub fn check(predicate: &Value, ports: &[&str]) -> Result<()> {
    let mut nodes = 0;
    node(predicate, ports, &mut nodes, "predicate")
}

fn node(p: &Value, ports: &[&str], nodes: &mut usize, path: &str) -> Result<()> {
    *nodes += 1;
    if *nodes > MAX_PREDICATE_NODES {
        return Err(Error::new(Code::PredicateNodesExceeded, "predicate"));
    }
    let malformed = || Error::new(Code::InvalidConstraint, path.to_owned());
    let o = p.as_object().ok_or_else(malformed)?;
    let op = o.get("op").and_then(Value::as_str).ok_or_else(malformed)?;
    if BOOLEAN_OPS.contains(&op) {
        let args = o
            .get("args")
            .and_then(Value::as_array)
            .ok_or_else(malformed)?;
        if args.is_empty() || (op == "not" && args.len() != 1) || o.len() != 2 {
            return Err(malformed());
        }
        for (i, a) in args.iter().enumerate() {
            node(a, ports, nodes, &format!("{path}.args[{i}]"))?;
        }
        return Ok(());
    }
    if !COMPARISON_OPS.contains(&op) {
        return Err(Error::new(Code::PredicateOpUnknown, path.to_owned()));
    }
    let target = o
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(malformed)?;
    let expected_members = if op == "exists" { 2 } else { 3 };
    if o.len() != expected_members || (op != "exists" && !o.contains("value")) {
        return Err(malformed());
    }
    let root = target.split('.').next().unwrap_or_default();
    if !ports.contains(&root) {
        return Err(Error::new(Code::PredicatePathUnresolved, path.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{DecodeBounds, decode};

    fn c(t: &str) -> Result<()> {
        check(
            &decode(t.as_bytes(), &DecodeBounds::MAX).expect("json"),
            &["result"],
        )
    }

    #[test]
    fn predicates_are_bounded_and_closed() {
        assert!(c(r#"{"op":"and","args":[{"op":"exists","path":"result.x"},{"op":"eq","path":"result","value":1}]}"#).is_ok());
        assert_eq!(
            c(r#"{"op":"xor","args":[]}"#).expect_err("op").code,
            Code::PredicateOpUnknown
        );
        assert_eq!(
            c(r#"{"op":"exists","path":"request.x"}"#)
                .expect_err("path")
                .code,
            Code::PredicatePathUnresolved
        );
        let wide = vec![r#"{"op":"exists","path":"result"}"#; 70].join(",");
        let deep = format!(r#"{{"op":"and","args":[{wide}]}}"#);
        assert_eq!(
            c(&deep).expect_err("nodes").code,
            Code::PredicateNodesExceeded
        );
    }
}
