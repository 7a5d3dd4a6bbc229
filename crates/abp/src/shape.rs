//! The one generic table-driven structure engine (spec 2, 16): closed-world member tables checked in
//! the pinned failure precedence, level by level: unknown member → missing required → type →
//! constraint → cardinality → nested. Cross-field hooks run after, in the artifact modules.

use std::collections::HashSet;

use crate::digest::Digest;
use crate::error::{Code, Error, Result};
use crate::json::{Object, Value};
use crate::schema;

/// The expected shape of one value.
#[derive(Clone, Copy)]
pub(crate) enum Shape {
    /// A string with a value form.
    Str(Form),
    /// A positive integer (`integer .gt 0`).
    PositiveInt,
    /// A boolean.
    Bool,
    /// One of the listed strings; the code names a failure.
    Enum(&'static [&'static str], Code),
    /// A closed object.
    Object(&'static ObjectShape),
    /// An array.
    Array(&'static ArrayShape),
    /// Any JSON value.
    Any,
    /// Any object (an open region).
    AnyObject,
    /// A bounded 2020-12 schema document (spec 2: `custom`).
    SchemaDocument,
}

/// String value forms.
#[derive(Clone, Copy)]
pub(crate) enum Form {
    /// Any string.
    Any,
    /// Non-empty.
    NonEmpty,
    /// An identifier: 1..=256 bytes, no whitespace or control characters.
    Identity,
    /// `producer/name`, lowercase (spec 2 blueprint_id).
    ProducerQualified,
    /// RFC 3339 `Z` form.
    Timestamp,
    /// A tagged digest (spec 5).
    TaggedDigest,
}

/// One member of a closed object.
pub(crate) struct Field {
    pub name: &'static str,
    pub shape: Shape,
    pub required: bool,
}

/// A closed object: its members and the code an absent required member denies with.
pub(crate) struct ObjectShape {
    pub fields: &'static [Field],
    pub missing: Code,
}

/// An array: item shape, cardinality and uniqueness.
pub(crate) struct ArrayShape {
    pub item: Shape,
    pub min: usize,
    pub max: Option<usize>,
    /// `Some("")` means unique by value; `Some(name)` unique by that member.
    pub unique_by: Option<&'static str>,
    pub duplicate: Code,
}

/// A required member.
pub(crate) const fn req(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        required: true,
    }
}

/// An optional member.
pub(crate) const fn opt(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        required: false,
    }
}

/// Check `value` against an object shape at `path`.
pub(crate) fn check_object(shape: &ObjectShape, value: &Value, path: &str) -> Result<()> {
    let Some(o) = value.as_object() else {
        return Err(Error::new(Code::InvalidType, path));
    };
    for name in o.keys() {
        if !shape.fields.iter().any(|f| f.name == name) {
            return Err(Error::new(Code::UnknownMember, join(path, name)));
        }
    }
    for f in shape.fields.iter().filter(|f| f.required) {
        if !o.contains(f.name) {
            return Err(Error::new(shape.missing, join(path, f.name)));
        }
    }
    let present = || {
        shape
            .fields
            .iter()
            .filter_map(|f| o.get(f.name).map(|v| (f, v)))
    };
    for (f, v) in present() {
        if !type_ok(f.shape, v) {
            return Err(Error::new(Code::InvalidType, join(path, f.name)));
        }
    }
    for (f, v) in present() {
        constraint(f.shape, v, path, f.name)?;
    }
    for (f, v) in present() {
        if let Shape::Array(a) = f.shape {
            cardinality(a, v, path, f.name)?;
        }
    }
    for (f, v) in present() {
        if matches!(f.shape, Shape::Object(_) | Shape::Array(_)) {
            nested(f.shape, v, &join(path, f.name))?;
        }
    }
    Ok(())
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else if name.starts_with('[') {
        format!("{path}{name}")
    } else {
        format!("{path}.{name}")
    }
}

fn type_ok(shape: Shape, v: &Value) -> bool {
    match shape {
        Shape::Str(_) | Shape::Enum(..) => matches!(v, Value::String(_)),
        Shape::PositiveInt => v.as_int().is_some(),
        Shape::Bool => matches!(v, Value::Bool(_)),
        Shape::Object(_) | Shape::AnyObject => matches!(v, Value::Object(_)),
        Shape::Array(_) => matches!(v, Value::Array(_)),
        Shape::Any => true,
        Shape::SchemaDocument => matches!(v, Value::Object(_) | Value::Bool(_)),
    }
}

fn constraint(shape: Shape, v: &Value, parent: &str, name: &str) -> Result<()> {
    let path = || join(parent, name);
    match shape {
        Shape::Str(form) => check_form(form, v.as_str().unwrap_or_default(), parent, name),
        Shape::PositiveInt => {
            if v.as_int().is_some_and(|i| i > 0) {
                Ok(())
            } else {
                Err(Error::new(Code::InvalidConstraint, path()))
            }
        }
        Shape::Enum(options, code) => {
            if options.contains(&v.as_str().unwrap_or_default()) {
                Ok(())
            } else {
                Err(Error::new(code, path()))
            }
        }
        Shape::SchemaDocument => schema::compile(v).map(|_| ()).map_err(|e| Error {
            subject: path(),
            ..e
        }),
        _ => Ok(()),
    }
}

/// Check a string value form.
pub(crate) fn check_form(form: Form, s: &str, parent: &str, name: &str) -> Result<()> {
    let ok = match form {
        Form::Any => true,
        Form::NonEmpty => !s.is_empty(),
        Form::Identity => is_identity(s),
        Form::ProducerQualified => is_producer_qualified(s),
        Form::Timestamp => parse_timestamp_ms(s).is_some(),
        Form::TaggedDigest => {
            return Digest::parse_tagged(s)
                .map(|_| ())
                .map_err(|e| Error::new(e.code, join(parent, name)));
        }
    };
    if ok {
        Ok(())
    } else {
        Err(Error::new(Code::InvalidConstraint, join(parent, name)))
    }
}

fn cardinality(a: &ArrayShape, v: &Value, parent: &str, name: &str) -> Result<()> {
    let items = v.as_array().unwrap_or_default();
    if items.len() < a.min || a.max.is_some_and(|m| items.len() > m) {
        return Err(Error::new(Code::InvalidCardinality, join(parent, name)));
    }
    Ok(())
}

fn nested(shape: Shape, v: &Value, path: &str) -> Result<()> {
    match shape {
        Shape::Object(o) => check_object(o, v, path),
        Shape::Array(a) => {
            let items = v.as_array().unwrap_or_default();
            for (i, item) in items.iter().enumerate() {
                if !type_ok(a.item, item) {
                    return Err(Error::new(Code::InvalidType, format!("{path}[{i}]")));
                }
            }
            for (i, item) in items.iter().enumerate() {
                constraint(a.item, item, path, &format!("[{i}]"))?;
            }
            if matches!(a.item, Shape::Object(_) | Shape::Array(_)) {
                for (i, item) in items.iter().enumerate() {
                    nested(a.item, item, &format!("{path}[{i}]"))?;
                }
            }
            if let Some(by) = a.unique_by {
                let mut seen = HashSet::new();
                for item in items {
                    let key = if by.is_empty() {
                        Some(item)
                    } else {
                        item.get(by)
                    };
                    if let Some(k) = key
                        && !seen.insert(crate::jcs::encode(k))
                    {
                        return Err(Error::new(a.duplicate, path));
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether `s` is an identifier string.
pub(crate) fn is_identity(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `producer/name`: lowercase DNS-like labels, one `/` (spec 2 value: producer-qualified name).
pub(crate) fn is_producer_qualified(s: &str) -> bool {
    let Some((producer, name)) = s.split_once('/') else {
        return false;
    };
    let label = |p: &str, extra: &[u8]| {
        !p.is_empty()
            && p.len() <= 128
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || extra.contains(&b))
            && p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
    };
    label(producer, b".-") && label(name, b".-_")
}

/// Milliseconds since the Unix epoch for an RFC 3339 `Z`-form timestamp.
pub fn parse_timestamp_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || *b.last()? != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    if b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    let mut millis = 0;
    let rest = &s[19..s.len() - 1];
    if !rest.is_empty() {
        let frac = rest.strip_prefix('.')?;
        if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        millis = format!("{frac:0<3}")[..3].parse().ok()?;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&mo)
        || d < 1
        || d > days_in[(mo - 1) as usize]
        || h > 23
        || mi > 59
        || sec > 60
    {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + millis)
}

/// Recompute an artifact digest over the value minus `excluded` and compare it with the declared
/// `member` (spec 5): `digest_mismatch` on tamper.
pub(crate) fn verify_declared_digest(
    value: &Value,
    member: &str,
    domain: crate::digest::Domain,
    excluded: &[&str],
) -> Result<Digest> {
    let o = value
        .as_object()
        .ok_or_else(|| Error::new(Code::InvalidType, "artifact"))?;
    let declared = o
        .get(member)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::new(Code::MissingRequiredField, member.to_owned()))?;
    let actual = Digest::compute(
        domain,
        &crate::jcs::encode(&Value::Object(o.without(excluded))),
    );
    if Digest::parse_tagged(declared)? != actual {
        return Err(Error::new(Code::DigestMismatch, member.to_owned()));
    }
    Ok(actual)
}

/// Members of `o` named in `names`, as an object (for partial digests).
pub(crate) fn pick(o: &Object, names: &[&str]) -> Object {
    names
        .iter()
        .filter_map(|n| o.get(n).map(|v| ((*n).to_owned(), v.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_to_epoch_milliseconds() {
        assert_eq!(parse_timestamp_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_timestamp_ms("2020-01-01T00:00:00Z"),
            Some(1_577_836_800_000)
        );
        assert_eq!(
            parse_timestamp_ms("2020-01-01T00:00:00.5Z"),
            Some(1_577_836_800_500)
        );
        assert_eq!(parse_timestamp_ms("2020-02-30T00:00:00Z"), None);
        assert_eq!(parse_timestamp_ms("2020-01-01 00:00:00Z"), None);
    }

    #[test]
    fn producer_qualified_names_are_lowercase_with_one_slash() {
        assert!(is_producer_qualified("example.demo/echo"));
        assert!(!is_producer_qualified("UPPER/Case"));
        assert!(!is_producer_qualified("a/b/c"));
        assert!(!is_producer_qualified("nodash"));
    }
}
