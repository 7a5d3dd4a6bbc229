//! Callback delivery policy, records and queries (spec 17).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{
    ActionId, Callback, Checker, CorrelationId, MessageId, ProfileId, ReceiptChain, SessionId,
    Timestamp, Validate,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Request for one callback delivery record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbackDeliveryQueryRequest {
    /// Stable delivery id.
    pub delivery_id: String,
    /// Optional tenant boundary expected by the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Include receipt chain when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_receipts: bool,
}

impl Validate for CallbackDeliveryQueryRequest {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Request for filtered callback delivery records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbackDeliveryListRequest {
    /// Action id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<ActionId>,
    /// Delivery status filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CallbackDeliveryStatus>,
    /// Callback profile filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileId>,
    /// Callback target filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Tenant id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Opaque page cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Maximum number of records to return.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u32"
    )]
    pub limit: Option<u32>,
    /// Include receipt chains when available.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_receipts: bool,
}

impl Validate for CallbackDeliveryListRequest {
    fn validate(&self, v: &mut Checker) {
        crate::rules::callback_delivery_list_request(self, v);
    }
}

/// Stable callback delivery lifecycle state.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CallbackDeliveryStatus {
    /// Delivery is accepted and waiting for an attempt window.
    Pending,
    /// A delivery attempt is currently in progress.
    Running,
    /// The callback target acknowledged the envelope.
    Delivered,
    /// The delivery exhausted its retry budget.
    Failed,
    /// The delivery is parked in the dead-letter queue after terminal failure.
    DeadLettered,
}

crate::wire_enum!(CallbackDeliveryStatus { Pending => "pending", Running => "running", Delivered => "delivered", Failed => "failed", DeadLettered => "dead_lettered" });

/// Durable native view of callback delivery state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbackDeliveryRecord {
    /// Stable delivery id.
    pub delivery_id: String,
    /// Delivery policy used by the runtime.
    pub policy: CallbackDeliveryPolicy,
    /// Envelope message id being delivered.
    pub message_id: MessageId,
    /// Envelope message type being delivered.
    pub message_type: String,
    /// Action associated with the delivered message, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<ActionId>,
    /// Session associated with the delivered message, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// Correlation id associated with the delivered message, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
    /// Tenant associated with the delivery, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Stable delivery status.
    pub status: CallbackDeliveryStatus,
    /// Recorded attempts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<CallbackDeliveryAttempt>,
    /// Earliest retry time after a failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Timestamp>,
    /// Worker currently holding the delivery lease, when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leased_by: Option<String>,
    /// Lease expiration time after which another worker may recover the delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<Timestamp>,
    /// Last delivery error, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Dead-letter reason when the delivery can no longer be retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_reason: Option<String>,
    /// Receipt chain, when requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_chain: Option<ReceiptChain>,
    /// Creation timestamp.
    pub created_at: Timestamp,
    /// Last update timestamp.
    pub updated_at: Timestamp,
    /// Terminal timestamp when delivery completed or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
}

impl Validate for CallbackDeliveryRecord {
    fn validate(&self, v: &mut Checker) {
        v.field("policy", |v| self.policy.validate(v));
        v.field("attempts", |v| v.each(&self.attempts));
        if let Some(x) = &self.next_attempt_at {
            v.field("next_attempt_at", |v| x.validate(v));
        }
        if let Some(x) = &self.lease_expires_at {
            v.field("lease_expires_at", |v| x.validate(v));
        }
        if let Some(x) = &self.receipt_chain {
            v.field("receipt_chain", |v| x.validate(v));
        }
        v.field("created_at", |v| self.created_at.validate(v));
        v.field("updated_at", |v| self.updated_at.validate(v));
        if let Some(x) = &self.completed_at {
            v.field("completed_at", |v| x.validate(v));
        }
    }
}

/// Transport-independent callback delivery policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbackDeliveryPolicy {
    /// Stable delivery id used for deduplication and audit.
    pub delivery_id: String,
    /// Callback target.
    pub target: Callback,
    /// Maximum delivery attempts.
    #[serde(deserialize_with = "crate::num::u32")]
    pub max_attempts: u32,
    /// Per-attempt timeout.
    #[serde(deserialize_with = "crate::num::u64")]
    pub timeout_ms: u64,
    /// Retry backoff schedule.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::num::vec_u64"
    )]
    pub retry_backoff_ms: Vec<u64>,
    /// Idempotency key propagated to delivery targets.
    pub idempotency_key: String,
    /// Whether the transport should sign payloads when supported.
    pub sign_payload: bool,
    /// Whether only terminal lifecycle states should be delivered.
    pub terminal_only: bool,
}

impl Validate for CallbackDeliveryPolicy {
    fn validate(&self, v: &mut Checker) {
        v.field("target", |v| self.target.validate(v));
    }
}

/// Durable view of one callback delivery attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbackDeliveryAttempt {
    /// One-based attempt number.
    #[serde(deserialize_with = "crate::num::u32")]
    pub attempt: u32,
    /// Attempt start timestamp.
    pub started_at: Timestamp,
    /// Attempt finish timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// Attempt error, when the target rejected the envelope or timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Validate for CallbackDeliveryAttempt {
    fn validate(&self, v: &mut Checker) {
        v.field("started_at", |v| self.started_at.validate(v));
        if let Some(x) = &self.finished_at {
            v.field("finished_at", |v| x.validate(v));
        }
    }
}

/// Filtered callback delivery list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbackDeliveryList {
    /// Delivery records visible to the caller.
    pub deliveries: Vec<CallbackDeliveryRecord>,
    /// Cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl Validate for CallbackDeliveryList {
    fn validate(&self, v: &mut Checker) {
        v.field("deliveries", |v| v.each(&self.deliveries));
        crate::rules::callback_delivery_list(self, v);
    }
}
