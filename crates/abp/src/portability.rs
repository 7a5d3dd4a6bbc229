//! The portability guard (spec 14, 18): member-name and value-shape denylists at any depth,
//! name-spelling-normalized. Necessary, not sufficient: a pass is no privacy guarantee.

use crate::error::{Code, Error, Result};
use crate::json::Value;
use crate::schema::DIALECT;

/// Normalized member names that carry environment-bound values (secrets, keys, grants, tenant ids,
/// endpoints, database keys, engine ids).
const DENIED_NAMES: &[&str] = &[
    "apikey",
    "secret",
    "secretkey",
    "clientsecret",
    "password",
    "passwd",
    "privatekey",
    "accesstoken",
    "refreshtoken",
    "bearertoken",
    "authtoken",
    "sessiontoken",
    "credential",
    "credentials",
    "tenant",
    "tenantid",
    "databaseid",
    "dbid",
    "primarykey",
    "rowid",
    "engineid",
    "enginename",
    "endpoint",
    "endpointurl",
    "connectionstring",
    "dsn",
    "grant",
    "grants",
    "livegrant",
    "accesskey",
    "signingkey",
];

/// Scan `value` at any depth; members named in `skip` at the top level are not scanned (quarantined
/// or schema-validated extension bodies, spec 14).
pub fn scan(value: &Value, skip: &[&str]) -> Result<()> {
    let deny = |mut rev: Vec<String>, root: &str| {
        rev.push(root.to_owned());
        rev.reverse();
        Error::new(Code::ForbiddenPortableValue, rev.concat())
    };
    match value {
        Value::Object(o) => {
            for (k, v) in o.iter() {
                if !skip.contains(&k.as_str()) {
                    walk(k, v).map_err(|p| deny(p, k))?;
                }
            }
            Ok(())
        }
        other => walk("", other).map_err(|p| deny(p, "$")),
    }
}

/// Scan one member; on a hit, the path below it comes back reversed (built only on failure).
fn walk(name: &str, v: &Value) -> std::result::Result<(), Vec<String>> {
    if denied_name(name) {
        return Err(vec![]);
    }
    match v {
        Value::String(s) if !(name == "$schema" && s == DIALECT) && denied_value(s) => Err(vec![]),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk("", item).map_err(|mut p| {
                    p.push(format!("[{i}]"));
                    p
                })?;
            }
            Ok(())
        }
        Value::Object(o) => {
            for (k, item) in o.iter() {
                walk(k, item).map_err(|mut p| {
                    p.push(format!(".{k}"));
                    p
                })?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether a member name, lowercased with `_`, `-`, `.` and spaces removed, is denylisted.
pub fn denied_name(name: &str) -> bool {
    let separator = |c: char| matches!(c, '_' | '-' | '.' | ' ');
    if name.is_ascii() {
        let mut buf = [0u8; 24];
        let mut len = 0;
        for b in name.bytes().filter(|b| !separator(char::from(*b))) {
            if len == buf.len() {
                return false;
            }
            buf[len] = b.to_ascii_lowercase();
            len += 1;
        }
        return DENIED_NAMES.iter().any(|d| d.as_bytes() == &buf[..len]);
    }
    let n: String = name
        .chars()
        .filter(|c| !separator(*c))
        .flat_map(char::to_lowercase)
        .collect();
    DENIED_NAMES.contains(&n.as_str())
}

/// Whether a string value has a denylisted shape: PEM armor, a bearer or JWT token, a URL with a
/// network authority, or a long lowercase hex run (raw keys, engine ids).
pub fn denied_value(s: &str) -> bool {
    if s.contains("-----BEGIN") || s.starts_with("Bearer ") {
        return true;
    }
    if s.starts_with("eyJ") && s.matches('.').count() == 2 {
        return true;
    }
    if let Some((scheme, rest)) = s.split_once("://")
        && !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        && !rest.is_empty()
    {
        return true;
    }
    s.len() >= 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{DecodeBounds, decode};

    fn scan_text(t: &str) -> Result<()> {
        scan(
            &decode(t.as_bytes(), &DecodeBounds::MAX).expect("json"),
            &[],
        )
    }

    #[test]
    fn names_and_value_shapes_are_denied_at_any_depth() {
        assert!(scan_text(r#"{"kind":"ordinary"}"#).is_ok());
        for bad in [
            r#"{"api_key":"x"}"#,
            r#"{"a":{"Tenant-ID":"org-7"}}"#,
            r#"{"a":["-----BEGIN PRIVATE KEY-----"]}"#,
            r#"{"a":"https://db.internal:5432"}"#,
            r#"{"kid":"abababababababababababababababababababababababab"}"#,
        ] {
            assert_eq!(
                scan_text(bad).expect_err(bad).code,
                Code::ForbiddenPortableValue
            );
        }
        assert!(
            scan_text(r#"{"max_tokens":1,"uuid":"123e4567-e89b-12d3-a456-426614174000"}"#).is_ok()
        );
    }
}
