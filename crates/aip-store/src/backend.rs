//! The one implementation of [`crate::Store`] shared by both backends.
//!
//! SQLite and PostgreSQL accept the same SQL here (`$N` parameters, `ON CONFLICT`, `RETURNING`), so
//! the behaviour is written once, against `db::Stmt` and `db::Row`, and expanded for each backend
//! (its store type and its inherent `write` and `tx_append_events`). What differs is
//! passed in: the row-lock suffix of reads that precede a write and the claim statement's lock clause.
//! Every write runs as a closure on a connection inside a transaction through the backend's inherent
//! `write(notify, f)`: PostgreSQL runs one transaction per write; SQLite group-commits concurrent
//! writes (one savepoint each, one commit and one fsync for the batch).

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::error::{StoreError, StoreResult};

/// A boxed, sendable future borrowing for `'a` (the shape of a write closure's result).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Converts a stored integer to an unsigned model value.
pub(crate) fn to_u64(v: i64, what: &'static str) -> StoreResult<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {what}")))
}

/// Converts an unsigned model value to a stored integer.
pub(crate) fn to_i64(v: u64, what: &'static str) -> StoreResult<i64> {
    i64::try_from(v).map_err(|_| StoreError::InvalidInput(what))
}

/// SHA-256 (lowercase hex) of a secret, so the secret itself is never stored.
pub(crate) fn secret_hash(secret: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(secret.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh unique id for rows the store names itself (reservations).
pub(crate) fn fresh_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Scope part for an optional filter: `None` and `Some("")` must fingerprint differently.
pub(crate) fn opt_part(v: Option<&str>) -> String {
    match v {
        Some(s) => format!("+{s}"),
        None => "-".to_owned(),
    }
}

/// Errors are bounded before they are stored.
pub(crate) fn bounded_error(e: &str) -> String {
    e.chars().take(2000).collect()
}

/// Compares stored JSON with offered JSON for chunk duplicates.
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    a == b
}

/// The most rows one multi-row statement carries (bounded parameter counts on both backends).
pub(crate) const MAX_ROWS: usize = 64;

/// `($1, …, $cols), ($cols+1, …)`: `rows` groups of numbered parameters for a multi-row INSERT. The
/// SQL holds placeholders only, never values.
pub(crate) fn values_list(rows: usize, cols: usize) -> String {
    use std::fmt::Write as _;
    let mut sql = String::with_capacity(rows * cols * 5);
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for col in 0..cols {
            if col > 0 {
                sql.push_str(", ");
            }
            let _ = write!(sql, "${}", row * cols + col + 1);
        }
        sql.push(')');
    }
    sql
}

/// Binds the nine `aip_events` insert columns of each event, in row order (both backends' multi-row
/// event insert).
macro_rules! bind_event_rows {
    ($query:expr, $events:expr) => {{
        let mut q = $query;
        for e in $events {
            q = q
                .bind(&e.event_id)
                .bind(&e.kind)
                .bind(&e.tenant)
                .bind(e.principal.as_deref())
                .bind(e.session_id.as_deref())
                .bind(e.action_id.as_deref())
                .bind(e.correlation_id.as_deref())
                .bind(e.occurred_at_ms)
                .bind($crate::db::Json(&e.data));
        }
        q
    }};
}
pub(crate) use bind_event_rows;

/// A failed event insert: a reused event id is a duplicate, anything else a storage error.
pub(crate) fn event_insert_error(err: crate::db::DbError) -> crate::error::StoreError {
    if err.is_unique_violation() {
        crate::error::StoreError::Duplicate { kind: "event" }
    } else {
        err.into()
    }
}

macro_rules! sql_store_impl {
    ($Store:ident, $backend:expr, lock = $lock:literal, claim_lock = $claim_lock:literal) => {
        type DbRow = $crate::db::Row;

        mod rows {
            use super::DbRow;
            use crate::backend::{to_u64};
            use crate::error::{StoreError, StoreResult};
            use crate::model::*;

            pub(super) fn action(r: &DbRow) -> StoreResult<ActionRecord> {
                let state: String = r.try_get("state")?;
                Ok(ActionRecord {
                    action_id: r.try_get("action_id")?,
                    tenant: r.try_get("tenant")?,
                    principal: r.try_get("principal")?,
                    session_id: r.try_get("session_id")?,
                    capability: r.try_get("capability")?,
                    correlation_id: r.try_get("correlation_id")?,
                    mode: r.try_get("mode")?,
                    state: ActionState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("action state {state}")))?,
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

            pub(super) fn reservation(r: &DbRow) -> StoreResult<IdempotencyRecord> {
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

            pub(super) fn event(r: &DbRow) -> StoreResult<EventRecord> {
                Ok(EventRecord {
                    sequence: to_u64(r.try_get("seq")?, "event sequence")?,
                    event_id: r.try_get("event_id")?,
                    kind: r.try_get("kind")?,
                    tenant: r.try_get("tenant")?,
                    principal: r.try_get("principal")?,
                    session_id: r.try_get("session_id")?,
                    action_id: r.try_get("action_id")?,
                    correlation_id: r.try_get("correlation_id")?,
                    occurred_at_ms: r.try_get("occurred_at_ms")?,
                    data: r.json("data")?,
                })
            }

            pub(super) fn chunk(r: &DbRow) -> StoreResult<ChunkRecord> {
                Ok(ChunkRecord {
                    action_id: r.try_get("action_id")?,
                    sequence: to_u64(r.try_get("seq")?, "chunk sequence")?,
                    kind: r.try_get("kind")?,
                    data: r.json("data")?,
                    created_at_ms: r.try_get("created_at_ms")?,
                })
            }

            pub(super) fn session(r: &DbRow) -> StoreResult<SessionRecord> {
                let state: String = r.try_get("state")?;
                Ok(SessionRecord {
                    session_id: r.try_get("session_id")?,
                    tenant: r.try_get("tenant")?,
                    principal: r.try_get("principal")?,
                    peer: r.try_get("peer")?,
                    state: SessionState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("session state {state}")))?,
                    created_at_ms: r.try_get("created_at_ms")?,
                    updated_at_ms: r.try_get("updated_at_ms")?,
                    expires_at_ms: r.try_get("expires_at_ms")?,
                    data: r.json("data")?,
                })
            }

            pub(super) fn receipt(r: &DbRow) -> StoreResult<ReceiptRecord> {
                Ok(ReceiptRecord {
                    receipt_id: r.try_get("receipt_id")?,
                    chain_id: r.try_get("chain_id")?,
                    position: to_u64(r.try_get("position")?, "receipt position")?,
                    tenant: r.try_get("tenant")?,
                    principal: r.try_get("principal")?,
                    action_id: r.try_get("action_id")?,
                    receipt_type: r.try_get("receipt_type")?,
                    hash: r.try_get("hash")?,
                    previous_hash: r.try_get("previous_hash")?,
                    created_at_ms: r.try_get("created_at_ms")?,
                    body: r.json("body")?,
                })
            }

            pub(super) fn audit(r: &DbRow) -> StoreResult<AuditRecord> {
                Ok(AuditRecord {
                    sequence: to_u64(r.try_get("seq")?, "audit sequence")?,
                    audit_id: r.try_get("audit_id")?,
                    tenant: r.try_get("tenant")?,
                    actor: r.try_get("actor")?,
                    action_label: r.try_get("action_label")?,
                    occurred_at_ms: r.try_get("occurred_at_ms")?,
                    data: r.json("data")?,
                })
            }

            pub(super) fn record(r: &DbRow) -> StoreResult<AppRecord> {
                Ok(AppRecord {
                    collection: r.try_get("collection")?,
                    record_id: r.try_get("record_id")?,
                    tenant: r.try_get("tenant")?,
                    created_at_ms: r.try_get("created_at_ms")?,
                    body: r.json("body")?,
                })
            }

            pub(super) fn lease(r: &DbRow, worker: &WorkerId) -> StoreResult<Lease> {
                let attempts: i64 = r.try_get("attempts")?;
                Ok(Lease {
                    fence: Fence {
                        job_id: r.try_get("job_id")?,
                        worker_id: worker.clone(),
                        token: to_u64(r.try_get("fence")?, "fencing token")?,
                    },
                    queue: r.try_get("queue")?,
                    action_id: r.try_get("action_id")?,
                    attempt: u32::try_from(attempts).map_err(|_| StoreError::Corrupt("attempt count".into()))?,
                    expires_at_ms: r.try_get("lease_expires_at_ms")?,
                    payload: r.json("payload")?,
                })
            }
        }

        /// Statements shared by several operations, run inside a caller's transaction.
        impl $Store {
            /// Applies pending migrations of `set` inside `tx` after checking the applied ones.
            async fn tx_migrate(tx: &mut dyn $crate::db::Tx, set: &[$crate::migrate::Migration]) -> $crate::error::StoreResult<()> {
                $crate::db::query($crate::migrate::CREATE_TABLE).execute(&mut *tx).await?;
                let applied: Vec<(i64, String)> = $crate::db::query("SELECT version, checksum FROM aip_migrations ORDER BY version")
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|r| Ok((r.try_get("version")?, r.try_get("checksum")?)))
                    .collect::<$crate::error::StoreResult<_>>()?;
                for m in $crate::migrate::pending(&applied, set)? {
                    tx.batch(m.sql).await?;
                    $crate::db::query("INSERT INTO aip_migrations (version, name, checksum, applied_at_ms) VALUES ($1, $2, $3, $4)")
                        .bind(m.version)
                        .bind(m.name)
                        .bind(m.checksum())
                        .bind($crate::migrate::now_ms())
                        .execute(&mut *tx)
                        .await?;
                }
                Ok(())
            }

            /// Loads the store's cursor key, creating it on first start (shared by every node).
            async fn tx_cursor_key(tx: &mut dyn $crate::db::Tx) -> $crate::error::StoreResult<$crate::cursor::CursorKey> {
                $crate::db::query("INSERT INTO aip_meta (name, value) VALUES ('cursor_key', $1) ON CONFLICT (name) DO NOTHING")
                    .bind($crate::cursor::CursorKey::random_hex()?)
                    .execute(&mut *tx)
                    .await?;
                let hex: String = $crate::db::query("SELECT value FROM aip_meta WHERE name = 'cursor_key'")
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("value")?;
                $crate::cursor::CursorKey::from_hex(&hex)
            }

            /// Appends receipts that must extend their chains exactly; returns their positions. Each run
            /// of one chain costs one read of the chain's head (none for a new chain, whose receipts
            /// start at position 0, which the insert finds taken if the chain exists) and one
            /// multi-row insert; only a collision costs more (to tell a duplicate from a fork).
            async fn tx_append_receipts(tx: &mut dyn $crate::db::Tx, receipts: &[$crate::model::NewReceipt]) -> $crate::error::StoreResult<Vec<i64>> {
                use $crate::error::StoreError;
                let mut positions = Vec::with_capacity(receipts.len());
                let mut rest = receipts;
                while let Some(first) = rest.first() {
                    let run = rest.iter().take_while(|r| r.chain_id == first.chain_id).count().min($crate::backend::MAX_ROWS);
                    let (chunk, tail) = rest.split_at(run);
                    rest = tail;
                    let conflict = || StoreError::ReceiptChainConflict { chain_id: first.chain_id.clone() };
                    let start: i64 = match first.previous_hash.as_deref() {
                        None => 0,
                        Some(prev) => {
                            let last = $crate::db::query("SELECT position, hash FROM aip_receipts WHERE chain_id = $1 ORDER BY position DESC LIMIT 1")
                                .bind(&first.chain_id)
                                .fetch_optional(&mut *tx)
                                .await?;
                            match last {
                                Some(row) if row.try_get::<String>("hash")? == prev => row.try_get::<i64>("position")? + 1,
                                _ => return Err(conflict()),
                            }
                        }
                    };
                    if chunk.windows(2).any(|w| w[1].previous_hash.as_deref() != Some(w[0].hash.as_str())) {
                        return Err(conflict());
                    }
                    let sql = format!(
                        "INSERT INTO aip_receipts (receipt_id, chain_id, position, tenant, principal, action_id, receipt_type, hash, previous_hash, created_at_ms, body) \
                         VALUES {} ON CONFLICT DO NOTHING RETURNING receipt_id",
                        $crate::backend::values_list(chunk.len(), 11)
                    );
                    let mut q = $crate::db::query(sql);
                    for (r, position) in chunk.iter().zip(start..) {
                        q = q
                            .bind(&r.receipt_id)
                            .bind(&r.chain_id)
                            .bind(position)
                            .bind(&r.tenant)
                            .bind(r.principal.as_deref())
                            .bind(r.action_id.as_deref())
                            .bind(&r.receipt_type)
                            .bind(&r.hash)
                            .bind(r.previous_hash.as_deref())
                            .bind(r.created_at_ms)
                            .bind($crate::db::Json(&r.body));
                        positions.push(position);
                    }
                    let inserted = q.fetch_all(&mut *tx).await?;
                    if inserted.len() < chunk.len() {
                        // A reused receipt id is a duplicate; any other collision is a position that
                        // another writer took first: a fork.
                        let got = inserted
                            .iter()
                            .map(|row| row.try_get::<String>("receipt_id"))
                            .collect::<Result<std::collections::HashSet<_>, _>>()?;
                        for r in chunk.iter().filter(|r| !got.contains(&r.receipt_id)) {
                            let exists = $crate::db::query("SELECT 1 AS one FROM aip_receipts WHERE receipt_id = $1")
                                .bind(&r.receipt_id)
                                .fetch_optional(&mut *tx)
                                .await?;
                            if exists.is_some() {
                                return Err(StoreError::Duplicate { kind: "receipt" });
                            }
                        }
                        return Err(conflict());
                    }
                }
                Ok(positions)
            }

            /// Inserts a job: ready, or (with `lease`: worker and expiry) already leased to its first
            /// worker, as a first claim would leave it (attempt 1, fencing token 1).
            async fn tx_insert_job(
                tx: &mut dyn $crate::db::Tx,
                job: &$crate::model::NewJob,
                lease: Option<(&$crate::model::WorkerId, i64)>,
            ) -> $crate::error::StoreResult<()> {
                let res = $crate::db::query(
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
                .bind($crate::db::Json(&job.payload))
                .bind(if lease.is_some() { "leased" } else { "ready" })
                .bind(i64::from(lease.is_some()))
                .bind(lease.map(|(worker, _)| worker.as_str()))
                .bind(lease.map(|(_, expires)| expires))
                .execute(&mut *tx)
                .await;
                match res {
                    Ok(_) => Ok(()),
                    Err(err) if err.is_unique_violation() => Err($crate::error::StoreError::Duplicate { kind: "job" }),
                    Err(err) => Err(err.into()),
                }
            }

            /// Fails unless `fence` still owns an unexpired lease (spec 13.4): the row is locked on
            /// PostgreSQL so no claim can slip in before this transaction commits.
            async fn tx_check_fence(tx: &mut dyn $crate::db::Tx, fence: &$crate::model::Fence, now_ms: i64) -> $crate::error::StoreResult<()> {
                let row = $crate::db::query(concat!(
                    "SELECT state, lease_owner, lease_expires_at_ms, fence FROM aip_jobs WHERE job_id = $1",
                    $lock
                ))
                .bind(&fence.job_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or($crate::error::StoreError::NotFound { kind: "job" })?;
                let state: String = row.try_get("state")?;
                let owner: Option<String> = row.try_get("lease_owner")?;
                let expires: Option<i64> = row.try_get("lease_expires_at_ms")?;
                let token: i64 = row.try_get("fence")?;
                let held = state == "leased"
                    && owner.as_deref() == Some(fence.worker_id.as_str())
                    && Some(token) == i64::try_from(fence.token).ok()
                    && expires.is_some_and(|e| e > now_ms);
                if held { Ok(()) } else { Err($crate::error::StoreError::StaleLease) }
            }

            /// One chunk inside a write: a new sequence must exceed the action's last; a retained
            /// duplicate is reported as such; other content under a used sequence is a conflict.
            async fn tx_append_chunk(tx: &mut dyn $crate::db::Tx, chunk: &$crate::model::NewChunk) -> $crate::error::StoreResult<$crate::model::ChunkAppend> {
                use $crate::error::StoreError;
                use $crate::model::ChunkAppend;
                let seq = $crate::backend::to_i64(chunk.sequence, "chunk sequence too large")?;
                let existing = $crate::db::query("SELECT kind, data FROM aip_chunks WHERE action_id = $1 AND seq = $2")
                    .bind(&chunk.action_id)
                    .bind(seq)
                    .fetch_optional(&mut *tx)
                    .await?;
                if let Some(row) = existing {
                    let kind: String = row.try_get("kind")?;
                    let data = row.json("data")?;
                    return if kind == chunk.kind && $crate::backend::same_json(&data, &chunk.data) {
                        Ok(ChunkAppend::Duplicate)
                    } else {
                        Err(StoreError::ChunkConflict { sequence: chunk.sequence })
                    };
                }
                let max = $crate::db::query("SELECT MAX(seq) AS last FROM aip_chunks WHERE action_id = $1")
                    .bind(&chunk.action_id)
                    .fetch_one(&mut *tx)
                    .await?;
                let last: Option<i64> = max.try_get("last")?;
                if let Some(last) = last {
                    if seq <= last {
                        return Err(StoreError::ChunkOutOfOrder { sequence: chunk.sequence, last: $crate::backend::to_u64(last, "chunk sequence")? });
                    }
                }
                let res = $crate::db::query("INSERT INTO aip_chunks (action_id, seq, kind, data, created_at_ms) VALUES ($1, $2, $3, $4, $5)")
                    .bind(&chunk.action_id)
                    .bind(seq)
                    .bind(&chunk.kind)
                    .bind($crate::db::Json(&chunk.data))
                    .bind(chunk.created_at_ms)
                    .execute(&mut *tx)
                    .await;
                match res {
                    Ok(_) => Ok(ChunkAppend::Inserted),
                    // A concurrent writer stored this sequence first; let the caller retry to learn
                    // whether it was the same chunk.
                    Err(err) if err.is_unique_violation() => {
                        Err(StoreError::Unavailable("concurrent chunk append".into()))
                    }
                    Err(err) => Err(err.into()),
                }
            }

            async fn tx_get_action(tx: &mut dyn $crate::db::Tx, action_id: &str) -> $crate::error::StoreResult<Option<$crate::model::ActionRecord>> {
                let row = $crate::db::query(concat!(
                    "SELECT action_id, tenant, principal, session_id, capability, correlation_id, mode, state, \
                     idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, result \
                     FROM aip_actions WHERE action_id = $1",
                    $lock
                ))
                .bind(action_id)
                .fetch_optional(&mut *tx)
                .await?;
                row.as_ref().map(rows::action).transpose()
            }

            async fn tx_get_session(tx: &mut dyn $crate::db::Tx, session_id: &str) -> $crate::error::StoreResult<Option<$crate::model::SessionRecord>> {
                let row = $crate::db::query(concat!(
                    "SELECT session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data \
                     FROM aip_sessions WHERE session_id = $1",
                    $lock
                ))
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await?;
                row.as_ref().map(rows::session).transpose()
            }

        }

        #[async_trait::async_trait]
        impl $crate::traits::ActionStore for $Store {
            async fn admit(&self, a: $crate::model::Admission) -> $crate::error::StoreResult<$crate::model::AdmissionOutcome> {
                use $crate::model::{AdmissionOutcome, CollisionBehavior};
                use $crate::error::StoreError;
                let now = a.action.created_at_ms;
                if a.action.state.is_terminal() {
                    return Err(StoreError::InvalidInput("an action cannot be admitted in a terminal state"));
                }
                if let Some(l) = &a.lease {
                    if a.job.is_none() {
                        return Err(StoreError::InvalidInput("an admission lease needs a job"));
                    }
                    if l.lease_ms <= 0 {
                        return Err(StoreError::InvalidInput("lease duration must be positive"));
                    }
                }
                self.write(true, move |tx| Box::pin(async move {
                if let Some(claim) = &a.idempotency {
                    if claim.expires_at_ms <= now {
                        return Err(StoreError::InvalidInput("idempotency reservation expires before admission"));
                    }
                    // Insert, or take over a lapsed reservation; a live one is left untouched and the
                    // statement returns nothing. On PostgreSQL a concurrent owner's uncommitted insert
                    // makes this wait, so exactly one admission owns the key.
                    let won = $crate::db::query(
                        "INSERT INTO aip_idempotency (scope, key, reservation_id, input_hash, action_id, created_at_ms, expires_at_ms) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7) \
                         ON CONFLICT (scope, key) DO UPDATE SET reservation_id = excluded.reservation_id, \
                         input_hash = excluded.input_hash, action_id = excluded.action_id, \
                         created_at_ms = excluded.created_at_ms, expires_at_ms = excluded.expires_at_ms \
                         WHERE aip_idempotency.expires_at_ms <= $6 RETURNING reservation_id",
                    )
                    .bind(&claim.scope)
                    .bind(&claim.key)
                    .bind($crate::backend::fresh_id())
                    .bind(&claim.input_hash)
                    .bind(&a.action.action_id)
                    .bind(now)
                    .bind(claim.expires_at_ms)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if won.is_none() {
                        let row = $crate::db::query(
                            "SELECT scope, key, reservation_id, input_hash, action_id, created_at_ms, expires_at_ms \
                             FROM aip_idempotency WHERE scope = $1 AND key = $2",
                        )
                        .bind(&claim.scope)
                        .bind(&claim.key)
                        .fetch_one(&mut *tx)
                        .await?;
                        let reservation = rows::reservation(&row)?;
                        let replay = match claim.behavior {
                            CollisionBehavior::ReturnOriginalResult => true,
                            CollisionBehavior::RejectConflict => false,
                            CollisionBehavior::RevalidateInputHash => reservation.input_hash == claim.input_hash,
                        };
                        if !replay {
                            return Ok(AdmissionOutcome::Conflict { reservation });
                        }
                        let original = Self::tx_get_action(&mut *tx, &reservation.action_id)
                            .await?
                            .ok_or_else(|| StoreError::Corrupt("idempotency reservation without its action".into()))?;
                        return Ok(AdmissionOutcome::Replayed { original, reservation });
                    }
                }
                let act = &a.action;
                let input_hash = act.input_hash.clone().or_else(|| a.idempotency.as_ref().map(|c| c.input_hash.clone()));
                // Nothing is read back: the new row is exactly what was written.
                let inserted = $crate::db::query(
                    "INSERT INTO aip_actions (action_id, tenant, principal, session_id, capability, correlation_id, mode, state, \
                     idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, 0, $14)",
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
                .bind($crate::db::Json(&act.request))
                .execute(&mut *tx)
                .await;
                match inserted {
                    Ok(_) => {}
                    Err(err) if err.is_unique_violation() => return Err(StoreError::Duplicate { kind: "action" }),
                    Err(err) => return Err(err.into()),
                }
                Self::tx_append_receipts(&mut *tx, &a.receipts).await?;
                let mut lease = None;
                if let Some(job) = &a.job {
                    let leased = a.lease.as_ref().map(|l| (&l.worker, now.saturating_add(l.lease_ms)));
                    Self::tx_insert_job(&mut *tx, job, leased).await?;
                    if let Some(l) = &a.lease {
                        // A fresh row: its first lease is attempt 1 with fencing token 1.
                        lease = Some($crate::model::Lease {
                            fence: $crate::model::Fence { job_id: job.job_id.clone(), worker_id: l.worker.clone(), token: 1 },
                            queue: job.queue.clone(),
                            action_id: job.action_id.clone(),
                            attempt: 1,
                            expires_at_ms: now.saturating_add(l.lease_ms),
                            payload: job.payload.clone(),
                        });
                    }
                }
                Self::tx_append_events(&mut *tx, &a.events).await?;
                let (scope, key) = a.idempotency.map(|c| (c.scope, c.key)).unzip();
                let act = a.action;
                let record = $crate::model::ActionRecord {
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
                }))
                .await
            }

            async fn get_action(&self, action_id: &str) -> $crate::error::StoreResult<Option<$crate::model::ActionRecord>> {
                let row = $crate::db::query(
                    "SELECT action_id, tenant, principal, session_id, capability, correlation_id, mode, state, \
                     idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, result \
                     FROM aip_actions WHERE action_id = $1",
                )
                .bind(action_id)
                .fetch_optional(&self.reader)
                .await?;
                row.as_ref().map(rows::action).transpose()
            }

            async fn count_active_actions(&self, q: &$crate::model::ActionQuery) -> $crate::error::StoreResult<u64> {
                let row = $crate::db::query(
                    "SELECT COUNT(*) AS n FROM aip_actions WHERE tenant = $1 \
                     AND (CAST($2 AS TEXT) IS NULL OR principal = $2) \
                     AND (CAST($3 AS TEXT) IS NULL OR session_id = $3) \
                     AND (CAST($4 AS TEXT) IS NULL OR capability = $4) \
                     AND state NOT IN ('cancelled', 'completed', 'failed', 'expired', 'dead_lettered')",
                )
                .bind(&q.tenant)
                .bind(q.principal.as_deref())
                .bind(q.session_id.as_deref())
                .bind(q.capability.as_deref())
                .fetch_one(&self.reader)
                .await?;
                $crate::backend::to_u64(row.try_get("n")?, "active action count")
            }

            async fn list_actions(
                &self,
                q: &$crate::model::ActionQuery,
                cursor: Option<&str>,
                limit: $crate::model::Limit,
            ) -> $crate::error::StoreResult<$crate::model::Page<$crate::model::ActionRecord>> {
                use $crate::backend::opt_part;
                let scope = [
                    q.tenant.clone(),
                    opt_part(q.principal.as_deref()),
                    opt_part(q.session_id.as_deref()),
                    opt_part(q.state.map(|s| s.as_str())),
                    opt_part(q.capability.as_deref()),
                ];
                let scope: Vec<&str> = scope.iter().map(String::as_str).collect();
                let kind = $crate::cursor::CursorKind::Actions;
                let after = match cursor {
                    Some(c) => self.key.decode(kind, &scope, c)?.1,
                    None => 0,
                };
                let found = $crate::db::query(
                    "SELECT seq, action_id, tenant, principal, session_id, capability, correlation_id, mode, state, \
                     idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, result \
                     FROM aip_actions WHERE tenant = $1 \
                     AND (CAST($2 AS TEXT) IS NULL OR principal = $2) \
                     AND (CAST($3 AS TEXT) IS NULL OR session_id = $3) \
                     AND (CAST($4 AS TEXT) IS NULL OR state = $4) \
                     AND (CAST($5 AS TEXT) IS NULL OR capability = $5) \
                     AND seq > $6 ORDER BY seq LIMIT $7",
                )
                .bind(&q.tenant)
                .bind(q.principal.as_deref())
                .bind(q.session_id.as_deref())
                .bind(q.state.map(|s| s.as_str()))
                .bind(q.capability.as_deref())
                .bind(after)
                .bind(limit.as_i64())
                .fetch_all(&self.reader)
                .await?;
                let mut last = after;
                let mut items = Vec::with_capacity(found.len());
                for row in &found {
                    last = row.try_get("seq")?;
                    items.push(rows::action(row)?);
                }
                Ok($crate::model::Page { items, next_cursor: self.key.encode(kind, &scope, (0, last)) })
            }

            async fn transition_action(&self, t: $crate::model::Transition) -> $crate::error::StoreResult<$crate::model::ActionRecord> {
                use $crate::error::StoreError;
                if t.finish_job && t.fence.is_none() {
                    return Err(StoreError::InvalidInput("finish_job needs a fence"));
                }
                self.write(true, move |tx| Box::pin(async move {
                match &t.fence {
                    Some(fence) if t.finish_job => {
                        // The fence check and the job's completion in one statement (on PostgreSQL the
                        // update locks the job row as the check's FOR UPDATE would).
                        let done = $crate::db::query(
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
                            Self::tx_check_fence(&mut *tx, fence, t.now_ms).await?;
                            return Err(StoreError::StaleLease);
                        }
                    }
                    Some(fence) => Self::tx_check_fence(&mut *tx, fence, t.now_ms).await?,
                    None => {}
                }
                // Compare-and-set in one statement; only a refused update reads the row to say why.
                let from: Vec<&str> = t.from.iter().filter(|s| !s.is_terminal()).map(|s| s.as_str()).collect();
                let row = if from.is_empty() {
                    None
                } else {
                    let states = (0..from.len()).map(|i| format!("${}", i + 5)).collect::<Vec<_>>().join(", ");
                    let sql = format!(
                        "UPDATE aip_actions SET state = $2, result = COALESCE($3, result), updated_at_ms = $4, version = version + 1 \
                         WHERE action_id = $1 AND state IN ({states}) RETURNING \
                         action_id, tenant, principal, session_id, capability, correlation_id, mode, state, \
                         idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, result"
                    );
                    let mut q = $crate::db::query(sql)
                        .bind(&t.action_id)
                        .bind(t.to.as_str())
                        .bind(t.result.as_ref().map($crate::db::Json))
                        .bind(t.now_ms);
                    for state in &from {
                        q = q.bind(*state);
                    }
                    q.fetch_optional(&mut *tx).await?
                };
                let record = match row {
                    Some(row) => rows::action(&row)?,
                    None => {
                        let current = Self::tx_get_action(&mut *tx, &t.action_id)
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
                Self::tx_append_receipts(&mut *tx, &t.receipts).await?;
                Self::tx_append_events(&mut *tx, &t.events).await?;
                Ok(record)
                }))
                .await
            }

            async fn get_idempotency(&self, scope: &str, key: &str, now_ms: i64) -> $crate::error::StoreResult<Option<$crate::model::IdempotencyRecord>> {
                let row = $crate::db::query(
                    "SELECT scope, key, reservation_id, input_hash, action_id, created_at_ms, expires_at_ms \
                     FROM aip_idempotency WHERE scope = $1 AND key = $2 AND expires_at_ms > $3",
                )
                .bind(scope)
                .bind(key)
                .bind(now_ms)
                .fetch_optional(&self.reader)
                .await?;
                row.as_ref().map(rows::reservation).transpose()
            }

            async fn list_unfinished_actions(
                &self,
                now_ms: i64,
                admitted_before_ms: i64,
                limit: $crate::model::Limit,
            ) -> $crate::error::StoreResult<Vec<$crate::model::ActionRecord>> {
                let found = $crate::db::query(
                    "SELECT a.action_id, a.tenant, a.principal, a.session_id, a.capability, a.correlation_id, a.mode, a.state, \
                     a.idempotency_scope, a.idempotency_key, a.input_hash, a.deadline_ms, a.created_at_ms, a.updated_at_ms, a.version, a.request, a.result \
                     FROM aip_actions a \
                     WHERE a.state NOT IN ('cancelled', 'completed', 'failed', 'expired', 'dead_lettered') \
                     AND a.created_at_ms <= $1 \
                     AND NOT EXISTS (SELECT 1 FROM aip_jobs j WHERE j.action_id = a.action_id \
                        AND (j.state = 'ready' OR (j.state = 'leased' AND (j.lease_expires_at_ms > $2 OR j.attempts < j.max_attempts)))) \
                     ORDER BY a.seq LIMIT $3",
                )
                .bind(admitted_before_ms)
                .bind(now_ms)
                .bind(limit.as_i64())
                .fetch_all(&self.reader)
                .await?;
                found.iter().map(rows::action).collect()
            }
        }

        #[async_trait::async_trait]
        impl $crate::traits::JobStore for $Store {
            async fn enqueue(&self, job: $crate::model::NewJob) -> $crate::error::StoreResult<()> {
                self.write(false, move |tx| Box::pin(async move {
                Self::tx_insert_job(&mut *tx, &job, None).await?;
                Ok(())
                }))
                .await
            }

            async fn claim(
                &self,
                queue: &str,
                worker: &$crate::model::WorkerId,
                now_ms: i64,
                lease_ms: i64,
            ) -> $crate::error::StoreResult<Option<$crate::model::Lease>> {
                if lease_ms <= 0 {
                    return Err($crate::error::StoreError::InvalidInput("lease duration must be positive"));
                }
                let queue = queue.to_owned();
                let worker = worker.clone();
                self.write(false, move |tx| Box::pin(async move {
                let row = $crate::db::query(concat!(
                    "UPDATE aip_jobs SET state = 'leased', lease_owner = $1, lease_expires_at_ms = $2, fence = fence + 1, \
                     attempts = attempts + 1, updated_at_ms = $3 \
                     WHERE job_id = (SELECT job_id FROM aip_jobs WHERE queue = $4 AND attempts < max_attempts \
                        AND ((state = 'ready' AND available_at_ms <= $3) OR (state = 'leased' AND lease_expires_at_ms <= $3)) \
                        ORDER BY available_at_ms, job_id LIMIT 1",
                    $claim_lock,
                    ") RETURNING job_id, queue, action_id, fence, attempts, lease_expires_at_ms, payload"
                ))
                .bind(worker.as_str())
                .bind(now_ms.saturating_add(lease_ms))
                .bind(now_ms)
                .bind(queue)
                .fetch_optional(&mut *tx)
                .await?;
                row.as_ref().map(|r| rows::lease(r, &worker)).transpose()
                }))
                .await
            }

            async fn claim_job(
                &self,
                job_id: &str,
                worker: &$crate::model::WorkerId,
                now_ms: i64,
                lease_ms: i64,
            ) -> $crate::error::StoreResult<Option<$crate::model::Lease>> {
                if lease_ms <= 0 {
                    return Err($crate::error::StoreError::InvalidInput("lease duration must be positive"));
                }
                let job_id = job_id.to_owned();
                let worker = worker.clone();
                self.write(false, move |tx| Box::pin(async move {
                    let row = $crate::db::query(
                        "UPDATE aip_jobs SET state = 'leased', lease_owner = $1, lease_expires_at_ms = $2, fence = fence + 1, \
                         attempts = attempts + 1, updated_at_ms = $3 \
                         WHERE job_id = $4 AND attempts < max_attempts \
                         AND ((state = 'ready' AND available_at_ms <= $3) OR (state = 'leased' AND lease_expires_at_ms <= $3)) \
                         RETURNING job_id, queue, action_id, fence, attempts, lease_expires_at_ms, payload",
                    )
                    .bind(worker.as_str())
                    .bind(now_ms.saturating_add(lease_ms))
                    .bind(now_ms)
                    .bind(&job_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    row.as_ref().map(|r| rows::lease(r, &worker)).transpose()
                }))
                .await
            }

            async fn renew(&self, fence: &$crate::model::Fence, now_ms: i64, lease_ms: i64) -> $crate::error::StoreResult<i64> {
                if lease_ms <= 0 {
                    return Err($crate::error::StoreError::InvalidInput("lease duration must be positive"));
                }
                let fence = fence.clone();
                self.write(false, move |tx| Box::pin(async move {
                Self::tx_check_fence(&mut *tx, &fence, now_ms).await?;
                let expires = now_ms.saturating_add(lease_ms);
                $crate::db::query("UPDATE aip_jobs SET lease_expires_at_ms = $2, updated_at_ms = $3 WHERE job_id = $1")
                    .bind(&fence.job_id)
                    .bind(expires)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                Ok(expires)
                }))
                .await
            }

            async fn complete_job(&self, fence: &$crate::model::Fence, now_ms: i64) -> $crate::error::StoreResult<()> {
                let fence = fence.clone();
                self.write(false, move |tx| Box::pin(async move {
                Self::tx_check_fence(&mut *tx, &fence, now_ms).await?;
                $crate::db::query("UPDATE aip_jobs SET state = 'done', lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = $2 WHERE job_id = $1")
                    .bind(&fence.job_id)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                Ok(())
                }))
                .await
            }

            async fn fail_job(
                &self,
                fence: &$crate::model::Fence,
                now_ms: i64,
                retry_at_ms: Option<i64>,
                error: &str,
            ) -> $crate::error::StoreResult<$crate::model::JobState> {
                let fence = fence.clone();
                let error = error.to_owned();
                self.write(false, move |tx| Box::pin(async move {
                Self::tx_check_fence(&mut *tx, &fence, now_ms).await?;
                let row = $crate::db::query(
                    "UPDATE aip_jobs SET \
                     state = CASE WHEN CAST($2 AS BIGINT) IS NOT NULL AND attempts < max_attempts THEN 'ready' ELSE 'dead' END, \
                     available_at_ms = COALESCE($2, available_at_ms), lease_owner = NULL, lease_expires_at_ms = NULL, \
                     last_error = $3, updated_at_ms = $4 WHERE job_id = $1 RETURNING state",
                )
                .bind(&fence.job_id)
                .bind(retry_at_ms)
                .bind($crate::backend::bounded_error(&error))
                .bind(now_ms)
                .fetch_one(&mut *tx)
                .await?;
                let state: String = row.try_get("state")?;
                $crate::model::JobState::parse(&state).ok_or_else(|| $crate::error::StoreError::Corrupt(format!("job state {state}")))
                }))
                .await
            }

            async fn release_job(&self, fence: &$crate::model::Fence, now_ms: i64) -> $crate::error::StoreResult<()> {
                let fence = fence.clone();
                self.write(false, move |tx| Box::pin(async move {
                Self::tx_check_fence(&mut *tx, &fence, now_ms).await?;
                $crate::db::query(
                    "UPDATE aip_jobs SET state = 'ready', available_at_ms = $2, lease_owner = NULL, lease_expires_at_ms = NULL, \
                     attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, updated_at_ms = $2 WHERE job_id = $1",
                )
                .bind(&fence.job_id)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
                Ok(())
                }))
                .await
            }
        }

        #[async_trait::async_trait]
        impl $crate::traits::EventStore for $Store {
            fn watch_changes(&self) -> $crate::watch::ChangeWatch {
                $crate::watch::ChangeWatch::new(self.changes.subscribe())
            }

            fn stream_cursor(&self, scope: &[&str], position: (i64, i64)) -> String {
                self.key.encode($crate::cursor::CursorKind::Stream, scope, position)
            }

            fn decode_stream_cursor(&self, scope: &[&str], cursor: &str) -> $crate::error::StoreResult<(i64, i64)> {
                self.key.decode($crate::cursor::CursorKind::Stream, scope, cursor)
            }

            async fn append_events(&self, events: Vec<$crate::model::NewEvent>) -> $crate::error::StoreResult<Vec<u64>> {
                if events.is_empty() {
                    return Ok(Vec::new());
                }
                self.write(true, move |tx| Box::pin(async move {
                let seqs = Self::tx_append_events(&mut *tx, &events).await?;
                Ok(seqs)
                }))
                .await
            }

            async fn list_events(
                &self,
                q: &$crate::model::EventQuery,
                cursor: Option<&str>,
                limit: $crate::model::Limit,
            ) -> $crate::error::StoreResult<$crate::model::Page<$crate::model::EventRecord>> {
                use $crate::backend::opt_part;
                let scope = [
                    q.tenant.clone(),
                    opt_part(q.principal.as_deref()),
                    opt_part(q.action_id.as_deref()),
                    opt_part(q.session_id.as_deref()),
                ];
                let scope: Vec<&str> = scope.iter().map(String::as_str).collect();
                let kind = $crate::cursor::CursorKind::Events;
                let after = match cursor {
                    Some(c) => self.key.decode(kind, &scope, c)?.1,
                    None => 0,
                };
                // Listed by commit-ordered position only (see the backends' `tx_append_events`), so
                // an event committed later can never slip in behind a cursor.
                let found = $crate::db::query(
                    "SELECT pos, seq, event_id, kind, tenant, principal, session_id, action_id, correlation_id, occurred_at_ms, data \
                     FROM aip_events WHERE tenant = $1 \
                     AND (CAST($2 AS TEXT) IS NULL OR principal = $2) \
                     AND (CAST($3 AS TEXT) IS NULL OR action_id = $3) \
                     AND (CAST($4 AS TEXT) IS NULL OR session_id = $4) \
                     AND pos > $5 ORDER BY pos LIMIT $6",
                )
                .bind(&q.tenant)
                .bind(q.principal.as_deref())
                .bind(q.action_id.as_deref())
                .bind(q.session_id.as_deref())
                .bind(after)
                .bind(limit.as_i64())
                .fetch_all(&self.reader)
                .await?;
                let mut last = after;
                let mut items = Vec::with_capacity(found.len());
                for row in &found {
                    last = row.try_get("pos")?;
                    items.push(rows::event(row)?);
                }
                Ok($crate::model::Page { items, next_cursor: self.key.encode(kind, &scope, (0, last)) })
            }

            async fn append_chunk(
                &self,
                chunk: $crate::model::NewChunk,
                fence: Option<&$crate::model::Fence>,
                now_ms: i64,
            ) -> $crate::error::StoreResult<$crate::model::ChunkAppend> {
                let mut appended = self.append_chunks(vec![chunk], fence, now_ms).await?;
                appended.pop().ok_or($crate::error::StoreError::NotFound { kind: "chunk" })
            }

            async fn append_chunks(
                &self,
                chunks: Vec<$crate::model::NewChunk>,
                fence: Option<&$crate::model::Fence>,
                now_ms: i64,
            ) -> $crate::error::StoreResult<Vec<$crate::model::ChunkAppend>> {
                use $crate::error::StoreError;
                if chunks.is_empty() {
                    return Ok(Vec::new());
                }
                let fence = fence.cloned();
                self.write(true, move |tx| Box::pin(async move {
                if let Some(fence) = fence {
                    Self::tx_check_fence(&mut *tx, &fence, now_ms).await?;
                }
                let mut appended = Vec::with_capacity(chunks.len());
                let mut checked: Option<String> = None;
                for chunk in &chunks {
                    if checked.as_deref() != Some(chunk.action_id.as_str()) {
                        if Self::tx_get_action(&mut *tx, &chunk.action_id).await?.is_none() {
                            return Err(StoreError::NotFound { kind: "action" });
                        }
                        checked = Some(chunk.action_id.clone());
                    }
                    appended.push(Self::tx_append_chunk(&mut *tx, chunk).await?);
                }
                Ok(appended)
                }))
                .await
            }

            async fn list_chunks(
                &self,
                action_id: &str,
                after: Option<u64>,
                limit: $crate::model::Limit,
            ) -> $crate::error::StoreResult<Vec<$crate::model::ChunkRecord>> {
                let after = match after {
                    Some(a) => $crate::backend::to_i64(a, "chunk sequence too large")?,
                    None => -1,
                };
                let found = $crate::db::query(
                    "SELECT action_id, seq, kind, data, created_at_ms FROM aip_chunks WHERE action_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                )
                .bind(action_id)
                .bind(after)
                .bind(limit.as_i64())
                .fetch_all(&self.reader)
                .await?;
                found.iter().map(rows::chunk).collect()
            }
        }

        #[async_trait::async_trait]
        impl $crate::traits::SessionStore for $Store {
            async fn create_session(
                &self,
                s: $crate::model::NewSession,
                events: Vec<$crate::model::NewEvent>,
            ) -> $crate::error::StoreResult<$crate::model::SessionRecord> {
                use $crate::error::StoreError;
                self.write(true, move |tx| Box::pin(async move {
                let res = $crate::db::query(
                    "INSERT INTO aip_sessions (session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data) \
                     VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8) \
                     RETURNING session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data",
                )
                .bind(&s.session_id)
                .bind(&s.tenant)
                .bind(&s.principal)
                .bind(s.peer.as_deref())
                .bind(s.state.as_str())
                .bind(s.created_at_ms)
                .bind(s.expires_at_ms)
                .bind($crate::db::Json(&s.data))
                .fetch_one(&mut *tx)
                .await;
                let record = match res {
                    Ok(row) => rows::session(&row)?,
                    Err(err) if err.is_unique_violation() => return Err(StoreError::Duplicate { kind: "session" }),
                    Err(err) => return Err(err.into()),
                };
                Self::tx_append_events(&mut *tx, &events).await?;
                Ok(record)
                }))
                .await
            }

            async fn get_session(&self, session_id: &str) -> $crate::error::StoreResult<Option<$crate::model::SessionRecord>> {
                let row = $crate::db::query(
                    "SELECT session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data \
                     FROM aip_sessions WHERE session_id = $1",
                )
                .bind(session_id)
                .fetch_optional(&self.reader)
                .await?;
                row.as_ref().map(rows::session).transpose()
            }

            async fn list_sessions(
                &self,
                q: &$crate::model::SessionQuery,
                cursor: Option<&str>,
                limit: $crate::model::Limit,
            ) -> $crate::error::StoreResult<$crate::model::Page<$crate::model::SessionRecord>> {
                use $crate::backend::opt_part;
                let scope = [q.tenant.clone(), opt_part(q.principal.as_deref()), opt_part(q.state.map(|s| s.as_str()))];
                let scope: Vec<&str> = scope.iter().map(String::as_str).collect();
                let kind = $crate::cursor::CursorKind::Sessions;
                let after = match cursor {
                    Some(c) => self.key.decode(kind, &scope, c)?.1,
                    None => 0,
                };
                let found = $crate::db::query(
                    "SELECT seq, session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data \
                     FROM aip_sessions WHERE tenant = $1 \
                     AND (CAST($2 AS TEXT) IS NULL OR principal = $2) \
                     AND (CAST($3 AS TEXT) IS NULL OR state = $3) \
                     AND seq > $4 ORDER BY seq LIMIT $5",
                )
                .bind(&q.tenant)
                .bind(q.principal.as_deref())
                .bind(q.state.map(|s| s.as_str()))
                .bind(after)
                .bind(limit.as_i64())
                .fetch_all(&self.reader)
                .await?;
                let mut last = after;
                let mut items = Vec::with_capacity(found.len());
                for row in &found {
                    last = row.try_get("seq")?;
                    items.push(rows::session(row)?);
                }
                Ok($crate::model::Page { items, next_cursor: self.key.encode(kind, &scope, (0, last)) })
            }

            async fn transition_session(
                &self,
                t: $crate::model::SessionTransition,
            ) -> $crate::error::StoreResult<$crate::model::SessionRecord> {
                use $crate::error::StoreError;
                self.write(true, move |tx| Box::pin(async move {
                let current = Self::tx_get_session(&mut *tx, &t.session_id)
                    .await?
                    .ok_or(StoreError::NotFound { kind: "session" })?;
                if current.state.is_terminal() {
                    return Err(StoreError::Terminal { state: current.state.as_str().to_owned() });
                }
                if !t.from.contains(&current.state) {
                    return Err(StoreError::StateConflict { actual: current.state.as_str().to_owned() });
                }
                if !current.state.can_transition_to(t.to) {
                    return Err(StoreError::InvalidTransition { from: current.state.as_str().to_owned(), to: t.to.as_str().to_owned() });
                }
                let row = $crate::db::query(
                    "UPDATE aip_sessions SET state = $2, data = COALESCE($3, data), updated_at_ms = $4 \
                     WHERE session_id = $1 AND state = $5 \
                     RETURNING session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data",
                )
                .bind(&t.session_id)
                .bind(t.to.as_str())
                .bind(t.data.as_ref().map($crate::db::Json))
                .bind(t.now_ms)
                .bind(current.state.as_str())
                .fetch_optional(&mut *tx)
                .await?
                .ok_or_else(|| StoreError::StateConflict { actual: current.state.as_str().to_owned() })?;
                let record = rows::session(&row)?;
                Self::tx_append_events(&mut *tx, &t.events).await?;
                Ok(record)
                }))
                .await
            }

            async fn issue_resume_token(&self, session_id: &str, token: &str, expires_at_ms: i64, now_ms: i64) -> $crate::error::StoreResult<()> {
                use $crate::error::StoreError;
                if token.is_empty() || expires_at_ms <= now_ms {
                    return Err(StoreError::InvalidInput("resume token must be non-empty and expire in the future"));
                }
                let session_id = session_id.to_owned();
                let token = token.to_owned();
                self.write(false, move |tx| Box::pin(async move {
                if Self::tx_get_session(&mut *tx, &session_id).await?.is_none() {
                    return Err(StoreError::NotFound { kind: "session" });
                }
                let res = $crate::db::query(
                    "INSERT INTO aip_resume_tokens (token_hash, session_id, created_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4)",
                )
                .bind($crate::backend::secret_hash(&token))
                .bind(session_id)
                .bind(now_ms)
                .bind(expires_at_ms)
                .execute(&mut *tx)
                .await;
                match res {
                    Ok(_) => {}
                    Err(err) if err.is_unique_violation() => return Err(StoreError::Duplicate { kind: "resume token" }),
                    Err(err) => return Err(err.into()),
                }
                Ok(())
                }))
                .await
            }

            async fn consume_resume_token(
                &self,
                token: &str,
                replacement: Option<(&str, i64)>,
                now_ms: i64,
            ) -> $crate::error::StoreResult<$crate::model::SessionRecord> {
                use $crate::error::StoreError;
                let token = token.to_owned();
                let replacement = replacement.map(|(t, e)| (t.to_owned(), e));
                self.write(false, move |tx| Box::pin(async move {
                // The conditional update is the atomic consume: of two concurrent resumes, one
                // updates the row and the other finds it consumed.
                let row = $crate::db::query(
                    "UPDATE aip_resume_tokens SET consumed_at_ms = $2 \
                     WHERE token_hash = $1 AND consumed_at_ms IS NULL AND expires_at_ms > $2 RETURNING session_id",
                )
                .bind($crate::backend::secret_hash(&token))
                .bind(now_ms)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::ResumeTokenInvalid)?;
                let session_id: String = row.try_get("session_id")?;
                if let Some((next, expires_at_ms)) = replacement {
                    if next.is_empty() || expires_at_ms <= now_ms || next == token {
                        return Err(StoreError::InvalidInput("replacement resume token must be new and expire in the future"));
                    }
                    $crate::db::query(
                        "INSERT INTO aip_resume_tokens (token_hash, session_id, created_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4)",
                    )
                    .bind($crate::backend::secret_hash(&next))
                    .bind(&session_id)
                    .bind(now_ms)
                    .bind(expires_at_ms)
                    .execute(&mut *tx)
                    .await?;
                }
                let session = Self::tx_get_session(&mut *tx, &session_id)
                    .await?
                    .ok_or_else(|| StoreError::Corrupt("resume token without its session".into()))?;
                Ok(session)
                }))
                .await
            }
        }

        #[async_trait::async_trait]
        impl $crate::traits::ReplayStore for $Store {
            async fn claim_message_id(
                &self,
                scope: &str,
                message_id: &str,
                now_ms: i64,
                retain_until_ms: i64,
            ) -> $crate::error::StoreResult<$crate::model::ReplayClaim> {
                if retain_until_ms <= now_ms {
                    return Err($crate::error::StoreError::InvalidInput("replay retention must end in the future"));
                }
                let scope = scope.to_owned();
                let message_id = message_id.to_owned();
                self.write(false, move |tx| Box::pin(async move {
                let row = $crate::db::query(
                    "INSERT INTO aip_replay_claims (scope, message_id, claimed_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (scope, message_id) DO UPDATE SET claimed_at_ms = excluded.claimed_at_ms, expires_at_ms = excluded.expires_at_ms \
                     WHERE aip_replay_claims.expires_at_ms <= $3 RETURNING message_id",
                )
                .bind(scope)
                .bind(message_id)
                .bind(now_ms)
                .bind(retain_until_ms)
                .fetch_optional(&mut *tx)
                .await?;
                Ok(if row.is_some() { $crate::model::ReplayClaim::Claimed } else { $crate::model::ReplayClaim::Replayed })
                }))
                .await
            }
        }

        #[async_trait::async_trait]
        impl $crate::traits::ReceiptStore for $Store {
            async fn append_receipt(&self, receipt: $crate::model::NewReceipt) -> $crate::error::StoreResult<$crate::model::ReceiptRecord> {
                self.write(false, move |tx| Box::pin(async move {
                let position = Self::tx_append_receipts(&mut *tx, std::slice::from_ref(&receipt)).await?;
                let position = position.first().copied().ok_or_else(|| $crate::error::StoreError::Corrupt("receipt without a position".into()))?;
                Ok($crate::model::ReceiptRecord {
                    position: $crate::backend::to_u64(position, "receipt position")?,
                    receipt_id: receipt.receipt_id,
                    chain_id: receipt.chain_id,
                    tenant: receipt.tenant,
                    principal: receipt.principal,
                    action_id: receipt.action_id,
                    receipt_type: receipt.receipt_type,
                    hash: receipt.hash,
                    previous_hash: receipt.previous_hash,
                    created_at_ms: receipt.created_at_ms,
                    body: receipt.body,
                })
                }))
                .await
            }

            async fn list_receipts(&self, chain_id: &str, limit: $crate::model::Limit) -> $crate::error::StoreResult<Vec<$crate::model::ReceiptRecord>> {
                let found = $crate::db::query(
                    "SELECT receipt_id, chain_id, position, tenant, principal, action_id, receipt_type, hash, previous_hash, created_at_ms, body \
                     FROM aip_receipts WHERE chain_id = $1 ORDER BY position LIMIT $2",
                )
                .bind(chain_id)
                .bind(limit.as_i64())
                .fetch_all(&self.reader)
                .await?;
                found.iter().map(rows::receipt).collect()
            }

            async fn get_receipt(&self, receipt_id: &str) -> $crate::error::StoreResult<Option<$crate::model::ReceiptRecord>> {
                let row = $crate::db::query(
                    "SELECT receipt_id, chain_id, position, tenant, principal, action_id, receipt_type, hash, previous_hash, created_at_ms, body \
                     FROM aip_receipts WHERE receipt_id = $1",
                )
                .bind(receipt_id)
                .fetch_optional(&self.reader)
                .await?;
                row.as_ref().map(rows::receipt).transpose()
            }

            async fn append_audit(&self, a: $crate::model::NewAudit) -> $crate::error::StoreResult<$crate::model::AuditRecord> {
                self.write(false, move |tx| Box::pin(async move {
                let row = $crate::db::query("UPDATE aip_counters SET value = value + 1 WHERE name = 'audit' RETURNING value")
                    .fetch_one(&mut *tx)
                    .await?;
                let seq: i64 = row.try_get("value")?;
                let res = $crate::db::query(
                    "INSERT INTO aip_audit (seq, audit_id, tenant, actor, action_label, occurred_at_ms, data) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq, audit_id, tenant, actor, action_label, occurred_at_ms, data",
                )
                .bind(seq)
                .bind(&a.audit_id)
                .bind(&a.tenant)
                .bind(&a.actor)
                .bind(&a.action_label)
                .bind(a.occurred_at_ms)
                .bind($crate::db::Json(&a.data))
                .fetch_one(&mut *tx)
                .await;
                let record = match res {
                    Ok(row) => rows::audit(&row)?,
                    Err(err) if err.is_unique_violation() => {
                        return Err($crate::error::StoreError::Duplicate { kind: "audit event" });
                    }
                    Err(err) => return Err(err.into()),
                };
                Ok(record)
                }))
                .await
            }

            async fn list_audit(
                &self,
                q: &$crate::model::AuditQuery,
                cursor: Option<&str>,
                limit: $crate::model::Limit,
            ) -> $crate::error::StoreResult<$crate::model::Page<$crate::model::AuditRecord>> {
                use $crate::backend::opt_part;
                let scope = [q.tenant.clone(), opt_part(q.actor.as_deref())];
                let scope: Vec<&str> = scope.iter().map(String::as_str).collect();
                let kind = $crate::cursor::CursorKind::Audit;
                let after = match cursor {
                    Some(c) => self.key.decode(kind, &scope, c)?.1,
                    None => 0,
                };
                let found = $crate::db::query(
                    "SELECT seq, audit_id, tenant, actor, action_label, occurred_at_ms, data FROM aip_audit \
                     WHERE tenant = $1 AND (CAST($2 AS TEXT) IS NULL OR actor = $2) AND seq > $3 ORDER BY seq LIMIT $4",
                )
                .bind(&q.tenant)
                .bind(q.actor.as_deref())
                .bind(after)
                .bind(limit.as_i64())
                .fetch_all(&self.reader)
                .await?;
                let mut last = after;
                let mut items = Vec::with_capacity(found.len());
                for row in &found {
                    last = row.try_get("seq")?;
                    items.push(rows::audit(row)?);
                }
                Ok($crate::model::Page { items, next_cursor: self.key.encode(kind, &scope, (0, last)) })
            }
        }

        #[async_trait::async_trait]
        impl $crate::traits::RecordStore for $Store {
            async fn insert_record(&self, r: $crate::model::AppRecord) -> $crate::error::StoreResult<()> {
                self.write(false, move |tx| Box::pin(async move {
                let res = $crate::db::query(
                    "INSERT INTO aip_records (collection, record_id, tenant, created_at_ms, body) VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(&r.collection)
                .bind(&r.record_id)
                .bind(&r.tenant)
                .bind(r.created_at_ms)
                .bind($crate::db::Json(&r.body))
                .execute(&mut *tx)
                .await;
                match res {
                    Ok(_) => {}
                    Err(err) if err.is_unique_violation() => {
                        return Err($crate::error::StoreError::Duplicate { kind: "record" });
                    }
                    Err(err) => return Err(err.into()),
                }
                Ok(())
                }))
                .await
            }

            async fn list_records(&self, collection: &str, tenant: &str, limit: $crate::model::Limit) -> $crate::error::StoreResult<Vec<$crate::model::AppRecord>> {
                let found = $crate::db::query(
                    "SELECT collection, record_id, tenant, created_at_ms, body FROM aip_records \
                     WHERE collection = $1 AND tenant = $2 ORDER BY created_at_ms, record_id LIMIT $3",
                )
                .bind(collection)
                .bind(tenant)
                .bind(limit.as_i64())
                .fetch_all(&self.reader)
                .await?;
                found.iter().map(rows::record).collect()
            }

            async fn count_records(&self, collection: &str, tenant: &str) -> $crate::error::StoreResult<u64> {
                let row = $crate::db::query("SELECT COUNT(*) AS n FROM aip_records WHERE collection = $1 AND tenant = $2")
                    .bind(collection)
                    .bind(tenant)
                    .fetch_one(&self.reader)
                    .await?;
                $crate::backend::to_u64(row.try_get("n")?, "record count")
            }
        }

        #[async_trait::async_trait]
        impl $crate::traits::HousekeepingStore for $Store {
            fn backend(&self) -> $crate::model::Backend {
                $backend
            }

            async fn ping(&self) -> $crate::error::StoreResult<()> {
                $crate::db::query("SELECT 1").execute(&self.reader).await?;
                Ok(())
            }

            async fn purge_expired(&self, now_ms: i64) -> $crate::error::StoreResult<$crate::model::PurgeReport> {
                self.write(false, move |tx| Box::pin(async move {
                let replay = $crate::db::query("DELETE FROM aip_replay_claims WHERE expires_at_ms <= $1")
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                let idem = $crate::db::query("DELETE FROM aip_idempotency WHERE expires_at_ms <= $1")
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                let tokens = $crate::db::query("DELETE FROM aip_resume_tokens WHERE expires_at_ms <= $1 OR consumed_at_ms IS NOT NULL")
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                Ok($crate::model::PurgeReport { replay_claims: replay, idempotency_reservations: idem, resume_tokens: tokens })
                }))
                .await
            }
        }
    };
}

pub(crate) use sql_store_impl;
