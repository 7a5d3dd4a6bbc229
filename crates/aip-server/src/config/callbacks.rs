//! The `[callbacks]` section (spec 17.2, 17.4): which targets actions may name and how deliveries
//! are made; the runtime takes it as a `CallbackPolicy`.

use std::collections::BTreeSet;

use aip_runtime::callback::{CallbackPolicy, ssrf::AddressPolicy};
use serde::Deserialize;

use crate::config::{ConfigError, malformed, within, within_usize};

/// `[callbacks]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallbacksConfig {
    /// Accept actions with a callback at all.
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// Exact host names targets may name (lowercase). Empty: any host whose addresses are public.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Hosts owned by the deployment that may resolve to loopback, private or other internal
    /// addresses (spec 17.4 "explicitly owned and allowed"). Exact names or IP literals.
    #[serde(default)]
    pub allow_internal_hosts: Vec<String>,
    /// Hosts that may be called over plain `http`; every other target needs `https`.
    #[serde(default)]
    pub allow_http_hosts: Vec<String>,
    /// Attempts per delivery, and the most a callback's metadata may ask for (1..=100).
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Per-attempt timeout, 1..=300000 (an attempt is also cut at half of `limits.lease_ms`, so
    /// the delivery's lease outlives it).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Waits before the 2nd, 3rd, ... attempt; the last repeats (each at most a day).
    #[serde(default = "default_backoff")]
    pub retry_backoff_ms: Vec<u64>,
    /// Redirects (307/308) followed per attempt, each checked again (0..=5).
    #[serde(default)]
    pub max_redirects: u32,
    /// Largest delivered message, bytes.
    #[serde(default = "default_max_request_bytes")]
    pub max_request_bytes: usize,
    /// Most of a target's answer that is read, bytes.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: usize,
    /// Subject prefixes NATS targets must start with; empty: NATS targets are refused.
    #[serde(default)]
    pub nats_subject_prefixes: Vec<String>,
    /// Sign deliveries with the node key.
    #[serde(default = "super::yes")]
    pub sign_payload: bool,
}

impl Default for CallbacksConfig {
    fn default() -> Self {
        let policy = CallbackPolicy::default();
        Self {
            enabled: policy.enabled,
            allowed_hosts: Vec::new(),
            allow_internal_hosts: Vec::new(),
            allow_http_hosts: Vec::new(),
            max_attempts: policy.max_attempts,
            timeout_ms: policy.timeout_ms,
            retry_backoff_ms: policy.retry_backoff_ms,
            max_redirects: policy.max_redirects,
            max_request_bytes: policy.max_request_bytes,
            max_response_bytes: policy.max_response_bytes,
            nats_subject_prefixes: Vec::new(),
            sign_payload: policy.sign_payload,
        }
    }
}

fn default_max_attempts() -> u32 {
    CallbackPolicy::default().max_attempts
}
fn default_timeout_ms() -> u64 {
    CallbackPolicy::default().timeout_ms
}
fn default_backoff() -> Vec<u64> {
    CallbackPolicy::default().retry_backoff_ms
}
fn default_max_request_bytes() -> usize {
    CallbackPolicy::default().max_request_bytes
}
fn default_max_response_bytes() -> usize {
    CallbackPolicy::default().max_response_bytes
}

impl CallbacksConfig {
    /// Range checks.
    pub fn check(&self) -> Result<(), ConfigError> {
        within("callbacks.max_attempts", self.max_attempts, 1..=100)?;
        within("callbacks.timeout_ms", self.timeout_ms, 1..=300_000)?;
        within_usize(
            "callbacks.retry_backoff_ms length",
            self.retry_backoff_ms.len(),
            1..=100,
        )?;
        for wait in &self.retry_backoff_ms {
            within("callbacks.retry_backoff_ms[]", *wait, 0..=86_400_000)?;
        }
        within("callbacks.max_redirects", self.max_redirects, 0..=5)?;
        within_usize(
            "callbacks.max_request_bytes",
            self.max_request_bytes,
            1024..=16 * 1024 * 1024,
        )?;
        within_usize(
            "callbacks.max_response_bytes",
            self.max_response_bytes,
            1..=16 * 1024 * 1024,
        )?;
        for (key, hosts) in [
            ("callbacks.allowed_hosts", &self.allowed_hosts),
            ("callbacks.allow_internal_hosts", &self.allow_internal_hosts),
            ("callbacks.allow_http_hosts", &self.allow_http_hosts),
        ] {
            for host in hosts {
                if host.is_empty() || *host != host.to_ascii_lowercase() || host.ends_with('.') {
                    return Err(malformed(
                        key,
                        host,
                        "an exact lowercase host name without a trailing dot",
                    ));
                }
            }
        }
        for prefix in &self.nats_subject_prefixes {
            if prefix.is_empty() || prefix.contains(['*', '>', ' ']) {
                return Err(malformed(
                    "callbacks.nats_subject_prefixes",
                    prefix,
                    "a literal subject prefix",
                ));
            }
        }
        Ok(())
    }

    /// The runtime's policy.
    pub fn policy(&self) -> CallbackPolicy {
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
        CallbackPolicy {
            enabled: self.enabled,
            address: AddressPolicy {
                allowed_hosts: set(&self.allowed_hosts),
                allow_internal: set(&self.allow_internal_hosts),
            },
            allow_http_hosts: set(&self.allow_http_hosts),
            max_attempts: self.max_attempts,
            timeout_ms: self.timeout_ms,
            retry_backoff_ms: self.retry_backoff_ms.clone(),
            max_redirects: self.max_redirects,
            max_request_bytes: self.max_request_bytes,
            max_response_bytes: self.max_response_bytes,
            nats_subject_prefixes: self.nats_subject_prefixes.clone(),
            sign_payload: self.sign_payload,
        }
    }
}

/// The `AIP_CALLBACKS__*` variables with a non-default value and a check that it took effect (the
/// configuration tests run them with the others).
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(crate) fn env_overrides() -> Vec<(
    &'static str,
    &'static str,
    fn(&crate::config::Config) -> bool,
)> {
    vec![
        ("AIP_CALLBACKS__ENABLED", "false", |c| !c.callbacks.enabled),
        (
            "AIP_CALLBACKS__ALLOWED_HOSTS",
            "[\"hooks.example.com\"]",
            |c| c.callbacks.allowed_hosts == ["hooks.example.com"],
        ),
        (
            "AIP_CALLBACKS__ALLOW_INTERNAL_HOSTS",
            "[\"10.0.0.5\"]",
            |c| c.callbacks.allow_internal_hosts == ["10.0.0.5"],
        ),
        ("AIP_CALLBACKS__ALLOW_HTTP_HOSTS", "[\"10.0.0.5\"]", |c| {
            c.callbacks.allow_http_hosts == ["10.0.0.5"]
        }),
        ("AIP_CALLBACKS__MAX_ATTEMPTS", "3", |c| {
            c.callbacks.max_attempts == 3
        }),
        ("AIP_CALLBACKS__TIMEOUT_MS", "2500", |c| {
            c.callbacks.timeout_ms == 2500
        }),
        ("AIP_CALLBACKS__RETRY_BACKOFF_MS", "[10, 20]", |c| {
            c.callbacks.retry_backoff_ms == [10, 20]
        }),
        ("AIP_CALLBACKS__MAX_REDIRECTS", "2", |c| {
            c.callbacks.max_redirects == 2
        }),
        ("AIP_CALLBACKS__MAX_REQUEST_BYTES", "4096", |c| {
            c.callbacks.max_request_bytes == 4096
        }),
        ("AIP_CALLBACKS__MAX_RESPONSE_BYTES", "512", |c| {
            c.callbacks.max_response_bytes == 512
        }),
        (
            "AIP_CALLBACKS__NATS_SUBJECT_PREFIXES",
            "[\"hooks.\"]",
            |c| c.callbacks.nats_subject_prefixes == ["hooks."],
        ),
        ("AIP_CALLBACKS__SIGN_PAYLOAD", "false", |c| {
            !c.callbacks.sign_payload
        }),
    ]
}
