//! The `[retention]` section: how long events and stream chunks are kept (spec 16.2, 22.9), and how
//! often the housekeeping job purges them (with expired replay claims, idempotency reservations and
//! resume tokens). Receipts and audit events are kept unless `receipts_secs` / `audit_secs` are set:
//! then they are archived to `archive_dir` (signed by the node key) before they are purged.

use std::path::{Path, PathBuf};

use aip_runtime::retention::RetentionPolicy;
use serde::Deserialize;

use crate::config::{ConfigError, malformed, within};

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
    /// Keep audit events this many seconds, then archive and purge them; unset keeps them.
    #[serde(default)]
    pub audit_secs: Option<u64>,
    /// Keep the receipt chains of ended actions this many seconds, then archive and purge them;
    /// unset keeps them.
    #[serde(default)]
    pub receipts_secs: Option<u64>,
    /// Where evidence archives are written (relative to `data_dir`); needed by `audit_secs` and
    /// `receipts_secs` unless `purge_unarchived` is set.
    #[serde(default)]
    pub archive_dir: Option<PathBuf>,
    /// Purge audit events and receipts without an archive: evidence is then gone for good.
    #[serde(default)]
    pub purge_unarchived: bool,
    /// Archive once at least this many records (audit events + receipt chains) are due
    /// (1..=5000) ...
    #[serde(default = "default_archive_min_records")]
    pub archive_min_records: u32,
    /// ... or once the oldest due record has waited this many seconds (0..=315360000).
    #[serde(default = "default_archive_max_wait_secs")]
    pub archive_max_wait_secs: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            events_secs: None,
            chunks_secs: None,
            purge_interval_secs: default_interval(),
            audit_secs: None,
            receipts_secs: None,
            archive_dir: None,
            purge_unarchived: false,
            archive_min_records: default_archive_min_records(),
            archive_max_wait_secs: default_archive_max_wait_secs(),
        }
    }
}

fn default_interval() -> u64 {
    RetentionPolicy::default().interval_ms / 1000
}

fn default_archive_min_records() -> u32 {
    RetentionPolicy::default().archive_min_records
}

fn default_archive_max_wait_secs() -> u64 {
    RetentionPolicy::default().archive_max_wait_ms / 1000
}

impl RetentionConfig {
    /// Range checks.
    pub fn check(&self) -> Result<(), ConfigError> {
        within(
            "retention.purge_interval_secs",
            self.purge_interval_secs,
            1..=86_400,
        )?;
        // Ten years at most: beyond that "keep" is what is meant, and the arithmetic stays exact.
        for (key, value) in [
            ("retention.events_secs", self.events_secs),
            ("retention.chunks_secs", self.chunks_secs),
            ("retention.audit_secs", self.audit_secs),
            ("retention.receipts_secs", self.receipts_secs),
        ] {
            if let Some(value) = value {
                within(key, value, 1..=315_360_000)?;
            }
        }
        within(
            "retention.archive_min_records",
            self.archive_min_records,
            1..=5_000,
        )?;
        within(
            "retention.archive_max_wait_secs",
            self.archive_max_wait_secs,
            0..=315_360_000,
        )?;
        let evidence = self.audit_secs.is_some() || self.receipts_secs.is_some();
        match (&self.archive_dir, self.purge_unarchived) {
            (Some(_), true) => Err(ConfigError::Exclusive {
                key: "retention.archive_dir".into(),
                other: "retention.purge_unarchived",
            }),
            (None, false) if evidence => Err(ConfigError::Needs {
                key: "retention.audit_secs and receipts_secs".into(),
                needs: "retention.archive_dir, or purge_unarchived = true to drop evidence for good",
                why: "evidence is archived before it is purged",
            }),
            (Some(dir), _) if dir.as_os_str().is_empty() => {
                Err(malformed("retention.archive_dir", "", "a directory path"))
            }
            _ => Ok(()),
        }
    }

    /// The runtime's policy; a relative `archive_dir` is under `data_dir`.
    pub fn policy(&self, data_dir: &Path) -> RetentionPolicy {
        RetentionPolicy {
            events_ms: self.events_secs.map(|s| s * 1000),
            chunks_ms: self.chunks_secs.map(|s| s * 1000),
            interval_ms: self.purge_interval_secs * 1000,
            audit_ms: self.audit_secs.map(|s| s * 1000),
            receipts_ms: self.receipts_secs.map(|s| s * 1000),
            archive_dir: self.archive_dir.as_ref().map(|d| data_dir.join(d)),
            purge_unarchived: self.purge_unarchived,
            archive_min_records: self.archive_min_records,
            archive_max_wait_ms: self.archive_max_wait_secs * 1000,
        }
    }
}
