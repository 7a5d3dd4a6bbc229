//! Bounded JSON decoding (spec 3): the eight parse ceilings, duplicate-member and trailing-byte
//! denial, the integer window rule, and lone-surrogate denial.

use std::collections::HashSet;

use crate::error::{CeilingKey, Code, Error, Result};
use crate::jcs;

/// The largest integer magnitude that decodes as an integer (2^53 - 1, spec 3).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// A decoded JSON value. Objects keep members in received order; names are unique.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A finite number.
    Number(Number),
    /// A string (valid Unicode: lone surrogates are denied at decode).
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object.
    Object(Object),
}

/// A finite JSON number: an integer inside the window, or a double (spec 3 integer window).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// An integer with magnitude at most 2^53 - 1.
    Int(i64),
    /// A finite double (never NaN or infinite: see [`Number::float`]).
    Float(Finite),
}

/// A finite `f64`; NaN and the infinities are unrepresentable (RFC 8785 3.2.2.3).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Finite(f64);

impl Finite {
    /// The value, or `None` for NaN and the infinities.
    pub fn new(f: f64) -> Option<Finite> {
        f.is_finite().then_some(Finite(f))
    }

    /// The wrapped double.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl Number {
    /// An integer number; `None` outside the integer window.
    pub fn int(i: i64) -> Option<Number> {
        (i.unsigned_abs() <= MAX_SAFE_INTEGER as u64).then_some(Number::Int(i))
    }

    /// A double; `None` for NaN and the infinities.
    pub fn float(f: f64) -> Option<Number> {
        Finite::new(f).map(Number::Float)
    }

    /// The number as a double.
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f.get(),
        }
    }
}

/// A JSON object: unique member names in received order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    members: Vec<(String, Value)>,
}

impl Object {
    /// An empty object.
    pub fn new() -> Self {
        Object::default()
    }

    /// Insert or replace a member (producer-side construction).
    pub fn insert(&mut self, name: impl Into<String>, value: Value) {
        let name = name.into();
        match self.members.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.members.push((name, value)),
        }
    }

    /// The member named `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.members.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// Whether a member named `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Members in received order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.members.iter().map(|(k, v)| (k, v))
    }

    /// Member names in received order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.members.iter().map(|(k, _)| k)
    }

    /// Members in received order, as a slice.
    pub(crate) fn as_slice(&self) -> &[(String, Value)] {
        &self.members
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the object has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// A copy without the named members (digest inputs, spec 5).
    pub fn without(&self, names: &[&str]) -> Object {
        Object {
            members: self
                .members
                .iter()
                .filter(|(k, _)| !names.contains(&k.as_str()))
                .cloned()
                .collect(),
        }
    }
}

impl FromIterator<(String, Value)> for Object {
    fn from_iter<T: IntoIterator<Item = (String, Value)>>(iter: T) -> Self {
        let mut o = Object::new();
        for (k, v) in iter {
            o.insert(k, v);
        }
        o
    }
}

impl Value {
    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is an integer-tagged number (a float-tagged value is not one, spec 3).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Number(Number::Int(i)) => Some(*i),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Member lookup on an object; `None` for non-objects.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.as_object().and_then(|o| o.get(name))
    }

    /// A string value.
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    /// An integer value (clamped into the window by construction of callers' inputs).
    pub fn int(i: i64) -> Value {
        Number::int(i).map_or(Value::Null, Value::Number)
    }

    /// The JSON type name, for diagnostics.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

/// The parse ceilings (spec 3, notes 12): tighten-only decoder limits, never intersection inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeBounds {
    /// Maximum input bytes.
    pub bytes: usize,
    /// Maximum container nesting.
    pub depth: usize,
    /// Maximum members per object.
    pub members: usize,
    /// Maximum items per array.
    pub items: usize,
    /// Maximum values per document.
    pub nodes: usize,
    /// Maximum UTF-8 bytes per string value.
    pub string: usize,
    /// Maximum UTF-8 bytes per member name.
    pub key: usize,
    /// Maximum bytes per number lexeme.
    pub number_lexeme: usize,
}

impl DecodeBounds {
    /// The maxima (notes 12); omitted override fields keep these.
    pub const MAX: DecodeBounds = DecodeBounds {
        bytes: 5_000_000,
        depth: 64,
        members: 1_000,
        items: 10_000,
        nodes: 200_000,
        string: 100_000,
        key: 1_000,
        number_lexeme: 64,
    };

    /// These bounds with every field at most its maximum.
    pub fn clamped(&self) -> DecodeBounds {
        let mut out = *self;
        for key in CeilingKey::ALL {
            let max = DecodeBounds::MAX.get(key);
            let slot = out.slot(key);
            *slot = (*slot).min(max);
        }
        out
    }

    /// The value of one ceiling.
    pub fn get(&self, key: CeilingKey) -> usize {
        match key {
            CeilingKey::Bytes => self.bytes,
            CeilingKey::Depth => self.depth,
            CeilingKey::Members => self.members,
            CeilingKey::Items => self.items,
            CeilingKey::Nodes => self.nodes,
            CeilingKey::String => self.string,
            CeilingKey::Key => self.key,
            CeilingKey::NumberLexeme => self.number_lexeme,
        }
    }

    fn slot(&mut self, key: CeilingKey) -> &mut usize {
        match key {
            CeilingKey::Bytes => &mut self.bytes,
            CeilingKey::Depth => &mut self.depth,
            CeilingKey::Members => &mut self.members,
            CeilingKey::Items => &mut self.items,
            CeilingKey::Nodes => &mut self.nodes,
            CeilingKey::String => &mut self.string,
            CeilingKey::Key => &mut self.key,
            CeilingKey::NumberLexeme => &mut self.number_lexeme,
        }
    }

    /// Tighten the maxima with an override map (`bounds.new`): unknown names deny `unknown_bound`,
    /// non-integers `invalid_type`, values below 1 `bound_value_invalid`, and values above the maximum
    /// deny the ceiling itself (overrides tighten only).
    pub fn tighten(overrides: &Object) -> Result<DecodeBounds> {
        let mut out = DecodeBounds::MAX;
        for (name, value) in overrides.iter() {
            let Some(key) = CeilingKey::ALL.iter().copied().find(|k| k.name() == name) else {
                return Err(Error::new(Code::UnknownBound, format!("bounds.{name}")));
            };
            let Some(n) = value.as_int() else {
                return Err(Error::new(Code::InvalidType, format!("bounds.{name}")));
            };
            if n < 1 {
                return Err(Error::new(
                    Code::BoundValueInvalid,
                    format!("bounds.{name}"),
                ));
            }
            let max = DecodeBounds::MAX.get(key);
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            if n > max {
                return Err(Error::new(Code::Ceiling(key), format!("bounds.{name}")));
            }
            *out.slot(key) = n;
        }
        Ok(out)
    }

    /// The bounds as a JSON object with all eight members.
    pub fn to_value(&self) -> Value {
        Value::Object(
            CeilingKey::ALL
                .iter()
                .map(|k| (k.name().to_owned(), Value::int(self.get(*k) as i64)))
                .collect(),
        )
    }
}

impl Default for DecodeBounds {
    fn default() -> Self {
        DecodeBounds::MAX
    }
}

/// Decode `bytes` as one JSON value under `bounds` (spec 3). Bounds above the maxima are clamped to
/// them: parse ceilings only ever tighten.
pub fn decode(bytes: &[u8], bounds: &DecodeBounds) -> Result<Value> {
    let bounds = &bounds.clamped();
    if bytes.len() > bounds.bytes {
        return Err(Error::new(Code::Ceiling(CeilingKey::Bytes), "bytes"));
    }
    let text =
        std::str::from_utf8(bytes).map_err(|_| Error::new(Code::InvalidEncoding, "bytes"))?;
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        i: 0,
        nodes: 0,
        bounds,
    };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(Error::new(Code::TrailingBytes, "bytes"));
    }
    Ok(v)
}

/// Decode and require the bytes to already be canonical (spec 3: `non_canonical_bytes` before any
/// semantic read).
pub fn decode_canonical(bytes: &[u8], bounds: &DecodeBounds) -> Result<Value> {
    let v = decode(bytes, bounds)?;
    if jcs::encode(&v) != bytes {
        return Err(Error::new(Code::NonCanonicalBytes, "bytes"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
    nodes: usize,
    bounds: &'a DecodeBounds,
}

fn syntax() -> Error {
    Error::new(Code::InvalidSyntax, "bytes")
}

impl Parser<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn node(&mut self) -> Result<()> {
        self.nodes += 1;
        if self.nodes > self.bounds.nodes {
            return Err(Error::new(Code::Ceiling(CeilingKey::Nodes), "bytes"));
        }
        Ok(())
    }

    fn lit(&mut self, word: &[u8], v: Value) -> Result<Value> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(syntax())
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value> {
        self.node()?;
        match self.s.get(self.i) {
            None => Err(syntax()),
            Some(b'n') => self.lit(b"null", Value::Null),
            Some(b't') => self.lit(b"true", Value::Bool(true)),
            Some(b'f') => self.lit(b"false", Value::Bool(false)),
            Some(b'"') => {
                let s = self.string(self.bounds.string, CeilingKey::String)?;
                Ok(Value::String(s))
            }
            Some(b'[') => self.array(depth + 1),
            Some(b'{') => self.object(depth + 1),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(syntax()),
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value> {
        if depth > self.bounds.depth {
            return Err(Error::new(Code::Ceiling(CeilingKey::Depth), "bytes"));
        }
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.ws();
            if items.len() == self.bounds.items {
                return Err(Error::new(Code::Ceiling(CeilingKey::Items), "bytes"));
            }
            items.push(self.value(depth)?);
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(syntax()),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value> {
        if depth > self.bounds.depth {
            return Err(Error::new(Code::Ceiling(CeilingKey::Depth), "bytes"));
        }
        self.i += 1;
        let mut members: Vec<(String, Value)> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        self.ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Value::Object(Object { members }));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(syntax());
            }
            if members.len() == self.bounds.members {
                return Err(Error::new(Code::Ceiling(CeilingKey::Members), "bytes"));
            }
            let key = self.string(self.bounds.key, CeilingKey::Key)?;
            if !seen.insert(key.clone()) {
                return Err(Error::with_detail(Code::DuplicateMember, "bytes", key));
            }
            self.ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(syntax());
            }
            self.i += 1;
            self.ws();
            let v = self.value(depth)?;
            members.push((key, v));
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(Object { members }));
                }
                _ => return Err(syntax()),
            }
        }
    }

    fn string(&mut self, limit: usize, key: CeilingKey) -> Result<String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(&b) = self.s.get(self.i) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.i += 1;
            }
            // The input was validated as UTF-8 and the run stops only at ASCII bytes.
            out.push_str(&self.text[start..self.i]);
            if out.len() > limit {
                return Err(Error::new(Code::Ceiling(key), "bytes"));
            }
            match self.s.get(self.i) {
                None => return Err(syntax()),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = self.escape()?;
                    out.push(c);
                    if out.len() > limit {
                        return Err(Error::new(Code::Ceiling(key), "bytes"));
                    }
                }
                Some(_) => return Err(syntax()),
            }
        }
    }

    fn escape(&mut self) -> Result<char> {
        let b = *self.s.get(self.i).ok_or_else(syntax)?;
        self.i += 1;
        Ok(match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                if (0xDC00..0xE000).contains(&hi) {
                    return Err(Error::new(Code::InvalidEncoding, "bytes"));
                }
                if (0xD800..0xDC00).contains(&hi) {
                    if self.s.get(self.i..self.i + 2) != Some(b"\\u") {
                        return Err(Error::new(Code::InvalidEncoding, "bytes"));
                    }
                    self.i += 2;
                    let lo = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return Err(Error::new(Code::InvalidEncoding, "bytes"));
                    }
                    let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    return char::from_u32(c)
                        .ok_or_else(|| Error::new(Code::InvalidEncoding, "bytes"));
                }
                return char::from_u32(hi)
                    .ok_or_else(|| Error::new(Code::InvalidEncoding, "bytes"));
            }
            _ => return Err(syntax()),
        })
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self.s.get(self.i..self.i + 4).ok_or_else(syntax)?;
        let mut n = 0u32;
        for d in digits {
            let v = (*d as char).to_digit(16).ok_or_else(syntax)?;
            n = n * 16 + v;
        }
        self.i += 4;
        Ok(n)
    }

    fn number(&mut self) -> Result<Value> {
        let start = self.i;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.s.get(self.i) {
            self.i += 1;
        }
        let lexeme = &self.text[start..self.i];
        if lexeme.len() > self.bounds.number_lexeme {
            return Err(Error::new(Code::Ceiling(CeilingKey::NumberLexeme), "bytes"));
        }
        parse_number(lexeme).map(Value::Number)
    }
}

fn well_formed_number(l: &[u8]) -> bool {
    let mut i = 0;
    if l.first() == Some(&b'-') {
        i += 1;
    }
    match l.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while let Some(b'0'..=b'9') = l.get(i) {
                i += 1;
            }
        }
        _ => return false,
    }
    if l.get(i) == Some(&b'.') {
        i += 1;
        let s = i;
        while let Some(b'0'..=b'9') = l.get(i) {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    if let Some(b'e' | b'E') = l.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = l.get(i) {
            i += 1;
        }
        let s = i;
        while let Some(b'0'..=b'9') = l.get(i) {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    i == l.len()
}

/// Parse one number lexeme under the integer window rule (spec 3).
pub fn parse_number(lexeme: &str) -> Result<Number> {
    if !well_formed_number(lexeme.as_bytes()) {
        return Err(Error::new(Code::InvalidNumber, "bytes"));
    }
    let pure_integer = !lexeme.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'));
    if pure_integer {
        if let Ok(i) = lexeme.parse::<i64>()
            && let Some(n) = Number::int(i)
        {
            return Ok(n);
        }
        let f: f64 = lexeme
            .parse()
            .map_err(|_| Error::new(Code::InvalidNumber, "bytes"))?;
        let Some(n) = Number::float(f) else {
            return Err(Error::new(Code::IntegerMagnitude, "bytes"));
        };
        let mut buf = String::new();
        jcs::write_number(&mut buf, n);
        if buf != lexeme {
            return Err(Error::new(Code::NumberNotDoubleExpressible, "bytes"));
        }
        return Ok(n);
    }
    let f: f64 = lexeme
        .parse()
        .map_err(|_| Error::new(Code::InvalidNumber, "bytes"))?;
    Number::float(f).ok_or_else(|| Error::new(Code::InvalidNumber, "bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str, bounds: &DecodeBounds) -> Code {
        decode(text.as_bytes(), bounds).expect_err("must deny").code
    }

    #[test]
    fn depth_counts_container_nesting() {
        let b = DecodeBounds {
            depth: 4,
            ..DecodeBounds::MAX
        };
        assert!(decode(b"[[[[1]]]]", &b).is_ok());
        assert_eq!(code("[[[[[1]]]]]", &b), Code::Ceiling(CeilingKey::Depth));
    }

    #[test]
    fn duplicate_members_and_trailing_bytes_deny() {
        assert_eq!(
            code(r#"{"a":1,"a":2}"#, &DecodeBounds::MAX),
            Code::DuplicateMember
        );
        assert_eq!(code("1 2", &DecodeBounds::MAX), Code::TrailingBytes);
        assert_eq!(code("", &DecodeBounds::MAX), Code::InvalidSyntax);
    }

    #[test]
    fn lone_surrogates_and_bad_utf8_deny_invalid_encoding() {
        assert_eq!(
            code(r#""\ud800""#, &DecodeBounds::MAX),
            Code::InvalidEncoding
        );
        assert_eq!(
            code(r#""\udc00x""#, &DecodeBounds::MAX),
            Code::InvalidEncoding
        );
        assert_eq!(
            decode(b"\"\xed\xa0\x80\"", &DecodeBounds::MAX)
                .expect_err("deny")
                .code,
            Code::InvalidEncoding
        );
        let v = decode(br#""\ud83d\ude00""#, &DecodeBounds::MAX).expect("pair");
        assert_eq!(v, Value::string("\u{1F600}"));
    }

    #[test]
    fn the_integer_window_rule_holds() {
        assert_eq!(
            decode(b"9007199254740991", &DecodeBounds::MAX).expect("int"),
            Value::int(MAX_SAFE_INTEGER)
        );
        assert!(matches!(
            decode(b"295147905179352830000", &DecodeBounds::MAX).expect("float"),
            Value::Number(Number::Float(_))
        ));
        assert_eq!(
            code("9007199254740993", &DecodeBounds::MAX),
            Code::NumberNotDoubleExpressible
        );
        let huge = "9".repeat(400);
        let wide = DecodeBounds {
            number_lexeme: 1000,
            ..DecodeBounds::MAX
        };
        assert_eq!(code(&huge, &wide), Code::Ceiling(CeilingKey::NumberLexeme));
        assert_eq!(
            parse_number(&huge).expect_err("overflow").code,
            Code::IntegerMagnitude
        );
        assert_eq!(code("01", &DecodeBounds::MAX), Code::InvalidNumber);
        assert_eq!(code("1.", &DecodeBounds::MAX), Code::InvalidNumber);
        assert_eq!(code("1e999", &DecodeBounds::MAX), Code::InvalidNumber);
    }

    #[test]
    fn every_ceiling_is_enforced() {
        let m = DecodeBounds::MAX;
        let cases: [(DecodeBounds, &str, CeilingKey); 7] = [
            (DecodeBounds { bytes: 2, ..m }, "[1]", CeilingKey::Bytes),
            (
                DecodeBounds { members: 1, ..m },
                r#"{"a":1,"b":2}"#,
                CeilingKey::Members,
            ),
            (DecodeBounds { items: 2, ..m }, "[1,2,3]", CeilingKey::Items),
            (DecodeBounds { nodes: 3, ..m }, "[1,2,3]", CeilingKey::Nodes),
            (
                DecodeBounds { string: 2, ..m },
                r#""abc""#,
                CeilingKey::String,
            ),
            (
                DecodeBounds { key: 2, ..m },
                r#"{"abc":1}"#,
                CeilingKey::Key,
            ),
            (
                DecodeBounds {
                    number_lexeme: 2,
                    ..m
                },
                "123",
                CeilingKey::NumberLexeme,
            ),
        ];
        for (b, text, key) in cases {
            assert_eq!(code(text, &b), Code::Ceiling(key), "{text}");
        }
    }

    #[test]
    fn overrides_tighten_only() {
        let o = |text: &str| match decode(text.as_bytes(), &DecodeBounds::MAX).expect("json") {
            Value::Object(o) => o,
            _ => unreachable!("test input is an object"),
        };
        assert_eq!(
            DecodeBounds::tighten(&o(r#"{"depth":8}"#))
                .expect("ok")
                .depth,
            8
        );
        let e = DecodeBounds::tighten(&o(r#"{"depth":65}"#)).expect_err("widen");
        assert_eq!(e.code, Code::Ceiling(CeilingKey::Depth));
        let e = DecodeBounds::tighten(&o(r#"{"width":1}"#)).expect_err("unknown");
        assert_eq!(e.code, Code::UnknownBound);
        let e = DecodeBounds::tighten(&o(r#"{"depth":0}"#)).expect_err("zero");
        assert_eq!(e.code, Code::BoundValueInvalid);
        let e = DecodeBounds::tighten(&o(r#"{"depth":"1"}"#)).expect_err("type");
        assert_eq!(e.code, Code::InvalidType);
    }
}
