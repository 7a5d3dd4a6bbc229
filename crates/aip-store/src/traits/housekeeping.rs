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
}
