//! Sessions and their resume tokens (spec 10).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Sessions under the spec 10.3 state machine, and the single-use tokens that resume them.
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Creates a session, with its events.
    async fn create_session(
        &self,
        session: NewSession,
        events: Vec<NewEvent>,
    ) -> StoreResult<SessionRecord>;

    /// One session of `tenant` by id: the tenant is part of the query, so another tenant's
    /// session is not found (spec 22.6).
    async fn get_session(
        &self,
        tenant: &str,
        session_id: &str,
    ) -> StoreResult<Option<SessionRecord>>;

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

    /// Atomically consumes a resume token of `session_id` (spec 10.5 step 2) and, when given,
    /// stores its replacement in the same transaction. Returns the session; unknown, expired or used
    /// tokens, and tokens of another session, are [`crate::StoreError::ResumeTokenInvalid`], and a
    /// token presented on the wrong session stays unused.
    async fn consume_resume_token(
        &self,
        session_id: &str,
        token: &str,
        replacement: Option<(&str, i64)>,
        now_ms: i64,
    ) -> StoreResult<SessionRecord>;
}
