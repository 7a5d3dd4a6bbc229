//! The bounded JSON Schema 2020-12 dialect (spec 2, 8): a closed keyword subset, local `$ref` only,
//! a complexity meter over schema nodes and an evaluation meter over validation steps.

use std::collections::HashMap;

use crate::error::{Code, Error, Result};
use crate::json::{Number, Value};

/// The only dialect URI accepted in `$schema`.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";
/// Maximum schema nodes (subschemas) in one document: the complexity meter.
pub const MAX_SCHEMA_NODES: usize = 512;
/// Maximum validation steps for one instance.
pub const MAX_EVALUATION_STEPS: usize = 100_000;

const KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$defs",
    "$ref",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minProperties",
    "maxProperties",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
];
const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// A schema document that passed the dialect check.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    root: Value,
}

/// Check `document` against the bounded dialect and return the usable schema.
pub fn compile(document: &Value) -> Result<Schema> {
    let mut c = Compiler {
        root: document,
        nodes: 0,
    };
    c.node(document, "#")?;
    check_ref_cycles(document)?;
    Ok(Schema {
        root: document.clone(),
    })
}

/// Compile `document` and validate `instance` against it.
pub fn validate_instance(document: &Value, instance: &Value) -> Result<()> {
    compile(document)?.validate(instance)
}

impl Schema {
    /// Validate `instance`; the first failing keyword names the code.
    pub fn validate(&self, instance: &Value) -> Result<()> {
        let mut v = Validator {
            root: &self.root,
            steps: 0,
        };
        v.check(&self.root, instance, "$")
    }

    /// The schema document.
    pub fn document(&self) -> &Value {
        &self.root
    }
}

struct Compiler<'a> {
    root: &'a Value,
    nodes: usize,
}

fn shape(path: &str) -> Error {
    Error::new(Code::SchemaInvalidShape, path)
}

fn bad_value(path: &str, kw: &str) -> Error {
    Error::new(Code::SchemaKeywordValueInvalid, format!("{path}/{kw}"))
}

impl<'a> Compiler<'a> {
    fn node(&mut self, s: &'a Value, path: &str) -> Result<()> {
        self.nodes += 1;
        if self.nodes > MAX_SCHEMA_NODES {
            return Err(Error::new(Code::SchemaComplexityExceeded, "schema"));
        }
        let o = match s {
            Value::Bool(_) => return Ok(()),
            Value::Object(o) => o,
            _ => return Err(shape(path)),
        };
        for (kw, v) in o.iter() {
            if !KEYWORDS.contains(&kw.as_str()) {
                return Err(Error::new(
                    Code::SchemaKeywordNotAllowed,
                    format!("{path}/{kw}"),
                ));
            }
            let sub = format!("{path}/{kw}");
            match kw.as_str() {
                "$schema" => {
                    if v.as_str() != Some(DIALECT) {
                        return Err(Error::new(Code::SchemaDialectUnknown, sub));
                    }
                }
                "$id" | "$comment" | "title" | "description" => {
                    v.as_str().ok_or_else(|| bad_value(path, kw))?;
                }
                "default" | "examples" | "const" => {}
                "$ref" => {
                    let r = v.as_str().ok_or_else(|| bad_value(path, kw))?;
                    resolve(self.root, r)?;
                }
                "type" => check_type_keyword(v).ok_or_else(|| bad_value(path, kw))?,
                "enum" => {
                    v.as_array().ok_or_else(|| bad_value(path, kw))?;
                }
                "properties" | "$defs" => {
                    let map = v.as_object().ok_or_else(|| bad_value(path, kw))?;
                    for (name, child) in map.iter() {
                        self.node(child, &format!("{sub}/{name}"))?;
                    }
                }
                "required" => {
                    let items = v.as_array().ok_or_else(|| bad_value(path, kw))?;
                    let mut seen = std::collections::HashSet::new();
                    for i in items {
                        let name = i.as_str().ok_or_else(|| bad_value(path, kw))?;
                        if !seen.insert(name) {
                            return Err(bad_value(path, kw));
                        }
                    }
                }
                "additionalProperties" | "items" | "not" => self.node(v, &sub)?,
                "prefixItems" | "oneOf" | "anyOf" | "allOf" => {
                    let items = v.as_array().ok_or_else(|| bad_value(path, kw))?;
                    if items.is_empty() {
                        return Err(bad_value(path, kw));
                    }
                    for (i, child) in items.iter().enumerate() {
                        self.node(child, &format!("{sub}/{i}"))?;
                    }
                }
                "minItems" | "maxItems" | "minLength" | "maxLength" | "minProperties"
                | "maxProperties" => {
                    if v.as_int().is_none_or(|n| n < 0) {
                        return Err(bad_value(path, kw));
                    }
                }
                "uniqueItems" => {
                    v.as_bool().ok_or_else(|| bad_value(path, kw))?;
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                    if !matches!(v, Value::Number(_)) {
                        return Err(bad_value(path, kw));
                    }
                }
                "multipleOf" => match v {
                    Value::Number(n) if n.as_f64() > 0.0 => {}
                    _ => return Err(bad_value(path, kw)),
                },
                _ => return Err(Error::new(Code::SchemaKeywordNotAllowed, sub)),
            }
        }
        Ok(())
    }
}

fn check_type_keyword(v: &Value) -> Option<()> {
    match v {
        Value::String(s) => TYPES.contains(&s.as_str()).then_some(()),
        Value::Array(items) if !items.is_empty() => {
            let mut seen = std::collections::HashSet::new();
            for i in items {
                let s = i.as_str()?;
                if !TYPES.contains(&s) || !seen.insert(s) {
                    return None;
                }
            }
            Some(())
        }
        _ => None,
    }
}

/// Resolve a local reference (`#` or `#/json/pointer`).
fn resolve<'a>(root: &'a Value, reference: &str) -> Result<&'a Value> {
    let unresolvable = || Error::new(Code::SchemaRefUnresolvable, reference.to_owned());
    let pointer = reference.strip_prefix('#').ok_or_else(unresolvable)?;
    if pointer.is_empty() {
        return Ok(root);
    }
    let pointer = pointer.strip_prefix('/').ok_or_else(unresolvable)?;
    let mut cur = root;
    for token in pointer.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        cur = match cur {
            Value::Object(o) => o.get(&token).ok_or_else(unresolvable)?,
            Value::Array(a) => token
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get(i))
                .ok_or_else(unresolvable)?,
            _ => return Err(unresolvable()),
        };
    }
    Ok(cur)
}

/// Deny a cycle of `$ref` and in-place applicators that never consumes instance structure.
fn check_ref_cycles(root: &Value) -> Result<()> {
    fn id(v: &Value) -> usize {
        v as *const Value as usize
    }
    fn edges<'a>(root: &'a Value, s: &'a Value) -> Vec<&'a Value> {
        let mut out = Vec::new();
        let Some(o) = s.as_object() else { return out };
        if let Some(r) = o.get("$ref").and_then(Value::as_str)
            && let Ok(t) = resolve(root, r)
        {
            out.push(t);
        }
        for kw in ["allOf", "anyOf", "oneOf"] {
            if let Some(items) = o.get(kw).and_then(Value::as_array) {
                out.extend(items.iter());
            }
        }
        if let Some(n) = o.get("not") {
            out.push(n);
        }
        out
    }
    fn visit<'a>(root: &'a Value, s: &'a Value, state: &mut HashMap<usize, u8>) -> Result<()> {
        match state.get(&id(s)) {
            Some(1) => return Err(Error::new(Code::SchemaRefCycle, "schema")),
            Some(_) => return Ok(()),
            None => {}
        }
        state.insert(id(s), 1);
        for e in edges(root, s) {
            visit(root, e, state)?;
        }
        state.insert(id(s), 2);
        Ok(())
    }
    fn all_nodes<'a>(s: &'a Value, out: &mut Vec<&'a Value>) {
        out.push(s);
        let Some(o) = s.as_object() else { return };
        for (kw, v) in o.iter() {
            match kw.as_str() {
                "properties" | "$defs" => {
                    if let Some(m) = v.as_object() {
                        m.iter().for_each(|(_, c)| all_nodes(c, out));
                    }
                }
                "additionalProperties" | "items" | "not" => all_nodes(v, out),
                "prefixItems" | "oneOf" | "anyOf" | "allOf" => {
                    if let Some(a) = v.as_array() {
                        a.iter().for_each(|c| all_nodes(c, out));
                    }
                }
                _ => {}
            }
        }
    }
    let mut nodes = Vec::new();
    all_nodes(root, &mut nodes);
    let mut state = HashMap::new();
    for n in nodes {
        visit(root, n, &mut state)?;
    }
    Ok(())
}

struct Validator<'a> {
    root: &'a Value,
    steps: usize,
}

fn fail(code: Code, path: &str) -> Result<()> {
    Err(Error::new(code, path.to_owned()))
}

fn type_matches(t: &str, v: &Value) -> bool {
    match (t, v) {
        ("null", Value::Null) => true,
        ("boolean", Value::Bool(_)) => true,
        ("object", Value::Object(_)) => true,
        ("array", Value::Array(_)) => true,
        ("string", Value::String(_)) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(Number::Int(_))) => true,
        ("integer", Value::Number(Number::Float(f))) => f.get().fract() == 0.0,
        _ => false,
    }
}

/// JSON equality with numeric comparison (1 == 1.0) and order-insensitive objects.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

impl<'a> Validator<'a> {
    fn check(&mut self, s: &'a Value, v: &Value, path: &str) -> Result<()> {
        self.steps += 1;
        if self.steps > MAX_EVALUATION_STEPS {
            return Err(Error::new(Code::SchemaComplexityExceeded, "schema"));
        }
        let o = match s {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return fail(Code::InvalidConstraint, path),
            Value::Object(o) => o,
            _ => return Err(shape("#")),
        };
        if let Some(t) = o.get("type") {
            let ok = match t {
                Value::String(t) => type_matches(t, v),
                Value::Array(ts) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .any(|t| type_matches(t, v)),
                _ => false,
            };
            if !ok {
                return fail(Code::InvalidType, path);
            }
        }
        if let Some(r) = o.get("$ref").and_then(Value::as_str) {
            let target = resolve(self.root, r)?;
            self.check(target, v, path)?;
        }
        if let Some(c) = o.get("const")
            && !json_eq(c, v)
        {
            return fail(Code::InvalidConstraint, path);
        }
        if let Some(Value::Array(options)) = o.get("enum")
            && !options.iter().any(|e| json_eq(e, v))
        {
            return fail(Code::InvalidConstraint, path);
        }
        match v {
            Value::Number(n) => self.number(o, n.as_f64(), path)?,
            Value::String(st) => {
                let len = st.chars().count() as i64;
                if o.get("minLength")
                    .and_then(Value::as_int)
                    .is_some_and(|m| len < m)
                    || o.get("maxLength")
                        .and_then(Value::as_int)
                        .is_some_and(|m| len > m)
                {
                    return fail(Code::InvalidConstraint, path);
                }
            }
            Value::Array(items) => self.array(o, items, path)?,
            Value::Object(obj) => self.object(o, obj, path)?,
            _ => {}
        }
        if let Some(Value::Array(all)) = o.get("allOf") {
            for sub in all {
                self.check(sub, v, path)?;
            }
        }
        if let Some(Value::Array(any)) = o.get("anyOf") {
            let mut ok = false;
            for sub in any {
                if self.attempt(sub, v, path)? {
                    ok = true;
                    break;
                }
            }
            if !ok {
                return fail(Code::InvalidConstraint, path);
            }
        }
        if let Some(Value::Array(one)) = o.get("oneOf") {
            let mut matched = 0;
            for sub in one {
                if self.attempt(sub, v, path)? {
                    matched += 1;
                }
            }
            if matched != 1 {
                return fail(Code::InvalidCardinality, path);
            }
        }
        if let Some(n) = o.get("not")
            && self.attempt(n, v, path)?
        {
            return fail(Code::InvalidConstraint, path);
        }
        Ok(())
    }

    /// Try a subschema: `Ok(false)` on an instance mismatch, `Err` only for meter exhaustion.
    fn attempt(&mut self, s: &'a Value, v: &Value, path: &str) -> Result<bool> {
        match self.check(s, v, path) {
            Ok(()) => Ok(true),
            Err(e) if e.code == Code::SchemaComplexityExceeded => Err(e),
            Err(_) => Ok(false),
        }
    }

    fn number(&mut self, o: &crate::json::Object, n: f64, path: &str) -> Result<()> {
        let num = |k: &str| match o.get(k) {
            Some(Value::Number(x)) => Some(x.as_f64()),
            _ => None,
        };
        let bad = num("minimum").is_some_and(|m| n < m)
            || num("maximum").is_some_and(|m| n > m)
            || num("exclusiveMinimum").is_some_and(|m| n <= m)
            || num("exclusiveMaximum").is_some_and(|m| n >= m)
            || num("multipleOf").is_some_and(|m| (n / m).fract() != 0.0);
        if bad {
            return fail(Code::InvalidConstraint, path);
        }
        Ok(())
    }

    fn array(&mut self, o: &'a crate::json::Object, items: &[Value], path: &str) -> Result<()> {
        let len = items.len() as i64;
        if o.get("minItems")
            .and_then(Value::as_int)
            .is_some_and(|m| len < m)
            || o.get("maxItems")
                .and_then(Value::as_int)
                .is_some_and(|m| len > m)
        {
            return fail(Code::InvalidCardinality, path);
        }
        if o.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
            for (i, a) in items.iter().enumerate() {
                self.steps += i;
                if items[..i].iter().any(|b| json_eq(a, b)) {
                    return fail(Code::InvalidCardinality, path);
                }
            }
        }
        let prefix = o
            .get("prefixItems")
            .and_then(Value::as_array)
            .unwrap_or(&[]);
        for (i, item) in items.iter().enumerate() {
            let sub = format!("{path}[{i}]");
            if let Some(p) = prefix.get(i) {
                self.check(p, item, &sub)?;
            } else if let Some(s) = o.get("items") {
                self.check(s, item, &sub)?;
            }
        }
        Ok(())
    }

    fn object(
        &mut self,
        o: &'a crate::json::Object,
        obj: &crate::json::Object,
        path: &str,
    ) -> Result<()> {
        let len = obj.len() as i64;
        if o.get("minProperties")
            .and_then(Value::as_int)
            .is_some_and(|m| len < m)
            || o.get("maxProperties")
                .and_then(Value::as_int)
                .is_some_and(|m| len > m)
        {
            return fail(Code::InvalidCardinality, path);
        }
        if let Some(Value::Array(req)) = o.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !obj.contains(r) {
                    return fail(Code::MissingRequiredField, &format!("{path}.{r}"));
                }
            }
        }
        let props = o.get("properties").and_then(Value::as_object);
        for (k, v) in obj.iter() {
            let sub = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(s) => self.check(s, v, &sub)?,
                None => match o.get("additionalProperties") {
                    Some(Value::Bool(false)) => return fail(Code::UnknownMember, &sub),
                    Some(s) => self.check(s, v, &sub)?,
                    None => {}
                },
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{DecodeBounds, decode};

    fn j(t: &str) -> Value {
        decode(t.as_bytes(), &DecodeBounds::MAX).expect("json")
    }

    fn code(schema: &str, instance: &str) -> Code {
        validate_instance(&j(schema), &j(instance))
            .expect_err("must deny")
            .code
    }

    #[test]
    fn instance_failures_map_to_their_codes() {
        assert_eq!(code(r#"{"type":"object"}"#, "5"), Code::InvalidType);
        assert_eq!(
            code(r#"{"type":"integer","minimum":10}"#, "5"),
            Code::InvalidConstraint
        );
        assert_eq!(
            code(r#"{"type":"array","maxItems":2}"#, "[1,2,3]"),
            Code::InvalidCardinality
        );
        assert_eq!(
            code(r#"{"required":["a"]}"#, "{}"),
            Code::MissingRequiredField
        );
        assert_eq!(
            code(r#"{"additionalProperties":false}"#, r#"{"a":1}"#),
            Code::UnknownMember
        );
        assert_eq!(
            code(r#"{"oneOf":[{"type":"integer"},{"type":"number"}]}"#, "1"),
            Code::InvalidCardinality
        );
        assert!(
            validate_instance(&j(r#"{"type":["integer","null"],"minimum":1}"#), &j("null")).is_ok()
        );
    }

    #[test]
    fn the_dialect_is_closed_and_bounded() {
        let c = |s: &str| compile(&j(s)).expect_err("must deny").code;
        assert_eq!(c(r#"{"pattern":"a"}"#), Code::SchemaKeywordNotAllowed);
        assert_eq!(
            c(r#"{"$schema":"http://json-schema.org/draft-07/schema#"}"#),
            Code::SchemaDialectUnknown
        );
        assert_eq!(c(r#"{"type":5}"#), Code::SchemaKeywordValueInvalid);
        assert_eq!(c("5"), Code::SchemaInvalidShape);
        assert_eq!(
            c(r##"{"$ref":"#/$defs/missing"}"##),
            Code::SchemaRefUnresolvable
        );
        assert_eq!(
            c(
                r##"{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}"##
            ),
            Code::SchemaRefCycle
        );
        let many: Vec<String> = (0..600)
            .map(|i| format!(r#""p{i}":{{"type":"integer"}}"#))
            .collect();
        assert_eq!(
            c(&format!(r#"{{"properties":{{{}}}}}"#, many.join(","))),
            Code::SchemaComplexityExceeded
        );
    }
}
