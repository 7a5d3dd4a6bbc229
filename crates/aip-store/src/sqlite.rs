//! The embedded SQLite backend (the default).
//!
//! Durability: WAL journal with `synchronous = FULL`, so a commit is on disk before the runtime
//! acknowledges it (NORMAL could lose the last commits on power loss). Writes go through one writer
//! connection and `BEGIN IMMEDIATE`, which makes every read-then-write transaction atomic (the
//! SQLite equivalent of row locks and `SKIP LOCKED` claims) and avoids lock-upgrade deadlocks;
//! reads use a separate pool and see committed data only. Foreign keys are on; the busy timeout
//! covers other processes on the same file.

use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::time::Duration;

use sqlx::Sqlite;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::backend::sql_store_impl;
use crate::cursor::CursorKey;
use crate::error::{StoreError, StoreResult};
use crate::migrate;
use crate::model::Backend;

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

/// An SQLite-backed [`crate::Store`].
#[derive(Debug)]
pub struct SqliteStore {
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
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(connect.clone())
            .await?;
        migrate_sqlite(&writer).await?;
        let key = load_key(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(options.readers.max(1))
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(connect.read_only(true))
            .await?;
        let (changes, _) = tokio::sync::watch::channel(0);
        Ok(SqliteStore {
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

    async fn begin_write(&self) -> StoreResult<sqlx::Transaction<'static, Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn notify_tx(_tx: &mut sqlx::Transaction<'static, Sqlite>) -> StoreResult<()> {
        // One process owns an SQLite file's waiters; the in-process watch is enough.
        Ok(())
    }
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
