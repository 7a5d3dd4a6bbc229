//! The storage trait the runtime talks to: no SQL crosses this boundary.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Durable state of an AIP runtime. Both backends implement it with one behaviour, proven by one
/// shared test suite. Hold it as `Arc<dyn Store>`.
///
/// Times are epoch milliseconds supplied by the caller, so leases and expiries are testable with an
/// injected clock.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// Round-trips to the database (for `/ready`).
    async fn ping(&self) -> StoreResult<()>;

    /// A watch that changes after events or chunks are committed (by this node, or on PostgreSQL by
    /// any node). Subscribe before querying, then wait on it, so `wait_ms` needs no busy loop.
    fn watch_changes(&self) -> ChangeWatch;

    /// An opaque cursor at `position` of a followed stream named by `scope` (for example an action's
    /// chunk stream as one reader sees it; spec 16.2, 20.2). HMAC-bound like the list cursors, so a
    /// client can neither forge it nor move it to another stream or reader, and every node of this
    /// store accepts it.
    fn stream_cursor(&self, scope: &[&str], position: (i64, i64)) -> String;

    /// The position of a cursor from [`Store::stream_cursor`] issued for `scope`: malformed →
    /// `InvalidCursor`; issued for another scope or store → `ForeignCursor`.
    fn decode_stream_cursor(&self, scope: &[&str], cursor: &str) -> StoreResult<(i64, i64)>;

    // ---- actions (spec 9.5, 11.3, 11.5) ----

    /// Durable admission in one transaction: idempotency reservation, action row, receipts, events
    /// and the queue entry. A duplicate key resolves per its [`CollisionBehavior`] without writing.
    async fn admit(&self, admission: Admission) -> StoreResult<AdmissionOutcome>;

    /// One action by id (the caller authorizes the reader against its tenant and principal).
    async fn get_action(&self, action_id: &str) -> StoreResult<Option<ActionRecord>>;

    /// Actions visible under `query`, oldest first, after `cursor`.
    async fn list_actions(
        &self,
        query: &ActionQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<ActionRecord>>;

    /// How many non-terminal actions match `query` (its `state` filter is ignored): a session's
    /// `active_action_count` (spec 10.4), counted under the reader's scope like a list.
    async fn count_active_actions(&self, query: &ActionQuery) -> StoreResult<u64>;

    /// Compare-and-set transition with its result, events and receipts in one transaction.
    /// Terminal states are final ([`crate::StoreError::Terminal`]); a mismatched current state is
    /// [`crate::StoreError::StateConflict`]; a fenced write from a stale lease is
    /// [`crate::StoreError::StaleLease`].
    async fn transition_action(&self, transition: Transition) -> StoreResult<ActionRecord>;

    /// The live reservation of `(scope, key)`, if any.
    async fn get_idempotency(
        &self,
        scope: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<IdempotencyRecord>>;

    /// Non-terminal actions admitted at or before `admitted_before_ms` that no job can still finish
    /// (no job; or its job is done, dead, or leased with attempts exhausted and the lease expired at
    /// `now_ms`): work a crash left unfinished. Jobs with a live or claimable lease are excluded.
    async fn list_unfinished_actions(
        &self,
        now_ms: i64,
        admitted_before_ms: i64,
        limit: Limit,
    ) -> StoreResult<Vec<ActionRecord>>;

    // ---- work queue and leases (spec 13.4, 17.3) ----

    /// Queues a job outside admission (re-queue on recovery, callbacks).
    async fn enqueue(&self, job: NewJob) -> StoreResult<()>;

    /// Atomically claims the oldest ready job of `queue` (or one whose lease expired) for
    /// `lease_ms`, issuing a fencing token greater than any before it for that job.
    async fn claim(
        &self,
        queue: &str,
        worker: &WorkerId,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<Lease>>;

    /// Claims one named job (for example the job a node just admitted for its own sync action, so
    /// that sync work is fenced and recoverable too); `None` when it is not claimable now (held by a
    /// live lease, not yet available, finished, or out of attempts).
    async fn claim_job(
        &self,
        job_id: &str,
        worker: &WorkerId,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<Lease>>;

    /// Extends a held lease to `now_ms + lease_ms`; returns the new expiry.
    async fn renew(&self, fence: &Fence, now_ms: i64, lease_ms: i64) -> StoreResult<i64>;

    /// Marks the job done.
    async fn complete_job(&self, fence: &Fence, now_ms: i64) -> StoreResult<()>;

    /// Fails an attempt: with `retry_at_ms` the job becomes ready again at that time (while attempts
    /// remain), else it is dead. Returns the job's new state.
    async fn fail_job(
        &self,
        fence: &Fence,
        now_ms: i64,
        retry_at_ms: Option<i64>,
        error: &str,
    ) -> StoreResult<JobState>;

    /// Gives the job back, claimable at once (graceful shutdown).
    async fn release_job(&self, fence: &Fence, now_ms: i64) -> StoreResult<()>;

    // ---- events (spec 16) ----

    /// Appends events outside another write; returns their sequences.
    async fn append_events(&self, events: Vec<NewEvent>) -> StoreResult<Vec<u64>>;

    /// Events visible under `query`, in sequence order, after `cursor` (opaque, bound to `query`).
    async fn list_events(
        &self,
        query: &EventQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<EventRecord>>;

    // ---- streaming chunks (spec 11.6) ----

    /// Appends a chunk: a new sequence must exceed the last; a retained duplicate is tolerated; a
    /// reused sequence with other content is [`crate::StoreError::ChunkConflict`]. Fenced when
    /// `fence` is set.
    async fn append_chunk(
        &self,
        chunk: NewChunk,
        fence: Option<&Fence>,
        now_ms: i64,
    ) -> StoreResult<ChunkAppend>;

    /// Appends several chunks in one transaction, in order, each under the rules of
    /// [`Store::append_chunk`]; all or nothing (one refused chunk writes none). Lets a handler that
    /// produces a burst of chunks pay one durable commit for it.
    async fn append_chunks(
        &self,
        chunks: Vec<NewChunk>,
        fence: Option<&Fence>,
        now_ms: i64,
    ) -> StoreResult<Vec<ChunkAppend>>;

    /// An action's chunks after `after` (exclusive), in order.
    async fn list_chunks(
        &self,
        action_id: &str,
        after: Option<u64>,
        limit: Limit,
    ) -> StoreResult<Vec<ChunkRecord>>;

    // ---- sessions and resume (spec 10) ----

    /// Creates a session, with its events.
    async fn create_session(
        &self,
        session: NewSession,
        events: Vec<NewEvent>,
    ) -> StoreResult<SessionRecord>;

    /// One session by id.
    async fn get_session(&self, session_id: &str) -> StoreResult<Option<SessionRecord>>;

    /// Sessions visible under `query`, oldest first, after `cursor`.
    async fn list_sessions(
        &self,
        query: &SessionQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<SessionRecord>>;

    /// Compare-and-set session transition, checked against the spec 10.3 state machine.
    async fn transition_session(&self, transition: SessionTransition)
    -> StoreResult<SessionRecord>;

    /// Stores a single-use resume token for a session. Only its SHA-256 hash is stored.
    async fn issue_resume_token(
        &self,
        session_id: &str,
        token: &str,
        expires_at_ms: i64,
        now_ms: i64,
    ) -> StoreResult<()>;

    /// Atomically consumes a resume token (spec 10.5 step 2) and, when given, stores its replacement
    /// in the same transaction. Returns the session; unknown, expired or used tokens are
    /// [`crate::StoreError::ResumeTokenInvalid`].
    async fn consume_resume_token(
        &self,
        token: &str,
        replacement: Option<(&str, i64)>,
        now_ms: i64,
    ) -> StoreResult<SessionRecord>;

    // ---- replay protection (spec 22.3) ----

    /// Durably claims a message id (or profile delivery id) within `scope` until `retain_until_ms`.
    async fn claim_message_id(
        &self,
        scope: &str,
        message_id: &str,
        now_ms: i64,
        retain_until_ms: i64,
    ) -> StoreResult<ReplayClaim>;

    // ---- receipts and audit (spec 18) ----

    /// Appends one receipt, checking it extends its chain.
    async fn append_receipt(&self, receipt: NewReceipt) -> StoreResult<ReceiptRecord>;

    /// A chain's receipts in order (at most `limit`).
    async fn list_receipts(&self, chain_id: &str, limit: Limit) -> StoreResult<Vec<ReceiptRecord>>;

    /// One receipt by id.
    async fn get_receipt(&self, receipt_id: &str) -> StoreResult<Option<ReceiptRecord>>;

    /// Appends an audit event (append-only: the schema refuses updates and deletes).
    async fn append_audit(&self, audit: NewAudit) -> StoreResult<AuditRecord>;

    /// Audit events visible under `query`, after `cursor`.
    async fn list_audit(
        &self,
        query: &AuditQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<AuditRecord>>;

    // ---- application records ----

    /// Inserts an application record; an existing `(collection, record_id)` is
    /// [`crate::StoreError::Duplicate`].
    async fn insert_record(&self, record: AppRecord) -> StoreResult<()>;

    /// A tenant's records of a collection, oldest first.
    async fn list_records(
        &self,
        collection: &str,
        tenant: &str,
        limit: Limit,
    ) -> StoreResult<Vec<AppRecord>>;

    /// How many records a tenant has in a collection.
    async fn count_records(&self, collection: &str, tenant: &str) -> StoreResult<u64>;

    // ---- housekeeping ----

    /// Removes expired replay claims, idempotency reservations and resume tokens.
    async fn purge_expired(&self, now_ms: i64) -> StoreResult<PurgeReport>;
}

/// Wakes readers after committed changes (see [`Store::watch_changes`]).
#[derive(Debug, Clone)]
pub struct ChangeWatch {
    rx: tokio::sync::watch::Receiver<u64>,
}

impl ChangeWatch {
    pub(crate) fn new(rx: tokio::sync::watch::Receiver<u64>) -> Self {
        ChangeWatch { rx }
    }

    /// Marks the current state as seen; call before the query whose emptiness you will wait on.
    pub fn mark_seen(&mut self) {
        self.rx.borrow_and_update();
    }

    /// Waits until something changed since the last [`ChangeWatch::mark_seen`] (or wait), at most
    /// `timeout`. Returns whether a change was seen. Bounded: never waits longer than `timeout`.
    pub async fn changed_within(&mut self, timeout: Duration) -> bool {
        matches!(
            tokio::time::timeout(timeout, self.rx.changed()).await,
            Ok(Ok(()))
        )
    }
}
