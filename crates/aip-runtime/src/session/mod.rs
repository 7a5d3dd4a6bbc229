//! Handshake and sessions (spec 10): negotiation, the session state machine (enforced by the store),
//! list/get/close, and resume with single-use resume tokens stored hashed and never logged.

use std::collections::BTreeMap;

use aip_core::{
    ActionId, ActionList, ActionStatus, CapabilityId, Envelope, Handshake, HandshakeResponse,
    HandshakeStatus, MessageBody, PrincipalKind, ProfileId, SessionId, SessionList,
    SessionListRequest, SessionRequest, SessionResume, SessionView,
};
use aip_store::{
    ActionQuery, EventQuery, Limit, NewEvent, NewSession, SessionQuery, SessionRecord,
    SessionState, SessionTransition, StoreError,
};
use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::read::views;
use crate::reply::Reply;
use crate::runtime::Runtime;

mod profile;

pub use profile::SessionCheck;

/// Lifetime of a session and of its resume tokens.
pub const SESSION_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// Heartbeat interval offered in the handshake response (spec 11.9).
pub const HEARTBEAT_INTERVAL_MS: u64 = 30_000;

/// What a session-wide cancellation requested (spec 11.8). Cancellation is a request: each action is
/// reported in the state the store holds once its intent was recorded, `cancelling` until its handler
/// (or, for never-started work, the runtime as owner) confirms, `cancelled` after.
///
/// The request covers every action of the session, but the answer names only those of the first
/// list page of the session's actions (at most 1000 records, spec 16.4); `cursor` then continues the
/// session's action list (`action_list_request` with `session_id`, `GET /aip/v1/actions?session_id=`)
/// where the rest are read, and the totals count them all.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionCancellation {
    /// The session.
    pub session_id: SessionId,
    /// Actions of the first page whose cancellation was requested: intent recorded durably and the
    /// handler signalled.
    pub requested: Vec<ActionStatus>,
    /// Non-terminal actions of the first page whose capability cannot be cancelled; they run on to
    /// their own outcome.
    pub not_cancellable: Vec<ActionId>,
    /// Actions whose cancellation was requested, on every page.
    pub requested_total: u64,
    /// Actions that cannot be cancelled, on every page.
    pub not_cancellable_total: u64,
    /// Where the session's action list continues after the first page, when it has more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl SessionCancellation {
    /// The native reply: an `ActionList` of the requested actions (202), the whole outcome repeated in
    /// `extensions.cancel` so that the actions left running are named too.
    pub fn reply(&self, request: &Envelope) -> Reply {
        let list = ActionList {
            total_size: self.requested.len() as u64,
            actions: self.requested.clone(),
            cursor: self.cursor.clone(),
        };
        let mut reply = Reply::accepted(request, MessageBody::ActionList(list));
        let requested: Vec<&ActionId> = self.requested.iter().map(|a| &a.action_id).collect();
        reply.envelope.extensions = Some(json!({ "cancel": {
            "target": { "session": self.session_id },
            "requested": requested,
            "not_cancellable": self.not_cancellable,
            "requested_total": self.requested_total,
            "not_cancellable_total": self.not_cancellable_total,
        } }));
        reply
    }
}

impl Runtime {
    /// Session-wide cancellation (spec 11.8, `Cancel.target = {"session": id}`): requests cancellation of
    /// every non-terminal action of the session that `caller` may see, each exactly like an action cancel
    /// (durable intent, handler signalled, `cancelled` only once confirmed). The session itself stays
    /// open; close it to refuse new actions.
    pub async fn cancel_session(
        &self,
        caller: &Caller,
        session_id: &str,
        reason: Option<&str>,
    ) -> Result<SessionCancellation, RuntimeError> {
        let session = self.visible_session(caller, session_id).await?;
        // A session's actions are all its owner's (admission checks it), so one check covers them.
        if !caller.may_cancel(&session.tenant, &session.principal) {
            return Err(RuntimeError::CancelDenied("this session"));
        }
        let query = ActionQuery {
            tenant: caller.tenant.clone(),
            principal: (!caller.reads_whole_tenant()).then(|| caller.id.clone()),
            session_id: Some(session.session_id.clone()),
            state: None,
            capability: None,
            transaction_id: None,
        };
        let mut requested = Vec::new();
        let mut not_cancellable = Vec::new();
        let (mut requested_total, mut not_cancellable_total) = (0_u64, 0_u64);
        let mut cursor: Option<String> = None;
        // Where the answer stops: after the first page, when another follows it.
        let mut answer_cursor: Option<String> = None;
        let mut first = true;
        loop {
            let page = self
                .store()
                .list_actions(&query, cursor.as_deref(), Limit::max())
                .await?;
            if page.items.is_empty() {
                break;
            }
            if !first && answer_cursor.is_none() {
                answer_cursor.clone_from(&cursor);
            }
            for record in page.items.iter().filter(|r| !r.state.is_terminal()) {
                match self.cancel(caller, &record.action_id, reason).await {
                    Ok(status) => {
                        requested_total += 1;
                        if first {
                            requested.push(status);
                        }
                    }
                    Err(RuntimeError::NotCancellable) => {
                        not_cancellable_total += 1;
                        if first {
                            not_cancellable.push(ActionId::new(record.action_id.clone()));
                        }
                    }
                    // It finished between the list and the request: nothing left to cancel.
                    Err(RuntimeError::Terminal(_)) => {}
                    Err(err) => return Err(err),
                }
            }
            first = false;
            cursor = Some(page.next_cursor);
        }
        let now = now_ms();
        let owner = Caller::owner(&session.tenant, &session.principal);
        let event = self.session_record_event(
            EventKind::SessionCancelRequested,
            &owner,
            &session,
            json!({ "requested_by": caller.id, "reason": reason, "requested": requested_total, "not_cancellable": not_cancellable_total }),
            now,
        );
        self.store().append_events(vec![event]).await?;
        self.record_audit(
            caller,
            "session.cancel_requested",
            now,
            json!({ "session_id": session.session_id, "requested": requested_total }),
            (None, Some(&session.session_id)),
        )
        .await?;
        Ok(SessionCancellation {
            session_id: SessionId::new(session.session_id),
            requested,
            not_cancellable,
            requested_total,
            not_cancellable_total,
            cursor: answer_cursor,
        })
    }

    /// Negotiate a session (spec 10.1-10.2, 23.3). The claimed `client` principal must be the
    /// authenticated one; the agreed profiles are those the client offers that this node serves, in
    /// the client's order (every one this node serves when the client names none), and a client
    /// offering none of them is rejected.
    pub async fn handshake(
        &self,
        caller: &Caller,
        envelope: &Envelope,
        handshake: &Handshake,
    ) -> Result<HandshakeResponse, RuntimeError> {
        let rejected = |reason: &str| HandshakeResponse {
            status: HandshakeStatus::Rejected,
            session_id: None,
            resume_token: None,
            server: Some(self.config().agent.clone()),
            agreed_profiles: Vec::new(),
            agreed_capabilities: Vec::new(),
            heartbeat: None,
            encryption: None,
            billing: None,
            redirect: None,
            rejection_reason: Some(aip_core::ErrorCode::SessionRejected.error(reason)),
        };
        if handshake.client.id.as_str() != caller.id {
            return Ok(rejected(
                "the handshake client is not the authenticated principal",
            ));
        }
        let ours = self.profiles();
        let agreed_profiles: Vec<ProfileId> = if handshake.profiles.is_empty() {
            ours.to_vec()
        } else {
            handshake
                .profiles
                .iter()
                .filter(|p| ours.contains(p))
                .cloned()
                .collect()
        };
        if agreed_profiles.is_empty() {
            let served: Vec<&str> = ours.iter().map(ProfileId::as_str).collect();
            return Ok(rejected(&format!(
                "no common profile: this node serves {}",
                served.join(", ")
            )));
        }
        if handshake.encryption.is_some() {
            return Ok(rejected(
                "session encryption is not offered by this runtime",
            ));
        }
        let visible = self.manifest(caller, None, &[]);
        let invokable: Vec<CapabilityId> =
            visible.capabilities.iter().map(|c| c.id.clone()).collect();
        let agreed: Vec<CapabilityId> = if handshake.requested_capabilities.is_empty() {
            invokable
        } else {
            handshake
                .requested_capabilities
                .iter()
                .filter(|c| invokable.contains(c))
                .cloned()
                .collect()
        };
        let now = now_ms();
        let session_id = SessionId::generate();
        let data = json!({ "purpose": handshake.purpose, "profiles": agreed_profiles, "capabilities": agreed, "principal_kind": caller.kind });
        let event = self.session_event(
            EventKind::SessionCreated,
            caller,
            session_id.as_str(),
            envelope,
            json!({ "capabilities": agreed.len() }),
            now,
        );
        self.store()
            .create_session(
                NewSession {
                    session_id: session_id.as_str().to_owned(),
                    tenant: caller.tenant.clone(),
                    principal: caller.id.clone(),
                    peer: Some(self.config().agent.id.as_str().to_owned()),
                    state: SessionState::Active,
                    created_at_ms: now,
                    expires_at_ms: Some(now + SESSION_TTL_MS),
                    data,
                },
                vec![event],
            )
            .await?;
        self.record_audit(
            caller,
            "session.created",
            now,
            json!({ "profiles": agreed_profiles, "issuer": caller.issuer }),
            (None, Some(session_id.as_str())),
        )
        .await?;
        let token = new_resume_token()?;
        self.store()
            .issue_resume_token(session_id.as_str(), &token, now + SESSION_TTL_MS, now)
            .await?;
        Ok(HandshakeResponse {
            status: HandshakeStatus::Accepted,
            session_id: Some(session_id),
            resume_token: Some(token),
            server: Some(self.config().agent.clone()),
            agreed_profiles,
            agreed_capabilities: agreed,
            heartbeat: Some(json!({ "interval_ms": HEARTBEAT_INTERVAL_MS })),
            encryption: None,
            billing: None,
            redirect: None,
            rejection_reason: None,
        })
    }

    /// The session if `caller` may read it; `NotFound` otherwise (spec 10.4).
    pub(crate) async fn visible_session(
        &self,
        caller: &Caller,
        session_id: &str,
    ) -> Result<SessionRecord, RuntimeError> {
        match self.store().get_session(&caller.tenant, session_id).await? {
            Some(s) if caller.may_read(&s.tenant, &s.principal) => Ok(s),
            _ => Err(RuntimeError::NotFound("session")),
        }
    }

    /// An action may name only a visible, open session.
    pub(crate) async fn check_session_open(
        &self,
        caller: &Caller,
        session_id: &str,
    ) -> Result<(), RuntimeError> {
        let session = self.visible_session(caller, session_id).await?;
        if session.principal != caller.id {
            return Err(RuntimeError::SessionState(
                "the session belongs to another principal".into(),
            ));
        }
        if session.expires_at_ms.is_some_and(|e| e <= now_ms()) {
            return Err(RuntimeError::SessionExpired);
        }
        if takes_actions(session.state) {
            Ok(())
        } else {
            Err(RuntimeError::SessionState(format!(
                "the session is {}",
                session.state.as_str()
            )))
        }
    }

    /// One session view.
    pub async fn session(
        &self,
        caller: &Caller,
        session_id: &str,
    ) -> Result<SessionView, RuntimeError> {
        let session = self.visible_session(caller, session_id).await?;
        self.session_view_for(caller, &session).await
    }

    /// `session_request`: one session view.
    pub async fn read_session(
        &self,
        caller: &Caller,
        request: &SessionRequest,
    ) -> Result<SessionView, RuntimeError> {
        self.session(caller, request.session_id.as_str()).await
    }

    /// `session_list_request`: the sessions visible to `caller`; filters never broaden visibility
    /// (a principal the caller may not read matches nothing).
    pub async fn read_sessions(
        &self,
        caller: &Caller,
        request: &SessionListRequest,
    ) -> Result<SessionList, RuntimeError> {
        let limit = self.limit(request.limit)?;
        let Ok(principal) =
            self.reader_bound(caller, request.principal_id.as_ref().map(|p| p.as_str()))
        else {
            return Ok(SessionList {
                sessions: Vec::new(),
                cursor: None,
            });
        };
        let state = match request.status {
            Some(s) => Some(
                SessionState::parse(s.as_str())
                    .ok_or(RuntimeError::InvalidQuery("unknown session state"))?,
            ),
            None => None,
        };
        let query = SessionQuery {
            tenant: caller.tenant.clone(),
            principal,
            state,
        };
        let page = self
            .store()
            .list_sessions(&query, request.cursor.as_deref(), limit)
            .await?;
        let mut sessions = Vec::with_capacity(page.items.len());
        for s in &page.items {
            sessions.push(self.session_view_for(caller, s).await?);
        }
        Ok(SessionList {
            sessions,
            cursor: Some(page.next_cursor),
        })
    }

    /// Close a session: an open session is cancelled, then settled (spec 10.3 transitions only).
    pub async fn close_session(
        &self,
        caller: &Caller,
        session_id: &str,
        reason: Option<&str>,
    ) -> Result<SessionView, RuntimeError> {
        let session = self.visible_session(caller, session_id).await?;
        let now = now_ms();
        let owner = Caller::owner(&session.tenant, &session.principal);
        let mut current = session;
        if current.state == SessionState::New {
            // A profile session closed before its initialization finished (spec 10.3 knows no
            // `new -> cancelled`): it becomes active only to be cancelled at once.
            let event = self.session_record_event(
                EventKind::SessionActivated,
                &owner,
                &current,
                json!({ "closing": true }),
                now,
            );
            current = self
                .transition_session(&current, SessionState::Active, event, now)
                .await?;
        }
        if matches!(
            current.state,
            SessionState::Active
                | SessionState::Queued
                | SessionState::Processing
                | SessionState::Streaming
                | SessionState::WaitingForHuman
        ) {
            let event = self.session_record_event(
                EventKind::SessionCancelled,
                &owner,
                &current,
                json!({ "closed_by": caller.id, "reason": reason }),
                now,
            );
            current = self
                .transition_session(&current, SessionState::Cancelled, event, now)
                .await?;
        }
        if matches!(
            current.state,
            SessionState::Completed | SessionState::Failed | SessionState::Cancelled
        ) {
            let event = self.session_record_event(
                EventKind::SessionSettled,
                &owner,
                &current,
                json!({}),
                now,
            );
            current = self
                .transition_session(&current, SessionState::Settled, event, now)
                .await?;
        } else if current.state != SessionState::Settled {
            return Err(RuntimeError::SessionState(format!(
                "a {} session cannot be closed",
                current.state.as_str()
            )));
        }
        self.record_audit(
            caller,
            "session.closed",
            now,
            json!({ "session_id": session_id }),
            (None, Some(session_id)),
        )
        .await?;
        self.session_view_for(caller, &current).await
    }

    async fn transition_session(
        &self,
        session: &SessionRecord,
        to: SessionState,
        event: NewEvent,
        now: i64,
    ) -> Result<SessionRecord, RuntimeError> {
        let transition = SessionTransition {
            session_id: session.session_id.clone(),
            from: vec![session.state],
            to,
            data: None,
            events: vec![event],
            now_ms: now,
        };
        match self.store().transition_session(transition).await {
            Ok(s) => Ok(s),
            Err(StoreError::StateConflict { actual } | StoreError::Terminal { state: actual }) => {
                Err(RuntimeError::SessionState(format!(
                    "the session is {actual}"
                )))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Resume (spec 10.5): ownership first, then atomic single-use consumption of the token with a
    /// replacement, then the session view and the visible events after the cursor.
    pub async fn resume_session(
        &self,
        caller: &Caller,
        session_id: &str,
        token: &str,
        cursor: Option<&str>,
    ) -> Result<SessionResume, RuntimeError> {
        let session = self.visible_session(caller, session_id).await?;
        if session.principal != caller.id {
            return Err(RuntimeError::NotFound("session"));
        }
        let now = now_ms();
        // An expired session is not brought back, whatever token is presented (its token is left
        // as it is: nothing is consumed by a refused resume).
        if session.expires_at_ms.is_some_and(|e| e <= now) {
            return Err(RuntimeError::SessionExpired);
        }
        let replacement = new_resume_token()?;
        let resumed = self
            .store()
            .consume_resume_token(
                &session.session_id,
                token,
                Some((&replacement, now + SESSION_TTL_MS)),
                now,
            )
            .await?;
        if resumed.session_id != session.session_id {
            return Err(RuntimeError::ResumeTokenInvalid);
        }
        let query = EventQuery {
            tenant: caller.tenant.clone(),
            principal: Some(caller.id.clone()),
            action_id: None,
            session_id: Some(session.session_id.clone()),
            kinds: Vec::new(),
        };
        let page = self
            .store()
            .list_events(&query, cursor, Limit::max())
            .await?;
        Ok(SessionResume {
            session: self.session_view_for(caller, &resumed).await?,
            replayed_events: views::events(&page.items)?,
            next_cursor: Some(page.next_cursor),
            resume_token: Some(replacement),
        })
    }

    /// The view of `s` as `caller` sees it: `active_action_count` counts only the non-terminal actions
    /// of the session that this reader may see (spec 10.4, 16.3: no hidden counts).
    async fn session_view_for(
        &self,
        caller: &Caller,
        s: &SessionRecord,
    ) -> Result<SessionView, RuntimeError> {
        let query = ActionQuery {
            tenant: caller.tenant.clone(),
            principal: (!caller.reads_whole_tenant()).then(|| caller.id.clone()),
            session_id: Some(s.session_id.clone()),
            state: None,
            capability: None,
            transaction_id: None,
        };
        let activity = self.store().active_actions_by_state(&query).await?;
        let active = activity.iter().map(|a| a.count).sum();
        if s.state == SessionState::Active {
            let mut reported = s.clone();
            reported.state = activity_state(&activity);
            return self.session_view(&reported, active);
        }
        self.session_view(s, active)
    }

    fn session_view(
        &self,
        s: &SessionRecord,
        active_action_count: u64,
    ) -> Result<SessionView, RuntimeError> {
        let status = serde_json::from_value(Value::String(s.state.as_str().to_owned()))
            .map_err(|e| views::corrupt(format!("session state {}: {e}", s.state)))?;
        let kind = match s.data.get("principal_kind") {
            Some(kind) => serde_json::from_value::<PrincipalKind>(kind.clone())
                .map_err(|e| views::corrupt(format!("session principal kind: {e}")))?,
            None => {
                return Err(views::corrupt(format!(
                    "session {} has no principal kind",
                    s.session_id
                )));
            }
        };
        Ok(SessionView {
            session_id: SessionId::new(s.session_id.clone()),
            status,
            principal: crate::events::bare_principal(&s.principal, kind),
            peer: self.config().agent.clone(),
            created_at: views::ts(s.created_at_ms)?,
            updated_at: views::ts(s.updated_at_ms)?,
            expires_at: s.expires_at_ms.map(views::ts).transpose()?,
            active_action_count,
            links: BTreeMap::new(),
        })
    }

    fn session_event(
        &self,
        kind: EventKind,
        caller: &Caller,
        session_id: &str,
        envelope: &Envelope,
        data: Value,
        now: i64,
    ) -> NewEvent {
        crate::events::new_event(
            kind,
            (&caller.tenant, &caller.id),
            Some(session_id.to_owned()),
            None,
            envelope
                .correlation_id
                .as_ref()
                .map(|c| c.as_str().to_owned()),
            (data, now),
        )
    }

    fn session_record_event(
        &self,
        kind: EventKind,
        owner: &Caller,
        s: &SessionRecord,
        data: Value,
        now: i64,
    ) -> NewEvent {
        crate::events::new_event(
            kind,
            (&owner.tenant, &owner.id),
            Some(s.session_id.clone()),
            None,
            None,
            (data, now),
        )
    }
}

/// A fresh 256-bit opaque resume token (a credential: never logged, only its hash is stored).
fn new_resume_token() -> Result<String, RuntimeError> {
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(|_| {
        RuntimeError::Storage(StoreError::Backend(
            "no randomness for a resume token".into(),
        ))
    })?;
    Ok(format!(
        "rst_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    ))
}

/// Serves `aip.core.v1.handshake`: the response envelope carries the new session's id.
pub(crate) async fn serve_handshake(
    runtime: &Runtime,
    caller: &Caller,
    envelope: &Envelope,
    handshake: &Handshake,
) -> Result<Reply, RuntimeError> {
    let response = runtime.handshake(caller, envelope, handshake).await?;
    let session_id = response.session_id.clone();
    let mut reply = Reply::done(envelope, MessageBody::HandshakeResponse(response));
    reply.envelope.session_id = session_id.or(reply.envelope.session_id);
    Ok(reply)
}

/// Answers `aip.core.v1.heartbeat` with the same sequence and the receive time (spec 11.9).
pub(crate) fn heartbeat(request: &Envelope, heartbeat: &aip_core::Heartbeat) -> Reply {
    let ack = aip_core::HeartbeatAck {
        sequence: heartbeat.sequence,
        received_at: aip_core::Timestamp::now(),
    };
    Reply::done(request, MessageBody::HeartbeatAck(ack))
}

impl Runtime {
    /// `session_resume_request` (spec 10.5): a request without a token is refused like a bad one.
    pub async fn read_resume(
        &self,
        caller: &Caller,
        request: &aip_core::SessionResumeRequest,
    ) -> Result<SessionResume, RuntimeError> {
        let token = request
            .resume_token
            .as_deref()
            .ok_or(RuntimeError::ResumeTokenInvalid)?;
        self.resume_session(
            caller,
            request.session_id.as_str(),
            token,
            request.last_event_cursor.as_deref(),
        )
        .await
    }
}

/// Whether a session in `state` takes new actions.
/// What an `active` session is doing, as spec 10.3 names it, from its live actions: one waiting
/// for a human makes it `waiting_for_human`, else one streaming `streaming`, else one running
/// `processing`, else one waiting for a worker `queued`; with none it is `active`. The stored
/// lifecycle state stays `active` (a session runs many actions; it accepts more in every one of
/// these states), so the activity is derived where it is read and can never be stale.
fn activity_state(activity: &[aip_store::ActiveActions]) -> SessionState {
    use aip_store::ActionState as A;
    let any = |f: &dyn Fn(&aip_store::ActiveActions) -> bool| activity.iter().any(f);
    if any(&|a| a.state == A::PendingApproval) {
        SessionState::WaitingForHuman
    } else if any(&|a| a.state == A::Streaming || (a.state == A::Running && a.mode == "streaming"))
    {
        SessionState::Streaming
    } else if any(&|a| matches!(a.state, A::Running | A::Cancelling)) {
        SessionState::Processing
    } else if any(&|a| matches!(a.state, A::Queued | A::Accepted | A::Unknown)) {
        SessionState::Queued
    } else {
        SessionState::Active
    }
}

pub(crate) fn takes_actions(state: SessionState) -> bool {
    matches!(
        state,
        SessionState::Active
            | SessionState::Queued
            | SessionState::Processing
            | SessionState::Streaming
            | SessionState::WaitingForHuman
    )
}
