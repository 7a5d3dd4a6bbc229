//! Why a configuration is refused: one variant per kind of rule, each naming the key it breaks as
//! written in the file (`section.key`; `section[name].key` for an entry of a list), so an operator
//! reads which line to change and a caller can match the rule without parsing text.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::PathBuf;

/// Why configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file or an environment override is malformed (syntax, an unknown key, a wrong type).
    #[error("configuration: {0}")]
    Parse(#[from] Box<figment::Error>),
    /// The configuration file named on the command line does not exist.
    #[error("configuration: config file {} not found", path.display())]
    FileNotFound {
        /// The path given.
        path: PathBuf,
    },
    /// A number outside its documented range.
    #[error("configuration: {key} must be {}, not {value}", range_text(*min, *max))]
    OutOfRange {
        /// The key.
        key: String,
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
        /// The value given.
        value: u64,
    },
    /// A number that must stand in an order with another key's value.
    #[error("configuration: {key} must be {order} {other} ({bound}), not {value}")]
    Ordered {
        /// The key.
        key: String,
        /// The order it must keep.
        order: Order,
        /// The other key.
        other: &'static str,
        /// The other key's value.
        bound: u64,
        /// The value given.
        value: u64,
    },
    /// A text value of the wrong form.
    #[error("configuration: {key} {value:?} must be {expected}")]
    Malformed {
        /// The key.
        key: String,
        /// The value given (never a secret: only names, ids, hosts and URLs are checked this way).
        value: String,
        /// The form it must have.
        expected: &'static str,
    },
    /// Two keys that are given together or not at all.
    #[error("configuration: give {key} and {other} together")]
    Together {
        /// The key given.
        key: String,
        /// The key it needs beside it.
        other: &'static str,
    },
    /// A set of keys of which exactly one must be given.
    #[error("configuration: {key}: give exactly one of {}", options.join(", "))]
    ExactlyOne {
        /// The table or entry holding them.
        key: String,
        /// The keys.
        options: &'static [&'static str],
    },
    /// A set of keys of which at most one may be given.
    #[error("configuration: {key}: choose at most one of {}", options.join(", "))]
    AtMostOne {
        /// The table or entry holding them.
        key: String,
        /// The keys.
        options: &'static [&'static str],
    },
    /// Two keys that exclude each other.
    #[error("configuration: {key} and {other} exclude each other")]
    Exclusive {
        /// The key given.
        key: String,
        /// The key it excludes.
        other: &'static str,
    },
    /// A key that is meaningful only with another one.
    #[error("configuration: {key} needs {needs} ({why})")]
    Needs {
        /// The key given.
        key: String,
        /// What it needs.
        needs: &'static str,
        /// Why.
        why: &'static str,
    },
    /// An id given twice where ids are unique.
    #[error("configuration: {key}: {id} is defined twice")]
    Duplicate {
        /// The list.
        key: String,
        /// The repeated id.
        id: String,
    },
    /// A reference to something the configuration does not define.
    #[error("configuration: {key} names {kind} {name:?}, which is not configured")]
    Unknown {
        /// The key holding the reference.
        key: String,
        /// What kind of thing it names (`principal`, `tenant policy`, `peer`, ...).
        kind: &'static str,
        /// The name given.
        name: String,
    },
    /// A value the node reserves for itself.
    #[error("configuration: {key} must not be {value} ({why})")]
    Reserved {
        /// The key.
        key: String,
        /// The reserved value.
        value: String,
        /// What the node uses it for.
        why: &'static str,
    },
    /// A file the configuration names could not be read.
    #[error("configuration: {key} {}: {source}", path.display())]
    Unreadable {
        /// The key naming the file.
        key: String,
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// A configured manifest object (capability, resource) that does not decode as its type.
    #[error("configuration: {key}: {source}")]
    Entry {
        /// The entry.
        key: String,
        /// Why it does not decode.
        #[source]
        source: serde_json::Error,
    },
    /// A server the configuration names (an upstream MCP server, a remote A2A agent) could not
    /// be reached, or its answer does not match what the entry pins.
    #[error("configuration: {key}: {source}")]
    Unreachable {
        /// The entry.
        key: String,
        /// Why, as the client saw it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An entry refused by the part of the runtime it configures, with that part's typed reason
    /// (an approval predicate, a handler URL, a resource path, an MCP tool name, an OAuth key set).
    #[error("configuration: {key}: {source}")]
    Rejected {
        /// The entry.
        key: String,
        /// The typed reason.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// `within 1..=5`, or `at least 1024` for a range with no upper bound of its own.
fn range_text(min: u64, max: u64) -> String {
    // `within_usize` widens `usize::MAX` to `u64::MAX`.
    if max == u64::MAX {
        format!("at least {min}")
    } else {
        format!("within {min}..={max}")
    }
}

/// The order a key keeps with another key ([`ConfigError::Ordered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Greater than or equal.
    AtLeast,
    /// Strictly greater.
    MoreThan,
    /// Less than or equal.
    AtMost,
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::AtLeast => "at least",
            Order::MoreThan => "more than",
            Order::AtMost => "at most",
        })
    }
}

impl ConfigError {
    /// The key the configuration breaks (`None` for a parse error, which figment locates itself,
    /// and for a missing file).
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Parse(_) | ConfigError::FileNotFound { .. } => None,
            ConfigError::OutOfRange { key, .. }
            | ConfigError::Ordered { key, .. }
            | ConfigError::Malformed { key, .. }
            | ConfigError::Together { key, .. }
            | ConfigError::ExactlyOne { key, .. }
            | ConfigError::AtMostOne { key, .. }
            | ConfigError::Exclusive { key, .. }
            | ConfigError::Needs { key, .. }
            | ConfigError::Duplicate { key, .. }
            | ConfigError::Unknown { key, .. }
            | ConfigError::Reserved { key, .. }
            | ConfigError::Unreadable { key, .. }
            | ConfigError::Entry { key, .. }
            | ConfigError::Unreachable { key, .. }
            | ConfigError::Rejected { key, .. } => Some(key),
        }
    }
}

/// [`ConfigError::Unreachable`]: the server `key` names could not be used, for `source`.
pub fn unreachable(
    key: impl Into<String>,
    source: impl std::error::Error + Send + Sync + 'static,
) -> ConfigError {
    ConfigError::Unreachable {
        key: key.into(),
        source: Box::new(source),
    }
}

/// [`ConfigError::Rejected`]: `key` refused for `source`.
pub fn rejected(
    key: impl Into<String>,
    source: impl std::error::Error + Send + Sync + 'static,
) -> ConfigError {
    ConfigError::Rejected {
        key: key.into(),
        source: Box::new(source),
    }
}

/// `Ok` when `value` of `key` lies in `range`, else [`ConfigError::OutOfRange`].
pub fn within<T: Copy + PartialOrd + Into<u64>>(
    key: impl Into<String>,
    value: T,
    range: RangeInclusive<T>,
) -> Result<(), ConfigError> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(ConfigError::OutOfRange {
        key: key.into(),
        min: (*range.start()).into(),
        max: (*range.end()).into(),
        value: value.into(),
    })
}

/// [`within`] for `usize` values (sizes and counts), which do not convert to `u64` by `Into`.
pub fn within_usize(
    key: impl Into<String>,
    value: usize,
    range: RangeInclusive<usize>,
) -> Result<(), ConfigError> {
    // usize is at most 64 bits on every supported target, so these conversions are exact.
    let wide = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
    within(key, wide(value), wide(*range.start())..=wide(*range.end()))
}

/// `Ok` when `value` of `key` keeps `order` with `other`'s `bound`, else [`ConfigError::Ordered`].
pub fn ordered(
    key: impl Into<String>,
    value: u64,
    order: Order,
    other: &'static str,
    bound: u64,
) -> Result<(), ConfigError> {
    let holds = match order {
        Order::AtLeast => value >= bound,
        Order::MoreThan => value > bound,
        Order::AtMost => value <= bound,
    };
    if holds {
        return Ok(());
    }
    Err(ConfigError::Ordered {
        key: key.into(),
        order,
        other,
        bound,
        value,
    })
}

/// [`ConfigError::Malformed`] for `key` holding `value`.
pub fn malformed(key: impl Into<String>, value: &str, expected: &'static str) -> ConfigError {
    ConfigError::Malformed {
        key: key.into(),
        value: value.into(),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_names_its_key_in_the_message() {
        let errors = [
            within("limits.lease_ms", 5u64, 1000..=10_000).unwrap_err(),
            ordered("a.b", 1, Order::AtLeast, "a.c", 2).unwrap_err(),
            malformed("peers[x].url", "ftp://", "an http(s) URL"),
        ];
        for e in errors {
            let key = e.key().expect("a rule names its key").to_owned();
            assert!(e.to_string().contains(&key), "{e}");
        }
    }

    #[test]
    fn a_range_without_an_upper_bound_reads_as_a_minimum() {
        let e = within("limits.lease_ms", 999u64, 1000..=u64::MAX).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("limits.lease_ms must be at least 1000, not 999"),
            "{e}"
        );
        let e = within("limits.max_wait_ms", 30_001u64, 0..=30_000).unwrap_err();
        assert!(
            e.to_string()
                .contains("must be within 0..=30000, not 30001"),
            "{e}"
        );
    }

    #[test]
    fn a_value_inside_its_range_or_order_passes() {
        assert!(within("k", 5u32, 1..=5).is_ok());
        assert!(within_usize("k", 0, 0..=0).is_ok());
        assert!(ordered("k", 3, Order::MoreThan, "o", 2).is_ok());
        assert!(ordered("k", 2, Order::MoreThan, "o", 2).is_err());
        assert!(ordered("k", 2, Order::AtMost, "o", 2).is_ok());
    }
}
