//! The leased worker, generic over job kinds. `Runtime::start` runs one for each kind: actions,
//! approval expiry and escalation expiry timers, transaction reconciliation timers, callback
//! deliveries, delegation follow-ups and retention housekeeping. A worker claims a job of its
//! kind's queue under a fenced lease (spec 13.4, 17.3), runs it, and survives whatever the run
//! does. A run that fails or panics is reported to its kind, which settles the job (retry later, or
//! give up and settle what the job was for); the worker goes on. Each kind also gets a periodic
//! sweep on every node, for work whose jobs can no longer finish.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use aip_store::{Fence, Lease, StoreError};
use async_trait::async_trait;
use futures_util::FutureExt;
use tokio::sync::Notify;

use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// How long an idle worker waits before looking at its queue again without a wake-up.
const IDLE_POLL: Duration = Duration::from_millis(500);
/// How long a worker waits after its store failed.
const OUTAGE_BACKOFF: Duration = Duration::from_millis(500);
/// Period of each kind's sweep.
const SWEEP_PERIOD: Duration = Duration::from_secs(5);

/// One kind of durable job: its queue, how to run a claimed job, and what to do when a run fails.
#[async_trait]
pub(crate) trait JobKind: Send + Sync + 'static {
    /// The queue this kind's jobs wait in.
    fn queue(&self) -> &'static str;

    /// What wakes an idle worker of this kind besides its poll: queued actions wake action
    /// workers, transitions wake callback workers. Timer kinds, whose jobs fall due later, poll.
    fn wake<'r>(&self, runtime: &'r Runtime) -> Option<&'r Notify> {
        let _ = runtime;
        None
    }

    /// Runs one claimed job. On success the job must have been settled (completed, released or
    /// failed) under `lease.fence`.
    async fn run(&self, runtime: &Arc<Runtime>, lease: &Lease) -> Result<(), RuntimeError>;

    /// `run` returned an error or panicked (`error` says which): settle the job, retrying or
    /// giving up. The lease may already be lost.
    async fn failed(&self, runtime: &Arc<Runtime>, lease: &Lease, error: RuntimeError);

    /// Settles work whose jobs can no longer finish (out of attempts after crashes, or dead).
    async fn sweep(&self, runtime: &Arc<Runtime>) -> Result<(), RuntimeError>;
}

/// The usual [`JobKind::failed`] of a timer: retried with exponential backoff (2^attempt s, at most
/// 32 s) while attempts remain, else given up. What the timer guards stays as it was, and is still
/// checked where it is used.
pub(crate) async fn retry_timer(
    runtime: &Runtime,
    lease: &Lease,
    error: &RuntimeError,
    what: &str,
) {
    let now = now_ms();
    let backoff = Duration::from_secs(1 << lease.attempt.min(5)).as_millis();
    let retry_at = now.saturating_add(i64::try_from(backoff).unwrap_or(0));
    let retry = (lease.attempt < runtime.config().max_attempts).then_some(retry_at);
    if let Err(err) = runtime
        .store()
        .fail_job(&lease.fence, now, retry, &error.to_string())
        .await
    {
        tracing::warn!(job = %lease.fence.job_id, error = %err, "{what} timer failure not recorded");
    }
}

/// Starts `runtime`'s configured number of workers for `kind`, and its sweep.
pub(crate) fn start(runtime: &Arc<Runtime>, kind: Arc<dyn JobKind>) {
    for _ in 0..runtime.config().async_workers.max(1) {
        let (runtime, kind) = (Arc::clone(runtime), Arc::clone(&kind));
        tokio::spawn(async move { work(runtime, kind).await });
    }
    let runtime = Arc::clone(runtime);
    tokio::spawn(async move { sweep(runtime, kind).await });
}

async fn work(runtime: Arc<Runtime>, kind: Arc<dyn JobKind>) {
    let lease_ms = runtime.lease_ms();
    while !runtime.shutdown_token().is_cancelled() {
        let claimed = runtime
            .store()
            .claim(kind.queue(), runtime.worker_id(), now_ms(), lease_ms)
            .await;
        match claimed {
            Ok(Some(lease)) => {
                // Held until the job is settled: a drain waits for it or gives its lease back.
                let _held = runtime.hold(&lease.fence);
                let ran = AssertUnwindSafe(kind.run(&runtime, &lease))
                    .catch_unwind()
                    .await;
                let error = match ran {
                    Ok(Ok(())) => continue,
                    Ok(Err(err)) => err,
                    Err(_panic) => RuntimeError::Internal("a job run panicked"),
                };
                // The store's code tells a stale fence (another node took the work) from an outage.
                let store = match &error {
                    RuntimeError::Storage(e) => e.code(),
                    _ => "",
                };
                if matches!(error, RuntimeError::Draining) {
                    // Released at the drain deadline: said once by the drain, not a failure.
                    continue;
                }
                tracing::warn!(queue = kind.queue(), job = %lease.fence.job_id, error = %error, store, "job run failed");
                let settled = AssertUnwindSafe(kind.failed(&runtime, &lease, error))
                    .catch_unwind()
                    .await;
                if settled.is_err() {
                    tracing::error!(queue = kind.queue(), job = %lease.fence.job_id, "settling a failed job panicked");
                }
            }
            Ok(None) => match kind.wake(&runtime) {
                Some(notify) => {
                    tokio::select! {
                        () = notify.notified() => {}
                        () = tokio::time::sleep(IDLE_POLL) => {}
                        () = runtime.shutdown_token().cancelled() => {}
                    }
                }
                None => {
                    tokio::select! {
                        () = tokio::time::sleep(IDLE_POLL) => {}
                        () = runtime.shutdown_token().cancelled() => {}
                    }
                }
            },
            Err(err) => {
                tracing::warn!(queue = kind.queue(), error = %err, "claiming work failed");
                tokio::time::sleep(OUTAGE_BACKOFF).await;
            }
        }
    }
}

async fn sweep(runtime: Arc<Runtime>, kind: Arc<dyn JobKind>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(SWEEP_PERIOD) => {}
            () = runtime.shutdown_token().cancelled() => return,
        }
        match AssertUnwindSafe(kind.sweep(&runtime)).catch_unwind().await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::warn!(queue = kind.queue(), error = %err, "sweep failed"),
            Err(_panic) => tracing::error!(queue = kind.queue(), "sweep panicked"),
        }
    }
}

/// Renews `fence`'s lease every third of its length, running `tick` after each renewal, until the
/// lease is lost (then it returns). An outage is retried next period: the lease may still be ours.
pub(crate) async fn keep_lease<F, Fut>(runtime: &Runtime, fence: &Fence, tick: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let lease_ms = runtime.lease_ms();
    let period = Duration::from_millis(u64::try_from(lease_ms / 3).unwrap_or(1).max(1));
    loop {
        tokio::time::sleep(period).await;
        match runtime.store().renew(fence, now_ms(), lease_ms).await {
            Ok(_) => {}
            Err(StoreError::StaleLease | StoreError::NotFound { .. }) => return,
            Err(err) => {
                tracing::warn!(job = %fence.job_id, error = %err, "lease renewal failed");
                continue;
            }
        }
        tick().await;
    }
}
