//! Housekeeping: which backend, whether it answers, and removing what has expired.

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// What operating a store needs beyond its aggregates.
#[async_trait]
pub trait HousekeepingStore: Send + Sync + 'static {
    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// Round-trips to the database (for `/ready`).
    async fn ping(&self) -> StoreResult<()>;

    /// Removes expired replay claims, idempotency reservations and resume tokens.
    async fn purge_expired(&self, now_ms: i64) -> StoreResult<PurgeReport>;

    /// Removes history past retention: events by age (a prefix of the listing order, whose end is
    /// remembered so a cursor into it is [`crate::StoreError::CursorExpired`]), and the chunks of
    /// actions that ended before the cutoff (a chunk cursor of such an action is then expired too).
    /// Receipts and audit events are never removed.
    async fn purge_history(&self, cutoffs: RetentionCutoffs) -> StoreResult<HistoryPurge>;
}
