//! The embedded SQLite backend (the default).
//!
//! Durability: WAL journal with `synchronous = FULL`, so a commit is on disk before the runtime
//! acknowledges it (NORMAL could lose the last commits on power loss). Writes go through one writer
//! thread owning one rusqlite connection; it runs each write in `BEGIN IMMEDIATE`, which makes every
//! read-then-write operation atomic (the SQLite equivalent of row locks and `SKIP LOCKED` claims).
//! A write's statements run on that thread as plain calls (see `db.rs`): a write costs one hand-off
//! to the thread and one back, not a thread round trip per statement.
//! Group commit: writes that queue up while a commit is being synced run in the next transaction
//! together, each inside its own savepoint (a failing write rolls back only itself), and share one
//! commit and one fsync; no caller hears back before that commit. Reads use a separate read-only
//! sqlx pool and see committed data only. Foreign keys are on; the busy timeout covers other
//! processes (and other store handles) writing the same file.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::backend::{
    BoxFuture, MAX_ROWS, bind_event_rows, event_insert_error, sql_store_impl, to_u64,
};
use crate::cursor::CursorKey;
use crate::db::{SqliteTx, Tx};
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

/// Prepared statements the writer keeps (the store's statements, with the multi-row variants).
const STATEMENT_CACHE: usize = 256;

/// What a finished write hands back to the writer thread: whether to keep its savepoint, whether
/// it wakes waiters, and how to deliver its result once the batch's commit outcome is known.
struct WriteDone {
    ok: bool,
    notify: bool,
    deliver: Box<dyn FnOnce(Result<(), String>) + Send>,
}

/// A write queued for the writer thread.
type WriteJob = Box<dyn for<'c> FnOnce(&'c mut dyn Tx) -> BoxFuture<'c, WriteDone> + Send>;

/// What the writer thread is asked to do.
enum Request {
    Write(WriteJob),
    /// Finish the queued writes, close the connection, then answer.
    Close(tokio::sync::oneshot::Sender<()>),
}

/// An SQLite-backed [`crate::Store`].
#[derive(Debug)]
pub struct SqliteStore {
    jobs: tokio::sync::mpsc::Sender<Request>,
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
        let (changes, _) = tokio::sync::watch::channel(0);
        let (jobs, queue) = tokio::sync::mpsc::channel(4 * MAX_BATCH);
        let (ready, opened) = tokio::sync::oneshot::channel::<StoreResult<CursorKey>>();
        let (thread_path, thread_changes) = (path.clone(), changes.clone());
        let busy_timeout = options.busy_timeout;
        std::thread::Builder::new()
            .name("aip-sqlite-writer".into())
            .spawn(move || match open_writer(&thread_path, busy_timeout) {
                Ok((mut conn, key)) => {
                    let _ = ready.send(Ok(key));
                    write_loop(&mut conn, queue, &thread_changes);
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            })
            .map_err(|e| StoreError::Backend(format!("cannot start the SQLite writer: {e}")))?;
        let key = opened.await.map_err(|_| {
            StoreError::Unavailable("the SQLite writer stopped while opening".into())
        })??;
        let connect = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| StoreError::Backend(e.to_string()))?
            .filename(&path)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(options.busy_timeout)
            .read_only(true);
        let reader = SqlitePoolOptions::new()
            .max_connections(options.readers.max(1))
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(connect)
            .await?;
        Ok(SqliteStore {
            jobs,
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

    /// Closes the read pool (waits for checked-out connections) and the writer (after the writes
    /// already queued). Writes asked for afterwards fail as `Unavailable`.
    pub async fn close(&self) {
        self.reader.close().await;
        let (done, closed) = tokio::sync::oneshot::channel();
        if self.jobs.send(Request::Close(done)).await.is_ok() {
            let _ = closed.await;
        }
    }

    /// Inserts `events` inside the caller's write; returns their sequences.
    async fn tx_append_events(tx: &mut dyn Tx, events: &[NewEvent]) -> StoreResult<Vec<u64>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        // Writes are serialized by the writer (and `BEGIN IMMEDIATE` across handles), so a counter
        // gives commit-ordered sequences and the listing position is the sequence itself. Each row
        // takes the counter plus its row number inside the insert, and the counter's trigger
        // (migration 3) advances it past every row: one statement per chunk, and the sequences are
        // read back with RETURNING.
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
            let rows = bind_event_rows!(crate::db::query(sql), chunk)
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

    /// Queues `f` for the writer thread and waits for the commit of its batch. `f` returning `Err`
    /// rolls back its own savepoint only. `f` must not wait on anything but its statements: the
    /// writer polls it once (a write that suspends is rolled back and reported `Unavailable`).
    async fn write<R, F>(&self, notify: bool, f: F) -> StoreResult<R>
    where
        R: Send + 'static,
        F: for<'c> FnOnce(&'c mut dyn Tx) -> BoxFuture<'c, StoreResult<R>> + Send + 'static,
    {
        let (reply, result) = tokio::sync::oneshot::channel::<StoreResult<R>>();
        let job: WriteJob = Box::new(move |conn: &mut dyn Tx| {
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
            .send(Request::Write(job))
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?;
        result
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite write was abandoned".into()))?
    }
}

/// Polls `f` once. Everything the writer runs completes without waiting (rusqlite is synchronous),
/// so `None` means a write tried to wait on something else.
fn run_now<F: Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => Some(out),
        Poll::Pending => None,
    }
}

/// Opens the writer's connection, applies pending migrations and loads the cursor key.
fn open_writer(
    path: &Path,
    busy_timeout: Duration,
) -> StoreResult<(rusqlite::Connection, CursorKey)> {
    use rusqlite::OpenFlags;
    let backend = |e: rusqlite::Error| StoreError::from(crate::db::DbError::Sqlite(e));
    let mut conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(backend)?;
    conn.busy_timeout(busy_timeout).map_err(backend)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(backend)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Backend(format!(
            "SQLite refused WAL mode (journal mode is {mode})"
        )));
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(backend)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(backend)?;
    // Savepoint journals hold the pages each write of a group commit changes, so they can be
    // rolled back alone; past 64 KiB SQLite spills them to a temporary file (two `pwrite`s per
    // page). They are never needed after a crash (the WAL is), so they stay in memory.
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(backend)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // One `BEGIN IMMEDIATE` transaction serializes concurrent openers of the same file.
    conn.execute_batch("BEGIN IMMEDIATE").map_err(backend)?;
    let setup = run_now(async {
        let mut tx = SqliteTx(&mut conn);
        SqliteStore::tx_migrate(&mut tx, migrate::SQLITE).await?;
        SqliteStore::tx_cursor_key(&mut tx).await
    })
    .unwrap_or_else(|| Err(StoreError::Backend("SQLite setup suspended".into())));
    match setup {
        Ok(key) => {
            conn.execute_batch("COMMIT").map_err(backend)?;
            Ok((conn, key))
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The writer thread: takes every queued write (up to [`MAX_BATCH`]) into one transaction.
fn write_loop(
    conn: &mut rusqlite::Connection,
    mut queue: tokio::sync::mpsc::Receiver<Request>,
    changes: &tokio::sync::watch::Sender<u64>,
) {
    let mut closing = None;
    while let Some(first) = queue.blocking_recv() {
        let mut batch = std::collections::VecDeque::with_capacity(MAX_BATCH);
        let mut next = Some(first);
        while let Some(request) = next.take() {
            match request {
                Request::Write(job) => batch.push_back(job),
                Request::Close(done) => {
                    closing = Some(done);
                    break;
                }
            }
            if batch.len() < MAX_BATCH {
                next = queue.try_recv().ok();
            }
        }
        while !batch.is_empty() {
            // Jobs dropped unrun (a transaction could not start or broke) surface as
            // `Unavailable` to their callers.
            if !run_transaction(conn, &mut batch, changes) {
                break;
            }
        }
        if closing.is_some() {
            break;
        }
    }
    // Writes queued after the close are refused (their callers hear `Unavailable`).
    queue.close();
    while queue.try_recv().is_ok() {}
    if let Some(done) = closing {
        let _ = done.send(());
    }
}

/// Runs one job on the connection; `None` if it suspended or panicked (it is then dropped, its
/// work is rolled back by the caller, and its caller hears that the write was abandoned). A
/// panicking write is a bug, but it must not take the writer, and every later write, down with it.
fn run_job(conn: &mut rusqlite::Connection, job: WriteJob) -> Option<WriteDone> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut tx = SqliteTx(conn);
        run_now(job(&mut tx))
    }))
    .unwrap_or(None)
}

/// Runs jobs from the front of `batch` in one transaction and delivers their outcomes. Stops early
/// (leaving the rest queued) only when the bare first write fails; returns false if the
/// transaction could not start or broke, in which case the jobs it had taken are dropped.
///
/// Savepoints are only taken where they protect another write: the first write of a transaction
/// runs bare (if it fails, the transaction holding only its work is rolled back and the rest of
/// the batch starts a new one), and each later write runs in a savepoint.
fn run_transaction(
    conn: &mut rusqlite::Connection,
    batch: &mut std::collections::VecDeque<WriteJob>,
    changes: &tokio::sync::watch::Sender<u64>,
) -> bool {
    if !conn.is_autocommit() {
        // A transaction left open by an earlier failure holds nothing anyone was told about.
        let _ = conn.execute_batch("ROLLBACK");
    }
    if conn.execute_batch("BEGIN IMMEDIATE").is_err() {
        return false;
    }
    let mut done: Vec<WriteDone> = Vec::with_capacity(batch.len());
    let mut broken = None;
    while let Some(job) = batch.pop_front() {
        let bare = done.is_empty();
        if !bare && let Err(e) = conn.execute_batch("SAVEPOINT aip_write") {
            broken = Some(e.to_string());
            break;
        }
        let d = run_job(conn, job);
        let ok = d.as_ref().is_some_and(|d| d.ok);
        if bare && !ok {
            // Only this write's work is in the transaction: rolling it back undoes exactly that.
            let _ = conn.execute_batch("ROLLBACK");
            if let Some(d) = d {
                (d.deliver)(Err("rolled back".into()));
            }
            return true;
        }
        let end = match (bare, ok) {
            (true, _) => Ok(()),
            (false, true) => conn.execute_batch("RELEASE aip_write"),
            (false, false) => conn.execute_batch("ROLLBACK TO aip_write; RELEASE aip_write"),
        };
        if let Some(d) = d {
            done.push(d);
        }
        if let Err(e) = end {
            broken = Some(e.to_string());
            break;
        }
    }
    let outcome = match broken {
        Some(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
        None => conn.execute_batch("COMMIT").map_err(|e| e.to_string()),
    };
    if outcome.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    let committed = outcome.is_ok();
    if committed && done.iter().any(|d| d.ok && d.notify) {
        changes.send_modify(|v| *v = v.wrapping_add(1));
    }
    for d in done {
        (d.deliver)(outcome.clone());
    }
    committed
}

sql_store_impl!(SqliteStore, Backend::Sqlite, lock = "", claim_lock = "");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AppRecord;
    use crate::prelude::*;

    fn record(id: &str) -> AppRecord {
        AppRecord {
            collection: "c".into(),
            record_id: id.into(),
            tenant: "t".into(),
            created_at_ms: 1,
            body: serde_json::json!({ "id": id }),
        }
    }

    /// The ids of the records in collection `c` of tenant `t`.
    async fn record_ids(s: &SqliteStore) -> Vec<String> {
        s.list_records("c", "t", crate::model::Limit::max())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.record_id)
            .collect()
    }

    async fn open(dir: &tempfile::TempDir) -> SqliteStore {
        SqliteStore::open(dir.path().join("aip.db")).await.unwrap()
    }

    /// A write that records `id` and then waits on something other than its statements.
    async fn suspending_write(s: &SqliteStore, id: &'static str) -> StoreResult<()> {
        s.write(true, move |tx| {
            Box::pin(async move {
                crate::db::query(
                    "INSERT INTO aip_records (collection, record_id, tenant, created_at_ms, body) VALUES ('c', $1, 't', 1, '{}')",
                )
                .bind(id)
                .execute(&mut *tx)
                .await?;
                tokio::task::yield_now().await;
                Ok(())
            })
        })
        .await
    }

    #[tokio::test]
    async fn a_write_that_waits_on_anything_but_its_statements_is_rolled_back_and_reported_unavailable()
     {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir).await;
        // Alone (the transaction's bare first write) and inside a group commit (a savepoint).
        let alone = suspending_write(&s, "x0").await;
        assert!(
            matches!(alone, Err(StoreError::Unavailable(_))),
            "{alone:?}"
        );
        let (a, b, c) = tokio::join!(
            s.insert_record(record("r1")),
            suspending_write(&s, "x1"),
            s.insert_record(record("r2")),
        );
        assert!(a.is_ok() && c.is_ok(), "{a:?} {c:?}");
        assert!(matches!(b, Err(StoreError::Unavailable(_))), "{b:?}");
        let ids = record_ids(&s).await;
        assert_eq!(ids, ["r1", "r2"]);
    }

    #[tokio::test]
    async fn a_write_that_panics_is_rolled_back_and_the_writer_keeps_serving() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir).await;
        let panicking = s
            .write(true, |tx| {
                Box::pin(async move {
                    crate::db::query(
                        "INSERT INTO aip_records (collection, record_id, tenant, created_at_ms, body) VALUES ('c', 'x', 't', 1, '{}')",
                    )
                    .execute(&mut *tx)
                    .await?;
                    if tx.batch("SELECT 1").await.is_ok() {
                        panic!("a bug inside a write");
                    }
                    Ok(())
                })
            })
            .await;
        assert!(
            matches!(panicking, Err(StoreError::Unavailable(_))),
            "{panicking:?}"
        );
        s.insert_record(record("r1")).await.unwrap();
        let ids = record_ids(&s).await;
        assert_eq!(ids, ["r1"]);
    }

    #[tokio::test]
    async fn the_writer_commits_in_wal_mode_with_full_sync_and_foreign_keys() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir).await;
        let settings = s
            .write(false, |tx| {
                Box::pin(async move {
                    let mut out = Vec::new();
                    for pragma in ["journal_mode", "synchronous", "foreign_keys", "temp_store"] {
                        let row = crate::db::query(format!("PRAGMA {pragma}"))
                            .fetch_one(&mut *tx)
                            .await?;
                        out.push(match row.try_get::<String>(pragma) {
                            Ok(text) => text,
                            Err(_) => row.try_get::<i64>(pragma)?.to_string(),
                        });
                    }
                    Ok(out)
                })
            })
            .await
            .unwrap();
        // FULL = 2, foreign keys on = 1, temp_store MEMORY = 2.
        assert_eq!(settings, ["wal", "2", "1", "2"]);
    }

    #[tokio::test]
    async fn writes_after_close_are_refused_and_committed_ones_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir).await;
        s.insert_record(record("r1")).await.unwrap();
        s.close().await;
        let late = s.insert_record(record("r2")).await;
        assert!(matches!(late, Err(StoreError::Unavailable(_))), "{late:?}");
        let again = open(&dir).await;
        assert_eq!(again.count_records("c", "t").await.unwrap(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_handles_on_one_file_write_concurrently_with_unique_gapless_event_sequences() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            std::sync::Arc::new(open(&dir).await),
            std::sync::Arc::new(open(&dir).await),
        );
        let mut tasks = Vec::new();
        for i in 0..40 {
            let s = if i % 2 == 0 { a.clone() } else { b.clone() };
            tasks.push(tokio::spawn(async move {
                let events = (0..3)
                    .map(|k| NewEvent {
                        event_id: format!("e{i}_{k}"),
                        kind: "test.event".into(),
                        tenant: "t".into(),
                        principal: None,
                        session_id: None,
                        action_id: None,
                        correlation_id: None,
                        occurred_at_ms: 1,
                        data: serde_json::json!({ "i": i }),
                    })
                    .collect();
                s.append_events(events).await
            }));
        }
        let mut seqs = Vec::new();
        for t in tasks {
            let got = t.await.unwrap().unwrap();
            // One write's events are consecutive.
            assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "{got:?}");
            seqs.extend(got);
        }
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=120).collect::<Vec<u64>>());
        let query = crate::model::EventQuery {
            tenant: "t".into(),
            principal: None,
            action_id: None,
            session_id: None,
        };
        let listed = b
            .list_events(&query, None, crate::model::Limit::max())
            .await
            .unwrap();
        assert_eq!(listed.items.len(), 120);
    }

    #[tokio::test]
    async fn a_database_that_cannot_be_opened_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = SqliteStore::open(dir.path().join("missing").join("aip.db"))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
        // A file that is not a database.
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, vec![7u8; 8192]).unwrap();
        let err = SqliteStore::open(&junk).await.unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
    }
}
