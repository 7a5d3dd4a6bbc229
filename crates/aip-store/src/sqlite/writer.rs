//! The SQLite writer thread: one rusqlite connection that runs every write, group-committing the
//! writes that queue up while a commit is being synced (see `sqlite/mod.rs`).

use std::future::Future;
use std::path::Path;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::cursor::CursorKey;
use crate::db::{BoxFuture, SqliteTx, Tx};
use crate::error::{StoreError, StoreResult};
use crate::migrate;
use crate::sql::{self, WriteFn};

/// The handle of the writer thread: every write of a store handle is queued to it.
#[derive(Debug)]
pub(super) struct Writer {
    jobs: tokio::sync::mpsc::Sender<Request>,
}

impl Writer {
    /// Starts the writer thread on the database file at `path`: it opens the connection, applies
    /// pending migrations and loads the cursor key, then serves the writes queued to the returned
    /// handle (waking `changes` after commits that notify).
    pub(super) async fn start(
        path: &Path,
        busy_timeout: Duration,
        changes: tokio::sync::watch::Sender<u64>,
        sessions: std::sync::Arc<super::session_cache::SessionCache>,
    ) -> StoreResult<(Writer, CursorKey)> {
        let (jobs, queue) = tokio::sync::mpsc::channel(4 * MAX_BATCH);
        let (ready, opened) = tokio::sync::oneshot::channel::<StoreResult<CursorKey>>();
        let thread_path = path.to_path_buf();
        std::thread::Builder::new()
            .name("aip-sqlite-writer".into())
            .spawn(move || match open_writer(&thread_path, busy_timeout) {
                Ok((mut conn, key)) => {
                    let touched = match watch_sessions(&conn) {
                        Ok(touched) => touched,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(key));
                    let observers = Observers {
                        changes,
                        sessions,
                        touched,
                    };
                    write_loop(&mut conn, queue, &observers);
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            })
            .map_err(|e| StoreError::Backend(format!("cannot start the SQLite writer: {e}")))?;
        let key = opened.await.map_err(|_| {
            StoreError::Unavailable("the SQLite writer stopped while opening".into())
        })??;
        Ok((Writer { jobs }, key))
    }

    /// Queues `f` for the writer thread and waits for the commit of its batch. `f` returning `Err`
    /// rolls back its own savepoint only. `f` must not wait on anything but its statements: the writer
    /// polls it once (a write that suspends is rolled back and reported `Unavailable`).
    pub(super) async fn write<R: Send + 'static>(
        &self,
        notify: bool,
        f: impl WriteFn<R>,
    ) -> StoreResult<R> {
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

    /// Asks the writer to finish the queued writes and close its connection, and waits until it has.
    pub(super) async fn close(&self) {
        let (done, closed) = tokio::sync::oneshot::channel();
        if self.jobs.send(Request::Close(done)).await.is_ok() {
            let _ = closed.await;
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
        sql::migrate(&mut tx, migrate::SQLITE).await?;
        sql::cursor_key(&mut tx).await
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
    observers: &Observers,
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
            if !run_transaction(conn, &mut batch, observers) {
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

/// A flag the connection sets whenever a write touches `aip_sessions`. Every row written there
/// passes the update hook (a rowid table, written only by INSERT and UPDATE), so the session cache
/// never outlives a committed change.
fn watch_sessions(
    conn: &rusqlite::Connection,
) -> StoreResult<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let touched = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hook = std::sync::Arc::clone(&touched);
    conn.update_hook(Some(
        move |_: rusqlite::hooks::Action, _: &str, table: &str, _: i64| {
            if table == "aip_sessions" {
                hook.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        },
    ))
    .map_err(|e| StoreError::from(crate::db::DbError::Sqlite(e)))?;
    Ok(touched)
}

/// Who hears of the writer's commits: readers waiting for changes, and the session cache.
struct Observers {
    changes: tokio::sync::watch::Sender<u64>,
    sessions: std::sync::Arc<super::session_cache::SessionCache>,
    /// Set by the update hook when a write touched `aip_sessions`.
    touched: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Observers {
    /// After a transaction ended (committed or not): empties the session cache if it touched
    /// sessions.
    fn sessions_settled(&self) {
        if self
            .touched
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            self.sessions.invalidate();
        }
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
    observers: &Observers,
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
            observers.sessions_settled();
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
    // Before anyone hears of the commit: a session change is never answered from the cache.
    observers.sessions_settled();
    if committed && done.iter().any(|d| d.ok && d.notify) {
        observers.changes.send_modify(|v| *v = v.wrapping_add(1));
    }
    for d in done {
        (d.deliver)(outcome.clone());
    }
    committed
}
