//! The operational read model: action status, lists, events (spec 16).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{
    ActionId, ActionResult, ActionResultStatus, ApprovalId, CapabilityId, Checker, CorrelationId,
    DelegationId, EventId, Principal, PrincipalId, ReceiptChain, SessionId, StreamChunk, Timestamp,
    TransactionId, Validate,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Request for the durable lifecycle view of one action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionStatusRequest {
    /// Action to inspect.
    pub action_id: ActionId,
    /// Optional tenant boundary expected by the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Include the final result when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_result: bool,
    /// Include the receipt chain when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_receipts: bool,
    /// Include durable stream chunks for the action.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_chunks: bool,
    /// Optional bounded wait preference in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub wait_ms: Option<u64>,
}

impl Validate for ActionStatusRequest {
    fn validate(&self, v: &mut Checker) {
        crate::rules::action_status_request(self, v);
    }
}

/// Durable native action lifecycle view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionStatus {
    /// Action id.
    pub action_id: ActionId,
    /// Capability invoked by the action, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_id: Option<CapabilityId>,
    /// Session bound to the action, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// Correlation id bound to the action, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
    /// Stable lifecycle state.
    pub state: ActionLifecycleState,
    /// Backend queue state label, when a queue record exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_state: Option<String>,
    /// Terminal result status, when a result exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_status: Option<ActionResultStatus>,
    /// Approval id blocking the action, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<ApprovalId>,
    /// Transaction id associated with the action, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<TransactionId>,
    /// Delegation id associated with the action, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_id: Option<DelegationId>,
    /// Time when the action started execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// Last durable state update time.
    pub updated_at: Timestamp,
    /// Terminal completion time, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// Retry metadata safe for operational readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Value>,
    /// Lease metadata safe for operational readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Value>,
    /// Final result when requested and available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ActionResult>,
    /// Receipt chain when requested and available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_chain: Option<ReceiptChain>,
    /// Durable stream chunks when requested.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<StreamChunk>,
    /// Typed links exposed by HTTP and SDK bindings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub links: BTreeMap<String, String>,
}

impl Validate for ActionStatus {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.started_at {
            v.field("started_at", |v| x.validate(v));
        }
        v.field("updated_at", |v| self.updated_at.validate(v));
        if let Some(x) = &self.completed_at {
            v.field("completed_at", |v| x.validate(v));
        }
        if let Some(x) = &self.result {
            v.field("result", |v| x.validate(v));
        }
        if let Some(x) = &self.receipt_chain {
            v.field("receipt_chain", |v| x.validate(v));
        }
        v.field("chunks", |v| v.each(&self.chunks));
        crate::rules::action_status(self, v);
    }
}

/// Stable native action lifecycle state exposed by AIP query APIs.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ActionLifecycleState {
    /// The action id is unknown to the current runtime.
    Unknown,
    /// The action was accepted but has not entered a queue.
    Accepted,
    /// The action is queued for execution.
    Queued,
    /// The action is currently running.
    Running,
    /// The action is emitting a stream.
    Streaming,
    /// The action is blocked on a human approval.
    PendingApproval,
    /// The action is being cancelled.
    Cancelling,
    /// The action was cancelled.
    Cancelled,
    /// The action completed successfully.
    Completed,
    /// The action failed.
    Failed,
    /// The action state expired by retention policy.
    Expired,
    /// The action is parked in the dead-letter queue.
    DeadLettered,
}

crate::wire_enum!(ActionLifecycleState { Unknown => "unknown", Accepted => "accepted", Queued => "queued", Running => "running", Streaming => "streaming", PendingApproval => "pending_approval", Cancelling => "cancelling", Cancelled => "cancelled", Completed => "completed", Failed => "failed", Expired => "expired", DeadLettered => "dead_lettered" });

/// Request for one final action result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionResultRequest {
    /// Action to inspect.
    pub action_id: ActionId,
    /// Optional tenant boundary expected by the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Optional bounded wait preference in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u64"
    )]
    pub wait_ms: Option<u64>,
    /// Include receipt metadata when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_receipt: bool,
    /// Include terminal event hints when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_terminal_events: bool,
}

impl Validate for ActionResultRequest {
    fn validate(&self, v: &mut Checker) {
        crate::rules::action_result_request(self, v);
    }
}

/// Request for a filtered durable action list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionListRequest {
    /// Lifecycle state filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ActionLifecycleState>,
    /// Capability filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_id: Option<CapabilityId>,
    /// Session filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// Requesting principal filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_id: Option<PrincipalId>,
    /// Approval id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<ApprovalId>,
    /// Transaction id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<TransactionId>,
    /// Tenant id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Opaque page cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Maximum number of actions to return.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u32"
    )]
    pub limit: Option<u32>,
    /// Include results when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_results: bool,
    /// Include receipt chains when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_receipts: bool,
}

impl Validate for ActionListRequest {
    fn validate(&self, v: &mut Checker) {
        crate::rules::action_list_request(self, v);
    }
}

/// Filtered durable action list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionList {
    /// Action views visible to the caller.
    pub actions: Vec<ActionStatus>,
    /// Number of matching actions before pagination.
    #[serde(deserialize_with = "crate::num::u64")]
    pub total_size: u64,
    /// Cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl Validate for ActionList {
    fn validate(&self, v: &mut Checker) {
        v.field("actions", |v| v.each(&self.actions));
        crate::rules::action_list(self, v);
    }
}

/// Request for events and chunks scoped to one action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionEventsRequest {
    /// Action to inspect.
    pub action_id: ActionId,
    /// Optional tenant boundary expected by the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Opaque event cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Maximum number of events to return.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u32"
    )]
    pub limit: Option<u32>,
    /// Event kind filter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Include durable stream chunks.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_chunks: bool,
    /// Caller preference for streaming/following bindings.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub follow: bool,
}

impl Validate for ActionEventsRequest {
    fn validate(&self, v: &mut Checker) {
        crate::rules::action_events_request(self, v);
    }
}

/// Events and chunks scoped to one action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionEvents {
    /// Source action.
    pub action_id: ActionId,
    /// Ordered action-scoped events.
    pub events: Vec<Event>,
    /// Ordered action-scoped stream chunks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<StreamChunk>,
    /// Cursor for the next event page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Whether the action is in a terminal lifecycle state.
    pub terminal: bool,
}

impl Validate for ActionEvents {
    fn validate(&self, v: &mut Checker) {
        v.field("events", |v| v.each(&self.events));
        v.field("chunks", |v| v.each(&self.chunks));
        crate::rules::action_events(self, v);
    }
}

/// Lifecycle, channel, tool, audit, or system event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Stable event id.
    pub id: EventId,
    /// Event kind.
    pub kind: String,
    /// Event timestamp.
    pub occurred_at: Timestamp,
    /// Associated session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// Associated action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<ActionId>,
    /// Request correlation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
    /// Actor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Principal>,
    /// Structured event data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Validate for Event {
    fn validate(&self, v: &mut Checker) {
        v.field("occurred_at", |v| self.occurred_at.validate(v));
        if let Some(x) = &self.actor {
            v.field("actor", |v| x.validate(v));
        }
    }
}

/// Event stream request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventStreamRequest {
    /// Starting cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Maximum events to return.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u32"
    )]
    pub limit: Option<u32>,
    /// Event kind filter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
}

impl Validate for EventStreamRequest {
    fn validate(&self, v: &mut Checker) {
        crate::rules::event_stream_request(self, v);
    }
}

/// Event stream response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventStream {
    /// Events.
    pub events: Vec<Event>,
    /// Next cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl Validate for EventStream {
    fn validate(&self, v: &mut Checker) {
        v.field("events", |v| v.each(&self.events));
        crate::rules::event_stream(self, v);
    }
}
