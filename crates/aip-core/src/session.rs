//! Handshake and session messages (spec 10).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{
    CapabilityId, Checker, Event, Principal, PrincipalId, ProfileId, ProtocolError, SessionId,
    Timestamp, Validate,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Handshake request for session negotiation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Handshake {
    /// Caller identity.
    pub client: Principal,
    /// Intended session purpose.
    pub purpose: String,
    /// Requested capabilities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requested_capabilities: Vec<CapabilityId>,
    /// Profiles supported by the caller.
    pub profiles: Vec<ProfileId>,
    /// Authentication proof or token metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Value>,
    /// Required compliance regimes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compliance_required: Vec<String>,
    /// Requested heartbeat settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<Value>,
    /// Session encryption request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<Value>,
    /// Billing/settlement preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billing: Option<Value>,
}

impl Validate for Handshake {
    fn validate(&self, v: &mut Checker) {
        v.field("client", |v| self.client.validate(v));
        crate::rules::handshake(self, v);
    }
}

/// Handshake negotiation response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandshakeResponse {
    /// Negotiation status.
    pub status: HandshakeStatus,
    /// Created session id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// Initial single-use opaque resume token for the created session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    /// Responder identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<Principal>,
    /// Selected profiles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agreed_profiles: Vec<ProfileId>,
    /// Accepted capabilities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agreed_capabilities: Vec<CapabilityId>,
    /// Agreed heartbeat settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<Value>,
    /// Session encryption metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<Value>,
    /// Billing/settlement metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billing: Option<Value>,
    /// Redirect target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect: Option<Value>,
    /// Rejection details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection_reason: Option<ProtocolError>,
}

impl Validate for HandshakeResponse {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.server {
            v.field("server", |v| x.validate(v));
        }
        if let Some(x) = &self.rejection_reason {
            v.field("rejection_reason", |v| x.validate(v));
        }
    }
}

/// Handshake response status.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HandshakeStatus {
    /// Session accepted.
    Accepted,
    /// Session rejected.
    Rejected,
    /// Caller should use another endpoint or participant.
    Redirect,
}

crate::wire_enum!(HandshakeStatus { Accepted => "accepted", Rejected => "rejected", Redirect => "redirect" });

/// Request for one durable session view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRequest {
    /// Session to inspect.
    pub session_id: SessionId,
}

impl Validate for SessionRequest {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Durable session read-model view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionView {
    /// Stable session id.
    pub session_id: SessionId,
    /// Current lifecycle state.
    pub status: SessionState,
    /// Session initiator.
    pub principal: Principal,
    /// Session responder.
    pub peer: Principal,
    /// Creation timestamp.
    pub created_at: Timestamp,
    /// Last known state update timestamp.
    pub updated_at: Timestamp,
    /// Optional expiration timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// Number of non-terminal actions bound to this session.
    #[serde(deserialize_with = "crate::num::u64")]
    pub active_action_count: u64,
    /// Operational links for HTTP and SDK bindings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub links: BTreeMap<String, String>,
}

impl Validate for SessionView {
    fn validate(&self, v: &mut Checker) {
        v.field("principal", |v| self.principal.validate(v));
        v.field("peer", |v| self.peer.validate(v));
        v.field("created_at", |v| self.created_at.validate(v));
        v.field("updated_at", |v| self.updated_at.validate(v));
        if let Some(x) = &self.expires_at {
            v.field("expires_at", |v| x.validate(v));
        }
    }
}

/// Lifecycle state of an AIP session.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Session is being negotiated.
    New,
    /// Session is ready for actions.
    Active,
    /// Work is accepted but not started.
    Queued,
    /// Work is running.
    Processing,
    /// Work is streaming output.
    Streaming,
    /// Work is blocked on human input or approval.
    WaitingForHuman,
    /// Work completed successfully.
    Completed,
    /// Work was cancelled.
    Cancelled,
    /// Work reached terminal failure.
    Failed,
    /// Settlement/audit closeout is complete.
    Settled,
}

crate::wire_enum!(SessionState { New => "new", Active => "active", Queued => "queued", Processing => "processing", Streaming => "streaming", WaitingForHuman => "waiting_for_human", Completed => "completed", Cancelled => "cancelled", Failed => "failed", Settled => "settled" });

/// Request for filtered durable session views.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionListRequest {
    /// Principal filter matching initiator or responder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_id: Option<PrincipalId>,
    /// Session lifecycle state filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SessionState>,
    /// Opaque page cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Maximum number of sessions to return.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u32"
    )]
    pub limit: Option<u32>,
}

impl Validate for SessionListRequest {
    fn validate(&self, v: &mut Checker) {
        crate::rules::session_list_request(self, v);
    }
}

/// Filtered session list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionList {
    /// Sessions visible to the caller.
    pub sessions: Vec<SessionView>,
    /// Cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl Validate for SessionList {
    fn validate(&self, v: &mut Checker) {
        v.field("sessions", |v| v.each(&self.sessions));
        crate::rules::session_list(self, v);
    }
}

/// Request to close one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCloseRequest {
    /// Session to close.
    pub session_id: SessionId,
    /// Optional operator-visible reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Validate for SessionCloseRequest {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Request to resume one session after reconnect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionResumeRequest {
    /// Session to resume.
    pub session_id: SessionId,
    /// Optional bearer or opaque resume token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    /// Last event cursor observed by the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event_cursor: Option<String>,
}

impl Validate for SessionResumeRequest {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Session resume response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionResume {
    /// Resumed session view.
    pub session: SessionView,
    /// Events replayed after the supplied cursor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replayed_events: Vec<Event>,
    /// Next cursor for subsequent reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Rotated single-use resume token. The previous token is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
}

impl Validate for SessionResume {
    fn validate(&self, v: &mut Checker) {
        v.field("session", |v| self.session.validate(v));
        v.field("replayed_events", |v| v.each(&self.replayed_events));
        crate::rules::session_resume(self, v);
    }
}
