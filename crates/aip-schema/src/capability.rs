//! Bounded validation of capability input and output schemas (spec 9.3, 11.3 step 4, 11.7, 22.8).
//!
//! A capability's schema comes from a manifest, so it is untrusted: before compiling, its depth,
//! node count and text size are bounded, it must be a JSON object, and remote references cannot be
//! resolved (the validator is built without network or file retrieval).

use aip_core::ErrorCode;
use serde_json::Value;

/// Bounds on a capability schema (22.8 "MUST reject excessive depth, node count, or text size").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaBounds {
    /// Deepest nesting of the schema document.
    pub max_depth: usize,
    /// Most JSON nodes (values) in the schema document.
    pub max_nodes: usize,
    /// Largest compact serialized size in bytes.
    pub max_bytes: usize,
    /// Most violations reported per instance.
    pub max_violations: usize,
}

impl Default for SchemaBounds {
    /// Depth 32, 10,000 nodes, 256 KiB, 16 violations.
    fn default() -> Self {
        Self {
            max_depth: 32,
            max_nodes: 10_000,
            max_bytes: 256 << 10,
            max_violations: 16,
        }
    }
}

/// Why a capability schema was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// Nesting deeper than allowed.
    #[error("schema nesting exceeds depth {0}")]
    TooDeep(usize),
    /// More nodes than allowed.
    #[error("schema exceeds {0} nodes")]
    TooManyNodes(usize),
    /// Larger than allowed.
    #[error("schema exceeds {0} bytes")]
    TooLarge(usize),
    /// An input schema must be a JSON object schema (9.3).
    #[error("an input schema must be a JSON object schema")]
    NotAnObjectSchema,
    /// The schema does not compile (invalid keyword values, unresolvable `$ref`, bad regex, ...).
    #[error("invalid schema: {0}")]
    Invalid(String),
}

impl SchemaError {
    /// Stable wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            SchemaError::TooDeep(_) => ErrorCode::SchemaTooDeep,
            SchemaError::TooManyNodes(_) => ErrorCode::SchemaTooManyNodes,
            SchemaError::TooLarge(_) => ErrorCode::SchemaTooLarge,
            SchemaError::NotAnObjectSchema => ErrorCode::SchemaNotObject,
            SchemaError::Invalid(_) => ErrorCode::SchemaInvalid,
        }
    }
}

/// One failed schema constraint on an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// JSON pointer of the offending instance member.
    pub pointer: String,
    /// Human-readable message; not an API.
    pub message: String,
}

/// A compiled, bounded capability schema.
pub struct CapabilitySchema {
    validator: jsonschema::Validator,
    max_violations: usize,
}

impl std::fmt::Debug for CapabilitySchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CapabilitySchema(..)")
    }
}

impl CapabilitySchema {
    /// Compiles an input schema: bounded, and a JSON object schema (`"type": "object"`, 9.3).
    pub fn compile_input(schema: &Value, bounds: &SchemaBounds) -> Result<Self, SchemaError> {
        let is_object = schema.get("type").and_then(Value::as_str) == Some("object");
        if !is_object {
            return Err(SchemaError::NotAnObjectSchema);
        }
        Self::compile(schema, bounds)
    }

    /// Compiles any schema (e.g. an output schema, 11.7) within `bounds`.
    pub fn compile(schema: &Value, bounds: &SchemaBounds) -> Result<Self, SchemaError> {
        check_bounds(schema, bounds)?;
        let validator =
            jsonschema::validator_for(schema).map_err(|e| SchemaError::Invalid(e.to_string()))?;
        Ok(Self {
            validator,
            max_violations: bounds.max_violations.max(1),
        })
    }

    /// Whether `instance` is valid.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(instance)
    }

    /// Validates `instance`, returning up to `max_violations` violations.
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<SchemaViolation>> {
        let v: Vec<SchemaViolation> = self
            .validator
            .iter_errors(instance)
            .take(self.max_violations)
            .map(|e| SchemaViolation {
                pointer: e.instance_path().to_string(),
                message: value_free(&e.schema_path().to_string()),
            })
            .collect();
        if v.is_empty() { Ok(()) } else { Err(v) }
    }
}

/// A violation described by the schema keyword it broke, never by the instance value: inputs may
/// carry secrets, and errors travel to clients and into logs.
fn value_free(schema_path: &str) -> String {
    let keyword = schema_path
        .rsplit('/')
        .find(|s| !s.is_empty() && s.parse::<usize>().is_err());
    format!(
        "does not satisfy `{}` (schema {})",
        keyword.unwrap_or("schema"),
        if schema_path.is_empty() {
            "/"
        } else {
            schema_path
        }
    )
}

fn check_bounds(schema: &Value, bounds: &SchemaBounds) -> Result<(), SchemaError> {
    let mut nodes = 0usize;
    let mut bytes = 0usize;
    // Iterative walk: a hostile schema cannot overflow the stack here.
    let mut stack: Vec<(&Value, usize)> = vec![(schema, 1)];
    while let Some((v, depth)) = stack.pop() {
        nodes += 1;
        if nodes > bounds.max_nodes {
            return Err(SchemaError::TooManyNodes(bounds.max_nodes));
        }
        if depth > bounds.max_depth {
            return Err(SchemaError::TooDeep(bounds.max_depth));
        }
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    bytes += k.len() + 4;
                    stack.push((child, depth + 1));
                }
            }
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, depth + 1))),
            Value::String(s) => bytes += s.len() + 2,
            _ => bytes += 8,
        }
        if bytes > bounds.max_bytes {
            return Err(SchemaError::TooLarge(bounds.max_bytes));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_input_schema_compiles_and_validates_with_pointers() {
        let s =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let c = CapabilitySchema::compile_input(&s, &SchemaBounds::default()).unwrap();
        assert!(c.is_valid(&json!({"n": 1})));
        let e = c.validate(&json!({"n": "secret-value"})).unwrap_err();
        assert_eq!(e[0].pointer, "/n");
        // The message names the keyword, never the value (inputs may carry secrets).
        assert_eq!(
            e[0].message,
            "does not satisfy `type` (schema /properties/n/type)"
        );
        assert!(!e[0].message.contains("secret-value"));
    }

    #[test]
    fn oversized_deep_or_non_object_schemas_are_refused() {
        let b = SchemaBounds {
            max_depth: 4,
            max_nodes: 50,
            max_bytes: 2000,
            max_violations: 4,
        };
        let deep = json!({"type": "object", "properties": {"a": {"properties": {"b": {"properties": {"c": {}}}}}}});
        assert_eq!(
            CapabilitySchema::compile_input(&deep, &b).unwrap_err(),
            SchemaError::TooDeep(4)
        );
        let many: serde_json::Map<String, Value> =
            (0..60).map(|i| (format!("p{i}"), json!({}))).collect();
        let wide = json!({"type": "object", "properties": many});
        assert_eq!(
            CapabilitySchema::compile_input(&wide, &b).unwrap_err(),
            SchemaError::TooManyNodes(50)
        );
        let big = json!({"type": "object", "description": "x".repeat(2500)});
        assert_eq!(
            CapabilitySchema::compile_input(&big, &b).unwrap_err(),
            SchemaError::TooLarge(2000)
        );
        assert_eq!(
            CapabilitySchema::compile_input(&json!({"type": "array"}), &b).unwrap_err(),
            SchemaError::NotAnObjectSchema
        );
    }

    #[test]
    fn remote_references_are_not_fetched() {
        let s =
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}});
        assert!(matches!(
            CapabilitySchema::compile_input(&s, &SchemaBounds::default()),
            Err(SchemaError::Invalid(_))
        ));
    }
}
