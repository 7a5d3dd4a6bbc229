//! Step 4: the input must satisfy the capability's input schema (compiled at admission of the
//! capability, within the bounds of spec 22.8).

use serde_json::Value;

use crate::error::RuntimeError;
use crate::registry::AdmittedCapability;

/// Longest violation text carried in the error.
const MAX_TEXT: usize = 300;

pub(crate) fn check(capability: &AdmittedCapability, input: &Value) -> Result<(), RuntimeError> {
    match capability.input_schema.validate(input) {
        Ok(()) => Ok(()),
        Err(violations) => {
            let first = violations.first();
            let mut text = first.map_or_else(String::new, |v| {
                format!("{} at {}", v.message, display_pointer(&v.pointer))
            });
            truncate(&mut text, MAX_TEXT);
            Err(RuntimeError::InvalidInput(text))
        }
    }
}

fn display_pointer(pointer: &str) -> &str {
    if pointer.is_empty() { "/" } else { pointer }
}

/// Cuts `text` to at most `max` bytes on a character boundary.
pub(crate) fn truncate(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}
