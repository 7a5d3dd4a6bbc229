//! [`ActionStore`] in SQL: durable admission, action reads and compare-and-set transitions.

use async_trait::async_trait;

use super::page::ListCursor;
use super::{Dialect, SqlStore, fresh_id, job, opt_part, receipt, to_u64, tx_get_locked};
use crate::cursor::CursorKind;
use crate::db::{Json, Row, Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::traits::ActionStore;

/// One action by id.
/// The action columns, from `aip_actions a` (for queries that filter with joins).
pub(super) const SELECT_ACTIONS_AS_A: &str = "SELECT a.action_id, a.tenant, a.principal, a.session_id, a.capability, \
     a.correlation_id, a.mode, a.state, a.idempotency_scope, a.idempotency_key, a.input_hash, a.deadline_ms, \
     a.created_at_ms, a.updated_at_ms, a.version, a.request, a.result FROM aip_actions a";

const SELECT_ACTION: &str = "SELECT action_id, tenant, principal, session_id, capability, correlation_id, mode, state, \
     idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, result \
     FROM aip_actions WHERE tenant = $1 AND action_id = $2";

#[async_trait]
impl<D: Dialect> ActionStore for SqlStore<D> {
    async fn admit(&self, a: Admission) -> StoreResult<AdmissionOutcome> {
        let now = a.action.created_at_ms;
        if a.action.state.is_terminal() {
            return Err(StoreError::InvalidInput(
                "an action cannot be admitted in a terminal state",
            ));
        }
        if let Some(l) = &a.lease {
            if a.job.is_none() {
                return Err(StoreError::InvalidInput("an admission lease needs a job"));
            }
            if l.lease_ms <= 0 {
                return Err(StoreError::InvalidInput("lease duration must be positive"));
            }
        }
        self.write(true, move |tx| {
            Box::pin(async move {
                if let Some(claim) = &a.idempotency {
                    if claim.expires_at_ms <= now {
                        return Err(StoreError::InvalidInput(
                            "idempotency reservation expires before admission",
                        ));
                    }
                    // Insert, or take over a lapsed reservation; a live one is left untouched and the
                    // statement returns nothing. On PostgreSQL a concurrent owner's uncommitted insert
                    // makes this wait, so exactly one admission owns the key.
                    let won = query(
                        "INSERT INTO aip_idempotency (scope, key, reservation_id, input_hash, action_id, created_at_ms, expires_at_ms) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7) \
                         ON CONFLICT (scope, key) DO UPDATE SET reservation_id = excluded.reservation_id, \
                         input_hash = excluded.input_hash, action_id = excluded.action_id, \
                         created_at_ms = excluded.created_at_ms, expires_at_ms = excluded.expires_at_ms \
                         WHERE aip_idempotency.expires_at_ms <= $6 RETURNING reservation_id",
                    )
                    .bind(&claim.scope)
                    .bind(&claim.key)
                    .bind(fresh_id())
                    .bind(&claim.input_hash)
                    .bind(&a.action.action_id)
                    .bind(now)
                    .bind(claim.expires_at_ms)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if won.is_none() {
                        let row = query(
                            "SELECT scope, key, reservation_id, input_hash, action_id, created_at_ms, expires_at_ms \
                             FROM aip_idempotency WHERE scope = $1 AND key = $2",
                        )
                        .bind(&claim.scope)
                        .bind(&claim.key)
                        .fetch_one(&mut *tx)
                        .await?;
                        let reservation = reservation(&row)?;
                        let replay = match claim.behavior {
                            CollisionBehavior::ReturnOriginalResult => true,
                            CollisionBehavior::RejectConflict => false,
                            CollisionBehavior::RevalidateInputHash => {
                                reservation.input_hash == claim.input_hash
                            }
                        };
                        if !replay {
                            return Ok(AdmissionOutcome::Conflict { reservation });
                        }
                        let original =
                            tx_get_action::<D>(&mut *tx, &a.action.tenant, &reservation.action_id)
                            .await?
                            .ok_or_else(|| {
                                StoreError::Corrupt(
                                    "idempotency reservation without its action".into(),
                                )
                            })?;
                        return Ok(AdmissionOutcome::Replayed {
                            original,
                            reservation,
                        });
                    }
                }
                let act = &a.action;
                let callback = a
                    .callback
                    .as_ref()
                    .map(serde_json::to_value)
                    .transpose()
                    .map_err(|_| StoreError::InvalidInput("unserializable callback subscription"))?;
                let input_hash = act
                    .input_hash
                    .clone()
                    .or_else(|| a.idempotency.as_ref().map(|c| c.input_hash.clone()));
                // Nothing is read back: the new row is exactly what was written.
                query(
                    "INSERT INTO aip_actions (action_id, tenant, principal, session_id, capability, correlation_id, mode, state, \
                     idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, callback) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, 0, $14, $15)",
                )
                .bind(&act.action_id)
                .bind(&act.tenant)
                .bind(&act.principal)
                .bind(act.session_id.as_deref())
                .bind(&act.capability)
                .bind(act.correlation_id.as_deref())
                .bind(&act.mode)
                .bind(act.state.as_str())
                .bind(a.idempotency.as_ref().map(|c| c.scope.as_str()))
                .bind(a.idempotency.as_ref().map(|c| c.key.as_str()))
                .bind(input_hash.as_deref())
                .bind(act.deadline_ms)
                .bind(act.created_at_ms)
                .bind(Json(&act.request))
                .bind(callback.as_ref().map(Json))
                .execute(&mut *tx)
                .await
                .map_err(|e| e.or_duplicate("action"))?;
                tx_check_quota::<D>(&mut *tx, act, a.quota).await?;
                if let Some(approval) = &a.approval {
                    if approval.tenant != act.tenant || approval.action_id != act.action_id {
                        return Err(StoreError::InvalidInput(
                            "an approval is created only with its own action",
                        ));
                    }
                    super::approval::tx_insert_approval(&mut *tx, approval).await?;
                }
                if let Some(link) = &a.transaction {
                    super::transaction::tx_link(&mut *tx, &act.tenant, &act.action_id, link, now)
                        .await?;
                }
                for timer in &a.timers {
                    if timer.tenant != act.tenant {
                        return Err(StoreError::InvalidInput(
                            "an admission's timers belong to its tenant",
                        ));
                    }
                    job::tx_insert_job(&mut *tx, timer, None).await?;
                }
                receipt::tx_append_receipts(&mut *tx, &a.receipts).await?;
                let mut lease = None;
                if let Some(job) = &a.job {
                    let leased = a
                        .lease
                        .as_ref()
                        .map(|l| (&l.worker, now.saturating_add(l.lease_ms)));
                    job::tx_insert_job(&mut *tx, job, leased).await?;
                    if let Some(l) = &a.lease {
                        // A fresh row: its first lease is attempt 1 with fencing token 1.
                        lease = Some(Lease {
                            fence: Fence {
                                job_id: job.job_id.clone(),
                                worker_id: l.worker.clone(),
                                token: 1,
                            },
                            queue: job.queue.clone(),
                            tenant: job.tenant.clone(),
                            action_id: job.action_id.clone(),
                            attempt: 1,
                            expires_at_ms: now.saturating_add(l.lease_ms),
                            payload: job.payload.clone(),
                        });
                    }
                }
                D::append_events(&mut *tx, &a.events).await?;
                // Last: the audit sequence is one counter row, locked only from here to commit.
                for audit in &a.audit {
                    receipt::tx_append_audit::<D>(&mut *tx, audit).await?;
                }
                let (scope, key) = a.idempotency.map(|c| (c.scope, c.key)).unzip();
                let act = a.action;
                let record = ActionRecord {
                    action_id: act.action_id,
                    tenant: act.tenant,
                    principal: act.principal,
                    session_id: act.session_id,
                    capability: act.capability,
                    correlation_id: act.correlation_id,
                    mode: act.mode,
                    state: act.state,
                    idempotency_scope: scope,
                    idempotency_key: key,
                    input_hash,
                    deadline_ms: act.deadline_ms,
                    created_at_ms: act.created_at_ms,
                    updated_at_ms: act.created_at_ms,
                    version: 0,
                    request: act.request,
                    result: None,
                };
                Ok(AdmissionOutcome::Admitted { record, lease })
            })
        })
        .await
    }

    async fn get_action(&self, tenant: &str, action_id: &str) -> StoreResult<Option<ActionRecord>> {
        let row = query(SELECT_ACTION)
            .bind(tenant)
            .bind(action_id)
            .fetch_optional(self.reader())
            .await?;
        row.as_ref().map(action_record).transpose()
    }

    async fn list_actions(
        &self,
        q: &ActionQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<ActionRecord>> {
        let scope = vec![
            q.tenant.clone(),
            opt_part(q.principal.as_deref()),
            opt_part(q.session_id.as_deref()),
            opt_part(q.state.map(|s| s.as_str())),
            opt_part(q.capability.as_deref()),
            opt_part(q.transaction_id.as_deref()),
        ];
        let page = ListCursor::open(&self.key, CursorKind::Actions, scope, cursor)?;
        let found = query(list_actions_sql(q.session_id.is_some()))
            .bind(&q.tenant)
            .bind(q.principal.as_deref())
            .bind(q.session_id.as_deref())
            .bind(q.state.map(|s| s.as_str()))
            .bind(q.capability.as_deref())
            .bind(page.after)
            .bind(limit.as_i64())
            .bind(q.transaction_id.as_deref())
            .fetch_all(self.reader())
            .await?;
        page.page(&found, "seq", action_record)
    }

    async fn count_active_actions(&self, q: &ActionQuery) -> StoreResult<u64> {
        let row = query(format!("SELECT COUNT(*) AS n {}", active_where(q)))
            .bind(&q.tenant)
            .bind(q.principal.as_deref())
            .bind(q.session_id.as_deref())
            .bind(q.capability.as_deref())
            .fetch_one(self.reader())
            .await?;
        to_u64(row.try_get("n")?, "active action count")
    }

    async fn active_actions_by_state(&self, q: &ActionQuery) -> StoreResult<Vec<ActiveActions>> {
        let rows = query(format!(
            "SELECT state, mode, COUNT(*) AS n {} GROUP BY state, mode ORDER BY state, mode",
            active_where(q)
        ))
        .bind(&q.tenant)
        .bind(q.principal.as_deref())
        .bind(q.session_id.as_deref())
        .bind(q.capability.as_deref())
        .fetch_all(self.reader())
        .await?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("state")?;
                Ok(ActiveActions {
                    state: ActionState::parse(&state)
                        .ok_or_else(|| StoreError::Corrupt(format!("action state {state}")))?,
                    mode: r.try_get("mode")?,
                    count: to_u64(r.try_get("n")?, "active action count")?,
                })
            })
            .collect()
    }

    async fn transition_action(&self, t: Transition) -> StoreResult<ActionRecord> {
        if t.finish_job && t.fence.is_none() {
            return Err(StoreError::InvalidInput("finish_job needs a fence"));
        }
        self.write(true, move |tx| {
            Box::pin(async move { tx_transition::<D>(&mut *tx, &t).await })
        })
        .await
    }

    async fn get_idempotency(
        &self,
        scope: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        let row = query(
            "SELECT scope, key, reservation_id, input_hash, action_id, created_at_ms, expires_at_ms \
             FROM aip_idempotency WHERE scope = $1 AND key = $2 AND expires_at_ms > $3",
        )
        .bind(scope)
        .bind(key)
        .bind(now_ms)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(reservation).transpose()
    }

    async fn list_unfinished_actions(
        &self,
        now_ms: i64,
        admitted_before_ms: i64,
        limit: Limit,
    ) -> StoreResult<Vec<ActionRecord>> {
        let found = query(UNFINISHED_SQL)
            .bind(admitted_before_ms)
            .bind(now_ms)
            .bind(limit.as_i64())
            .fetch_all(self.reader())
            .await?;
        found.iter().map(action_record).collect()
    }
}

/// Recovery's listing of unfinished actions no job can finish (`$1` admitted before, `$2` now, `$3`
/// limit): the unfinished states listed, so the state index serves it and a sweep costs the
/// unfinished work, not the history.
pub(super) const UNFINISHED_SQL: &str = "SELECT a.action_id, a.tenant, a.principal, a.session_id, a.capability, a.correlation_id, a.mode, a.state, \
    a.idempotency_scope, a.idempotency_key, a.input_hash, a.deadline_ms, a.created_at_ms, a.updated_at_ms, a.version, a.request, a.result \
    FROM aip_actions a \
    WHERE a.state IN ('accepted', 'queued', 'running', 'streaming', 'cancelling') \
    AND a.created_at_ms <= $1 \
    AND NOT EXISTS (SELECT 1 FROM aip_jobs j WHERE j.tenant = a.tenant AND j.action_id = a.action_id \
       AND (j.state = 'ready' OR (j.state = 'leased' AND (j.lease_expires_at_ms > $2 OR j.attempts < j.max_attempts)))) \
    ORDER BY a.seq LIMIT $3";

/// A compare-and-set transition (with its fence, result, receipts and events) inside a write:
/// `transition_action`, and the writes of other aggregates that move an action (an approval's
/// decision) in their own transaction.
/// `FROM` and `WHERE` of the non-terminal actions under `q` ($1 tenant, $2 principal, $3 session,
/// $4 capability).
fn active_where(q: &ActionQuery) -> String {
    let session = super::session_filter(3, q.session_id.is_some());
    format!(
        "FROM aip_actions WHERE tenant = $1 \
         AND (CAST($2 AS TEXT) IS NULL OR principal = $2) \
         AND {session} \
         AND (CAST($4 AS TEXT) IS NULL OR capability = $4) \
         AND state NOT IN ('cancelled', 'completed', 'failed', 'expired', 'dead_lettered')"
    )
}

pub(super) async fn tx_transition<D: Dialect>(
    tx: &mut dyn Tx,
    t: &Transition,
) -> StoreResult<ActionRecord> {
    match &t.fence {
        Some(fence) if t.finish_job => {
            // The fence check and the job's completion in one statement (on PostgreSQL the
            // update locks the job row as the check's FOR UPDATE would).
            let done = query(
                    "UPDATE aip_jobs SET state = 'done', lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = $2 \
                     WHERE job_id = $1 AND state = 'leased' AND lease_owner = $3 AND fence = $4 AND lease_expires_at_ms > $2",
                )
                .bind(&fence.job_id)
                .bind(t.now_ms)
                .bind(fence.worker_id.as_str())
                .bind(i64::try_from(fence.token).map_err(|_| StoreError::StaleLease)?)
                .execute(&mut *tx)
                .await?;
            if done == 0 {
                // Not held: the check names why (a missing job or a stale lease).
                job::tx_check_fence::<D>(&mut *tx, fence, t.now_ms).await?;
                return Err(StoreError::StaleLease);
            }
        }
        Some(fence) => job::tx_check_fence::<D>(&mut *tx, fence, t.now_ms).await?,
        None => {}
    }
    // Compare-and-set in one statement; only a refused update reads the row to say why.
    let from: Vec<&str> = t
        .from
        .iter()
        .filter(|s| !s.is_terminal())
        .map(|s| s.as_str())
        .collect();
    let row = if from.is_empty() {
        None
    } else {
        let states = (0..from.len())
            .map(|i| format!("${}", i + 6))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "UPDATE aip_actions SET state = $2, result = COALESCE($3, result), updated_at_ms = $4, version = version + 1 \
                 WHERE action_id = $1 AND tenant = $5 AND state IN ({states}) RETURNING \
                 action_id, tenant, principal, session_id, capability, correlation_id, mode, state, \
                 idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, result, callback, subscribers"
        );
        let mut q = query(sql)
            .bind(&t.action_id)
            .bind(t.to.as_str())
            .bind(t.result.as_ref().map(Json))
            .bind(t.now_ms)
            .bind(&t.tenant);
        for state in &from {
            q = q.bind(*state);
        }
        q.fetch_optional(&mut *tx).await?
    };
    let (record, callback, subscribers) = match row {
        Some(row) => (
            action_record(&row)?,
            row.opt_json("callback")?,
            row.try_get::<i64>("subscribers")?,
        ),
        None => {
            let current = tx_get_action::<D>(&mut *tx, &t.tenant, &t.action_id)
                .await?
                .ok_or(StoreError::NotFound { kind: "action" })?;
            let actual = current.state.as_str().to_owned();
            return Err(if current.state.is_terminal() {
                StoreError::Terminal { state: actual }
            } else {
                StoreError::StateConflict { actual }
            });
        }
    };
    if let Some(reported) = &t.operation {
        super::transaction::tx_report_operation(
            &mut *tx,
            &t.tenant,
            &t.action_id,
            reported,
            t.now_ms,
        )
        .await?;
    }
    if let Some(callback) = callback {
        let subscription: CallbackSubscription = serde_json::from_value(callback)
            .map_err(|e| StoreError::Corrupt(format!("callback subscription: {e}")))?;
        if record.state.is_terminal() || !subscription.terminal_only {
            super::callback::tx_queue_delivery(&mut *tx, &record, &subscription, t.now_ms).await?;
        }
    }
    if subscribers > 0 {
        super::subscription::tx_queue_subscribed(&mut *tx, &record, t.now_ms).await?;
    }
    receipt::tx_append_receipts(&mut *tx, &t.receipts).await?;
    D::append_events(&mut *tx, &t.events).await?;
    Ok(record)
}

/// One action by id inside a write, its row locked where the dialect locks rows.
pub(super) async fn tx_get_action<D: Dialect>(
    tx: &mut dyn Tx,
    tenant: &str,
    action_id: &str,
) -> StoreResult<Option<ActionRecord>> {
    tx_get_locked::<D, _>(tx, SELECT_ACTION, &[tenant, action_id], action_record).await
}

pub(super) fn action_record(r: &Row) -> StoreResult<ActionRecord> {
    let state: String = r.try_get("state")?;
    Ok(ActionRecord {
        action_id: r.try_get("action_id")?,
        tenant: r.try_get("tenant")?,
        principal: r.try_get("principal")?,
        session_id: r.try_get("session_id")?,
        capability: r.try_get("capability")?,
        correlation_id: r.try_get("correlation_id")?,
        mode: r.try_get("mode")?,
        state: ActionState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("action state {state}")))?,
        idempotency_scope: r.try_get("idempotency_scope")?,
        idempotency_key: r.try_get("idempotency_key")?,
        input_hash: r.try_get("input_hash")?,
        deadline_ms: r.try_get("deadline_ms")?,
        created_at_ms: r.try_get("created_at_ms")?,
        updated_at_ms: r.try_get("updated_at_ms")?,
        version: r.try_get("version")?,
        request: r.json("request")?,
        result: r.opt_json("result")?,
    })
}

fn reservation(r: &Row) -> StoreResult<IdempotencyRecord> {
    Ok(IdempotencyRecord {
        scope: r.try_get("scope")?,
        key: r.try_get("key")?,
        reservation_id: r.try_get("reservation_id")?,
        input_hash: r.try_get("input_hash")?,
        action_id: r.try_get("action_id")?,
        created_at_ms: r.try_get("created_at_ms")?,
        expires_at_ms: r.try_get("expires_at_ms")?,
    })
}

/// The action listing (parameters: tenant, principal, session, state, capability, after, limit,
/// transaction); the session term only when `session` (see [`super::session_filter`]).
pub(super) fn list_actions_sql(session: bool) -> String {
    let session = super::session_filter(3, session);
    format!(
        "SELECT seq, action_id, tenant, principal, session_id, capability, correlation_id, mode, state, \
         idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, result \
         FROM aip_actions WHERE tenant = $1 \
         AND (CAST($2 AS TEXT) IS NULL OR principal = $2) \
         AND {session} \
         AND (CAST($4 AS TEXT) IS NULL OR state = $4) \
         AND (CAST($5 AS TEXT) IS NULL OR capability = $5) \
         AND (CAST($8 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM aip_transaction_actions l \
              WHERE l.tenant = aip_actions.tenant AND l.action_id = aip_actions.action_id AND l.transaction_id = $8)) \
         AND seq > $6 ORDER BY seq LIMIT $7",
    )
}

/// States that count against a concurrency quota (the partial index `aip_actions_unfinished`).
const UNFINISHED: &str = "state IN ('accepted', 'queued', 'running', 'streaming', 'cancelling')";

/// Refuses the admission of `act` (already inserted in this transaction, so the error rolls it
/// back) when its tenant or principal then holds more unfinished actions than `quota` allows.
/// The tenant's lock is taken before the principal's, always in that order.
async fn tx_check_quota<D: Dialect>(
    tx: &mut dyn Tx,
    act: &NewAction,
    quota: RunningQuota,
) -> StoreResult<()> {
    if !act.state.counts_against_quota() {
        return Ok(());
    }
    let buckets = [
        ("tenant", quota.tenant, None),
        ("principal", quota.principal, Some(act.principal.as_str())),
    ];
    for (bucket, limit, principal) in buckets {
        let Some(limit) = limit else { continue };
        if let Some(lock) = D::QUOTA_LOCK {
            let key = match principal {
                Some(p) => format!("quota/{}/{p}", act.tenant),
                None => format!("quota/{}", act.tenant),
            };
            query(lock).bind(key).execute(&mut *tx).await?;
        }
        // `$2 IS NULL` counts the whole tenant; the partial index serves both.
        let sql = format!(
            "SELECT COUNT(*) AS n FROM aip_actions WHERE tenant = $1 \
             AND (CAST($2 AS TEXT) IS NULL OR principal = $2) AND {UNFINISHED}"
        );
        let n: i64 = query(sql)
            .bind(&act.tenant)
            .bind(principal)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        if n > i64::from(limit) {
            return Err(StoreError::QuotaExceeded { bucket, limit });
        }
    }
    if let (ActionState::Queued, Some(limit)) = (act.state, quota.queued) {
        // Counts at most one past the bound (the index on state serves it), so a full queue costs
        // what a short one does.
        let n: i64 = query(
            "SELECT COUNT(*) AS n FROM (SELECT 1 FROM aip_actions WHERE state = 'queued' LIMIT $1) q",
        )
        .bind(i64::from(limit) + 1)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if n > i64::from(limit) {
            return Err(StoreError::QueueFull { limit });
        }
    }
    Ok(())
}
