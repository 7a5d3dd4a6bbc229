//! The PostgreSQL backend, for several `aip serve` nodes sharing one database.
//!
//! Reads that precede a write lock their rows (`FOR UPDATE`); queue claims use
//! `FOR UPDATE SKIP LOCKED`; migrations run under a transaction-scoped advisory lock; the event
//! sequencer sends `NOTIFY aip_changes` once per batch, which a background `LISTEN` task turns into the store's change
//! watch, so waiters on any node wake without polling.

mod sequencer;

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};

use crate::cursor::CursorKey;
use crate::db::Tx;
use crate::error::StoreResult;
use crate::migrate;
use crate::model::{AuditRecord, Backend, NewAudit, NewEvent};
use crate::sql::{
    self, AUDIT_RETURNING, Dialect, MAX_ROWS, SqlStore, WriteFn, audit_record, bind_audit,
    bind_event_rows, to_u64, values_list,
};
use crate::watch::ChangeWatch;
use sequencer::Sequencer;

/// The advisory-lock key that serializes migrations across nodes ("aipmigr" in ASCII).
const MIGRATION_LOCK: i64 = 0x0061_6970_6d69_6772;
/// The notification channel.
const CHANNEL: &str = "aip_changes";

/// Tuning of a PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Pool size.
    pub max_connections: u32,
    /// How long to wait for a pooled connection.
    pub acquire_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(30),
        }
    }
}

/// A PostgreSQL-backed [`crate::Store`]: the shared SQL over the PostgreSQL dialect.
pub type PostgresStore = SqlStore<Postgres>;

/// The PostgreSQL dialect: the pool, the event sequencer and the `LISTEN` task behind the change
/// watch.
#[derive(Debug)]
pub struct Postgres {
    writer: PgPool,
    reader: PgPool,
    changes: tokio::sync::watch::Sender<u64>,
    listener: tokio::task::JoinHandle<()>,
    sequencer: Sequencer,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl SqlStore<Postgres> {
    /// Connects to `url` (`postgres://…`) and applies pending migrations under an advisory lock.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// [`PostgresStore::connect`] with explicit options.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(2))
            .acquire_timeout(options.acquire_timeout)
            .connect(url)
            .await?;
        migrate_postgres(&pool).await?;
        let key = load_key(&pool).await?;
        let (changes, _) = tokio::sync::watch::channel(0);
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        let listener = tokio::spawn(sequencer::listen(listener, pool.clone(), changes.clone()));
        let db = Postgres {
            writer: pool.clone(),
            reader: pool,
            changes,
            listener,
            sequencer: Sequencer::default(),
        };
        Ok(SqlStore::new(db, key))
    }

    /// Closes the pool and stops the listener.
    pub async fn close(&self) {
        self.dialect().close().await;
    }
}

impl Dialect for Postgres {
    const BACKEND: Backend = Backend::Postgres;
    const ROW_LOCK: &'static str = " FOR UPDATE";
    const CLAIM_LOCK: &'static str = " FOR UPDATE SKIP LOCKED";
    const QUOTA_LOCK: Option<&'static str> = Some("SELECT pg_advisory_xact_lock(hashtext($1))");
    const MIGRATIONS: &'static [crate::migrate::Migration] = crate::migrate::POSTGRES;

    type Reader = PgPool;

    async fn close(&self) {
        self.listener.abort();
        self.writer.close().await;
    }

    fn reader(&self) -> &PgPool {
        &self.reader
    }

    /// One transaction per write; commits when `f` returns `Ok`, rolls back otherwise. With
    /// `notify`, waiters on every node are woken after the commit.
    async fn write<R: Send + 'static>(&self, notify: bool, f: impl WriteFn<R>) -> StoreResult<R> {
        let mut tx = self.writer.begin().await?;
        match f(&mut *tx).await {
            Ok(r) => {
                tx.commit().await?;
                if notify {
                    // Make this write's events listable before answering (read your writes). Should
                    // it fail, the listener's periodic sweep sequences them.
                    // A NOTIFY takes a transaction id and a WAL flush under PostgreSQL's global
                    // notify lock, so only the sequencer (once per batch) sends one. Writes that add
                    // no events (chunks) wake this node's waiters only; waiters elsewhere poll.
                    self.sequencer.run_after_commit(&self.writer).await;
                    self.changes.send_modify(|v| *v = v.wrapping_add(1));
                }
                Ok(r)
            }
            Err(e) => {
                // Dropping the transaction rolls it back as well; an explicit rollback frees the
                // connection at once.
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }

    async fn append_events(tx: &mut dyn Tx, events: &[NewEvent]) -> StoreResult<Vec<u64>> {
        // No shared counter: `seq` comes from a PostgreSQL sequence and `pos` stays NULL until the
        // sequencer runs after commit, so concurrent writers do not serialize (migration 0002).
        let mut seqs = Vec::with_capacity(events.len());
        for chunk in events.chunks(MAX_ROWS) {
            let sql = format!(
                "INSERT INTO aip_events (event_id, kind, tenant, principal, session_id, action_id, correlation_id, occurred_at_ms, data) VALUES {} RETURNING seq",
                values_list(chunk.len(), 9)
            );
            let rows = bind_event_rows(crate::db::query(sql), chunk)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| e.or_duplicate("event"))?;
            // Sequences come from one nextval per row, in row order.
            let mut chunk_seqs = rows
                .iter()
                .map(|row| to_u64(row.try_get("seq")?, "event sequence"))
                .collect::<StoreResult<Vec<_>>>()?;
            chunk_seqs.sort_unstable();
            seqs.extend(chunk_seqs);
        }
        Ok(seqs)
    }

    async fn append_audit(tx: &mut dyn Tx, a: &NewAudit) -> StoreResult<AuditRecord> {
        // No shared counter (migration 9): `seq` from a sequence, `pos` set by the sequencer.
        let sql = format!(
            "INSERT INTO aip_audit (audit_id, tenant, actor, action_label, occurred_at_ms, data, action_id, session_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {AUDIT_RETURNING}"
        );
        let row = bind_audit(crate::db::query(sql), a)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| e.or_duplicate("audit event"))?;
        audit_record(&row)
    }

    fn watch_changes(&self) -> ChangeWatch {
        ChangeWatch::new(self.changes.subscribe())
    }
}

async fn migrate_postgres(pool: &PgPool) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    // Held until commit: concurrent nodes starting together apply each migration once.
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await?;
    sql::migrate(&mut *tx, migrate::POSTGRES).await?;
    tx.commit().await?;
    Ok(())
}

async fn load_key(pool: &PgPool) -> StoreResult<CursorKey> {
    let mut tx = pool.begin().await?;
    let key = sql::cursor_key(&mut *tx).await?;
    tx.commit().await?;
    Ok(key)
}
