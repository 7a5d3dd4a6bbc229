//! The embedded SQLite backend (the default).
//!
//! Durability: WAL journal with `synchronous = FULL`, so a commit is on disk before the runtime
//! acknowledges it (NORMAL could lose the last commits on power loss). Writes go through one writer
//! task owning one connection; it runs each write in `BEGIN IMMEDIATE`, which makes every
//! read-then-write operation atomic (the SQLite equivalent of row locks and `SKIP LOCKED` claims).
//! Group commit: writes that queue up while a commit is being synced run in the next transaction
//! together, each inside its own savepoint (a failing write rolls back only itself), and share one
//! commit and one fsync; no caller hears back before that commit. Reads use a separate read-only
//! pool and see committed data only. Foreign keys are on; the busy timeout covers other processes.

use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, SqliteConnection};

use crate::backend::{
    BoxFuture, MAX_ROWS, bind_event_rows, event_insert_error, sql_store_impl, to_u64,
};
use crate::cursor::CursorKey;
use crate::error::StoreError;
use crate::error::StoreResult;
use crate::migrate;
use crate::model::Backend;
use crate::model::NewEvent;

/// Tuning of an SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How long a statement waits for another process's lock.
    pub busy_timeout: Duration,
    /// Size of the read pool.
    pub readers: u32,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            readers: 4,
        }
    }
}

/// The most writes one group commit takes.
const MAX_BATCH: usize = 256;

/// What a finished write hands back to the writer task: whether to keep its savepoint, whether it
/// wakes waiters, and how to deliver its result once the batch's commit outcome is known.
struct WriteDone {
    ok: bool,
    notify: bool,
    deliver: Box<dyn FnOnce(Result<(), String>) + Send>,
}

/// A write queued for the writer task.
type WriteJob =
    Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, WriteDone> + Send>;

/// An SQLite-backed [`crate::Store`].
#[derive(Debug)]
pub struct SqliteStore {
    jobs: tokio::sync::mpsc::Sender<WriteJob>,
    writer: SqlitePool,
    reader: SqlitePool,
    key: CursorKey,
    changes: tokio::sync::watch::Sender<u64>,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if missing) the database file at `path` and applies pending migrations.
    pub async fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// [`SqliteStore::open`] with explicit options.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> StoreResult<Self> {
        let path = path.as_ref().to_path_buf();
        let connect = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| StoreError::Backend(e.to_string()))?
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(options.busy_timeout);
        // The writer task is the pool's only user and sees every failure of its connection, so a
        // liveness ping before each batch would only cost a round trip.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            // Savepoint journals hold the pages each write of a group commit changes, so they can
            // be rolled back alone; past 64 KiB SQLite spills them to a temporary file (two
            // `pwrite`s per page). They are never needed after a crash (the WAL is), so they stay
            // in memory.
            .connect_with(connect.clone().pragma("temp_store", "memory"))
            .await?;
        migrate_sqlite(&writer).await?;
        let key = load_key(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(options.readers.max(1))
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(connect.read_only(true))
            .await?;
        let (changes, _) = tokio::sync::watch::channel(0);
        let (jobs, queue) = tokio::sync::mpsc::channel(4 * MAX_BATCH);
        tokio::spawn(write_loop(writer.clone(), queue, changes.clone()));
        Ok(SqliteStore {
            jobs,
            writer,
            reader,
            key,
            changes,
            path,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes both pools (waits for checked-out connections).
    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }

    /// Inserts `events` inside the caller's write; returns their sequences.
    async fn tx_append_events(
        tx: &mut SqliteConnection,
        events: &[NewEvent],
    ) -> StoreResult<Vec<u64>> {
        use sqlx::Row as _;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        // Writes are serialized by the writer task, so a counter gives commit-ordered sequences and the
        // listing position is the sequence itself. Each row takes the counter plus its row number
        // inside the insert, and the counter's trigger (migration 3) advances it past every row:
        // one statement per chunk, and the sequences are read back with RETURNING.
        const NEXT: &str = "(SELECT value FROM aip_counters WHERE name = 'events')";
        let mut seqs = Vec::with_capacity(events.len());
        for chunk in events.chunks(MAX_ROWS) {
            use std::fmt::Write as _;
            let mut sql = String::from(
                "INSERT INTO aip_events (seq, pos, event_id, kind, tenant, principal, session_id, action_id, correlation_id, occurred_at_ms, data) VALUES ",
            );
            // Placeholders and row numbers only, never values.
            for row in 0..chunk.len() {
                let p = row * 9;
                let _ = write!(
                    sql,
                    "{}({NEXT} + {n}, {NEXT} + {n}, ${}, ${}, ${}, ${}, ${}, ${}, ${}, ${}, ${})",
                    if row == 0 { "" } else { ", " },
                    p + 1,
                    p + 2,
                    p + 3,
                    p + 4,
                    p + 5,
                    p + 6,
                    p + 7,
                    p + 8,
                    p + 9,
                    n = row + 1,
                );
            }
            sql.push_str(" RETURNING seq, pos, event_id");
            let rows = bind_event_rows!(sqlx::query(sqlx::AssertSqlSafe(sql)), chunk)
                .fetch_all(&mut *tx)
                .await
                .map_err(event_insert_error)?;
            // RETURNING promises no row order: match the rows to the events by id.
            let mut by_id = std::collections::HashMap::with_capacity(rows.len());
            for row in &rows {
                let seq: Option<i64> = row.try_get("seq")?;
                let pos: Option<i64> = row.try_get("pos")?;
                let event_id: String = row.try_get("event_id")?;
                match (seq, pos) {
                    (Some(seq), Some(pos)) if seq == pos => {
                        by_id.insert(event_id, seq);
                    }
                    _ => return Err(StoreError::Corrupt("events counter missing".into())),
                }
            }
            for e in chunk {
                let seq = by_id.get(&e.event_id).ok_or_else(|| {
                    StoreError::Corrupt("an inserted event was not returned".into())
                })?;
                seqs.push(to_u64(*seq, "event sequence")?);
            }
        }
        Ok(seqs)
    }

    /// Queues `f` for the writer task and waits for the commit of its batch. `f` returning `Err`
    /// rolls back its own savepoint only.
    async fn write<R, F>(&self, notify: bool, f: F) -> StoreResult<R>
    where
        R: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, StoreResult<R>>
            + Send
            + 'static,
    {
        let (reply, result) = tokio::sync::oneshot::channel::<StoreResult<R>>();
        let job: WriteJob = Box::new(move |conn: &mut SqliteConnection| {
            Box::pin(async move {
                let res = f(conn).await;
                WriteDone {
                    ok: res.is_ok(),
                    notify,
                    deliver: Box::new(move |commit: Result<(), String>| {
                        let out = match (res, commit) {
                            (Ok(r), Ok(())) => Ok(r),
                            (Ok(_), Err(e)) => Err(StoreError::Backend(e)),
                            (Err(e), _) => Err(e),
                        };
                        // The caller may have gone away (cancelled request); the write stands.
                        let _ = reply.send(out);
                    }),
                }
            })
        });
        self.jobs
            .send(job)
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?;
        result
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite write was abandoned".into()))?
    }
}

/// The writer task: takes every queued write (up to [`MAX_BATCH`]) into one transaction.
///
/// Savepoints cost a worker round trip each, so they are only taken where they protect another
/// write: the first write of a transaction runs bare (if it fails, the transaction holding only its
/// work is rolled back and the rest of the batch starts a new one), each later write runs in a
/// savepoint whose release is sent together with the next write's savepoint, and the last savepoint
/// is left for `COMMIT` to release (it commits the whole transaction stack).
async fn write_loop(
    pool: SqlitePool,
    mut queue: tokio::sync::mpsc::Receiver<WriteJob>,
    changes: tokio::sync::watch::Sender<u64>,
) {
    while let Some(first) = queue.recv().await {
        let mut batch = std::collections::VecDeque::with_capacity(MAX_BATCH);
        batch.push_back(first);
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push_back(job),
                Err(_) => break,
            }
        }
        while !batch.is_empty() {
            // Jobs dropped unrun (a transaction could not start or broke) surface as `Unavailable` to
            // their callers.
            if !run_transaction(&pool, &mut batch, &changes).await {
                break;
            }
        }
    }
}

/// Runs jobs from the front of `batch` in one transaction and delivers their outcomes. Stops early
/// (leaving the rest queued) only when the bare first write fails; returns false if the transaction
/// could not start or broke, in which case the jobs it had taken are dropped.
async fn run_transaction(
    pool: &SqlitePool,
    batch: &mut std::collections::VecDeque<WriteJob>,
    changes: &tokio::sync::watch::Sender<u64>,
) -> bool {
    let Ok(mut tx) = pool.begin_with("BEGIN IMMEDIATE").await else {
        return false;
    };
    let mut done: Vec<WriteDone> = Vec::with_capacity(batch.len());
    let mut broken = None;
    // Whether the previous write's savepoint is still open (released with the next one).
    let mut open = false;
    while let Some(job) = batch.pop_front() {
        let bare = done.is_empty();
        if !bare {
            let sql = if open {
                "RELEASE aip_write; SAVEPOINT aip_write"
            } else {
                "SAVEPOINT aip_write"
            };
            if let Err(e) = sqlx::raw_sql(sql).execute(&mut *tx).await {
                broken = Some(e.to_string());
                break;
            }
        }
        let d = job(&mut tx).await;
        if bare {
            if !d.ok {
                // Only this write's work is in the transaction: dropping it undoes exactly that.
                let _ = tx.rollback().await;
                (d.deliver)(Err("rolled back".into()));
                return true;
            }
            done.push(d);
            continue;
        }
        open = d.ok;
        let end = if d.ok {
            Ok(())
        } else {
            sqlx::raw_sql("ROLLBACK TO aip_write; RELEASE aip_write")
                .execute(&mut *tx)
                .await
                .map(|_| ())
        };
        done.push(d);
        if let Err(e) = end {
            broken = Some(e.to_string());
            break;
        }
    }
    let outcome = match broken {
        Some(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
        None => tx.commit().await.map_err(|e| e.to_string()),
    };
    let committed = outcome.is_ok();
    if committed && done.iter().any(|d| d.ok && d.notify) {
        changes.send_modify(|v| *v = v.wrapping_add(1));
    }
    for d in done {
        (d.deliver)(outcome.clone());
    }
    committed
}

async fn migrate_sqlite(pool: &SqlitePool) -> StoreResult<()> {
    // BEGIN IMMEDIATE serializes concurrent openers of the same file.
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    SqliteStore::tx_migrate(&mut tx, migrate::SQLITE).await?;
    tx.commit().await?;
    Ok(())
}

async fn load_key(pool: &SqlitePool) -> StoreResult<CursorKey> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let key = SqliteStore::tx_cursor_key(&mut tx).await?;
    tx.commit().await?;
    Ok(key)
}

sql_store_impl!(
    SqliteStore,
    Sqlite,
    Backend::Sqlite,
    lock = "",
    claim_lock = ""
);
