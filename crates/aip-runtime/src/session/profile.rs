//! Sessions opened by a compatibility profile (spec 21): an MCP session is a native session, so it
//! is durable, shared by every node on one store, owned by the principal that opened it, and listed
//! by the native session reads. A profile session starts `new` (negotiated, not yet usable) and
//! becomes `active` when the profile's own initialization completes (spec 10.3 `new -> active`).

use aip_store::{NewSession, SessionRecord, SessionState, SessionTransition, StoreError};
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::runtime::Runtime;
use crate::session::SESSION_TTL_MS;

/// What the runtime found when it read a session for its owner: only the runtime makes one, so an
/// action request carrying it (see `ActionRequest::checked`) skips a second read of the same
/// session within the same request.
#[derive(Debug, Clone)]
pub struct SessionCheck {
    session_id: String,
    tenant: String,
    principal: String,
    expires_at_ms: Option<i64>,
    open: bool,
    at: std::time::Instant,
}

impl SessionCheck {
    /// How long a check stands in for a read: one request's admission, not a cache.
    pub const FRESH: std::time::Duration = std::time::Duration::from_secs(1);

    /// Whether this check answers "may `caller` add an action to `session_id` now": the same
    /// session and owner, read within [`SessionCheck::FRESH`], open, and not expired since.
    pub(crate) fn admits(&self, caller: &Caller, session_id: &str) -> bool {
        self.open
            && self.session_id == session_id
            && self.tenant == caller.tenant
            && self.principal == caller.id
            && self.at.elapsed() < Self::FRESH
            && self.expires_at_ms.is_none_or(|e| e > now_ms())
    }
}

/// Randomness beyond the time-ordered id in a profile session id: with the id's own 74 random bits
/// the id carries more than 128 bits, so it cannot be guessed (ownership is checked anyway).
const EXTRA_RANDOM_BYTES: usize = 8;

impl Runtime {
    /// Opens a `new` session for `caller` on behalf of `profile`, with the profile's negotiated
    /// parameters in `data` (kept in the session view under `data.profile_data`).
    pub async fn open_profile_session(
        &self,
        caller: &Caller,
        profile: &str,
        data: Value,
    ) -> Result<SessionRecord, RuntimeError> {
        let mut extra = [0u8; EXTRA_RANDOM_BYTES];
        getrandom::fill(&mut extra).map_err(|_| {
            RuntimeError::Storage(StoreError::Backend("no randomness for a session id".into()))
        })?;
        let session_id = format!(
            "{}{}",
            aip_core::SessionId::generate().as_str(),
            extra.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        self.create_profile_session(caller, profile, (session_id, SessionState::New), data)
            .await
    }

    /// The `active` session `session_id` of `caller` for `profile`, opened on first use: for a
    /// profile whose clients name their own contexts (A2A `contextId`), so the id is derived from
    /// that name and a repeated name joins the same session. An id held by another principal, or
    /// an expired session, is `NotFound`; a closed one is refused at admission like any other.
    pub async fn named_profile_session(
        &self,
        caller: &Caller,
        profile: &str,
        session_id: &str,
        data: Value,
    ) -> Result<SessionRecord, RuntimeError> {
        if let Some(found) = self.store().get_session(&caller.tenant, session_id).await? {
            return match found {
                s if s.tenant == caller.tenant && s.principal == caller.id => {
                    self.owned_session(caller, session_id).await
                }
                _ => Err(RuntimeError::NotFound("session")),
            };
        }
        let created = self
            .create_profile_session(
                caller,
                profile,
                (session_id.to_owned(), SessionState::Active),
                data,
            )
            .await;
        match created {
            // Opened concurrently by the same client: read what is there now.
            Err(RuntimeError::Storage(StoreError::Duplicate { .. })) => {
                self.owned_session(caller, session_id).await
            }
            other => other,
        }
    }

    async fn create_profile_session(
        &self,
        caller: &Caller,
        profile: &str,
        (session_id, state): (String, SessionState),
        data: Value,
    ) -> Result<SessionRecord, RuntimeError> {
        let now = now_ms();
        let event = crate::events::new_event(
            EventKind::SessionCreated,
            (&caller.tenant, &caller.id),
            Some(session_id.clone()),
            None,
            None,
            (json!({ "profile": profile }), now),
        );
        let record = NewSession {
            session_id: session_id.clone(),
            tenant: caller.tenant.clone(),
            principal: caller.id.clone(),
            peer: Some(self.config().agent.id.as_str().to_owned()),
            state,
            created_at_ms: now,
            expires_at_ms: Some(now + SESSION_TTL_MS),
            data: json!({ "profiles": [profile], "principal_kind": caller.kind, "profile_data": data }),
        };
        self.store().create_session(record, vec![event]).await?;
        self.record_audit(
            caller,
            "session.created",
            now,
            json!({ "profile": profile, "issuer": caller.issuer }),
            (None, Some(&session_id)),
        )
        .await?;
        self.owned_session(caller, &session_id).await
    }

    /// The session if `caller` opened it and it has not expired; `NotFound` for every other case,
    /// so another principal cannot tell a foreign session from a missing one.
    pub async fn owned_session(
        &self,
        caller: &Caller,
        session_id: &str,
    ) -> Result<SessionRecord, RuntimeError> {
        self.checked_session(caller, session_id)
            .await
            .map(|(record, _)| record)
    }

    /// [`Runtime::owned_session`], with the runtime's word that it was read and found usable by
    /// actions: an action request carrying that word (`ActionRequest::checked`) is admitted into
    /// the session without reading it again, for [`SessionCheck::FRESH`].
    pub async fn checked_session(
        &self,
        caller: &Caller,
        session_id: &str,
    ) -> Result<(SessionRecord, SessionCheck), RuntimeError> {
        match self.store().get_session(&caller.tenant, session_id).await? {
            Some(s)
                if s.tenant == caller.tenant
                    && s.principal == caller.id
                    && s.expires_at_ms.is_none_or(|e| e > now_ms()) =>
            {
                let check = SessionCheck {
                    session_id: s.session_id.clone(),
                    tenant: s.tenant.clone(),
                    principal: s.principal.clone(),
                    expires_at_ms: s.expires_at_ms,
                    open: crate::session::takes_actions(s.state),
                    at: std::time::Instant::now(),
                };
                Ok((s, check))
            }
            _ => Err(RuntimeError::NotFound("session")),
        }
    }

    /// Moves a `new` profile session to `active` once the profile's initialization completed; an
    /// already active session stays as it is (a repeated notification changes nothing).
    pub async fn activate_profile_session(
        &self,
        caller: &Caller,
        session_id: &str,
    ) -> Result<SessionRecord, RuntimeError> {
        let session = self.owned_session(caller, session_id).await?;
        if session.state != SessionState::New {
            return Ok(session);
        }
        let now = now_ms();
        let event = crate::events::new_event(
            EventKind::SessionActivated,
            (&caller.tenant, &caller.id),
            Some(session.session_id.clone()),
            None,
            None,
            (json!({}), now),
        );
        let transition = SessionTransition {
            session_id: session.session_id.clone(),
            from: vec![SessionState::New],
            to: SessionState::Active,
            data: None,
            events: vec![event],
            now_ms: now,
        };
        match self.store().transition_session(transition).await {
            Ok(s) => Ok(s),
            // Activated concurrently by the same client: read what is there now.
            Err(StoreError::StateConflict { .. }) => self.owned_session(caller, session_id).await,
            Err(err) => Err(err.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(open: bool, expires_at_ms: Option<i64>, age: std::time::Duration) -> SessionCheck {
        SessionCheck {
            session_id: "sess_1".into(),
            tenant: "t".into(),
            principal: "alice".into(),
            expires_at_ms,
            open,
            at: std::time::Instant::now() - age,
        }
    }

    #[test]
    fn a_session_check_admits_only_its_own_open_unexpired_session_for_its_owner_while_fresh() {
        let alice = Caller::owner("t", "alice");
        let fresh = std::time::Duration::ZERO;
        assert!(check(true, None, fresh).admits(&alice, "sess_1"));
        assert!(check(true, Some(now_ms() + 60_000), fresh).admits(&alice, "sess_1"));
        assert!(!check(true, None, fresh).admits(&alice, "sess_2"));
        assert!(!check(true, None, fresh).admits(&Caller::owner("t", "bob"), "sess_1"));
        assert!(!check(true, None, fresh).admits(&Caller::owner("u", "alice"), "sess_1"));
        assert!(!check(false, None, fresh).admits(&alice, "sess_1"));
        assert!(!check(true, Some(now_ms() - 1), fresh).admits(&alice, "sess_1"));
        assert!(!check(true, None, SessionCheck::FRESH).admits(&alice, "sess_1"));
    }
}
