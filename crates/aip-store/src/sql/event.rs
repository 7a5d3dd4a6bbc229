//! [`EventStore`] in SQL: the event log (spec 16), streaming chunks (spec 11.6), the change watch
//! and stream cursors. How an event gets its sequence is the dialect's ([`Dialect::append_events`]).

use async_trait::async_trait;

use super::page::ListCursor;
use super::{Dialect, SqlStore, action, opt_part, same_json, to_i64, to_u64};
use crate::cursor::CursorKind;
use crate::db::{Json, Row, Stmt, Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::traits::EventStore;
use crate::watch::ChangeWatch;

#[async_trait]
impl<D: Dialect> EventStore for SqlStore<D> {
    fn watch_changes(&self) -> ChangeWatch {
        self.db.watch_changes()
    }

    fn stream_cursor(&self, scope: &[&str], position: (i64, i64)) -> String {
        self.key.encode(CursorKind::Stream, scope, position)
    }

    fn decode_stream_cursor(&self, scope: &[&str], cursor: &str) -> StoreResult<(i64, i64)> {
        self.key.decode(CursorKind::Stream, scope, cursor)
    }

    async fn append_events(&self, events: Vec<NewEvent>) -> StoreResult<Vec<u64>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        self.write(true, move |tx| {
            Box::pin(async move {
                let seqs = D::append_events(&mut *tx, &events).await?;
                Ok(seqs)
            })
        })
        .await
    }

    async fn list_events(
        &self,
        q: &EventQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<EventRecord>> {
        if q.kinds.len() > EventQuery::MAX_KINDS {
            return Err(StoreError::InvalidInput(
                "too many event kinds in one query",
            ));
        }
        let mut kinds = q.kinds.clone();
        kinds.sort();
        kinds.dedup();
        let mut scope = vec![
            q.tenant.clone(),
            opt_part(q.principal.as_deref()),
            opt_part(q.action_id.as_deref()),
            opt_part(q.session_id.as_deref()),
        ];
        // A cursor is bound to its kinds filter too (cursors of unfiltered queries are unchanged).
        if !kinds.is_empty() {
            scope.push(format!("kinds\n{}", kinds.join("\n")));
        }
        let page = ListCursor::open(&self.key, CursorKind::Events, scope, cursor)?;
        // A cursor before the purge horizon would silently skip purged events (spec 16.2).
        if page.after > 0
            && super::housekeeping::mark(self, super::housekeeping::EVENTS_PURGED_THROUGH)
                .await?
                .is_some_and(|horizon| page.after < horizon)
        {
            return Err(StoreError::CursorExpired);
        }
        let kind_filter = if kinds.is_empty() {
            String::new()
        } else {
            let slots: Vec<String> = (0..kinds.len()).map(|i| format!("${}", i + 7)).collect();
            format!(" AND kind IN ({})", slots.join(", "))
        };
        // Listed by commit-ordered position only (see the dialects' `append_events`), so an event
        // committed later can never slip in behind a cursor.
        let mut statement = query(list_events_sql(q.session_id.is_some(), &kind_filter))
            .bind(&q.tenant)
            .bind(q.principal.as_deref())
            .bind(q.action_id.as_deref())
            .bind(q.session_id.as_deref())
            .bind(page.after)
            .bind(limit.as_i64());
        for kind in &kinds {
            statement = statement.bind(kind.as_str());
        }
        let found = statement.fetch_all(self.reader()).await?;
        page.page(&found, "pos", event_record)
    }

    async fn append_chunk(
        &self,
        chunk: NewChunk,
        fence: Option<&Fence>,
        now_ms: i64,
    ) -> StoreResult<ChunkAppend> {
        let mut appended = self.append_chunks(vec![chunk], fence, now_ms).await?;
        appended.pop().ok_or(StoreError::NotFound { kind: "chunk" })
    }

    async fn append_chunks(
        &self,
        chunks: Vec<NewChunk>,
        fence: Option<&Fence>,
        now_ms: i64,
    ) -> StoreResult<Vec<ChunkAppend>> {
        if chunks.is_empty() {
            return Ok(Vec::new());
        }
        let fence = fence.cloned();
        self.write(true, move |tx| {
            Box::pin(async move {
                if let Some(fence) = fence {
                    super::job::tx_check_fence::<D>(&mut *tx, &fence, now_ms).await?;
                }
                let mut appended = Vec::with_capacity(chunks.len());
                let mut checked: Option<(&str, &str)> = None;
                for chunk in &chunks {
                    let key = (chunk.tenant.as_str(), chunk.action_id.as_str());
                    if checked != Some(key) {
                        if action::tx_get_action::<D>(&mut *tx, key.0, key.1)
                            .await?
                            .is_none()
                        {
                            return Err(StoreError::NotFound { kind: "action" });
                        }
                        checked = Some(key);
                    }
                    appended.push(tx_append_chunk(&mut *tx, chunk).await?);
                }
                Ok(appended)
            })
        })
        .await
    }

    async fn list_chunks(
        &self,
        tenant: &str,
        action_id: &str,
        after: Option<u64>,
        limit: Limit,
    ) -> StoreResult<Vec<ChunkRecord>> {
        let after = match after {
            Some(a) => to_i64(a, "chunk sequence too large")?,
            None => -1,
        };
        let found = query(
            "SELECT action_id, seq, kind, data, created_at_ms FROM aip_chunks \
             WHERE tenant = $4 AND action_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .bind(action_id)
        .bind(after)
        .bind(limit.as_i64())
        .bind(tenant)
        .fetch_all(self.reader())
        .await?;
        // Past a cursor, nothing at all for an action that ended before the chunk purge mark: its
        // chunks were purged, and an empty page would read as "no more".
        if after >= 0 && found.is_empty() && chunks_purged(self, tenant, action_id).await? {
            return Err(StoreError::CursorExpired);
        }
        found.iter().map(chunk_record).collect()
    }
}

/// Whether `action_id`'s chunks were purged: it ended before the purge mark and has none left.
async fn chunks_purged<D: Dialect>(
    store: &SqlStore<D>,
    tenant: &str,
    action_id: &str,
) -> StoreResult<bool> {
    let Some(mark) =
        super::housekeeping::mark(store, super::housekeeping::CHUNKS_PURGED_BEFORE).await?
    else {
        return Ok(false);
    };
    let row = query(
            "SELECT a.state, a.updated_at_ms, CAST(CASE WHEN EXISTS (SELECT 1 FROM aip_chunks c WHERE c.tenant = a.tenant \
             AND c.action_id = a.action_id) THEN 1 ELSE 0 END AS BIGINT) AS has_chunks FROM aip_actions a WHERE a.tenant = $1 AND a.action_id = $2",
        )
        .bind(tenant)
        .bind(action_id)
        .fetch_optional(store.reader())
        .await?;
    let Some(row) = row else { return Ok(false) };
    let state: String = row.try_get("state")?;
    let updated: i64 = row.try_get("updated_at_ms")?;
    let has_chunks: i64 = row.try_get("has_chunks")?;
    Ok(has_chunks == 0
        && updated < mark
        && ActionState::parse(&state).is_some_and(ActionState::is_terminal))
}

/// Binds the nine `aip_events` insert columns of each event, in row order (both dialects'
/// multi-row event insert).
pub(crate) fn bind_event_rows<'q>(mut q: Stmt<'q>, events: &'q [NewEvent]) -> Stmt<'q> {
    for e in events {
        q = q
            .bind(&e.event_id)
            .bind(&e.kind)
            .bind(&e.tenant)
            .bind(e.principal.as_deref())
            .bind(e.session_id.as_deref())
            .bind(e.action_id.as_deref())
            .bind(e.correlation_id.as_deref())
            .bind(e.occurred_at_ms)
            .bind(Json(&e.data));
    }
    q
}

/// One chunk inside a write: a new sequence must exceed the action's last; a retained duplicate is
/// reported as such; other content under a used sequence is a conflict.
async fn tx_append_chunk(tx: &mut dyn Tx, chunk: &NewChunk) -> StoreResult<ChunkAppend> {
    let seq = to_i64(chunk.sequence, "chunk sequence too large")?;
    let existing = query(
        "SELECT kind, data FROM aip_chunks WHERE tenant = $3 AND action_id = $1 AND seq = $2",
    )
    .bind(&chunk.action_id)
    .bind(seq)
    .bind(&chunk.tenant)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(row) = existing {
        let kind: String = row.try_get("kind")?;
        let data = row.json("data")?;
        return if kind == chunk.kind && same_json(&data, &chunk.data) {
            Ok(ChunkAppend::Duplicate)
        } else {
            Err(StoreError::ChunkConflict {
                sequence: chunk.sequence,
            })
        };
    }
    let max = query("SELECT MAX(seq) AS last FROM aip_chunks WHERE tenant = $2 AND action_id = $1")
        .bind(&chunk.action_id)
        .bind(&chunk.tenant)
        .fetch_one(&mut *tx)
        .await?;
    let last: Option<i64> = max.try_get("last")?;
    if let Some(last) = last
        && seq <= last
    {
        return Err(StoreError::ChunkOutOfOrder {
            sequence: chunk.sequence,
            last: to_u64(last, "chunk sequence")?,
        });
    }
    let res = query(
        "INSERT INTO aip_chunks (action_id, seq, kind, data, created_at_ms, tenant) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&chunk.action_id)
    .bind(seq)
    .bind(&chunk.kind)
    .bind(Json(&chunk.data))
    .bind(chunk.created_at_ms)
    .bind(&chunk.tenant)
    .execute(&mut *tx)
    .await;
    match res {
        Ok(_) => Ok(ChunkAppend::Inserted),
        // A concurrent writer stored this sequence first; let the caller retry to learn whether it
        // was the same chunk.
        Err(err) if err.is_unique_violation() => {
            Err(StoreError::Unavailable("concurrent chunk append".into()))
        }
        Err(err) => Err(err.into()),
    }
}

fn event_record(r: &Row) -> StoreResult<EventRecord> {
    Ok(EventRecord {
        sequence: to_u64(r.try_get("seq")?, "event sequence")?,
        event_id: r.try_get("event_id")?,
        kind: r.try_get("kind")?,
        tenant: r.try_get("tenant")?,
        principal: r.try_get("principal")?,
        session_id: r.try_get("session_id")?,
        action_id: r.try_get("action_id")?,
        correlation_id: r.try_get("correlation_id")?,
        occurred_at_ms: r.try_get("occurred_at_ms")?,
        data: r.json("data")?,
    })
}

fn chunk_record(r: &Row) -> StoreResult<ChunkRecord> {
    Ok(ChunkRecord {
        action_id: r.try_get("action_id")?,
        sequence: to_u64(r.try_get("seq")?, "chunk sequence")?,
        kind: r.try_get("kind")?,
        data: r.json("data")?,
        created_at_ms: r.try_get("created_at_ms")?,
    })
}

/// The event listing (parameters: tenant, principal, action, session, after, limit, then the kinds
/// of `kind_filter`); the session term only when `session` (see [`super::session_filter`]).
pub(super) fn list_events_sql(session: bool, kind_filter: &str) -> String {
    let session = super::session_filter(4, session);
    format!(
        "SELECT pos, seq, event_id, kind, tenant, principal, session_id, action_id, correlation_id, occurred_at_ms, data \
         FROM aip_events WHERE tenant = $1 \
         AND (CAST($2 AS TEXT) IS NULL OR principal = $2) \
         AND (CAST($3 AS TEXT) IS NULL OR action_id = $3) \
         AND {session}{kind_filter} \
         AND pos > $5 ORDER BY pos LIMIT $6"
    )
}
