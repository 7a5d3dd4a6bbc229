//! Integer members: JSON Schema's `integer` admits any number with a zero fraction (`1.0`, `1e2`), so
//! decoding does too; values beyond the implementation's range are a limit error (spec 5.1).

use serde::de::{self, Deserializer, Visitor};

/// Marker in a serde error message for an integer outside the implementation's range.
pub(crate) const RANGE_MARK: &str = "[aip:out-of-range]";

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

pub(crate) fn default_true() -> bool {
    true
}

pub(crate) fn default_1_u32() -> u32 {
    1
}

struct U64Visitor;

impl Visitor<'_> for U64Visitor {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a non-negative integer")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        if !v.is_finite() || v.fract() != 0.0 || v < 0.0 {
            return Err(E::invalid_value(de::Unexpected::Float(v), &self));
        }
        // 2^64 as f64 is exact; every integral f64 below it converts without loss.
        if v >= 18_446_744_073_709_551_616.0 {
            return Err(E::custom(format!(
                "{RANGE_MARK} {v} exceeds the 64-bit range"
            )));
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(v as u64)
    }
}

pub(crate) fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(U64Visitor)
}

pub(crate) fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    narrow(d.deserialize_any(U64Visitor)?)
}

/// An integer decoded with [`U64Visitor`], for use inside `Option` and `Vec`.
struct Int(u64);

impl<'de> serde::Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(U64Visitor).map(Int)
    }
}

fn narrow<E: de::Error>(v: u64) -> Result<u32, E> {
    u32::try_from(v).map_err(|_| E::custom(format!("{RANGE_MARK} {v} exceeds the 32-bit range")))
}

pub(crate) fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v: Option<Int> = serde::Deserialize::deserialize(d)?;
    Ok(v.map(|i| i.0))
}

pub(crate) fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v: Option<Int> = serde::Deserialize::deserialize(d)?;
    v.map(|i| narrow(i.0)).transpose()
}

pub(crate) fn vec_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    let v: Vec<Int> = serde::Deserialize::deserialize(d)?;
    Ok(v.into_iter().map(|i| i.0).collect())
}
