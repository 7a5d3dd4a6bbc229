//! What differs between the backends, for the one SQL implementation in `sql/`.

use std::future::Future;

use crate::db::{BoxFuture, Pool, Tx};
use crate::error::StoreResult;
use crate::model::{AuditRecord, Backend, NewAudit, NewEvent};
use crate::watch::ChangeWatch;

/// A backend as the shared SQL sees it: its lock clauses, its read pool, how it runs a write
/// transaction, how it sequences events and how it wakes readers. Implemented by the SQLite
/// dialect (`sqlite/`) and the PostgreSQL dialect (`postgres/`).
pub(crate) trait Dialect: Send + Sync + 'static {
    /// Which backend this is.
    const BACKEND: Backend;

    /// Appended to a read that precedes a write in its transaction: `FOR UPDATE` on PostgreSQL,
    /// nothing on SQLite (its writes are serialized, so the read is already stable).
    const ROW_LOCK: &'static str;

    /// The lock clause of the claim's job pick: `FOR UPDATE SKIP LOCKED` on PostgreSQL, so
    /// concurrent claimers take different jobs; nothing on SQLite.
    const CLAIM_LOCK: &'static str;

    /// A statement taking a transaction-scoped lock on the text `$1` (PostgreSQL: an advisory
    /// lock on its hash), so the admissions that count one principal's or tenant's unfinished
    /// actions run one at a time; none on SQLite, whose writes are serialized already.
    const QUOTA_LOCK: Option<&'static str>;

    /// The migrations this build applies on this backend, in order.
    const MIGRATIONS: &'static [crate::migrate::Migration];

    /// The pool reads run on.
    type Reader: Pool;

    /// The pool reads run on (committed data only).
    fn reader(&self) -> &Self::Reader;

    /// Sessions this process read lately, where the backend knows every change to them (SQLite,
    /// one writer); `None` where other nodes write them too (PostgreSQL): every read then asks.
    fn session_cache(&self) -> Option<&crate::sqlite::SessionCache> {
        None
    }

    /// Finishes the writes already queued, then closes the pools (writes asked for afterwards fail
    /// as `Unavailable`): the last step of a clean shutdown.
    fn close(&self) -> impl Future<Output = ()> + Send;

    /// Runs `f` in a write transaction and answers once it is committed: `Err` from `f` rolls back
    /// its work. With `notify`, readers are woken after the commit. `f` must not wait on anything
    /// but its statements (the SQLite writer polls it once).
    fn write<R: Send + 'static>(
        &self,
        notify: bool,
        f: impl WriteFn<R>,
    ) -> impl Future<Output = StoreResult<R>> + Send;

    /// Inserts `events` inside the caller's write; returns their sequences. Each backend keeps
    /// listing order equal to commit order its own way (a counter on SQLite, a sequencer after
    /// commit on PostgreSQL).
    fn append_events(
        tx: &mut dyn Tx,
        events: &[NewEvent],
    ) -> impl Future<Output = StoreResult<Vec<u64>>> + Send;

    /// Inserts an audit event inside the caller's write, positioned in commit order like events
    /// (the counter on SQLite; on PostgreSQL a plain sequence, and the sequencer after commit).
    fn append_audit(
        tx: &mut dyn Tx,
        audit: &NewAudit,
    ) -> impl Future<Output = StoreResult<AuditRecord>> + Send;

    /// A watch that changes after committed events or chunks.
    fn watch_changes(&self) -> ChangeWatch;
}

/// A write: statements run on the connection of a write transaction, returning the write's result.
/// [`crate::sql::SqlStore::write`] spells the bound out, so a closure passed to it gets its
/// higher-ranked signature.
pub(crate) trait WriteFn<R>:
    for<'c> FnOnce(&'c mut dyn Tx) -> BoxFuture<'c, StoreResult<R>> + Send + 'static
{
}

impl<R, F> WriteFn<R> for F where
    F: for<'c> FnOnce(&'c mut dyn Tx) -> BoxFuture<'c, StoreResult<R>> + Send + 'static
{
}
