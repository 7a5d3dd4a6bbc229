//! The one SQL implementation of every storage trait, shared by both backends.
//!
//! SQLite and PostgreSQL accept the same SQL here (`$N` parameters, `ON CONFLICT`, `RETURNING`), so
//! each aggregate's behaviour is written once, in its own file, against `db::Stmt` and `db::Row`,
//! as an impl for [`SqlStore<D>`] generic over the backend's [`Dialect`]. What differs between the
//! backends is the dialect's: the row-lock suffix of reads that precede a write, the claim
//! statement's lock clause, how a write transaction is run, how events get their sequences, and how
//! readers are woken. Every write runs as a closure on a connection inside a transaction through
//! [`Dialect::write`]: PostgreSQL runs one transaction per write; SQLite group-commits concurrent
//! writes (one savepoint each, one commit and one fsync for the batch).

mod action;
mod approval;
mod callback;
mod channel;
mod dialect;
mod escalation;
mod event;
mod evidence;
mod housekeeping;
mod job;
pub use job::CLAIM_PICKS;
mod page;
mod receipt;
mod record;
mod replay;
mod session;
mod settlement;
mod setup;
mod subscription;
mod transaction;

use std::borrow::Cow;

use serde_json::Value;

use crate::cursor::CursorKey;
use crate::db::{BoxFuture, Row, Tx, query};
use crate::error::{StoreError, StoreResult};

pub(crate) use dialect::{Dialect, WriteFn};
pub(crate) use event::bind_event_rows;
pub(crate) use receipt::{AUDIT_RETURNING, audit_record, bind_audit};
pub(crate) use setup::{cursor_key, migrate};

/// A store: the backend's connections and writer (its [`Dialect`]) and the cursor key every node of
/// the database shares. `SqliteStore` and `PostgresStore` are this type over their dialects.
#[derive(Debug)]
pub struct SqlStore<D> {
    db: D,
    key: CursorKey,
}

// The bounds sit on the methods, not the impl: `Dialect` is crate-private and `SqlStore` is not.
impl<D> SqlStore<D> {
    /// A store over `db`, whose cursors are bound to `key`.
    pub(crate) fn new(db: D, key: CursorKey) -> Self {
        SqlStore { db, key }
    }

    /// The backend's connections and writer.
    pub(crate) fn dialect(&self) -> &D {
        &self.db
    }

    /// Runs `f` as one write (see [`Dialect::write`]); with `notify`, readers are woken after its
    /// commit.
    pub(crate) async fn write<R, F>(&self, notify: bool, f: F) -> StoreResult<R>
    where
        D: Dialect,
        R: Send + 'static,
        F: for<'c> FnOnce(&'c mut dyn Tx) -> BoxFuture<'c, StoreResult<R>> + Send + 'static,
    {
        self.db.write(notify, f).await
    }

    /// The pool reads run on (committed data only).
    fn reader(&self) -> &D::Reader
    where
        D: Dialect,
    {
        self.db.reader()
    }
}

/// The row `sql` selects by one id (`$1`) inside a write, locked where the dialect locks rows, as
/// `decode` reads it.
async fn tx_get_locked<D: Dialect, T>(
    tx: &mut dyn Tx,
    sql: &'static str,
    key: &[&str],
    decode: fn(&Row) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    let mut q = query(locked::<D>(sql));
    for part in key {
        q = q.bind(*part);
    }
    let row = q.fetch_optional(&mut *tx).await?;
    row.as_ref().map(decode).transpose()
}

/// `sql` followed by the dialect's row lock: for a read that precedes a write in the same
/// transaction. Borrowed where the dialect locks nothing (SQLite's writes are serialized already).
fn locked<D: Dialect>(sql: &'static str) -> Cow<'static, str> {
    if D::ROW_LOCK.is_empty() {
        Cow::Borrowed(sql)
    } else {
        Cow::Owned(format!("{sql}{}", D::ROW_LOCK))
    }
}

/// Converts a stored integer to an unsigned model value.
pub(crate) fn to_u64(v: i64, what: &'static str) -> StoreResult<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {what}")))
}

/// Converts an unsigned model value to a stored integer.
fn to_i64(v: u64, what: &'static str) -> StoreResult<i64> {
    i64::try_from(v).map_err(|_| StoreError::InvalidInput(what))
}

/// SHA-256 (lowercase hex) of a secret, so the secret itself is never stored.
fn secret_hash(secret: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(secret.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh unique id for rows the store names itself (reservations).
fn fresh_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Scope part for an optional filter: `None` and `Some("")` must fingerprint differently.
fn opt_part(v: Option<&str>) -> String {
    match v {
        Some(s) => format!("+{s}"),
        None => "-".to_owned(),
    }
}

/// A listing's session term on parameter `$n` (bound to the session id, or NULL when `given` is
/// false). With a session it is an equality on `session_tail`, which the session indexes key
/// (migrations: SQLite 16, PostgreSQL 14), and on the full id; an `OR`-shaped optional term would
/// keep both planners off the index. Without one it holds for every row.
fn session_filter(n: usize, given: bool) -> String {
    if given {
        format!(
            "session_tail = substr(CAST(${n} AS TEXT), length(CAST(${n} AS TEXT)) - 11) AND session_id = ${n}"
        )
    } else {
        format!("CAST(${n} AS TEXT) IS NULL")
    }
}

/// Errors are bounded before they are stored.
fn bounded_error(e: &str) -> String {
    e.chars().take(2000).collect()
}

/// Compares stored JSON with offered JSON for chunk duplicates.
fn same_json(a: &Value, b: &Value) -> bool {
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

#[cfg(test)]
mod plan_tests {
    /// SQLite's plan of `sql`, with every parameter bound to `value`.
    async fn plan(store: &crate::sqlite::SqliteStore, sql: &str, value: &str) -> String {
        let params = (1..=20).filter(|n| sql.contains(&format!("${n}"))).count();
        let mut q = crate::db::query(format!("EXPLAIN QUERY PLAN {sql}"));
        for _ in 0..params {
            q = q.bind(value.to_owned());
        }
        let rows = q.fetch_all(store.reader()).await.unwrap();
        rows.iter()
            .map(|r| r.try_get::<String>("detail").unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[tokio::test]
    async fn session_listings_are_planned_on_the_session_tail_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::sqlite::SqliteStore::open(dir.path().join("aip.db"))
            .await
            .unwrap();
        for (sql, index) in [
            (
                super::action::list_actions_sql(true),
                "aip_actions_by_session_tail",
            ),
            (
                super::event::list_events_sql(true, ""),
                "aip_events_by_session_tail",
            ),
            (
                super::receipt::list_audit_sql(true),
                "aip_audit_by_session_tail",
            ),
        ] {
            let plan = plan(&store, &sql, "sess_0123456789abcdef").await;
            assert!(plan.contains(index), "{index} not in the plan:\n{plan}");
        }
        let unfiltered = plan(&store, &super::action::list_actions_sql(false), "t").await;
        assert!(!unfiltered.contains("session_tail"), "{unfiltered}");
    }

    #[tokio::test]
    async fn recovery_lists_unfinished_actions_by_their_state_not_by_scanning_the_history() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::sqlite::SqliteStore::open(dir.path().join("aip.db"))
            .await
            .unwrap();
        let plan = plan(&store, super::action::UNFINISHED_SQL, "1").await;
        assert!(plan.contains("SEARCH a USING INDEX"), "{plan}");
        assert!(!plan.contains("SCAN a"), "{plan}");
    }
}
