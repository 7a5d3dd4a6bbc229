//! `[limits]` rate limits and concurrency quotas (spec 22.8): their TOML shape and bounds, and
//! the runtime policies built from them.

use super::{ConfigError, Limits};
use serde::Deserialize;

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
        let bound = |v: u32| {
            std::num::NonZeroU32::new(v)
                .filter(|v| v.get() <= 1_000_000)
                .ok_or_else(|| {
                    ConfigError::Invalid(format!(
                        "{key}: per_second and burst must be within 1..=1000000"
                    ))
                })
        };
        Ok(aip_runtime::Rate {
            per_second: bound(self.per_second)?,
            burst: bound(self.burst)?,
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

    /// The runtime's concurrency quotas, or the first one out of bounds (1..=1000000).
    pub fn quotas(&self) -> Result<aip_runtime::QuotaPolicy, ConfigError> {
        let bound = |v: u32, key: &str| {
            if (1..=1_000_000).contains(&v) {
                Ok(v)
            } else {
                Err(ConfigError::Invalid(format!(
                    "{key}: a quota must be within 1..=1000000"
                )))
            }
        };
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
