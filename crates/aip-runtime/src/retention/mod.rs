//! Retention (spec 16.2, 22.9): events and stream chunks are kept for a configured time, then purged
//! by a housekeeping job on the generic leased worker, together with expired replay claims,
//! idempotency reservations and resume tokens. Receipts and audit events are kept unless a
//! retention is configured for them too; then they are archived first ([`archive`]). A cursor
//! that points into purged history is refused with `aip.read.cursor_expired` instead of silently
//! skipping what is gone.
//!
//! The job is one per period: its id names the period, so every node enqueues the same job and one
//! node runs it under a lease; each run enqueues the next period's.

use std::path::PathBuf;
use std::sync::Arc;

use aip_store::{Lease, NewJob, RetentionCutoffs, StoreError};
use async_trait::async_trait;
use serde_json::json;

use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::runtime::Runtime;
use crate::worker::JobKind;

pub mod archive;

/// The queue of housekeeping jobs.
pub const HOUSEKEEPING_QUEUE: &str = "housekeeping";

/// How long history is kept.
#[derive(Debug, Clone)]
pub struct RetentionPolicy {
    /// Events older than this are purged; `None` keeps them.
    pub events_ms: Option<u64>,
    /// Chunks of actions that ended longer ago than this are purged; `None` keeps them.
    pub chunks_ms: Option<u64>,
    /// How often the housekeeping job runs (also purging expired claims and tokens).
    pub interval_ms: u64,
    /// Audit events older than this are archived, then purged; `None` keeps them.
    pub audit_ms: Option<u64>,
    /// Receipt chains of actions that ended longer ago than this are archived, then purged;
    /// `None` keeps them.
    pub receipts_ms: Option<u64>,
    /// Where evidence archives are written.
    pub archive_dir: Option<PathBuf>,
    /// Purge evidence without writing an archive (an explicit, separate choice).
    pub purge_unarchived: bool,
    /// An archive is written once at least this many records (audit events and receipt chains)
    /// are due, or once the oldest due record has waited [`Self::archive_max_wait_ms`]: so the
    /// purge's own audit event does not become a one-record archive every period.
    pub archive_min_records: u32,
    /// How long a due record waits at most for a batch to fill.
    pub archive_max_wait_ms: u64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            events_ms: None,
            chunks_ms: None,
            interval_ms: 300_000,
            audit_ms: None,
            receipts_ms: None,
            archive_dir: None,
            purge_unarchived: false,
            archive_min_records: 1_000,
            archive_max_wait_ms: 86_400_000,
        }
    }
}

/// The housekeeping job kind.
pub(crate) struct Housekeeping;

#[async_trait]
impl JobKind for Housekeeping {
    fn queue(&self) -> &'static str {
        HOUSEKEEPING_QUEUE
    }

    async fn run(&self, runtime: &Arc<Runtime>, lease: &Lease) -> Result<(), RuntimeError> {
        let now = now_ms();
        // The next period's job first: a purge that keeps failing (and this job with it) does not
        // end housekeeping.
        runtime.schedule_housekeeping(now).await?;
        let policy = &runtime.config().retention;
        let before = |keep: Option<u64>| before(now, keep);
        let expired = runtime.store().purge_expired(now).await?;
        let history = runtime
            .store()
            .purge_history(RetentionCutoffs {
                events_before_ms: before(policy.events_ms),
                chunks_before_ms: before(policy.chunks_ms),
            })
            .await?;
        let evidence = runtime.purge_evidence(now).await?;
        tracing::info!(
            events = history.events,
            chunks = history.chunks,
            audit_events = evidence.audit,
            receipt_chains = evidence.chains,
            receipts = evidence.receipts,
            replay_claims = expired.replay_claims,
            idempotency_reservations = expired.idempotency_reservations,
            resume_tokens = expired.resume_tokens,
            "housekeeping purged"
        );
        runtime.store().complete_job(&lease.fence, now_ms()).await?;
        Ok(())
    }

    async fn failed(&self, runtime: &Arc<Runtime>, lease: &Lease, error: RuntimeError) {
        crate::worker::retry_timer(runtime, lease, &error, "housekeeping").await;
    }

    async fn sweep(&self, _runtime: &Arc<Runtime>) -> Result<(), RuntimeError> {
        Ok(())
    }
}

/// The cutoff time for a retention of `keep` ms at `now`.
fn before(now: i64, keep: Option<u64>) -> Option<i64> {
    keep.map(|ms| now.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX)))
}

impl Runtime {
    /// Enqueues the housekeeping job of the period after `now` (due at its start); a job another
    /// node already enqueued for it is left as it is.
    pub(crate) async fn schedule_housekeeping(&self, now: i64) -> Result<(), RuntimeError> {
        let interval =
            i64::try_from(self.config().retention.interval_ms.max(1)).unwrap_or(i64::MAX);
        let period = now / interval + 1;
        let job = NewJob {
            job_id: format!("housekeeping:{period}"),
            queue: HOUSEKEEPING_QUEUE.into(),
            action_id: None,
            tenant: String::new(),
            available_at_ms: period.saturating_mul(interval),
            max_attempts: self.config().max_attempts.max(1),
            payload: json!({}),
        };
        match self.store().enqueue(job).await {
            Ok(()) | Err(StoreError::Duplicate { .. }) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }
}
