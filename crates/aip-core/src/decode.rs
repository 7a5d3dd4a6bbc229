//! Bounded decoding in spec 6.4 order: limits → JSON → version → registered type → body key ↔ type →
//! non-empty `message_id` / `idempotency_key` → schema (typed, closed decode) → semantic rules.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::decode_error::{DecodeError, LimitKind};
use crate::limits::Limits;
use crate::num::RANGE_MARK;
use crate::validate::{Checker, Validate};
use crate::{Envelope, MessageType};

/// Decodes and fully validates one envelope from untrusted bytes.
///
/// Offline checks only: clock skew, replay, authentication and authorization are the runtime's.
pub fn decode_envelope(bytes: &[u8], limits: &Limits) -> Result<Envelope, DecodeError> {
    decode_envelope_value(bytes, limits).map(|(e, _)| e)
}

/// Like [`decode_envelope`], also returning the parsed JSON as received (needed to verify a signature
/// or hash over exactly what was sent, 22.2).
pub fn decode_envelope_value(
    bytes: &[u8],
    limits: &Limits,
) -> Result<(Envelope, Value), DecodeError> {
    limits.prescan(bytes)?;
    let value: Value = serde_json::from_slice(bytes).map_err(|e| DecodeError::MalformedJson {
        message: e.to_string(),
    })?;
    let envelope = envelope_from_value(&value)?;
    Ok((envelope, value))
}

/// Decodes and validates an envelope from an already parsed JSON value (no byte limits applied).
pub fn envelope_from_value(value: &Value) -> Result<Envelope, DecodeError> {
    check_envelope_head(value)?;
    let envelope: Envelope = typed(value)?;
    semantic(&envelope)?;
    Ok(envelope)
}

/// Decodes and validates a standalone value of type `T` (a body or another schema-file type) from
/// bounded bytes.
pub fn decode_body<T: DeserializeOwned + Validate>(
    bytes: &[u8],
    limits: &Limits,
) -> Result<T, DecodeError> {
    limits.prescan(bytes)?;
    let value: Value = serde_json::from_slice(bytes).map_err(|e| DecodeError::MalformedJson {
        message: e.to_string(),
    })?;
    decode_value(&value)
}

/// Decodes and validates a standalone value of type `T` from parsed JSON.
pub fn decode_value<T: DeserializeOwned + Validate>(value: &Value) -> Result<T, DecodeError> {
    let t: T = typed(value)?;
    semantic(&t)?;
    Ok(t)
}

/// Decodes `T` from `value` with the schema layer only (closed typed decode), no semantic rules.
pub fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, DecodeError> {
    match T::deserialize(value) {
        Ok(t) => Ok(t),
        // Slow path only on failure: decode again tracking the path, for the pointer.
        Err(first) => match serde_path_to_error::deserialize::<_, T>(value) {
            Ok(t) => Ok(t),
            Err(e) => {
                Err(
                    schema_error(e.path(), e.inner()).unwrap_or_else(|| DecodeError::Schema {
                        pointer: String::new(),
                        message: first.to_string(),
                    }),
                )
            }
        },
    }
}

fn semantic<T: Validate + ?Sized>(t: &T) -> Result<(), DecodeError> {
    let mut c = Checker::new();
    t.validate(&mut c);
    let mut all = c.into_violations().into_iter();
    match all.next() {
        None => Ok(()),
        Some(first) => Err(DecodeError::Semantic {
            first,
            more: all.collect(),
        }),
    }
}

/// The checks 6.4 lists before schema validation, on the raw value so each gets its own error.
fn check_envelope_head(value: &Value) -> Result<(), DecodeError> {
    let Some(obj) = value.as_object() else {
        return Err(DecodeError::Schema {
            pointer: String::new(),
            message: "an envelope must be a JSON object".into(),
        });
    };
    if let Some(v) = obj.get("aip_version")
        && v.as_str() != Some("1.0")
    {
        return Err(DecodeError::UnsupportedVersion {
            found: v.to_string(),
        });
    }
    let declared = match obj.get("message_type") {
        Some(Value::String(s)) => match MessageType::from_wire(s) {
            Some(t) => Some(t),
            None => return Err(DecodeError::UnsupportedMessageType { found: s.clone() }),
        },
        _ => None,
    };
    if let (Some(t), Some(Value::Object(body))) = (declared, obj.get("body"))
        && body.len() == 1
        && let Some(key) = body.keys().next()
        && key != t.body_key()
    {
        return Err(DecodeError::TypeMismatch {
            message_type: t.as_str().to_owned(),
            body_key: key.clone(),
        });
    }
    if obj.get("message_id").and_then(Value::as_str) == Some("") {
        return Err(DecodeError::EmptyMessageId);
    }
    if obj.get("idempotency_key").and_then(Value::as_str) == Some("") {
        return Err(DecodeError::EmptyIdempotencyKey);
    }
    Ok(())
}

fn schema_error(
    path: &serde_path_to_error::Path,
    inner: &serde_json::Error,
) -> Option<DecodeError> {
    let mut pointer = String::new();
    for seg in path.iter() {
        use serde_path_to_error::Segment;
        let key = match seg {
            Segment::Seq { index } => index.to_string(),
            Segment::Map { key } => key.clone(),
            Segment::Enum { variant } => variant.clone(),
            Segment::Unknown => continue,
        };
        pointer.push('/');
        pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
    }
    let message = inner.to_string();
    if message.contains(RANGE_MARK) {
        let max = if message.contains("32-bit") {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        return Some(DecodeError::Limit {
            kind: LimitKind::NumberRange,
            limit: max,
            offset: 0,
            pointer,
        });
    }
    // Name the member itself for unknown and missing members.
    for prefix in ["unknown field `", "missing field `"] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some(name) = rest.split('`').next()
            && !pointer.ends_with(&format!("/{name}"))
        {
            pointer.push('/');
            pointer.push_str(&name.replace('~', "~0").replace('/', "~1"));
        }
    }
    Some(DecodeError::Schema { pointer, message })
}
