//! Authentication refusals in the audit log at a bounded cost (spec 18.3, 22.5): every refusal is
//! counted in a metric, but per (tenant, source, reason) at most one audit event is written per
//! window, carrying the number of refusals it stands for; the transports refuse unauthenticated
//! traffic without waiting for that write. An unauthenticated flood is then a few
//! writes per window, never one database write per request. Refusals before a tenant is known
//! (a bad bearer token, a refused `Host`) go to the node's own security log, the audit events of
//! the reserved tenant [`NODE_LOG_TENANT`], which holders of `audit:read` in the admin tenant read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aip_store::NewAudit;
use serde_json::{Value, json};

use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// The reserved tenant holding the node's security log: configuration refuses it as a tenant name.
pub const NODE_LOG_TENANT: &str = "aip.node";

/// The audit label of a refusal at the transport (authentication, `Host`, `Origin`, signatures of
/// inbound webhooks).
pub const AUTH_REFUSED: &str = "auth.refused";

/// The audit label of an action refused by a rate limit or a concurrency quota.
pub const LIMIT_REFUSED: &str = "limit.refused";

/// At most this many (tenant, source, reason) windows are open at once; past it, new sources
/// share one window per reason (source `*`), so the table's memory is bounded too.
const MAX_WINDOWS: usize = 10_000;

/// Why a request was refused before it was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalReason {
    /// No credentials at all on a protected route.
    MissingCredentials,
    /// A bearer token that is unknown, revoked or expired.
    BadBearer,
    /// An OAuth access token that did not verify (signature, issuer, audience, expiry).
    BadOAuthToken,
    /// An inbound webhook whose signature did not verify.
    BadWebhookSignature,
    /// A `Host` header outside the allowed names (DNS rebinding guard).
    HostNotAllowed,
    /// An `Origin` header outside the allowed origins.
    OriginNotAllowed,
    /// An envelope refused by its authenticity checks (signature, signer binding, skew, replay).
    EnvelopeRejected,
    /// An authenticated principal past its request rate (spec 22.8).
    RateLimited,
    /// An authenticated principal or tenant at its concurrency quota (spec 22.8).
    QuotaExceeded,
}

impl RefusalReason {
    /// The stable name in audit data and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingCredentials => "missing_credentials",
            Self::BadBearer => "bad_bearer_token",
            Self::BadOAuthToken => "bad_oauth_token",
            Self::BadWebhookSignature => "bad_webhook_signature",
            Self::HostNotAllowed => "host_not_allowed",
            Self::OriginNotAllowed => "origin_not_allowed",
            Self::EnvelopeRejected => "envelope_rejected",
            Self::RateLimited => "rate_limited",
            Self::QuotaExceeded => "quota_exceeded",
        }
    }

    /// Whether the refused source is an authenticated principal (it is then the events' actor).
    fn authenticated(self) -> bool {
        matches!(self, Self::RateLimited | Self::QuotaExceeded)
    }
}

/// One refusal, as the binding or the runtime saw it.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The tenant, when the refused request was already bound to one (a webhook subscription, a
    /// configured peer); `None` for the node's own log.
    pub tenant: Option<String>,
    /// Where it came from: the remote address, a webhook subscription, a peer's principal id.
    pub source: String,
    /// Why.
    pub reason: RefusalReason,
    /// The audit label (see [`AUTH_REFUSED`]).
    pub label: &'static str,
    /// Facts of the first refusal of a window (the error code, the message type), kept in its event.
    pub data: Value,
}

/// How refusals are aggregated, and who reads the node's log.
#[derive(Debug, Clone)]
pub struct RefusalPolicy {
    /// The aggregation window.
    pub window_ms: u64,
    /// The admin principal's tenant: its `audit:read` holders read the node's security log.
    pub admin_tenant: String,
}

impl Default for RefusalPolicy {
    fn default() -> Self {
        Self {
            window_ms: 10_000,
            admin_tenant: crate::caller::DEFAULT_TENANT.to_owned(),
        }
    }
}

type Key = (Option<String>, String, RefusalReason, &'static str);

#[derive(Debug)]
struct Window {
    opened: Instant,
    /// Refusals since the window's event was written.
    pending: u64,
    /// The first of those refusals' facts.
    data: Value,
}

/// The open windows (one per key).
#[derive(Debug, Default)]
pub(crate) struct RefusalLog {
    windows: Mutex<HashMap<Key, Window>>,
}

/// An audit event to write: the refusal's key, how many refusals it stands for, their facts.
type Due = (Key, u64, Value);

impl RefusalLog {
    /// Every entry is one insert, update or removal: a lock poisoned by a panic elsewhere still
    /// guards a whole table.
    fn windows(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Window>> {
        self.windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts `refusal`; the event to write now, if it opens a window (the first of its key, or
    /// the first after its window ended, standing for what the window held).
    fn note(&self, refusal: Refusal, window: Duration) -> Option<Due> {
        let mut windows = self.windows();
        let mut key: Key = (
            refusal.tenant,
            refusal.source,
            refusal.reason,
            refusal.label,
        );
        if !windows.contains_key(&key) && windows.len() >= MAX_WINDOWS {
            key.1 = "*".to_owned();
        }
        let now = Instant::now();
        match windows.get_mut(&key) {
            Some(open) if now.duration_since(open.opened) < window => {
                if open.pending == 0 {
                    open.data = refusal.data;
                }
                open.pending += 1;
                None
            }
            Some(ended) => {
                let count = ended.pending + 1;
                ended.opened = now;
                ended.pending = 0;
                Some((key, count, refusal.data))
            }
            None => {
                windows.insert(
                    key.clone(),
                    Window {
                        opened: now,
                        pending: 0,
                        data: Value::Null,
                    },
                );
                Some((key, 1, refusal.data))
            }
        }
    }

    /// The counts of windows that ended with refusals not yet written; ended quiet windows close.
    fn due(&self, window: Duration) -> Vec<Due> {
        let now = Instant::now();
        let mut due = Vec::new();
        self.windows().retain(|key, w| {
            if now.duration_since(w.opened) < window {
                return true;
            }
            if w.pending == 0 {
                return false;
            }
            due.push((key.clone(), w.pending, std::mem::take(&mut w.data)));
            w.opened = now;
            w.pending = 0;
            true
        });
        due
    }
}

impl Runtime {
    /// Records a refusal: a metric always, an audit event when it opens a window. The event of an
    /// opening refusal is written before this returns, so the refusal is answered only once its
    /// evidence is durable (an error here is the storage error, for a binding to fail closed on).
    pub async fn note_refusal(&self, refusal: Refusal) -> Result<(), RuntimeError> {
        let window = self.refusal_window();
        match self.count_refusal(refusal, window) {
            Some(due) => self.write_refusals(due, window).await,
            None => Ok(()),
        }
    }

    /// [`Runtime::note_refusal`] without waiting for the store: the refusal is counted at once
    /// and the event of a window it opens is written by a background task. A transport refuses
    /// unauthenticated traffic this way before any store access (spec 22.8): a flood costs at
    /// most one write per (source, reason) and window, and never holds a request.
    pub fn note_refusal_detached(self: &Arc<Self>, refusal: Refusal) {
        let window = self.refusal_window();
        if let Some(due) = self.count_refusal(refusal, window) {
            let runtime = Arc::clone(self);
            // Logged by `write_refusals` when it fails; the refusal itself was answered.
            tokio::spawn(async move { runtime.write_refusals(due, window).await });
        }
    }

    /// Counts `refusal` (its metric, its window); the event to write now, if it opens one.
    fn count_refusal(&self, refusal: Refusal, window: Duration) -> Option<Due> {
        if !refusal.reason.authenticated() {
            metrics::counter!("aip_auth_refusals_total", "reason" => refusal.reason.as_str())
                .increment(1);
        }
        self.refusal_log().note(refusal, window)
    }

    /// Writes the counts of ended windows; run by [`Runtime::start`]'s refusal flusher.
    async fn flush_refusals(&self) {
        let window = self.refusal_window();
        for due in self.refusal_log().due(window) {
            // Logged by `write_refusals`; the next flush does not retry it (its count is gone).
            let _ = self.write_refusals(due, window).await;
        }
    }

    async fn write_refusals(
        &self,
        ((tenant, source, reason, label), count, data): Due,
        window: Duration,
    ) -> Result<(), RuntimeError> {
        let mut data = match data {
            Value::Object(fields) => fields,
            _ => serde_json::Map::new(),
        };
        data.insert("reason".into(), json!(reason.as_str()));
        data.insert("source".into(), json!(source));
        data.insert("count".into(), json!(count));
        data.insert(
            "window_ms".into(),
            json!(u64::try_from(window.as_millis()).unwrap_or(u64::MAX)),
        );
        // A limited principal's kind came with the refusal; an unauthenticated source is the system.
        data.entry(crate::events::ACTOR_KIND)
            .or_insert_with(|| json!(aip_core::PrincipalKind::System));
        let audit = NewAudit {
            audit_id: aip_core::generate_with_prefix("aud_"),
            tenant: tenant.unwrap_or_else(|| NODE_LOG_TENANT.to_owned()),
            // The refusal's source acts: a limited principal, or nobody it could name authenticated.
            actor: if reason.authenticated() {
                source
            } else {
                format!("unauthenticated:{source}")
            },
            action_label: label.to_owned(),
            occurred_at_ms: crate::clock::now_ms(),
            data: Value::Object(data),
            action_id: None,
            session_id: None,
        };
        self.store()
            .append_audit(audit)
            .await
            .map(|_| ())
            .map_err(|err| {
                tracing::error!(label, error = %err, "refusal audit record not written");
                RuntimeError::Storage(err)
            })
    }

    fn refusal_window(&self) -> Duration {
        Duration::from_millis(self.config().refusals.window_ms.max(1))
    }

    /// Runs until shutdown, writing the counts of ended windows once per window.
    pub(crate) fn start_refusal_flusher(self: &Arc<Self>) {
        let runtime = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(runtime.refusal_window());
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => runtime.flush_refusals().await,
                    () = runtime.stopped() => {
                        runtime.flush_refusals().await;
                        return;
                    }
                }
            }
        });
    }
}

impl Runtime {
    /// `err` as answered after it is counted in the caller's tenant audit, when a rate limit or a
    /// concurrency quota refused the action (aggregated per principal and window like the
    /// transport's refusals, so a runaway agent costs a few writes, not one per request); a
    /// refusal whose opening event cannot be written is answered with the storage error.
    pub(crate) async fn audit_limit_refusal(
        &self,
        caller: &crate::Caller,
        err: RuntimeError,
        capability_id: Option<&str>,
    ) -> RuntimeError {
        let reason = match &err {
            RuntimeError::RateLimited { .. } => RefusalReason::RateLimited,
            RuntimeError::QuotaExceeded { .. } => RefusalReason::QuotaExceeded,
            _ => return err,
        };
        let refusal = Refusal {
            tenant: Some(caller.tenant.clone()),
            source: caller.id.clone(),
            reason,
            label: LIMIT_REFUSED,
            data: {
                let mut data = json!({
                    "code": err.code().as_str(),
                    crate::events::ACTOR_KIND: caller.kind,
                });
                // A read names no capability.
                if let Some(capability_id) = capability_id {
                    data["capability_id"] = json!(capability_id);
                }
                data
            },
        };
        match self.note_refusal(refusal).await {
            Ok(()) => err,
            Err(unwritten) => unwritten,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(source: &str) -> Refusal {
        Refusal {
            tenant: None,
            source: source.into(),
            reason: RefusalReason::BadBearer,
            label: AUTH_REFUSED,
            data: json!({ "n": source }),
        }
    }

    #[test]
    fn a_flood_from_one_source_opens_one_window_whose_count_is_written_when_it_ends() {
        let log = RefusalLog::default();
        let window = Duration::from_millis(50);
        let first = log.note(refusal("a"), window).map(|d| d.1);
        assert_eq!(first, Some(1));
        for _ in 0..99 {
            assert!(log.note(refusal("a"), window).is_none());
        }
        // Another source has its own window.
        assert_eq!(log.note(refusal("b"), window).map(|d| d.1), Some(1));
        assert!(log.due(window).is_empty(), "the window is still open");
        std::thread::sleep(Duration::from_millis(60));
        let due = log.due(window);
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!((due[0].0.1.as_str(), due[0].1), ("a", 99));
        // Quiet windows close; the next refusal opens a new one.
        std::thread::sleep(Duration::from_millis(60));
        assert!(log.due(window).is_empty());
        assert!(log.windows().is_empty());
        assert_eq!(log.note(refusal("a"), window).map(|d| d.1), Some(1));
    }

    #[test]
    fn past_the_window_bound_new_sources_share_one_window() {
        let log = RefusalLog::default();
        let window = Duration::from_secs(60);
        for i in 0..MAX_WINDOWS {
            assert!(log.note(refusal(&i.to_string()), window).is_some());
        }
        assert_eq!(
            log.note(refusal("new-1"), window).map(|d| d.0.1),
            Some("*".to_owned())
        );
        assert!(log.note(refusal("new-2"), window).is_none());
        assert_eq!(log.windows().len(), MAX_WINDOWS + 1);
    }
}
