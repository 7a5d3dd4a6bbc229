//! [`SessionStore`] in SQL: sessions under the spec 10.3 state machine and their resume tokens.

use async_trait::async_trait;

use super::page::ListCursor;
use super::{Dialect, SqlStore, opt_part, secret_hash, tx_get_locked};
use crate::cursor::CursorKind;
use crate::db::{Json, Row, Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::traits::SessionStore;

/// One session of a tenant by id.
const SELECT_SESSION: &str = "SELECT session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data \
     FROM aip_sessions WHERE tenant = $1 AND session_id = $2";

/// One session by id alone, for writes: their callers read it through [`SELECT_SESSION`] first.
const SELECT_SESSION_BY_ID: &str = "SELECT session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data \
     FROM aip_sessions WHERE session_id = $1";

/// Stores a resume token's hash.
const INSERT_RESUME_TOKEN: &str = "INSERT INTO aip_resume_tokens (token_hash, session_id, created_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4)";

// The bound sits on the method: `Dialect` is crate-private and `SqlStore` is not.
impl<D> SqlStore<D> {
    /// One session as the database has it now.
    async fn read_session(
        &self,
        tenant: &str,
        session_id: &str,
    ) -> StoreResult<Option<SessionRecord>>
    where
        D: Dialect,
    {
        let row = query(SELECT_SESSION)
            .bind(tenant)
            .bind(session_id)
            .fetch_optional(self.reader())
            .await?;
        row.as_ref().map(session_record).transpose()
    }
}

#[async_trait]
impl<D: Dialect> SessionStore for SqlStore<D> {
    async fn create_session(
        &self,
        s: NewSession,
        events: Vec<NewEvent>,
    ) -> StoreResult<SessionRecord> {
        self.write(true, move |tx| {
            Box::pin(async move {
                let row = query(
                    "INSERT INTO aip_sessions (session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data) \
                     VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8) \
                     RETURNING session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data",
                )
                .bind(&s.session_id)
                .bind(&s.tenant)
                .bind(&s.principal)
                .bind(s.peer.as_deref())
                .bind(s.state.as_str())
                .bind(s.created_at_ms)
                .bind(s.expires_at_ms)
                .bind(Json(&s.data))
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| e.or_duplicate("session"))?;
                let record = session_record(&row)?;
                D::append_events(&mut *tx, &events).await?;
                Ok(record)
            })
        })
        .await
    }

    async fn get_session(
        &self,
        tenant: &str,
        session_id: &str,
    ) -> StoreResult<Option<SessionRecord>> {
        let Some(cache) = self.dialect().session_cache() else {
            return self.read_session(tenant, session_id).await;
        };
        // Session ids are unique across tenants: a cached record of another tenant is an answer
        // (not found), never a reason to read again.
        if let Some(found) = cache.get(session_id) {
            return Ok((found.tenant == tenant).then_some(found));
        }
        let generation = cache.generation();
        let record = self.read_session(tenant, session_id).await?;
        if let Some(record) = &record {
            cache.keep(generation, record);
        }
        Ok(record)
    }

    async fn list_sessions(
        &self,
        q: &SessionQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<SessionRecord>> {
        let scope = vec![
            q.tenant.clone(),
            opt_part(q.principal.as_deref()),
            opt_part(q.state.map(|s| s.as_str())),
        ];
        let page = ListCursor::open(&self.key, CursorKind::Sessions, scope, cursor)?;
        let found = query(
            "SELECT seq, session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data \
             FROM aip_sessions WHERE tenant = $1 \
             AND (CAST($2 AS TEXT) IS NULL OR principal = $2) \
             AND (CAST($3 AS TEXT) IS NULL OR state = $3) \
             AND seq > $4 ORDER BY seq LIMIT $5",
        )
        .bind(&q.tenant)
        .bind(q.principal.as_deref())
        .bind(q.state.map(|s| s.as_str()))
        .bind(page.after)
        .bind(limit.as_i64())
        .fetch_all(self.reader())
        .await?;
        page.page(&found, "seq", session_record)
    }

    async fn transition_session(&self, t: SessionTransition) -> StoreResult<SessionRecord> {
        self.write(true, move |tx| {
            Box::pin(async move {
                let current = tx_get_session::<D>(&mut *tx, &t.session_id)
                    .await?
                    .ok_or(StoreError::NotFound { kind: "session" })?;
                if current.state.is_terminal() {
                    return Err(StoreError::Terminal {
                        state: current.state.as_str().to_owned(),
                    });
                }
                if !t.from.contains(&current.state) {
                    return Err(StoreError::StateConflict {
                        actual: current.state.as_str().to_owned(),
                    });
                }
                if !current.state.can_transition_to(t.to) {
                    return Err(StoreError::InvalidTransition {
                        from: current.state.as_str().to_owned(),
                        to: t.to.as_str().to_owned(),
                    });
                }
                let row = query(
                    "UPDATE aip_sessions SET state = $2, data = COALESCE($3, data), updated_at_ms = $4 \
                     WHERE session_id = $1 AND state = $5 \
                     RETURNING session_id, tenant, principal, peer, state, created_at_ms, updated_at_ms, expires_at_ms, data",
                )
                .bind(&t.session_id)
                .bind(t.to.as_str())
                .bind(t.data.as_ref().map(Json))
                .bind(t.now_ms)
                .bind(current.state.as_str())
                .fetch_optional(&mut *tx)
                .await?
                .ok_or_else(|| StoreError::StateConflict {
                    actual: current.state.as_str().to_owned(),
                })?;
                let record = session_record(&row)?;
                D::append_events(&mut *tx, &t.events).await?;
                Ok(record)
            })
        })
        .await
    }

    async fn issue_resume_token(
        &self,
        session_id: &str,
        token: &str,
        expires_at_ms: i64,
        now_ms: i64,
    ) -> StoreResult<()> {
        if token.is_empty() || expires_at_ms <= now_ms {
            return Err(StoreError::InvalidInput(
                "resume token must be non-empty and expire in the future",
            ));
        }
        let session_id = session_id.to_owned();
        let token = token.to_owned();
        self.write(false, move |tx| {
            Box::pin(async move {
                if tx_get_session::<D>(&mut *tx, &session_id).await?.is_none() {
                    return Err(StoreError::NotFound { kind: "session" });
                }
                query(INSERT_RESUME_TOKEN)
                    .bind(secret_hash(&token))
                    .bind(session_id)
                    .bind(now_ms)
                    .bind(expires_at_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.or_duplicate("resume token"))?;
                Ok(())
            })
        })
        .await
    }

    async fn consume_resume_token(
        &self,
        session_id: &str,
        token: &str,
        replacement: Option<(&str, i64)>,
        now_ms: i64,
    ) -> StoreResult<SessionRecord> {
        let session_id = session_id.to_owned();
        let token = token.to_owned();
        let replacement = replacement.map(|(t, e)| (t.to_owned(), e));
        self.write(false, move |tx| {
            Box::pin(async move {
                // The conditional update is the atomic consume: of two concurrent resumes, one
                // updates the row and the other finds it consumed. A token of another session
                // matches no row, so it stays unused.
                query(
                    "UPDATE aip_resume_tokens SET consumed_at_ms = $2 \
                     WHERE token_hash = $1 AND session_id = $3 AND consumed_at_ms IS NULL AND expires_at_ms > $2 \
                     RETURNING session_id",
                )
                .bind(secret_hash(&token))
                .bind(now_ms)
                .bind(&session_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::ResumeTokenInvalid)?;
                if let Some((next, expires_at_ms)) = replacement {
                    if next.is_empty() || expires_at_ms <= now_ms || next == token {
                        return Err(StoreError::InvalidInput(
                            "replacement resume token must be new and expire in the future",
                        ));
                    }
                    query(INSERT_RESUME_TOKEN)
                        .bind(secret_hash(&next))
                        .bind(&session_id)
                        .bind(now_ms)
                        .bind(expires_at_ms)
                        .execute(&mut *tx)
                        .await?;
                }
                let session = tx_get_session::<D>(&mut *tx, &session_id)
                    .await?
                    .ok_or_else(|| StoreError::Corrupt("resume token without its session".into()))?;
                Ok(session)
            })
        })
        .await
    }
}

/// One session by id inside a write, its row locked where the dialect locks rows.
async fn tx_get_session<D: Dialect>(
    tx: &mut dyn Tx,
    session_id: &str,
) -> StoreResult<Option<SessionRecord>> {
    tx_get_locked::<D, _>(tx, SELECT_SESSION_BY_ID, &[session_id], session_record).await
}

fn session_record(r: &Row) -> StoreResult<SessionRecord> {
    let state: String = r.try_get("state")?;
    Ok(SessionRecord {
        session_id: r.try_get("session_id")?,
        tenant: r.try_get("tenant")?,
        principal: r.try_get("principal")?,
        peer: r.try_get("peer")?,
        state: SessionState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("session state {state}")))?,
        created_at_ms: r.try_get("created_at_ms")?,
        updated_at_ms: r.try_get("updated_at_ms")?,
        expires_at_ms: r.try_get("expires_at_ms")?,
        data: r.json("data")?,
    })
}
