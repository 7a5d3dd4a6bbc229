//! The compiled validator registry: every generated schema compiled once with `jsonschema`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::capability::SchemaViolation;
use crate::{FILES, SchemaError};

/// The 52 generated schemas, compiled (Draft 2020-12).
pub struct Validators {
    by_stem: BTreeMap<&'static str, jsonschema::Validator>,
}

impl std::fmt::Debug for Validators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validators")
            .field("schemas", &self.by_stem.len())
            .finish()
    }
}

impl Validators {
    /// Compiles every generated schema. Fails only if a generated schema does not compile, which the
    /// tests rule out.
    pub fn new() -> Result<Self, SchemaError> {
        let mut by_stem = BTreeMap::new();
        for f in FILES {
            let v = jsonschema::draft202012::new(&f.schema())
                .map_err(|e| SchemaError::Invalid(format!("{}: {e}", f.file_name())))?;
            by_stem.insert(f.stem, v);
        }
        Ok(Self { by_stem })
    }

    /// The compiled validator of a file stem.
    pub fn get(&self, stem: &str) -> Option<&jsonschema::Validator> {
        self.by_stem.get(stem)
    }

    /// Whether `instance` satisfies the generated schema `stem` (`None` for an unknown stem).
    pub fn is_valid(&self, stem: &str, instance: &Value) -> Option<bool> {
        self.get(stem).map(|v| v.is_valid(instance))
    }

    /// Every violation of the generated schema `stem` (at most `max`), with instance pointers.
    pub fn violations(
        &self,
        stem: &str,
        instance: &Value,
        max: usize,
    ) -> Option<Vec<SchemaViolation>> {
        let v = self.get(stem)?;
        Some(
            v.iter_errors(instance)
                .take(max)
                .map(|e| SchemaViolation {
                    pointer: e.instance_path().to_string(),
                    message: e.to_string(),
                })
                .collect(),
        )
    }
}
