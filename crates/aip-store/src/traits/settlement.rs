//! Settlement batches (spec 18.4).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Settlement batches and the claim of each action they settle.
#[async_trait]
pub trait SettlementStore: Send + Sync + 'static {
    /// `tenant`'s completed actions of `capabilities` that no batch settled yet, oldest first.
    async fn unsettled_actions(
        &self,
        tenant: &str,
        capabilities: &[String],
        limit: Limit,
    ) -> StoreResult<Vec<ActionRecord>>;

    /// Records a batch, claims its actions and appends its receipts and audit event, all or
    /// nothing: a batch id or an action already claimed is [`crate::StoreError::Duplicate`].
    async fn record_settlement(&self, batch: NewSettlement) -> StoreResult<SettlementRecord>;

    /// One of `tenant`'s batches.
    async fn get_settlement(
        &self,
        tenant: &str,
        batch_id: &str,
    ) -> StoreResult<Option<SettlementRecord>>;
}
