//! `[limits]`: the bounds applied to every request and every node (spec 16.4, 22.8), with rate
//! limits and concurrency quotas; their TOML shape, defaults and bounds, and the runtime policies
//! built from them.

use super::{ConfigError, Order, ordered, within, within_usize};
use serde::Deserialize;

/// Bounds applied to every request (spec 16.4, 22.8).
#[derive(Debug, Clone, Deserialize)]
// Every key is optional: a missing one takes its value from `Limits::default()`.
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest accepted request body in bytes.
    pub max_body_bytes: usize,
    /// Largest list page (1..=1000).
    pub max_list_limit: u32,
    /// Page size when the client names none.
    pub default_list_limit: u32,
    /// Longest bounded wait in milliseconds (at most 30000).
    pub max_wait_ms: u64,
    /// Action deadline when the action names no `timeout_ms`.
    pub default_action_timeout_ms: u64,
    /// Upper bound of any action deadline.
    pub max_action_timeout_ms: u64,
    /// Number of async workers claiming queued actions.
    pub async_workers: u32,
    /// Lease length of a claimed async action in milliseconds.
    pub lease_ms: u64,
    /// How long after a commit's admission its outcome is first reconciled when it is then
    /// unknown (spec 13.6); 0: only on request.
    pub reconcile_after_ms: u64,
    /// Claims of an action's job before it is given up (`dead_lettered`), 1..=100.
    pub job_max_attempts: u32,
    /// Each principal's rate of admitted actions (spec 22.8); unset: unlimited.
    pub rate_per_principal: Option<RateConfig>,
    /// Each tenant's rate of admitted actions, all its principals together; unset: unlimited.
    pub rate_per_tenant: Option<RateConfig>,
    /// Each principal's rate of requests that admit no action (reads, handshakes, decisions), on
    /// every transport; unset: unlimited.
    pub read_rate_per_principal: Option<RateConfig>,
    /// Each tenant's rate of such requests, all its principals together; unset: unlimited.
    pub read_rate_per_tenant: Option<RateConfig>,
    /// Rates of named principals, in place of `rate_per_principal`.
    pub principal_rates: std::collections::HashMap<String, RateConfig>,
    /// Rates of named tenants, in place of `rate_per_tenant`.
    pub tenant_rates: std::collections::HashMap<String, RateConfig>,
    /// Most unfinished actions each principal holds at once (spec 22.8); unset: unbounded.
    pub max_running_per_principal: Option<u32>,
    /// Most unfinished actions each tenant holds at once, all its principals together.
    pub max_running_per_tenant: Option<u32>,
    /// Quotas of named principals, in place of `max_running_per_principal`.
    pub principal_running: std::collections::HashMap<String, u32>,
    /// Quotas of named tenants, in place of `max_running_per_tenant`.
    pub tenant_running: std::collections::HashMap<String, u32>,
    /// Idle time after which an SSE/WebSocket stream gets a `heartbeat` event (100..=60000 ms).
    pub stream_heartbeat_ms: u64,
    /// A stream consumer whose buffer stays full this long is disconnected (ms).
    pub stream_send_timeout_ms: u64,
    /// Events buffered per stream connection (1..=4096).
    pub stream_buffer_events: usize,
    /// Requests in flight and streams followed at once per WebSocket connection (1..=4096).
    pub ws_max_streams: usize,
    /// Actions waiting for a worker at once, every tenant together (1..=1000000; 0: unbounded); a
    /// queued admission past it is refused `aip.runtime.queue_full` (spec 22.8).
    pub max_queued_actions: u32,
    /// Streams open at once on the node, SSE responses and WebSocket connections together
    /// (1..=1000000); a request asking for one more is refused `aip.transport.too_many_streams`.
    pub max_open_streams: usize,
    /// HTTP requests the node handles at once, every route but the probes (1..=100000); the
    /// excess is refused at once with `aip.runtime.overloaded` (spec 22.8).
    pub max_in_flight_requests: usize,
    /// A native HTTP request not answered within this is answered `aip.runtime.request_timeout`
    /// (more than `max_wait_ms`, at most 3600000); an action it submitted runs on.
    pub request_timeout_ms: u64,
    /// TCP connections open at once (1..=1000000); one past it is answered
    /// `aip.runtime.overloaded` and closed without being read (spec 22.8).
    pub max_connections: usize,
    /// A client must send a whole request head within this (100..=300000 ms) or is disconnected.
    pub header_read_timeout_ms: u64,
    /// A client must send a whole request body within this (100..=300000 ms), or is answered
    /// `aip.runtime.request_timeout` and its request is not served (slow-body clients hold no
    /// in-flight slot longer).
    pub body_read_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            max_list_limit: 1000,
            default_list_limit: 100,
            max_wait_ms: 30_000,
            default_action_timeout_ms: 60_000,
            max_action_timeout_ms: 3_600_000,
            async_workers: 8,
            lease_ms: 30_000,
            reconcile_after_ms: 10_000,
            job_max_attempts: 5,
            rate_per_principal: None,
            read_rate_per_principal: None,
            read_rate_per_tenant: None,
            rate_per_tenant: None,
            principal_rates: std::collections::HashMap::new(),
            tenant_rates: std::collections::HashMap::new(),
            max_running_per_principal: None,
            max_running_per_tenant: None,
            principal_running: std::collections::HashMap::new(),
            tenant_running: std::collections::HashMap::new(),
            stream_heartbeat_ms: 15_000,
            stream_send_timeout_ms: 30_000,
            stream_buffer_events: 64,
            ws_max_streams: 64,
            max_in_flight_requests: 1024,
            max_open_streams: 10_000,
            max_queued_actions: 100_000,
            request_timeout_ms: 90_000,
            max_connections: 16_384,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
        }
    }
}

impl Limits {
    /// The first bound this `[limits]` table breaks (documented in docs/configuration.md).
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        let key = |k: &str| format!("limits.{k}");
        within(key("max_list_limit"), self.max_list_limit, 1..=1000)?;
        within(
            key("default_list_limit"),
            self.default_list_limit,
            1..=u32::MAX,
        )?;
        ordered(
            key("default_list_limit"),
            self.default_list_limit.into(),
            Order::AtMost,
            "limits.max_list_limit",
            self.max_list_limit.into(),
        )?;
        within(key("max_wait_ms"), self.max_wait_ms, 0..=30_000)?;
        within(
            key("stream_heartbeat_ms"),
            self.stream_heartbeat_ms,
            100..=60_000,
        )?;
        within(
            key("stream_send_timeout_ms"),
            self.stream_send_timeout_ms,
            100..=600_000,
        )?;
        within_usize(
            key("stream_buffer_events"),
            self.stream_buffer_events,
            1..=4096,
        )?;
        within_usize(key("ws_max_streams"), self.ws_max_streams, 1..=4096)?;
        within_usize(
            key("max_in_flight_requests"),
            self.max_in_flight_requests,
            1..=100_000,
        )?;
        within_usize(
            key("max_open_streams"),
            self.max_open_streams,
            1..=1_000_000,
        )?;
        within_usize(key("max_connections"), self.max_connections, 1..=1_000_000)?;
        within(
            key("header_read_timeout_ms"),
            self.header_read_timeout_ms,
            100..=300_000,
        )?;
        within(
            key("body_read_timeout_ms"),
            self.body_read_timeout_ms,
            100..=300_000,
        )?;
        within(
            key("request_timeout_ms"),
            self.request_timeout_ms,
            1..=3_600_000,
        )?;
        ordered(
            key("request_timeout_ms"),
            self.request_timeout_ms,
            Order::MoreThan,
            "limits.max_wait_ms",
            self.max_wait_ms,
        )?;
        within_usize(
            key("max_body_bytes"),
            self.max_body_bytes,
            1024..=usize::MAX,
        )?;
        within(
            key("default_action_timeout_ms"),
            self.default_action_timeout_ms,
            1..=u64::MAX,
        )?;
        ordered(
            key("default_action_timeout_ms"),
            self.default_action_timeout_ms,
            Order::AtMost,
            "limits.max_action_timeout_ms",
            self.max_action_timeout_ms,
        )?;
        within(key("async_workers"), self.async_workers, 1..=1024)?;
        within(key("job_max_attempts"), self.job_max_attempts, 1..=100)?;
        self.rates()?;
        self.read_rates()?;
        self.quotas()?;
        // 0: reconcile only on request.
        within(
            key("reconcile_after_ms"),
            self.reconcile_after_ms,
            0..=86_400_000,
        )?;
        within(key("lease_ms"), self.lease_ms, 1000..=u64::MAX)?;
        Ok(())
    }
}

/// A token bucket: `per_second` admissions refill it, `burst` is its size (both 1..=1000000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateConfig {
    /// Admissions per second, sustained.
    pub per_second: u32,
    /// Admissions at once after an idle time.
    pub burst: u32,
}

impl RateConfig {
    /// The runtime's rate, or the bound it breaks.
    fn rate(self, key: &str) -> Result<aip_runtime::Rate, ConfigError> {
        let bound = |v: u32, part: &str| {
            let out_of_range = || ConfigError::OutOfRange {
                key: format!("{key}.{part}"),
                min: 1,
                max: 1_000_000,
                value: v.into(),
            };
            std::num::NonZeroU32::new(v)
                .filter(|v| v.get() <= 1_000_000)
                .ok_or_else(out_of_range)
        };
        Ok(aip_runtime::Rate {
            per_second: bound(self.per_second, "per_second")?,
            burst: bound(self.burst, "burst")?,
        })
    }
}

impl Limits {
    /// The runtime's rate policy, or the first rate out of bounds.
    pub fn rates(&self) -> Result<aip_runtime::RatePolicy, ConfigError> {
        let named = |m: &std::collections::HashMap<String, RateConfig>, key: &str| {
            m.iter()
                .map(|(id, r)| Ok((id.clone(), r.rate(&format!("{key}.{id}"))?)))
                .collect::<Result<std::collections::HashMap<_, _>, ConfigError>>()
        };
        Ok(aip_runtime::RatePolicy {
            per_principal: self
                .rate_per_principal
                .map(|r| r.rate("limits.rate_per_principal"))
                .transpose()?,
            per_tenant: self
                .rate_per_tenant
                .map(|r| r.rate("limits.rate_per_tenant"))
                .transpose()?,
            principals: named(&self.principal_rates, "limits.principal_rates")?,
            tenants: named(&self.tenant_rates, "limits.tenant_rates")?,
        })
    }

    /// The runtime's read buckets (requests that admit no action), or the first rate out of bounds.
    pub fn read_rates(&self) -> Result<aip_runtime::RatePolicy, ConfigError> {
        Ok(aip_runtime::RatePolicy {
            per_principal: self
                .read_rate_per_principal
                .map(|r| r.rate("limits.read_rate_per_principal"))
                .transpose()?,
            per_tenant: self
                .read_rate_per_tenant
                .map(|r| r.rate("limits.read_rate_per_tenant"))
                .transpose()?,
            ..aip_runtime::RatePolicy::default()
        })
    }

    /// The runtime's concurrency quotas, or the first one out of bounds (1..=1000000).
    pub fn quotas(&self) -> Result<aip_runtime::QuotaPolicy, ConfigError> {
        let bound = |v: u32, key: &str| within(key, v, 1..=1_000_000).map(|()| v);
        let named = |m: &std::collections::HashMap<String, u32>, key: &str| {
            m.iter()
                .map(|(id, v)| Ok((id.clone(), bound(*v, &format!("{key}.{id}"))?)))
                .collect::<Result<std::collections::HashMap<_, _>, ConfigError>>()
        };
        Ok(aip_runtime::QuotaPolicy {
            per_principal: self
                .max_running_per_principal
                .map(|v| bound(v, "limits.max_running_per_principal"))
                .transpose()?,
            per_tenant: self
                .max_running_per_tenant
                .map(|v| bound(v, "limits.max_running_per_tenant"))
                .transpose()?,
            principals: named(&self.principal_running, "limits.principal_running")?,
            tenants: named(&self.tenant_running, "limits.tenant_running")?,
            max_queued: match self.max_queued_actions {
                0 => None,
                n => Some(bound(n, "limits.max_queued_actions")?),
            },
        })
    }
}
