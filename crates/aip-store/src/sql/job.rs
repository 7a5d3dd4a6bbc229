//! [`JobStore`] in SQL: the work queue, its leases and their fencing tokens (spec 13.4, 17.3).

use std::borrow::Cow;

use async_trait::async_trait;

use super::{Dialect, SqlStore, bounded_error, locked, to_u64};
use crate::db::{Json, Row, Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::traits::JobStore;

/// The claim's update of the job its pick selects (`$1` worker, `$2` lease expiry, `$3` now, `$4`
/// queue), up to the pick.
const CLAIM_SET: &str = "UPDATE aip_jobs SET state = 'leased', lease_owner = $1, lease_expires_at_ms = $2, fence = fence + 1, \
     attempts = attempts + 1, updated_at_ms = $3 WHERE job_id = (";

/// The claim's picks, tried in this order, each a range of one partial index that holds only
/// claimable jobs, so a claim costs the same at a thousand finished jobs as at a million: first a
/// lapsed lease (work a stopped worker left, `aip_jobs_expiring`), then a job that fell due
/// (`aip_jobs_claimable`). Each is followed by the dialect's lock clause (none on SQLite,
/// `FOR UPDATE SKIP LOCKED` on PostgreSQL). Public so an operator (and the store suite) can read
/// their plans on real data.
pub const CLAIM_PICKS: [&str; 2] = [
    "SELECT job_id FROM aip_jobs WHERE queue = $4 AND state = 'leased' AND attempts < max_attempts \
     AND lease_expires_at_ms <= $3 ORDER BY lease_expires_at_ms, job_id LIMIT 1",
    "SELECT job_id FROM aip_jobs WHERE queue = $4 AND state = 'ready' AND attempts < max_attempts \
     AND available_at_ms <= $3 ORDER BY available_at_ms, job_id LIMIT 1",
];

/// What a claim returns of the job it leased.
const CLAIM_RETURNING: &str =
    " RETURNING job_id, queue, tenant, action_id, fence, attempts, lease_expires_at_ms, payload";

#[async_trait]
impl<D: Dialect> JobStore for SqlStore<D> {
    async fn enqueue(&self, job: NewJob) -> StoreResult<()> {
        self.write(false, move |tx| {
            Box::pin(async move {
                tx_insert_job(&mut *tx, &job, None).await?;
                Ok(())
            })
        })
        .await
    }

    async fn claim(
        &self,
        queue: &str,
        worker: &WorkerId,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<Lease>> {
        let picks = CLAIM_PICKS
            .map(|pick| format!("{CLAIM_SET}{pick}{}){CLAIM_RETURNING}", D::CLAIM_LOCK).into());
        lease_one(self, picks.into(), queue, worker, now_ms, lease_ms).await
    }

    async fn claim_job(
        &self,
        job_id: &str,
        worker: &WorkerId,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<Lease>> {
        let sql = "UPDATE aip_jobs SET state = 'leased', lease_owner = $1, lease_expires_at_ms = $2, fence = fence + 1, \
             attempts = attempts + 1, updated_at_ms = $3 \
             WHERE job_id = $4 AND attempts < max_attempts \
             AND ((state = 'ready' AND available_at_ms <= $3) OR (state = 'leased' AND lease_expires_at_ms <= $3)) \
             RETURNING job_id, queue, tenant, action_id, fence, attempts, lease_expires_at_ms, payload";
        lease_one(self, vec![sql.into()], job_id, worker, now_ms, lease_ms).await
    }

    async fn renew(&self, fence: &Fence, now_ms: i64, lease_ms: i64) -> StoreResult<i64> {
        if lease_ms <= 0 {
            return Err(StoreError::InvalidInput("lease duration must be positive"));
        }
        let fence = fence.clone();
        self.write(false, move |tx| {
            Box::pin(async move {
                tx_check_fence::<D>(&mut *tx, &fence, now_ms).await?;
                let expires = now_ms.saturating_add(lease_ms);
                query("UPDATE aip_jobs SET lease_expires_at_ms = $2, updated_at_ms = $3 WHERE job_id = $1")
                    .bind(&fence.job_id)
                    .bind(expires)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                Ok(expires)
            })
        })
        .await
    }

    async fn complete_job(&self, fence: &Fence, now_ms: i64) -> StoreResult<()> {
        let sql = "UPDATE aip_jobs SET state = 'done', lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = $2 WHERE job_id = $1";
        update_held(self, fence, now_ms, sql).await
    }

    async fn fail_job(
        &self,
        fence: &Fence,
        now_ms: i64,
        retry_at_ms: Option<i64>,
        error: &str,
    ) -> StoreResult<JobState> {
        let fence = fence.clone();
        let error = error.to_owned();
        self.write(false, move |tx| {
            Box::pin(async move {
                tx_check_fence::<D>(&mut *tx, &fence, now_ms).await?;
                let row = query(
                    "UPDATE aip_jobs SET \
                     state = CASE WHEN CAST($2 AS BIGINT) IS NOT NULL AND attempts < max_attempts THEN 'ready' ELSE 'dead' END, \
                     available_at_ms = COALESCE($2, available_at_ms), lease_owner = NULL, lease_expires_at_ms = NULL, \
                     last_error = $3, updated_at_ms = $4 WHERE job_id = $1 RETURNING state",
                )
                .bind(&fence.job_id)
                .bind(retry_at_ms)
                .bind(bounded_error(&error))
                .bind(now_ms)
                .fetch_one(&mut *tx)
                .await?;
                let state: String = row.try_get("state")?;
                JobState::parse(&state)
                    .ok_or_else(|| StoreError::Corrupt(format!("job state {state}")))
            })
        })
        .await
    }

    async fn supersede_leases(
        &self,
        stale: StaleLeases<'_>,
        current: &WorkerId,
        now_ms: i64,
    ) -> StoreResult<u64> {
        // `<node>/`: the owner's prefix, compared exactly (no LIKE wildcards in node ids).
        let prefix = match stale {
            StaleLeases::All => None,
            StaleLeases::OfNode(node) => Some(format!("{node}/")),
        };
        let current = current.as_str().to_owned();
        self.write(false, move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE aip_jobs SET lease_expires_at_ms = $1, updated_at_ms = $1 \
                     WHERE state = 'leased' AND lease_expires_at_ms > $1 AND lease_owner <> $2 \
                     AND (CAST($3 AS TEXT) IS NULL OR substr(lease_owner, 1, length(CAST($3 AS TEXT))) = $3)",
                )
                .bind(now_ms)
                .bind(&current)
                .bind(prefix.as_deref())
                .execute(&mut *tx)
                .await?;
                Ok(done)
            })
        })
        .await
    }

    async fn release_job(&self, fence: &Fence, now_ms: i64) -> StoreResult<()> {
        let sql = "UPDATE aip_jobs SET state = 'ready', available_at_ms = $2, lease_owner = NULL, lease_expires_at_ms = NULL, \
             attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, updated_at_ms = $2 WHERE job_id = $1";
        update_held(self, fence, now_ms, sql).await
    }
}

/// Runs `sql` (`$1` the job, `$2` now) as one write on a job `fence` still holds (else
/// `StaleLease`, or `NotFound` for no such job).
async fn update_held<D: Dialect>(
    store: &SqlStore<D>,
    fence: &Fence,
    now_ms: i64,
    sql: &'static str,
) -> StoreResult<()> {
    let fence = fence.clone();
    store
        .write(false, move |tx| {
            Box::pin(async move {
                tx_check_fence::<D>(&mut *tx, &fence, now_ms).await?;
                query(sql)
                    .bind(&fence.job_id)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                Ok(())
            })
        })
        .await
}

/// Marks a job done inside a write whose fence check already passed.
pub(super) async fn tx_complete(tx: &mut dyn Tx, fence: &Fence, now_ms: i64) -> StoreResult<()> {
    query(
        "UPDATE aip_jobs SET state = 'done', lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = $2 WHERE job_id = $1",
    )
    .bind(&fence.job_id)
    .bind(now_ms)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Runs claim statements (`$1` worker, `$2` lease expiry, `$3` now, `$4` which queue or job) in
/// order as one write, until one leases a job: that job, if any, with the fencing token the
/// statement issued.
async fn lease_one<D: Dialect>(
    store: &SqlStore<D>,
    statements: Vec<Cow<'static, str>>,
    target: &str,
    worker: &WorkerId,
    now_ms: i64,
    lease_ms: i64,
) -> StoreResult<Option<Lease>> {
    if lease_ms <= 0 {
        return Err(StoreError::InvalidInput("lease duration must be positive"));
    }
    let target = target.to_owned();
    let worker = worker.clone();
    store
        .write(false, move |tx| {
            Box::pin(async move {
                for sql in statements {
                    let row = query(sql)
                        .bind(worker.as_str())
                        .bind(now_ms.saturating_add(lease_ms))
                        .bind(now_ms)
                        .bind(target.as_str())
                        .fetch_optional(&mut *tx)
                        .await?;
                    if let Some(row) = row {
                        return lease(&row, &worker).map(Some);
                    }
                }
                Ok(None)
            })
        })
        .await
}

/// Inserts a job: ready, or (with `lease`: worker and expiry) already leased to its first worker,
/// as a first claim would leave it (attempt 1, fencing token 1).
pub(super) async fn tx_insert_job(
    tx: &mut dyn Tx,
    job: &NewJob,
    lease: Option<(&WorkerId, i64)>,
) -> StoreResult<()> {
    query(
        "INSERT INTO aip_jobs (job_id, queue, action_id, tenant, state, available_at_ms, attempts, max_attempts, fence, \
         lease_owner, lease_expires_at_ms, created_at_ms, updated_at_ms, payload) \
         VALUES ($1, $2, $3, $4, $8, $5, $9, $6, $9, $10, $11, $5, $5, $7)",
    )
    .bind(&job.job_id)
    .bind(&job.queue)
    .bind(job.action_id.as_deref())
    .bind(&job.tenant)
    .bind(job.available_at_ms)
    .bind(i64::from(job.max_attempts.max(1)))
    .bind(Json(&job.payload))
    .bind(if lease.is_some() { "leased" } else { "ready" })
    .bind(i64::from(lease.is_some()))
    .bind(lease.map(|(worker, _)| worker.as_str()))
    .bind(lease.map(|(_, expires)| expires))
    .execute(&mut *tx)
    .await
    .map_err(|e| e.or_duplicate("job"))?;
    Ok(())
}

/// Fails unless `fence` still owns an unexpired lease (spec 13.4): the row is locked on PostgreSQL
/// so no claim can slip in before this transaction commits.
pub(super) async fn tx_check_fence<D: Dialect>(
    tx: &mut dyn Tx,
    fence: &Fence,
    now_ms: i64,
) -> StoreResult<()> {
    let row = query(locked::<D>(
        "SELECT state, lease_owner, lease_expires_at_ms, fence FROM aip_jobs WHERE job_id = $1",
    ))
    .bind(&fence.job_id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(StoreError::NotFound { kind: "job" })?;
    let state: String = row.try_get("state")?;
    let owner: Option<String> = row.try_get("lease_owner")?;
    let expires: Option<i64> = row.try_get("lease_expires_at_ms")?;
    let token: i64 = row.try_get("fence")?;
    let held = state == "leased"
        && owner.as_deref() == Some(fence.worker_id.as_str())
        && Some(token) == i64::try_from(fence.token).ok()
        && expires.is_some_and(|e| e > now_ms);
    if held {
        Ok(())
    } else {
        Err(StoreError::StaleLease)
    }
}

fn lease(r: &Row, worker: &WorkerId) -> StoreResult<Lease> {
    let attempts: i64 = r.try_get("attempts")?;
    Ok(Lease {
        fence: Fence {
            job_id: r.try_get("job_id")?,
            worker_id: worker.clone(),
            token: to_u64(r.try_get("fence")?, "fencing token")?,
        },
        queue: r.try_get("queue")?,
        tenant: r.try_get("tenant")?,
        action_id: r.try_get("action_id")?,
        attempt: u32::try_from(attempts)
            .map_err(|_| StoreError::Corrupt("attempt count".into()))?,
        expires_at_ms: r.try_get("lease_expires_at_ms")?,
        payload: r.json("payload")?,
    })
}
