//! Events (spec 16), streaming chunks (spec 11.6), the change watch and stream cursors.

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;
use crate::watch::ChangeWatch;

/// What readers follow: the event log, an action's chunks, a watch that wakes them after commits,
/// and the opaque cursors that resume a followed stream on any node.
#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// A watch that changes after events or chunks are committed (by this node, or on PostgreSQL by
    /// any node). Subscribe before querying, then wait on it, so `wait_ms` needs no busy loop.
    fn watch_changes(&self) -> ChangeWatch;

    /// An opaque cursor at `position` of a followed stream named by `scope` (for example an action's
    /// chunk stream as one reader sees it; spec 16.2, 20.2). HMAC-bound like the list cursors, so a
    /// client can neither forge it nor move it to another stream or reader, and every node of this
    /// store accepts it.
    fn stream_cursor(&self, scope: &[&str], position: (i64, i64)) -> String;

    /// The position of a cursor from [`EventStore::stream_cursor`] issued for `scope`: malformed →
    /// `InvalidCursor`; issued for another scope or store → `ForeignCursor`.
    fn decode_stream_cursor(&self, scope: &[&str], cursor: &str) -> StoreResult<(i64, i64)>;

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
    /// [`EventStore::append_chunk`]; all or nothing (one refused chunk writes none). Lets a handler
    /// that produces a burst of chunks pay one durable commit for it.
    async fn append_chunks(
        &self,
        chunks: Vec<NewChunk>,
        fence: Option<&Fence>,
        now_ms: i64,
    ) -> StoreResult<Vec<ChunkAppend>>;

    /// The chunks of `tenant`'s action after `after` (exclusive), in order.
    async fn list_chunks(
        &self,
        tenant: &str,
        action_id: &str,
        after: Option<u64>,
        limit: Limit,
    ) -> StoreResult<Vec<ChunkRecord>>;
}
