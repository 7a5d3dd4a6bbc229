//! The `[retention]` section: how long events and stream chunks are kept (spec 16.2, 22.9), and how
//! often the housekeeping job purges them (with expired replay claims, idempotency reservations and
//! resume tokens). Receipts and audit events are kept.

use aip_runtime::retention::RetentionPolicy;
use serde::Deserialize;

use crate::config::ConfigError;

/// `[retention]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// Keep events this many seconds; unset keeps them.
    #[serde(default)]
    pub events_secs: Option<u64>,
    /// Keep the stream chunks of ended actions this many seconds; unset keeps them.
    #[serde(default)]
    pub chunks_secs: Option<u64>,
    /// Seconds between housekeeping runs (1..=86400).
    #[serde(default = "default_interval")]
    pub purge_interval_secs: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            events_secs: None,
            chunks_secs: None,
            purge_interval_secs: default_interval(),
        }
    }
}

fn default_interval() -> u64 {
    RetentionPolicy::default().interval_ms / 1000
}

impl RetentionConfig {
    /// Range checks.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !(1..=86_400).contains(&self.purge_interval_secs) {
            return Err(ConfigError::Invalid(
                "retention: purge_interval_secs must be 1..=86400".into(),
            ));
        }
        // Ten years at most: beyond that "keep" is what is meant, and the arithmetic stays exact.
        let too_long = |v: Option<u64>| v.is_some_and(|s| s == 0 || s > 315_360_000);
        if too_long(self.events_secs) || too_long(self.chunks_secs) {
            return Err(ConfigError::Invalid(
                "retention: events_secs and chunks_secs must be 1..=315360000 (or unset to keep)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The runtime's policy.
    pub fn policy(&self) -> RetentionPolicy {
        RetentionPolicy {
            events_ms: self.events_secs.map(|s| s * 1000),
            chunks_ms: self.chunks_secs.map(|s| s * 1000),
            interval_ms: self.purge_interval_secs * 1000,
        }
    }
}
