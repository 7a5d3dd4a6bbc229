//! Streaming actions (spec 11.6): the handler-side chunk sink, and the transport-independent follower
//! that replays an action's chunks and final result from the store (spec 20.2-20.3).
//!
//! Every chunk is committed with its sequence before anyone can read it: followers only ever read the
//! store, so any node can serve any stream and a reconnect resumes with no gap and no duplicate.

use std::sync::Arc;
use std::time::Duration;

use aip_core::{ActionId, ActionResult, ErrorCode, StreamChunk, StreamChunkKind};
use aip_store::{Fence, Limit, NewChunk, Store, StoreError};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::action::result;
use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::handler::{HandlerError, HandlerOutput};
use crate::runtime::Runtime;

/// Where a streaming handler emits its chunks. Outside streaming mode it is inert (emits return `None`),
/// so a handler can serve several modes with one body.
#[derive(Clone, Default)]
pub struct ChunkSink {
    inner: Option<Arc<SinkInner>>,
}

struct SinkInner {
    store: Arc<dyn Store>,
    tenant: String,
    action_id: String,
    fence: Option<Fence>,
    state: Mutex<SinkState>,
}

#[derive(Default)]
struct SinkState {
    last: u64,
    done: bool,
}

impl std::fmt::Debug for ChunkSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkSink")
            .field("streaming", &self.inner.is_some())
            .finish_non_exhaustive()
    }
}

impl ChunkSink {
    /// A sink persisting chunks of `action_id` (fenced by the worker's lease when set).
    pub(crate) fn streaming(
        store: Arc<dyn Store>,
        record: &aip_store::ActionRecord,
        fence: Option<Fence>,
    ) -> Self {
        Self {
            inner: Some(Arc::new(SinkInner {
                store,
                tenant: record.tenant.clone(),
                action_id: record.action_id.clone(),
                fence,
                state: Mutex::new(SinkState::default()),
            })),
        }
    }

    /// Whether chunks emitted here reach a stream.
    pub fn is_streaming(&self) -> bool {
        self.inner.is_some()
    }

    /// Persists one chunk with the next sequence and returns that sequence (spec 11.6). After `done`
    /// nothing more may be emitted. A re-dispatched handler that re-emits the same chunks is tolerated
    /// (the store reports them as retained duplicates); different content under a used sequence fails.
    pub async fn emit(
        &self,
        kind: StreamChunkKind,
        data: Option<Value>,
    ) -> Result<Option<u64>, HandlerError> {
        self.emit_batch(vec![(kind, data)]).await
    }

    /// Persists a burst of chunks, in order, with consecutive sequences and one durable write per
    /// [`MAX_CHUNK_BATCH`] chunks; returns the last sequence. Nothing is readable before its write
    /// commits, and a refused write persists none of its chunks. `done` may only come last.
    pub async fn emit_batch(
        &self,
        chunks: Vec<(StreamChunkKind, Option<Value>)>,
    ) -> Result<Option<u64>, HandlerError> {
        let Some(inner) = &self.inner else {
            return Ok(None);
        };
        let closed = || HandlerError::Failed {
            code: ErrorCode::StreamClosed.as_str().into(),
            message: "a chunk was emitted after `done`".into(),
            retryable: false,
        };
        let mut state = inner.state.lock().await;
        if state.done
            || chunks
                .iter()
                .rev()
                .skip(1)
                .any(|(kind, _)| *kind == StreamChunkKind::Done)
        {
            return Err(closed());
        }
        let mut chunks = chunks.into_iter().peekable();
        while chunks.peek().is_some() {
            let mut sequence = state.last;
            let mut batch = Vec::new();
            let mut done = false;
            for (kind, data) in chunks.by_ref().take(MAX_CHUNK_BATCH) {
                sequence += 1;
                let chunk = StreamChunk {
                    action_id: ActionId::new(inner.action_id.clone()),
                    sequence,
                    kind,
                    data,
                    part: None,
                };
                let value = serde_json::to_value(&chunk).map_err(|e| HandlerError::Failed {
                    code: ErrorCode::StreamEncode.as_str().into(),
                    message: e.to_string(),
                    retryable: false,
                })?;
                done = kind == StreamChunkKind::Done;
                batch.push(NewChunk {
                    tenant: inner.tenant.clone(),
                    action_id: inner.action_id.clone(),
                    sequence,
                    kind: kind.as_str().to_owned(),
                    data: value,
                    created_at_ms: now_ms(),
                });
            }
            match inner
                .store
                .append_chunks(batch, inner.fence.as_ref(), now_ms())
                .await
            {
                // Inserted, or retained duplicates of a re-dispatched handler (tolerated, spec 11.6).
                Ok(_) => {}
                Err(StoreError::StaleLease) => {
                    return Err(HandlerError::Failed {
                        code: ErrorCode::StreamLeaseLost.as_str().into(),
                        message: "another worker owns this action now".into(),
                        retryable: true,
                    });
                }
                Err(err) => {
                    return Err(HandlerError::Failed {
                        code: ErrorCode::StreamPersistFailed.as_str().into(),
                        message: err.to_string(),
                        retryable: err.is_retryable(),
                    });
                }
            }
            state.last = sequence;
            state.done = done;
        }
        Ok(Some(state.last))
    }

    /// Emits a `data` chunk.
    pub async fn data(&self, data: Value) -> Result<Option<u64>, HandlerError> {
        self.emit(StreamChunkKind::Data, Some(data)).await
    }

    /// Emits a `progress` chunk.
    pub async fn progress(&self, data: Value) -> Result<Option<u64>, HandlerError> {
        self.emit(StreamChunkKind::Progress, Some(data)).await
    }

    /// Ends the chunk stream after the handler returned: `done` on success, an `error` chunk otherwise,
    /// so a stream never closes silently (spec 11.6). Best effort: the final result stays authoritative.
    pub(crate) async fn finish(&self, outcome: &Result<HandlerOutput, HandlerError>) {
        let Some(inner) = &self.inner else {
            return;
        };
        if inner.state.lock().await.done {
            return;
        }
        let (kind, data) = match outcome {
            Ok(_) => (StreamChunkKind::Done, None),
            Err(err) => (
                StreamChunkKind::Error,
                Some(json!({ "code": handler_error_code(err), "message": err.to_string() })),
            ),
        };
        if let Err(err) = self.emit(kind, data).await {
            tracing::warn!(action = %inner.action_id, error = %err, "closing chunk not persisted");
        }
    }
}

fn handler_error_code(err: &HandlerError) -> String {
    match err {
        HandlerError::Cancelled => ErrorCode::Cancelled.as_str().into(),
        HandlerError::Failed { code, .. } => code.clone(),
        HandlerError::UncertainOutcome(_) => ErrorCode::UncertainOutcome.as_str().into(),
        HandlerError::DeadlineExceeded => ErrorCode::DeadlineExceeded.as_str().into(),
    }
}

/// One item of an action stream as a follower sees it, in store order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamItem {
    /// A persisted chunk (its `sequence` is the resume position).
    Chunk(StreamChunk),
    /// The authoritative final result; nothing follows it.
    Result(Box<ActionResult>),
    /// Nothing happened for one heartbeat interval; the stream is still alive (spec 11.9).
    Idle,
}

/// Reads an action's stream from the store, resuming after a chunk sequence. Pull-based: it reads the
/// store only when the consumer asks for more, so a slow consumer holds at most one page in memory.
#[derive(Debug)]
pub struct ActionFollower {
    runtime: Arc<Runtime>,
    caller: Caller,
    action_id: String,
    after: u64,
    page: std::collections::VecDeque<StreamChunk>,
    finished: bool,
    page_size: u32,
    idle: Duration,
}

impl ActionFollower {
    /// The next item: a chunk, the final result (then `None` forever), or `Idle` after `idle` without
    /// news. Authorization is re-checked on every store read (spec 20.2 "preserve authorization").
    pub async fn next(&mut self) -> Result<Option<StreamItem>, RuntimeError> {
        loop {
            if let Some(chunk) = self.page.pop_front() {
                self.after = chunk.sequence;
                return Ok(Some(StreamItem::Chunk(chunk)));
            }
            if self.finished {
                return Ok(None);
            }
            let mut watch = self.runtime.store().watch_changes();
            watch.mark_seen();
            // Read the state first: a terminal state commits after the last chunk, so the chunks read
            // after it are complete.
            let record = self
                .runtime
                .visible_action(&self.caller, &self.action_id)
                .await?;
            let limit = Limit::new(self.page_size).map_err(RuntimeError::Storage)?;
            let chunks = self
                .runtime
                .store()
                .list_chunks(&record.tenant, &self.action_id, Some(self.after), limit)
                .await?;
            let withheld = self
                .runtime
                .withheld_output(&self.caller, &record)
                .is_some();
            for chunk in chunks {
                self.page.push_back(parse_chunk(chunk.data, withheld)?);
            }
            if !self.page.is_empty() {
                continue;
            }
            if record.state.is_terminal() {
                self.finished = true;
                let result = match self.runtime.withheld_output(&self.caller, &record) {
                    Some(_) => result::stored(&record)?.map(crate::read::withhold),
                    None => result::stored(&record)?,
                };
                return Ok(result.map(|r| StreamItem::Result(Box::new(r))));
            }
            if !watch.changed_within(self.idle).await {
                return Ok(Some(StreamItem::Idle));
            }
        }
    }

    /// The last chunk sequence handed out (the resume position).
    pub fn position(&self) -> u64 {
        self.after
    }
}

/// Where a reader stands in one action's stream (what a stream cursor encodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamPosition {
    /// After chunk `n` (0 = after the ack, before the first chunk).
    After(u64),
    /// After the final result: only the (idempotent) result is left to repeat.
    End,
}

impl Runtime {
    /// The opaque cursor of `position` in `action_id`'s stream as `caller` reads it (spec 16.2): bound
    /// by the store's cursor key to this reader and this action, so it resumes on any node and after
    /// a restart, and a cursor of another stream or reader, or a forged one, is refused.
    pub fn stream_cursor(
        &self,
        caller: &Caller,
        action_id: &str,
        position: StreamPosition,
    ) -> String {
        let position = match position {
            StreamPosition::After(n) => (0, i64::try_from(n).unwrap_or(i64::MAX)),
            StreamPosition::End => (1, 0),
        };
        self.store()
            .stream_cursor(&stream_scope(caller, action_id), position)
    }

    /// The position a stream cursor stands for; `InvalidCursor` when it is malformed, forged, or
    /// was issued for another action or reader.
    pub fn parse_stream_cursor(
        &self,
        caller: &Caller,
        action_id: &str,
        cursor: &str,
    ) -> Result<StreamPosition, RuntimeError> {
        let scope = stream_scope(caller, action_id);
        match self.store().decode_stream_cursor(&scope, cursor)? {
            (0, n) => Ok(StreamPosition::After(
                u64::try_from(n).map_err(|_| RuntimeError::InvalidCursor)?,
            )),
            (1, 0) => Ok(StreamPosition::End),
            _ => Err(RuntimeError::InvalidCursor),
        }
    }

    /// Follows `action_id`'s chunk stream after chunk `after` (0 = from the start), as `caller` may see
    /// it. `NotFound` when the caller cannot read the action. `InvalidCursor` when `after` lies beyond
    /// the action's persisted chunks of a finished stream (a cursor this stream never issued).
    pub async fn follow_action(
        self: &Arc<Self>,
        caller: &Caller,
        action_id: &str,
        after: u64,
        idle: Duration,
    ) -> Result<ActionFollower, RuntimeError> {
        let record = self.visible_action(caller, action_id).await?;
        if after > 0 {
            let limit = Limit::new(1).map_err(RuntimeError::Storage)?;
            let at = self
                .store()
                .list_chunks(&record.tenant, action_id, Some(after - 1), limit)
                .await?;
            if at.first().map(|c| c.sequence) != Some(after) {
                return Err(RuntimeError::InvalidCursor);
            }
        }
        Ok(ActionFollower {
            runtime: Arc::clone(self),
            caller: caller.clone(),
            action_id: record.action_id,
            after,
            page: std::collections::VecDeque::new(),
            finished: false,
            page_size: 256,
            idle,
        })
    }
}

/// One page of an action's persisted chunks (`GET /aip/v1/actions/{id}/chunks`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChunkPage {
    /// The action.
    pub action_id: String,
    /// Chunks after the cursor, in sequence order.
    pub chunks: Vec<StreamChunk>,
    /// Continue after the last chunk of this page (the cursor passed in, or the start, when empty).
    /// The same opaque, reader-bound cursors as SSE event ids.
    pub cursor: String,
    /// Whether the action was terminal before this page was read: then an empty page is the end.
    pub terminal: bool,
}

impl Runtime {
    /// A page of `action_id`'s chunks after a stream cursor (from the start without one), as `caller`
    /// may read them (spec 16.2-16.4: authorized reader, opaque cursor, 1..=1000 limit).
    pub async fn action_chunks(
        &self,
        caller: &Caller,
        action_id: &str,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<ChunkPage, RuntimeError> {
        let limit = self.limit(limit)?;
        // The state first: a terminal state commits after the last chunk.
        let record = self.visible_action(caller, action_id).await?;
        let position = match cursor {
            Some(cursor) => self.parse_stream_cursor(caller, &record.action_id, cursor)?,
            None => StreamPosition::After(0),
        };
        let StreamPosition::After(after) = position else {
            // After the result nothing follows.
            return Ok(ChunkPage {
                action_id: record.action_id,
                chunks: Vec::new(),
                cursor: cursor.map(str::to_owned).unwrap_or_default(),
                terminal: true,
            });
        };
        let chunks = self.chunks_after(caller, &record, after, limit).await?;
        let last = chunks.last().map_or(after, |c| c.sequence);
        Ok(ChunkPage {
            cursor: self.stream_cursor(caller, &record.action_id, StreamPosition::After(last)),
            action_id: record.action_id,
            chunks,
            terminal: record.state.is_terminal(),
        })
    }

    /// The first chunks of an action the caller may read (`include_chunks`), at most `limit` (the
    /// configured maximum list limit without one).
    pub async fn first_chunks(
        &self,
        caller: &Caller,
        action_id: &str,
        limit: Option<u32>,
    ) -> Result<Vec<StreamChunk>, RuntimeError> {
        let limit = self.limit(Some(limit.unwrap_or(self.config().max_list_limit)))?;
        let record = self.visible_action(caller, action_id).await?;
        self.chunks_after(caller, &record, 0, limit).await
    }

    async fn chunks_after(
        &self,
        caller: &Caller,
        record: &aip_store::ActionRecord,
        after: u64,
        limit: Limit,
    ) -> Result<Vec<StreamChunk>, RuntimeError> {
        let withheld = self.withheld_output(caller, record).is_some();
        self.store()
            .list_chunks(&record.tenant, &record.action_id, Some(after), limit)
            .await?
            .into_iter()
            .map(|chunk| parse_chunk(chunk.data, withheld))
            .collect()
    }
}

/// A stored chunk; `withheld` (spec 9.6): without the action's data it carries (its `data` and
/// `part`), its kind and sequence stay, so a reader still follows the stream to its end.
fn parse_chunk(stored: serde_json::Value, withheld: bool) -> Result<StreamChunk, RuntimeError> {
    let mut chunk = serde_json::from_value::<StreamChunk>(stored)
        .map_err(|e| RuntimeError::Storage(StoreError::Corrupt(e.to_string())))?;
    if withheld && !matches!(chunk.kind, StreamChunkKind::Error) {
        chunk.data = None;
        chunk.part = None;
    }
    Ok(chunk)
}

/// The cursor scope of one reader's view of one action stream.
fn stream_scope<'a>(caller: &'a Caller, action_id: &'a str) -> [&'a str; 4] {
    [
        "action",
        caller.tenant.as_str(),
        caller.id.as_str(),
        action_id,
    ]
}

/// Most chunks [`ChunkSink::emit_batch`] persists in one write.
pub const MAX_CHUNK_BATCH: usize = 256;
