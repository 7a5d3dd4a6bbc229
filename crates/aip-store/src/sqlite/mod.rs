//! The embedded SQLite backend (the default).
//!
//! Durability: WAL journal with `synchronous = FULL`, so a commit is on disk before the runtime
//! acknowledges it (NORMAL could lose the last commits on power loss). Writes go through one writer
//! thread owning one rusqlite connection; it runs each write in `BEGIN IMMEDIATE`, which makes every
//! read-then-write operation atomic (the SQLite equivalent of row locks and `SKIP LOCKED` claims).
//! A write's statements run on that thread as plain calls (see `db.rs`): a write costs one hand-off
//! to the thread and one back, not a thread round trip per statement (the thread is `writer.rs`).
//! Group commit: writes that queue up while a commit is being synced run in the next transaction
//! together, each inside its own savepoint (a failing write rolls back only itself), and share one
//! commit and one fsync; no caller hears back before that commit. Reads use a separate read-only
//! sqlx pool and see committed data only. Foreign keys are on; the busy timeout covers other
//! processes (and other store handles) writing the same file.

mod writer;

use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::db::Tx;
use crate::error::{StoreError, StoreResult};
use crate::model::{AuditRecord, Backend, NewAudit, NewEvent};
use crate::sql::{
    AUDIT_RETURNING, Dialect, MAX_ROWS, SqlStore, WriteFn, audit_record, bind_audit,
    bind_event_rows, to_u64,
};
use crate::watch::ChangeWatch;
use writer::Writer;

mod session_cache;
pub(crate) use session_cache::SessionCache;

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

/// An SQLite-backed [`crate::Store`]: the shared SQL over the SQLite dialect.
pub type SqliteStore = SqlStore<Sqlite>;

/// The SQLite dialect: the writer thread, the read pool and the in-process change watch.
#[derive(Debug)]
pub struct Sqlite {
    writer: Writer,
    reader: SqlitePool,
    changes: tokio::sync::watch::Sender<u64>,
    path: PathBuf,
    /// Sessions read lately (see `session_cache`).
    sessions: std::sync::Arc<session_cache::SessionCache>,
}

impl SqlStore<Sqlite> {
    /// Opens (creating if missing) the database file at `path` and applies pending migrations.
    pub async fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// [`SqliteStore::open`] with explicit options.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> StoreResult<Self> {
        let path = path.as_ref().to_path_buf();
        let (changes, _) = tokio::sync::watch::channel(0);
        let sessions = std::sync::Arc::new(session_cache::SessionCache::default());
        let (writer, key) = Writer::start(
            &path,
            options.busy_timeout,
            changes.clone(),
            std::sync::Arc::clone(&sessions),
        )
        .await?;
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
        let db = Sqlite {
            writer,
            reader,
            changes,
            path,
            sessions,
        };
        Ok(SqlStore::new(db, key))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.dialect().path
    }

    /// Closes the read pool (waits for checked-out connections) and the writer (after the writes
    /// already queued). Writes asked for afterwards fail as `Unavailable`.
    pub async fn close(&self) {
        self.dialect().close().await;
    }
}

impl Dialect for Sqlite {
    const BACKEND: Backend = Backend::Sqlite;
    // Every write runs on the one writer in `BEGIN IMMEDIATE`: reads inside it need no lock.
    const ROW_LOCK: &'static str = "";
    const CLAIM_LOCK: &'static str = "";
    const QUOTA_LOCK: Option<&'static str> = None;
    const MIGRATIONS: &'static [crate::migrate::Migration] = crate::migrate::SQLITE;

    type Reader = SqlitePool;

    async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }

    fn reader(&self) -> &SqlitePool {
        &self.reader
    }

    fn session_cache(&self) -> Option<&SessionCache> {
        Some(&self.sessions)
    }

    async fn write<R: Send + 'static>(&self, notify: bool, f: impl WriteFn<R>) -> StoreResult<R> {
        self.writer.write(notify, f).await
    }

    async fn append_events(tx: &mut dyn Tx, events: &[NewEvent]) -> StoreResult<Vec<u64>> {
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
            let rows = bind_event_rows(crate::db::query(sql), chunk)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| e.or_duplicate("event"))?;
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

    async fn append_audit(tx: &mut dyn Tx, a: &NewAudit) -> StoreResult<AuditRecord> {
        // Serialized writes: the counter is commit-ordered, and the position is the sequence.
        let row = crate::db::query(
            "UPDATE aip_counters SET value = value + 1 WHERE name = 'audit' RETURNING value",
        )
        .fetch_one(&mut *tx)
        .await?;
        let seq: i64 = row.try_get("value")?;
        let sql = format!(
            "INSERT INTO aip_audit (audit_id, tenant, actor, action_label, occurred_at_ms, data, action_id, session_id, seq, pos) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING {AUDIT_RETURNING}"
        );
        let row = bind_audit(crate::db::query(sql), a)
            .bind(seq)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| e.or_duplicate("audit event"))?;
        audit_record(&row)
    }

    fn watch_changes(&self) -> ChangeWatch {
        ChangeWatch::new(self.changes.subscribe())
    }
}

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
            kinds: Vec::new(),
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
