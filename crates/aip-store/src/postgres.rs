//! The PostgreSQL backend, for several `aip serve` nodes sharing one database.
//!
//! Reads that precede a write lock their rows (`FOR UPDATE`); queue claims use
//! `FOR UPDATE SKIP LOCKED`; migrations run under a transaction-scoped advisory lock; the event
//! sequencer sends `NOTIFY aip_changes` once per batch, which a background `LISTEN` task turns into the store's change
//! watch, so waiters on any node wake without polling.

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};

use crate::backend::{
    BoxFuture, MAX_ROWS, bind_event_rows, event_insert_error, sql_store_impl, to_u64, values_list,
};
use crate::cursor::CursorKey;
use crate::error::StoreResult;
use crate::migrate;
use crate::model::Backend;
use crate::model::NewEvent;

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

/// A PostgreSQL-backed [`crate::Store`].
#[derive(Debug)]
pub struct PostgresStore {
    writer: PgPool,
    reader: PgPool,
    key: CursorKey,
    changes: tokio::sync::watch::Sender<u64>,
    listener: tokio::task::JoinHandle<()>,
    sequencer: Sequencer,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl PostgresStore {
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
        let listener = tokio::spawn(listen(listener, pool.clone(), changes.clone()));
        Ok(PostgresStore {
            writer: pool.clone(),
            reader: pool,
            key,
            changes,
            listener,
            sequencer: Sequencer::default(),
        })
    }

    /// Closes the pool and stops the listener.
    pub async fn close(&self) {
        self.listener.abort();
        self.writer.close().await;
    }

    /// Inserts `events` inside the caller's write; returns their sequences.
    async fn tx_append_events(
        tx: &mut dyn crate::db::Tx,
        events: &[NewEvent],
    ) -> StoreResult<Vec<u64>> {
        // No shared counter: `seq` comes from a PostgreSQL sequence and `pos` stays NULL until the
        // sequencer runs after commit, so concurrent writers do not serialize (migration 0002).
        let mut seqs = Vec::with_capacity(events.len());
        for chunk in events.chunks(MAX_ROWS) {
            let sql = format!(
                "INSERT INTO aip_events (event_id, kind, tenant, principal, session_id, action_id, correlation_id, occurred_at_ms, data) VALUES {} RETURNING seq",
                values_list(chunk.len(), 9)
            );
            let rows = bind_event_rows!(crate::db::query(sql), chunk)
                .fetch_all(&mut *tx)
                .await
                .map_err(event_insert_error)?;
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

    /// Runs `f` in its own transaction; commits when it returns `Ok`, rolls back otherwise. With
    /// `notify`, waiters on every node are woken after the commit.
    async fn write<R, F>(&self, notify: bool, f: F) -> StoreResult<R>
    where
        R: Send + 'static,
        F: for<'c> FnOnce(&'c mut dyn crate::db::Tx) -> BoxFuture<'c, StoreResult<R>>
            + Send
            + 'static,
    {
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
}

/// Coalesces this node's sequencer runs. Every committed write with events needs one run that
/// starts after its commit; instead of each writer queueing on the cross-node advisory lock (one
/// transaction per writer, serialized), writers wait for the next in-process run, which covers every
/// write registered before it started.
#[derive(Debug, Default)]
struct Sequencer {
    /// Writes registered so far (each after its commit).
    requested: std::sync::atomic::AtomicU64,
    /// Every write up to this count is covered by a finished run.
    covered: std::sync::atomic::AtomicU64,
    /// One run at a time in this process.
    running: tokio::sync::Mutex<()>,
}

impl Sequencer {
    /// Returns once a sequencer run that started after this call has finished (or failed: the
    /// listener's periodic sweep then sequences the events, as before).
    async fn run_after_commit(&self, pool: &PgPool) {
        use std::sync::atomic::Ordering::SeqCst;
        let ticket = self.requested.fetch_add(1, SeqCst) + 1;
        if self.covered.load(SeqCst) >= ticket {
            return;
        }
        let _running = self.running.lock().await;
        if self.covered.load(SeqCst) >= ticket {
            return;
        }
        // Every write counted here committed before registering, so this run sees its events.
        let covers = self.requested.load(SeqCst);
        if sequence_events(pool).await.is_ok() {
            self.covered.fetch_max(covers, SeqCst);
        }
    }
}

/// The advisory-lock key of the event sequencer ("aipseqr" in ASCII).
const SEQUENCER_LOCK: i64 = 0x0061_6970_7365_7172;
/// How many events one sequencer transaction positions.
const SEQUENCER_BATCH: u64 = 10_000;

/// Gives committed, unpositioned events their listing position. Runs one at a time across all nodes
/// (advisory lock held to commit), so every run's positions are greater than every earlier run's and
/// become visible atomically: a reader's cursor can never be overtaken by a late commit.
async fn sequence_events(pool: &PgPool) -> StoreResult<u64> {
    let mut total = 0;
    loop {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(SEQUENCER_LOCK)
            .execute(&mut *tx)
            .await?;
        let n = sqlx::query(
            "WITH pending AS (SELECT seq, row_number() OVER (ORDER BY seq) AS rn FROM aip_events \
             WHERE pos IS NULL ORDER BY seq LIMIT 10000), \
             base AS (SELECT COALESCE(MAX(pos), 0) AS b FROM aip_events) \
             UPDATE aip_events e SET pos = base.b + pending.rn FROM pending, base WHERE e.seq = pending.seq",
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n > 0 {
            sqlx::query("SELECT pg_notify('aip_changes', '')")
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        total += n;
        if n < SEQUENCER_BATCH {
            return Ok(total);
        }
    }
}

/// Forwards notifications into the watch and sweeps unpositioned events once a second (a node that
/// died between commit and sequencing leaves some). `try_recv` reconnects by itself; after a
/// reconnect (or any error) waiters are woken too, because notifications sent meanwhile were lost.
async fn listen(mut listener: PgListener, pool: PgPool, changes: tokio::sync::watch::Sender<u64>) {
    loop {
        match tokio::time::timeout(Duration::from_secs(1), listener.try_recv()).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(_) => {
                if let Ok(0) = sequence_events(&pool).await {
                    continue;
                }
            }
        }
        changes.send_modify(|v| *v = v.wrapping_add(1));
    }
}

async fn migrate_postgres(pool: &PgPool) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    // Held until commit: concurrent nodes starting together apply each migration once.
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await?;
    PostgresStore::tx_migrate(&mut *tx, migrate::POSTGRES).await?;
    tx.commit().await?;
    Ok(())
}

async fn load_key(pool: &PgPool) -> StoreResult<CursorKey> {
    let mut tx = pool.begin().await?;
    let key = PostgresStore::tx_cursor_key(&mut *tx).await?;
    tx.commit().await?;
    Ok(key)
}

sql_store_impl!(
    PostgresStore,
    Backend::Postgres,
    lock = " FOR UPDATE",
    claim_lock = " FOR UPDATE SKIP LOCKED"
);
