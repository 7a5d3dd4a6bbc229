//! Wire timestamps (spec 5.2): RFC 3339 text, compared as instants.
//!
//! A [`Timestamp`] keeps the exact wire text (so signatures and receipts hash what was sent) and the
//! parsed instant. Decoding accepts any string, as the schema does; the semantic layer rejects text
//! that is not RFC 3339 with `aip.semantic.invalid_timestamp` and the member's JSON pointer.

use std::borrow::Cow;
use std::cmp::Ordering;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// An RFC 3339 wire timestamp.
#[derive(Debug, Clone)]
pub struct Timestamp {
    raw: String,
    instant: Option<OffsetDateTime>,
}

impl Timestamp {
    /// Parses wire text; the result is invalid (see [`Timestamp::is_valid`]) when it is not RFC 3339.
    pub fn from_wire(raw: impl Into<String>) -> Self {
        let raw = raw.into();
        // RFC 3339's ABNF separates date and time with `T` (any case); the `time` crate also takes a
        // space, which the grammar does not.
        let t_separated = matches!(raw.as_bytes().get(10), Some(b'T' | b't'));
        let instant = if t_separated {
            OffsetDateTime::parse(&raw, &Rfc3339).ok()
        } else {
            None
        };
        Self { raw, instant }
    }

    /// Strict parse: `None` unless the text is RFC 3339.
    pub fn parse(raw: &str) -> Option<Self> {
        let t = Self::from_wire(raw);
        t.is_valid().then_some(t)
    }

    /// The current time in UTC with a `Z` suffix (spec 5.2 SHOULD).
    pub fn now() -> Self {
        Self::from_instant(OffsetDateTime::now_utc())
    }

    /// Formats an instant as UTC RFC 3339 with a `Z` suffix.
    pub fn from_instant(at: OffsetDateTime) -> Self {
        let utc = at.to_offset(time::UtcOffset::UTC);
        // Formatting a UTC date-time between years 0 and 9999 as RFC 3339 cannot fail; outside that
        // range fall back to the Unix epoch rather than emit invalid text.
        match utc.format(&Rfc3339) {
            Ok(raw) => Self {
                raw,
                instant: Some(utc),
            },
            Err(_) => Self::from_instant(OffsetDateTime::UNIX_EPOCH),
        }
    }

    /// Milliseconds since the Unix epoch as an instant; `None` outside the representable range.
    pub fn from_unix_millis(ms: i64) -> Option<Self> {
        let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
        Some(Self::from_instant(at))
    }

    /// Whether the text is RFC 3339.
    pub fn is_valid(&self) -> bool {
        self.instant.is_some()
    }

    /// The instant, when the text is RFC 3339.
    pub fn instant(&self) -> Option<OffsetDateTime> {
        self.instant
    }

    /// Milliseconds since the Unix epoch, when valid.
    pub fn unix_millis(&self) -> Option<i64> {
        let nanos = self.instant?.unix_timestamp_nanos();
        i64::try_from(nanos.div_euclid(1_000_000)).ok()
    }

    /// The exact wire text.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Compares instants, not text (spec 5.2); `None` if either side is not RFC 3339.
    pub fn cmp_instant(&self, other: &Timestamp) -> Option<Ordering> {
        Some(self.instant?.cmp(&other.instant?))
    }
}

/// Equality is instant equality when both sides parse (`...Z` equals `...+00:00`), else text equality.
impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        match (self.instant, other.instant) {
            (Some(a), Some(b)) => a == b,
            _ => self.raw == other.raw,
        }
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.raw)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Cow::<'de, str>::deserialize(d)?;
        Ok(Self::from_wire(raw.into_owned()))
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> Cow<'static, str> {
        "Timestamp".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string" })
    }
}

impl crate::validate::Validate for Timestamp {
    fn validate(&self, v: &mut crate::validate::Checker) {
        if !self.is_valid() {
            v.report(
                crate::rules::Rule::Timestamp,
                format!("`{}` is not an RFC 3339 timestamp", self.raw),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_compare_as_instants_not_text() {
        let z = Timestamp::from_wire("2026-07-14T08:30:00Z");
        let plus4 = Timestamp::from_wire("2026-07-14T12:30:00+04:00");
        assert_eq!(z, plus4);
        assert_eq!(z.cmp_instant(&plus4), Some(Ordering::Equal));
        let later = Timestamp::from_wire("2026-07-14T08:30:00.001Z");
        assert_eq!(z.cmp_instant(&later), Some(Ordering::Less));
    }

    #[test]
    fn non_rfc3339_text_is_kept_but_marked_invalid() {
        for bad in [
            "yesterday",
            "2026-07-14",
            "2026-07-14 08:30:00Z",
            "2026-13-01T00:00:00Z",
            "",
        ] {
            let t = Timestamp::from_wire(bad);
            assert!(!t.is_valid(), "{bad}");
            assert_eq!(t.as_str(), bad);
        }
    }

    #[test]
    fn now_is_utc_with_a_z_suffix_and_round_trips_through_millis() {
        let t = Timestamp::now();
        assert!(t.as_str().ends_with('Z'));
        let ms = t.unix_millis().unwrap();
        let back = Timestamp::from_unix_millis(ms).unwrap();
        assert_eq!(back.unix_millis(), Some(ms));
    }
}
