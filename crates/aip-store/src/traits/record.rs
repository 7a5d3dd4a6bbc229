//! Application records.

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Records that capabilities keep for themselves (for example the demo's bookings), per tenant and
/// collection.
#[async_trait]
pub trait RecordStore: Send + Sync + 'static {
    /// Inserts an application record; an existing `(collection, record_id)` is
    /// [`crate::StoreError::Duplicate`].
    async fn insert_record(&self, record: AppRecord) -> StoreResult<()>;

    /// [`RecordStore::insert_record`] only while `fence` still owns an unexpired lease at `now_ms`,
    /// checked in the same transaction: a provider effect written this way can never be made by a
    /// worker whose lease was superseded ([`crate::StoreError::StaleLease`], nothing written).
    async fn insert_record_fenced(
        &self,
        record: AppRecord,
        fence: &Fence,
        now_ms: i64,
    ) -> StoreResult<()>;

    /// One of a tenant's records by id.
    async fn get_record(
        &self,
        collection: &str,
        tenant: &str,
        record_id: &str,
    ) -> StoreResult<Option<AppRecord>>;

    /// A tenant's records of a collection, oldest first.
    async fn list_records(
        &self,
        collection: &str,
        tenant: &str,
        limit: Limit,
    ) -> StoreResult<Vec<AppRecord>>;

    /// How many records a tenant has in a collection.
    async fn count_records(&self, collection: &str, tenant: &str) -> StoreResult<u64>;
}
