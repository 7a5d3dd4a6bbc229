//! Callback deliveries (spec 17.3): the outbox's reads and its fenced attempt writes. Deliveries are
//! created by action transitions ([`crate::Admission::callback`]), never by this trait.

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// The callback outbox.
#[async_trait]
pub trait CallbackStore: Send + Sync + 'static {
    /// Adds (or, under a taken id, replaces) a subscription of a live action; at most `max` per
    /// action. An unknown action is [`crate::StoreError::NotFound`], an ended one
    /// [`crate::StoreError::Terminal`], one too many [`crate::StoreError::InvalidInput`].
    async fn add_action_subscription(
        &self,
        subscription: NewActionSubscription,
        max: u32,
    ) -> StoreResult<()>;

    /// An action's subscriptions, oldest first.
    async fn list_action_subscriptions(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> StoreResult<Vec<ActionSubscriptionRecord>>;

    /// Removes one subscription; whether it existed. Deliveries already queued stay.
    async fn remove_action_subscription(
        &self,
        tenant: &str,
        action_id: &str,
        subscription_id: &str,
    ) -> StoreResult<bool>;

    /// One delivery of `tenant`.
    async fn get_delivery(
        &self,
        tenant: &str,
        delivery_id: &str,
    ) -> StoreResult<Option<DeliveryRecord>>;

    /// A page of the deliveries matching `q`, oldest first.
    async fn list_deliveries(
        &self,
        q: &DeliveryQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<DeliveryRecord>>;

    /// Starts an attempt of the delivery whose job `fence` holds: records the attempt (closing an
    /// earlier one a stopped worker left open) and marks it running. A delivery already delivered,
    /// failed or dead-lettered is returned unchanged (its job is then completed by the caller).
    async fn start_delivery_attempt(
        &self,
        fence: &Fence,
        now_ms: i64,
    ) -> StoreResult<DeliveryRecord>;

    /// Records how the running attempt ended, with its receipts, and settles the delivery's job in
    /// the same transaction: done, or ready again at the retry time.
    async fn finish_delivery_attempt(
        &self,
        fence: &Fence,
        outcome: DeliveryOutcome,
        receipts: Vec<NewReceipt>,
        now_ms: i64,
    ) -> StoreResult<DeliveryRecord>;

    /// Queues a failed or dead-lettered delivery again with `max_attempts` fresh attempts (same
    /// delivery id and message); [`crate::StoreError::StateConflict`] for any other status.
    async fn redrive_delivery(
        &self,
        tenant: &str,
        delivery_id: &str,
        max_attempts: u32,
        now_ms: i64,
    ) -> StoreResult<DeliveryRecord>;

    /// Dead-letters open deliveries whose job can never run again (its attempts were used up by
    /// workers that stopped mid-attempt), returning them.
    async fn dead_letter_stranded(
        &self,
        now_ms: i64,
        reason: &str,
    ) -> StoreResult<Vec<DeliveryRecord>>;
}
