//! The work queue and its leases (spec 13.4, 17.3).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Queued jobs, claimed under leases whose fencing tokens reject a stale worker's writes.
#[async_trait]
pub trait JobStore: Send + Sync + 'static {
    /// Queues a job outside admission (re-queue on recovery, callbacks).
    async fn enqueue(&self, job: NewJob) -> StoreResult<()>;

    /// Atomically claims the oldest ready job of `queue` (or one whose lease expired) for
    /// `lease_ms`, issuing a fencing token greater than any before it for that job.
    async fn claim(
        &self,
        queue: &str,
        worker: &WorkerId,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<Lease>>;

    /// Claims one named job (for example the job a node just admitted for its own sync action, so
    /// that sync work is fenced and recoverable too); `None` when it is not claimable now (held by a
    /// live lease, not yet available, finished, or out of attempts).
    async fn claim_job(
        &self,
        job_id: &str,
        worker: &WorkerId,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<Lease>>;

    /// Extends a held lease to `now_ms + lease_ms`; returns the new expiry.
    async fn renew(&self, fence: &Fence, now_ms: i64, lease_ms: i64) -> StoreResult<i64>;

    /// Marks the job done.
    async fn complete_job(&self, fence: &Fence, now_ms: i64) -> StoreResult<()>;

    /// Fails an attempt: with `retry_at_ms` the job becomes ready again at that time (while attempts
    /// remain), else it is dead. Returns the job's new state.
    async fn fail_job(
        &self,
        fence: &Fence,
        now_ms: i64,
        retry_at_ms: Option<i64>,
        error: &str,
    ) -> StoreResult<JobState>;

    /// Gives the job back, claimable at once (graceful shutdown).
    async fn release_job(&self, fence: &Fence, now_ms: i64) -> StoreResult<()>;

    /// At boot: makes the live leases `stale` names, other than `current`'s, lapse now, so their
    /// jobs are claimable at once instead of when the dead process's leases would have expired.
    /// Nothing else changes: a claim still issues a new fence, so a late write from a process
    /// that is somehow alive is refused as stale, and each job's attempts count as they did.
    /// Returns how many leases lapsed.
    async fn supersede_leases(
        &self,
        stale: StaleLeases<'_>,
        current: &WorkerId,
        now_ms: i64,
    ) -> StoreResult<u64>;
}
