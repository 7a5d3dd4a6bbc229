//! The `[channels]` section: deployment policy for conversations and channel messages (spec 15):
//! whether raw provider payloads are kept (redacted) and the bounds on message parts.

use aip_runtime::channel::ChannelPolicy;
use serde::Deserialize;

use crate::config::{ConfigError, malformed, within_usize};

/// `[channels]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelsConfig {
    /// Keep a message's `raw_payload`, redacted by `redact_keys` (spec 15.3: retention is explicit).
    /// Off: raw payloads are dropped before anything is stored.
    #[serde(default)]
    pub retain_raw_payload: bool,
    /// Keys whose values are replaced by `[redacted]` at any depth of a kept raw payload
    /// (case-insensitive). Replaces the default list.
    #[serde(default = "default_redact_keys")]
    pub redact_keys: Vec<String>,
    /// Most parts in one message (1..=1000).
    #[serde(default = "default_max_parts")]
    pub max_parts: usize,
    /// Largest inline `data` of a part once decoded, bytes (1..=16 MiB; the envelope bound applies too).
    #[serde(default = "default_max_inline_bytes")]
    pub max_inline_bytes: usize,
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        ChannelsConfig {
            retain_raw_payload: false,
            redact_keys: default_redact_keys(),
            max_parts: default_max_parts(),
            max_inline_bytes: default_max_inline_bytes(),
        }
    }
}

fn default_redact_keys() -> Vec<String> {
    ChannelPolicy::default().redact_keys
}
fn default_max_parts() -> usize {
    ChannelPolicy::default().max_parts
}
fn default_max_inline_bytes() -> usize {
    ChannelPolicy::default().max_inline_bytes
}

impl ChannelsConfig {
    /// Range checks.
    pub fn check(&self) -> Result<(), ConfigError> {
        within_usize("channels.max_parts", self.max_parts, 1..=1000)?;
        within_usize(
            "channels.max_inline_bytes",
            self.max_inline_bytes,
            1..=16 * 1024 * 1024,
        )?;
        if self.redact_keys.iter().any(|k| k.trim().is_empty()) {
            return Err(malformed("channels.redact_keys", "", "non-empty keys"));
        }
        Ok(())
    }

    /// The runtime's policy.
    pub fn policy(&self) -> ChannelPolicy {
        ChannelPolicy {
            retain_raw_payload: self.retain_raw_payload,
            redact_keys: self.redact_keys.clone(),
            max_parts: self.max_parts,
            max_inline_bytes: self.max_inline_bytes,
        }
    }
}
