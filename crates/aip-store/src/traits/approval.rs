//! Approval workflows and their decisions (spec 12).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Approvals are created with their governed action ([`Admission::approval`]); this trait reads and
/// decides them.
#[async_trait]
pub trait ApprovalStore: Send + Sync + 'static {
    /// One approval of `tenant` by id.
    async fn get_approval(
        &self,
        tenant: &str,
        approval_id: &str,
    ) -> StoreResult<Option<ApprovalRecord>>;

    /// The approval that governs `tenant`'s action, if any.
    async fn approval_of_action(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> StoreResult<Option<ApprovalRecord>>;

    /// An approval's decisions, in the order they were recorded.
    async fn list_decisions(
        &self,
        tenant: &str,
        approval_id: &str,
    ) -> StoreResult<Vec<DecisionRecord>>;

    /// Approvals visible under `query`, oldest first, after `cursor`.
    async fn list_approvals(
        &self,
        query: &ApprovalQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<ApprovalRecord>>;

    /// One compare-and-set write to an approval (see [`ApprovalWrite`]).
    async fn write_approval(&self, write: ApprovalWrite) -> StoreResult<ApprovalWritten>;
}
