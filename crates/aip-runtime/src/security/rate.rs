//! Rate limits on admitted work (spec 22.8): a token bucket per principal and one per tenant, with
//! per-principal and per-tenant overrides, checked at admission so every transport and profile
//! (native HTTP, envelopes, WebSocket, NATS, MCP, A2A, webhooks, delegations) is bound by the same
//! buckets. Exceeding one refuses the action with `aip.limit.rate_limited` before anything is
//! written. Buckets are GCRA (the `governor` crate).
//!
//! Concurrency quotas ([`QuotaPolicy`]) bound the unfinished actions a principal and a tenant hold
//! at once; the store checks them inside the admission's transaction, so they hold across nodes.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota};

use crate::caller::{Caller, RUNTIME_ISSUER};

/// A bucket's refill rate and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Tokens added per second (at least 1).
    pub per_second: NonZeroU32,
    /// Most tokens held, so the largest burst (at least 1).
    pub burst: NonZeroU32,
}

impl Rate {
    fn quota(self) -> Quota {
        Quota::per_second(self.per_second).allow_burst(self.burst)
    }
}

/// The configured limits; `None` is no limit.
#[derive(Debug, Clone, Default)]
pub struct RatePolicy {
    /// Each principal's bucket, unless overridden.
    pub per_principal: Option<Rate>,
    /// Each tenant's bucket (all its principals together), unless overridden.
    pub per_tenant: Option<Rate>,
    /// Buckets of named principals, by principal id (in any tenant).
    pub principals: HashMap<String, Rate>,
    /// Buckets of named tenants.
    pub tenants: HashMap<String, Rate>,
}

/// Which bucket refused, and when it has a token again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    /// `principal` or `tenant`.
    pub bucket: &'static str,
    /// Milliseconds until the next admission may pass.
    pub retry_after_ms: u64,
}

impl Limited {
    /// The refusal it answers, counted in `aip_rate_limited_total` under `bucket` (the bucket's
    /// name as the refusal reports it).
    pub(crate) fn refusal(&self, bucket: &'static str) -> crate::error::RuntimeError {
        metrics::counter!("aip_rate_limited_total", "bucket" => bucket).increment(1);
        crate::error::RuntimeError::RateLimited {
            bucket,
            retry_after_ms: self.retry_after_ms,
        }
    }
}

/// Checks that keep keyed buckets of idle keys, before the idle ones are dropped (memory bound).
const RETAIN_EVERY: u64 = 4096;

/// The live buckets of a [`RatePolicy`].
pub(crate) struct RateLimits {
    policy: RatePolicy,
    principals: Option<DefaultKeyedRateLimiter<(String, String)>>,
    tenants: Option<DefaultKeyedRateLimiter<String>>,
    named_principals: HashMap<String, DefaultDirectRateLimiter>,
    named_tenants: HashMap<String, DefaultDirectRateLimiter>,
    checks: AtomicU64,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl RateLimits {
    pub(crate) fn new(policy: RatePolicy) -> Self {
        let direct = |m: &HashMap<String, Rate>| {
            m.iter()
                .map(|(k, r)| (k.clone(), DefaultDirectRateLimiter::direct(r.quota())))
                .collect()
        };
        Self {
            principals: policy
                .per_principal
                .map(|r| DefaultKeyedRateLimiter::keyed(r.quota())),
            tenants: policy
                .per_tenant
                .map(|r| DefaultKeyedRateLimiter::keyed(r.quota())),
            named_principals: direct(&policy.principals),
            named_tenants: direct(&policy.tenants),
            policy,
            checks: AtomicU64::new(0),
        }
    }

    /// No bucket at all (the default): every check passes without touching a clock or a key.
    fn unlimited(&self) -> bool {
        self.principals.is_none()
            && self.tenants.is_none()
            && self.named_principals.is_empty()
            && self.named_tenants.is_empty()
    }

    /// Takes one token from `caller`'s principal bucket and its tenant's; refuses when either is
    /// empty. A refusal by the tenant bucket still spent the principal's token: a principal
    /// flooding a full tenant slows itself down too.
    pub(crate) fn check(&self, caller: &Caller) -> Result<(), Limited> {
        // Work the runtime admits itself (a reconciliation as the commit's principal) was paid
        // for by the request that caused it.
        if caller.issuer == RUNTIME_ISSUER || self.unlimited() {
            return Ok(());
        }
        if self.checks.fetch_add(1, Ordering::Relaxed) % RETAIN_EVERY == RETAIN_EVERY - 1 {
            if let Some(keyed) = &self.principals {
                keyed.retain_recent();
            }
            if let Some(keyed) = &self.tenants {
                keyed.retain_recent();
            }
        }
        let clock = DefaultClock::default();
        let wait = |not_until: governor::NotUntil<_>| {
            let ms = not_until.wait_time_from(clock.now()).as_millis();
            u64::try_from(ms).unwrap_or(u64::MAX).max(1)
        };
        let principal = match self.named_principals.get(&caller.id) {
            Some(limiter) => limiter.check(),
            None => match &self.principals {
                Some(keyed) => keyed.check_key(&(caller.tenant.clone(), caller.id.clone())),
                None => Ok(()),
            },
        };
        principal.map_err(|n| Limited {
            bucket: "principal",
            retry_after_ms: wait(n),
        })?;
        let tenant = match self.named_tenants.get(&caller.tenant) {
            Some(limiter) => limiter.check(),
            None => match &self.tenants {
                Some(keyed) => keyed.check_key(&caller.tenant),
                None => Ok(()),
            },
        };
        tenant.map_err(|n| Limited {
            bucket: "tenant",
            retry_after_ms: wait(n),
        })
    }
}

/// Concurrency quotas: the most unfinished actions a principal and a tenant may hold at once
/// (spec 22.8); `None` is no bound. Exceeding one refuses the action with
/// `aip.limit.quota_exceeded` and writes nothing.
#[derive(Debug, Clone, Default)]
pub struct QuotaPolicy {
    /// Each principal's bound, unless overridden.
    pub per_principal: Option<u32>,
    /// Each tenant's bound (all its principals together), unless overridden.
    pub per_tenant: Option<u32>,
    /// Bounds of named principals, by principal id (in any tenant).
    pub principals: HashMap<String, u32>,
    /// Bounds of named tenants.
    pub tenants: HashMap<String, u32>,
    /// The most actions waiting for a worker at once, every tenant together.
    pub max_queued: Option<u32>,
}

impl QuotaPolicy {
    /// The bounds `caller`'s admission must fit. Work the runtime admits itself (a
    /// reconciliation, a compensation) is never refused: it finishes what was admitted.
    pub(crate) fn of(&self, caller: &Caller) -> aip_store::RunningQuota {
        if caller.issuer == RUNTIME_ISSUER {
            return aip_store::RunningQuota::default();
        }
        aip_store::RunningQuota {
            principal: self
                .principals
                .get(&caller.id)
                .copied()
                .or(self.per_principal),
            tenant: self
                .tenants
                .get(&caller.tenant)
                .copied()
                .or(self.per_tenant),
            queued: self.max_queued,
        }
    }
}
