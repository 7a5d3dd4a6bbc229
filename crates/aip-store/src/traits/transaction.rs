//! Transactions (spec 13).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Transactions are created and claimed in their actions' admissions
/// ([`Admission::transaction`]); this trait reads them.
#[async_trait]
pub trait TransactionStore: Send + Sync + 'static {
    /// One transaction of `tenant` by id.
    async fn get_transaction(
        &self,
        tenant: &str,
        transaction_id: &str,
    ) -> StoreResult<Option<TransactionRecord>>;

    /// The transaction holding plan `plan_id` of `tenant`.
    async fn transaction_by_plan(
        &self,
        tenant: &str,
        plan_id: &str,
    ) -> StoreResult<Option<TransactionRecord>>;

    /// The transaction `tenant`'s action belongs to, with the action's role in it.
    async fn transaction_of_action(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> StoreResult<Option<(TransactionRecord, TransactionRole)>>;
}
