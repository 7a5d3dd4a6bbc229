//! Callback deliveries (spec 17): the durable outbox. An action admitted with a callback carries a
//! [`CallbackSubscription`]; every transition of that action into a state the subscription covers
//! queues one delivery in the transition's own transaction (so a settled action never lacks its
//! delivery, and a delivery never exists for a transition that did not commit). Each delivery has
//! its own job in the `callbacks` queue (job id = delivery id), whose fenced lease is the
//! delivery's lease.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ActionState;

/// The queue callback deliveries wait in.
pub const CALLBACK_QUEUE: &str = "callbacks";

/// What an admitted action's callback asks for; the runtime owns `spec` (the validated target and
/// delivery policy), the store keeps the columns its queries and hook need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallbackSubscription {
    /// Callback profile id (for list filters).
    pub profile: String,
    /// Target URI or subject (for list filters).
    pub target: String,
    /// Only terminal states are delivered.
    pub terminal_only: bool,
    /// Attempts each delivery may make (its job's `max_attempts`), at least 1.
    pub max_attempts: u32,
    /// The runtime's policy and target, opaque to the store.
    pub spec: Value,
}

string_enum!(
    /// A delivery's state (spec 17.3).
    DeliveryStatus {
        /// Waiting for its (next) attempt.
        Pending = "pending",
        /// An attempt is in progress.
        Running = "running",
        /// The target acknowledged it.
        Delivered = "delivered",
        /// The target refused it permanently (or its address is no longer allowed).
        Failed = "failed",
        /// Out of attempts: parked until an operator re-drives it.
        DeadLettered = "dead_lettered",
    }
);

impl DeliveryStatus {
    /// Delivered, failed or dead-lettered: no worker attempts it again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            DeliveryStatus::Delivered | DeliveryStatus::Failed | DeliveryStatus::DeadLettered
        )
    }
}

/// One recorded attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryAttempt {
    /// One-based attempt number.
    pub attempt: u32,
    /// Start, epoch ms.
    pub started_at_ms: i64,
    /// End, epoch ms; `None` while running or when the worker stopped mid-attempt.
    pub finished_at_ms: Option<i64>,
    /// Why it did not deliver.
    pub error: Option<String>,
}

/// A stored delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    /// Delivery id (globally unique, stable across retries).
    pub delivery_id: String,
    /// Tenant of the action.
    pub tenant: String,
    /// Owner of the action.
    pub principal: String,
    /// The action.
    pub action_id: String,
    /// Its session, if any.
    pub session_id: Option<String>,
    /// Its correlation id, if any.
    pub correlation_id: Option<String>,
    /// The id of the message delivered (stable across retries).
    pub message_id: String,
    /// The state the action entered (what is delivered).
    pub action_state: ActionState,
    /// The action's version after that transition.
    pub action_version: i64,
    /// Callback profile.
    pub profile: String,
    /// Target.
    pub target: String,
    /// The subscription's spec (runtime-owned).
    pub spec: Value,
    /// Status.
    pub status: DeliveryStatus,
    /// Attempts, oldest first.
    pub attempts: Vec<DeliveryAttempt>,
    /// When a retry is due, epoch ms.
    pub next_attempt_at_ms: Option<i64>,
    /// The last error.
    pub last_error: Option<String>,
    /// Why it was dead-lettered or failed.
    pub dead_letter_reason: Option<String>,
    /// The worker holding its lease, while one does.
    pub leased_by: Option<String>,
    /// That lease's expiry, epoch ms.
    pub lease_expires_at_ms: Option<i64>,
    /// Created, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
    /// Delivered, failed or dead-lettered at, epoch ms.
    pub completed_at_ms: Option<i64>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The target acknowledged (2xx recorded before the delivery counts as complete).
    Delivered,
    /// Try again at `at_ms`.
    Retry {
        /// Due time, epoch ms.
        at_ms: i64,
        /// What went wrong.
        error: String,
    },
    /// Permanently refused: no retry.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// Out of attempts.
    DeadLettered {
        /// What went wrong last.
        error: String,
        /// Why it is parked.
        reason: String,
    },
}

/// A filtered delivery list of one tenant (spec 16.3: filters only narrow).
#[derive(Debug, Clone, Default)]
pub struct DeliveryQuery {
    /// Tenant.
    pub tenant: String,
    /// Only deliveries of this principal's actions; `None` for tenant-wide readers.
    pub principal: Option<String>,
    /// Only this action's deliveries.
    pub action_id: Option<String>,
    /// Only this status.
    pub status: Option<DeliveryStatus>,
    /// Only this profile.
    pub profile: Option<String>,
    /// Only this exact target.
    pub target: Option<String>,
}

/// A callback subscription added to an admitted action (an A2A push notification config, say):
/// every later transition into a state it covers queues a delivery, like the admitted callback.
#[derive(Debug, Clone, PartialEq)]
pub struct NewActionSubscription {
    /// Tenant of the action.
    pub tenant: String,
    /// The action.
    pub action_id: String,
    /// Subscription id, unique per action (a write with a taken id replaces it).
    pub subscription_id: String,
    /// Who subscribed.
    pub principal: String,
    /// What to deliver, where.
    pub subscription: CallbackSubscription,
    /// Time, epoch ms.
    pub created_at_ms: i64,
}

/// A stored action subscription.
pub type ActionSubscriptionRecord = NewActionSubscription;
