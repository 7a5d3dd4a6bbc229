//! [`CallbackStore`] in SQL: the callback outbox (spec 17.3). A delivery row is created by
//! [`tx_queue_delivery`] inside the action transition it reports; its lease is its job's lease
//! (`aip_jobs`, job id = delivery id), so every attempt write is fenced like any job write.

use async_trait::async_trait;
use serde_json::json;

use super::{Dialect, SqlStore, bounded_error, fresh_id, job, locked, opt_part, receipt};
use crate::cursor::CursorKind;
use crate::db::{Json, Row, Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::sql::page::ListCursor;
use crate::traits::CallbackStore;

/// A delivery with its job's live lease.
const SELECT: &str = "SELECT d.seq, d.delivery_id, d.tenant, d.principal, d.action_id, d.session_id, d.correlation_id, \
     d.message_id, d.action_state, d.action_version, d.profile, d.target, d.spec, d.status, d.attempts, \
     d.next_attempt_at_ms, d.last_error, d.dead_letter_reason, d.created_at_ms, d.updated_at_ms, d.completed_at_ms, \
     CASE WHEN j.state = 'leased' THEN j.lease_owner END AS leased_by, \
     CASE WHEN j.state = 'leased' THEN j.lease_expires_at_ms END AS lease_expires_at_ms \
     FROM aip_callback_deliveries d LEFT JOIN aip_jobs j ON j.job_id = d.delivery_id";

/// What an attempt that a stopped worker left open is closed with.
const INTERRUPTED: &str = "interrupted: the delivering worker stopped before the target answered";

#[async_trait]
impl<D: Dialect> CallbackStore for SqlStore<D> {
    async fn add_action_subscription(
        &self,
        subscription: NewActionSubscription,
        max: u32,
    ) -> StoreResult<()> {
        super::subscription::add(self, subscription, max).await
    }

    async fn list_action_subscriptions(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> StoreResult<Vec<ActionSubscriptionRecord>> {
        super::subscription::list(self, tenant, action_id).await
    }

    async fn remove_action_subscription(
        &self,
        tenant: &str,
        action_id: &str,
        subscription_id: &str,
    ) -> StoreResult<bool> {
        super::subscription::remove(self, tenant, action_id, subscription_id).await
    }

    async fn get_delivery(
        &self,
        tenant: &str,
        delivery_id: &str,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let row = query(format!(
            "{SELECT} WHERE d.tenant = $1 AND d.delivery_id = $2"
        ))
        .bind(tenant)
        .bind(delivery_id)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(delivery_record).transpose()
    }

    async fn list_deliveries(
        &self,
        q: &DeliveryQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<DeliveryRecord>> {
        let scope = vec![
            q.tenant.clone(),
            opt_part(q.principal.as_deref()),
            opt_part(q.action_id.as_deref()),
            opt_part(q.status.map(DeliveryStatus::as_str)),
            opt_part(q.profile.as_deref()),
            opt_part(q.target.as_deref()),
        ];
        let page = ListCursor::open(&self.key, CursorKind::Deliveries, scope, cursor)?;
        let rows = query(format!(
            "{SELECT} WHERE d.tenant = $1 \
             AND (CAST($2 AS TEXT) IS NULL OR d.principal = $2) \
             AND (CAST($3 AS TEXT) IS NULL OR d.action_id = $3) \
             AND (CAST($4 AS TEXT) IS NULL OR d.status = $4) \
             AND (CAST($5 AS TEXT) IS NULL OR d.profile = $5) \
             AND (CAST($6 AS TEXT) IS NULL OR d.target = $6) \
             AND d.seq > $7 ORDER BY d.seq LIMIT $8"
        ))
        .bind(&q.tenant)
        .bind(q.principal.as_deref())
        .bind(q.action_id.as_deref())
        .bind(q.status.map(DeliveryStatus::as_str))
        .bind(q.profile.as_deref())
        .bind(q.target.as_deref())
        .bind(page.after)
        .bind(i64::from(limit.get()))
        .fetch_all(self.reader())
        .await?;
        page.page(&rows, "seq", delivery_record)
    }

    async fn start_delivery_attempt(
        &self,
        fence: &Fence,
        now_ms: i64,
    ) -> StoreResult<DeliveryRecord> {
        let fence = fence.clone();
        self.write(false, move |tx| {
            Box::pin(async move {
                job::tx_check_fence::<D>(&mut *tx, &fence, now_ms).await?;
                let current = tx_delivery::<D>(&mut *tx, &fence.job_id).await?;
                if current.status.is_terminal() {
                    return Ok(current);
                }
                let mut attempts = current.attempts;
                close_open(&mut attempts, now_ms, INTERRUPTED);
                let number = u32::try_from(attempts.len())
                    .map_err(|_| StoreError::Corrupt("attempt count".into()))?
                    .saturating_add(1);
                attempts.push(DeliveryAttempt {
                    attempt: number,
                    started_at_ms: now_ms,
                    finished_at_ms: None,
                    error: None,
                });
                query(
                    "UPDATE aip_callback_deliveries SET status = 'running', attempts = $2, next_attempt_at_ms = NULL, \
                     updated_at_ms = $3 WHERE delivery_id = $1",
                )
                .bind(&fence.job_id)
                .bind(Json(&attempts_value(&attempts)?))
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
                tx_delivery::<D>(&mut *tx, &fence.job_id).await
            })
        })
        .await
    }

    async fn finish_delivery_attempt(
        &self,
        fence: &Fence,
        outcome: DeliveryOutcome,
        receipts: Vec<NewReceipt>,
        now_ms: i64,
    ) -> StoreResult<DeliveryRecord> {
        let fence = fence.clone();
        self.write(false, move |tx| {
            Box::pin(async move {
                job::tx_check_fence::<D>(&mut *tx, &fence, now_ms).await?;
                let current = tx_delivery::<D>(&mut *tx, &fence.job_id).await?;
                if current.status != DeliveryStatus::Running {
                    return Err(StoreError::StateConflict {
                        actual: current.status.as_str().to_owned(),
                    });
                }
                let (status, error, reason, retry_at) = match &outcome {
                    DeliveryOutcome::Delivered => (DeliveryStatus::Delivered, None, None, None),
                    DeliveryOutcome::Retry { at_ms, error } => {
                        (DeliveryStatus::Pending, Some(error), None, Some(*at_ms))
                    }
                    DeliveryOutcome::Failed { error } => {
                        (DeliveryStatus::Failed, Some(error), Some(error), None)
                    }
                    DeliveryOutcome::DeadLettered { error, reason } => {
                        (DeliveryStatus::DeadLettered, Some(error), Some(reason), None)
                    }
                };
                let error = error.map(|e| bounded_error(e));
                let mut attempts = current.attempts;
                close_open(&mut attempts, now_ms, error.as_deref().unwrap_or(""));
                if error.is_none()
                    && let Some(last) = attempts.last_mut()
                {
                    last.error = None;
                }
                let completed = status.is_terminal().then_some(now_ms);
                query(
                    "UPDATE aip_callback_deliveries SET status = $2, attempts = $3, next_attempt_at_ms = $4, \
                     last_error = COALESCE($5, last_error), dead_letter_reason = $6, updated_at_ms = $7, \
                     completed_at_ms = $8 WHERE delivery_id = $1",
                )
                .bind(&fence.job_id)
                .bind(status.as_str())
                .bind(Json(&attempts_value(&attempts)?))
                .bind(retry_at)
                .bind(error.as_deref())
                .bind(reason.map(|r| bounded_error(r)))
                .bind(now_ms)
                .bind(completed)
                .execute(&mut *tx)
                .await?;
                match retry_at {
                    Some(at) => {
                        query(
                            "UPDATE aip_jobs SET state = 'ready', available_at_ms = $2, lease_owner = NULL, \
                             lease_expires_at_ms = NULL, last_error = $3, updated_at_ms = $4 WHERE job_id = $1",
                        )
                        .bind(&fence.job_id)
                        .bind(at)
                        .bind(error.as_deref())
                        .bind(now_ms)
                        .execute(&mut *tx)
                        .await?;
                    }
                    None => job::tx_complete(&mut *tx, &fence, now_ms).await?,
                }
                receipt::tx_append_receipts(&mut *tx, &receipts).await?;
                tx_delivery::<D>(&mut *tx, &fence.job_id).await
            })
        })
        .await
    }

    async fn redrive_delivery(
        &self,
        tenant: &str,
        delivery_id: &str,
        max_attempts: u32,
        now_ms: i64,
    ) -> StoreResult<DeliveryRecord> {
        let (tenant, delivery_id) = (tenant.to_owned(), delivery_id.to_owned());
        self.write(false, move |tx| {
            Box::pin(async move {
                let current = tx_delivery::<D>(&mut *tx, &delivery_id).await?;
                if current.tenant != tenant {
                    return Err(StoreError::NotFound { kind: "delivery" });
                }
                if !matches!(
                    current.status,
                    DeliveryStatus::Failed | DeliveryStatus::DeadLettered
                ) {
                    return Err(StoreError::StateConflict {
                        actual: current.status.as_str().to_owned(),
                    });
                }
                query(
                    "UPDATE aip_callback_deliveries SET status = 'pending', dead_letter_reason = NULL, completed_at_ms = NULL, \
                     next_attempt_at_ms = $2, updated_at_ms = $2 WHERE delivery_id = $1",
                )
                .bind(&delivery_id)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
                // The job keeps its fencing token (tokens only grow), with fresh attempts.
                query(
                    "INSERT INTO aip_jobs (job_id, queue, action_id, tenant, state, available_at_ms, attempts, max_attempts, fence, \
                     created_at_ms, updated_at_ms, payload) VALUES ($1, $2, $3, $4, 'ready', $5, 0, $6, 0, $5, $5, $7) \
                     ON CONFLICT (job_id) DO UPDATE SET state = 'ready', available_at_ms = $5, attempts = 0, max_attempts = $6, \
                     lease_owner = NULL, lease_expires_at_ms = NULL, last_error = NULL, updated_at_ms = $5",
                )
                .bind(&delivery_id)
                .bind(CALLBACK_QUEUE)
                .bind(&current.action_id)
                .bind(&current.tenant)
                .bind(now_ms)
                .bind(i64::from(max_attempts.max(1)))
                .bind(Json(&json!({ "delivery_id": delivery_id })))
                .execute(&mut *tx)
                .await?;
                tx_delivery::<D>(&mut *tx, &delivery_id).await
            })
        })
        .await
    }

    async fn dead_letter_stranded(
        &self,
        now_ms: i64,
        reason: &str,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let reason = bounded_error(reason);
        self.write(false, move |tx| {
            Box::pin(async move {
                let rows = query(
                    "SELECT d.delivery_id FROM aip_callback_deliveries d JOIN aip_jobs j ON j.job_id = d.delivery_id \
                     WHERE d.status IN ('pending', 'running') AND (j.state IN ('dead', 'done') \
                     OR (j.attempts >= j.max_attempts AND (j.state = 'ready' OR j.lease_expires_at_ms <= $1))) \
                     ORDER BY d.seq LIMIT 100",
                )
                .bind(now_ms)
                .fetch_all(&mut *tx)
                .await?;
                let mut settled = Vec::with_capacity(rows.len());
                for row in &rows {
                    let id: String = row.try_get("delivery_id")?;
                    let current = tx_delivery::<D>(&mut *tx, &id).await?;
                    let mut attempts = current.attempts;
                    close_open(&mut attempts, now_ms, INTERRUPTED);
                    let last = attempts.last().and_then(|a| a.error.clone());
                    query(
                        "UPDATE aip_callback_deliveries SET status = 'dead_lettered', attempts = $2, dead_letter_reason = $3, \
                         last_error = COALESCE($4, last_error), next_attempt_at_ms = NULL, updated_at_ms = $5, \
                         completed_at_ms = $5 WHERE delivery_id = $1 AND status IN ('pending', 'running')",
                    )
                    .bind(&id)
                    .bind(Json(&attempts_value(&attempts)?))
                    .bind(reason.as_str())
                    .bind(last.as_deref())
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                    query(
                        "UPDATE aip_jobs SET state = 'done', lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = $2 \
                         WHERE job_id = $1",
                    )
                    .bind(&id)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                    settled.push(tx_delivery::<D>(&mut *tx, &id).await?);
                }
                Ok(settled)
            })
        })
        .await
    }
}

/// Queues the delivery of `record`'s transition (to its current state and version) for
/// `subscription`, with its job, inside that transition's transaction.
pub(super) async fn tx_queue_delivery(
    tx: &mut dyn Tx,
    record: &ActionRecord,
    subscription: &CallbackSubscription,
    now_ms: i64,
) -> StoreResult<()> {
    let delivery_id = fresh_id();
    query(
        "INSERT INTO aip_callback_deliveries (delivery_id, tenant, principal, action_id, session_id, correlation_id, \
         message_id, action_state, action_version, profile, target, spec, status, attempts, created_at_ms, updated_at_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'pending', $13, $14, $14)",
    )
    .bind(&delivery_id)
    .bind(&record.tenant)
    .bind(&record.principal)
    .bind(&record.action_id)
    .bind(record.session_id.as_deref())
    .bind(record.correlation_id.as_deref())
    .bind(fresh_id())
    .bind(record.state.as_str())
    .bind(record.version)
    .bind(&subscription.profile)
    .bind(&subscription.target)
    .bind(Json(&subscription.spec))
    .bind(Json(&json!([])))
    .bind(now_ms)
    .execute(&mut *tx)
    .await?;
    let job = NewJob {
        job_id: delivery_id.clone(),
        queue: CALLBACK_QUEUE.to_owned(),
        action_id: Some(record.action_id.clone()),
        tenant: record.tenant.clone(),
        available_at_ms: now_ms,
        max_attempts: subscription.max_attempts,
        payload: json!({ "delivery_id": delivery_id }),
    };
    job::tx_insert_job(&mut *tx, &job, None).await
}

/// One delivery by id inside a write, locked where the dialect locks rows.
async fn tx_delivery<D: Dialect>(
    tx: &mut dyn Tx,
    delivery_id: &str,
) -> StoreResult<DeliveryRecord> {
    // The lock names the delivery row only (a join's nullable side cannot be locked on PostgreSQL).
    query(locked::<D>(
        "SELECT delivery_id FROM aip_callback_deliveries WHERE delivery_id = $1",
    ))
    .bind(delivery_id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(StoreError::NotFound { kind: "delivery" })?;
    let row = query(format!("{SELECT} WHERE d.delivery_id = $1"))
        .bind(delivery_id)
        .fetch_one(&mut *tx)
        .await?;
    delivery_record(&row)
}

fn attempts_value(attempts: &[DeliveryAttempt]) -> StoreResult<serde_json::Value> {
    serde_json::to_value(attempts)
        .map_err(|e| StoreError::Corrupt(format!("delivery attempts: {e}")))
}

/// Closes the open attempt, if any, with `error` (empty: none).
fn close_open(attempts: &mut [DeliveryAttempt], now_ms: i64, error: &str) {
    if let Some(last) = attempts.last_mut()
        && last.finished_at_ms.is_none()
    {
        last.finished_at_ms = Some(now_ms);
        last.error = (!error.is_empty()).then(|| error.to_owned());
    }
}

fn delivery_record(r: &Row) -> StoreResult<DeliveryRecord> {
    let state: String = r.try_get("action_state")?;
    let status: String = r.try_get("status")?;
    let attempts = serde_json::from_value(r.json("attempts")?)
        .map_err(|e| StoreError::Corrupt(format!("delivery attempts: {e}")))?;
    Ok(DeliveryRecord {
        delivery_id: r.try_get("delivery_id")?,
        tenant: r.try_get("tenant")?,
        principal: r.try_get("principal")?,
        action_id: r.try_get("action_id")?,
        session_id: r.try_get("session_id")?,
        correlation_id: r.try_get("correlation_id")?,
        message_id: r.try_get("message_id")?,
        action_state: ActionState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("action state {state}")))?,
        action_version: r.try_get("action_version")?,
        profile: r.try_get("profile")?,
        target: r.try_get("target")?,
        spec: r.json("spec")?,
        status: DeliveryStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("delivery status {status}")))?,
        attempts,
        next_attempt_at_ms: r.try_get("next_attempt_at_ms")?,
        last_error: r.try_get("last_error")?,
        dead_letter_reason: r.try_get("dead_letter_reason")?,
        leased_by: r.try_get("leased_by")?,
        lease_expires_at_ms: r.try_get("lease_expires_at_ms")?,
        created_at_ms: r.try_get("created_at_ms")?,
        updated_at_ms: r.try_get("updated_at_ms")?,
        completed_at_ms: r.try_get("completed_at_ms")?,
    })
}
