//! Receipts and audit (spec 18).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Append-only evidence: hash-chained receipts and audit events.
#[async_trait]
pub trait ReceiptStore: Send + Sync + 'static {
    /// Appends one receipt, checking it extends its chain.
    async fn append_receipt(&self, receipt: NewReceipt) -> StoreResult<ReceiptRecord>;

    /// The receipts of `tenant`'s chain in order (at most `limit`); chain ids are unique per tenant.
    async fn list_receipts(
        &self,
        tenant: &str,
        chain_id: &str,
        limit: Limit,
    ) -> StoreResult<Vec<ReceiptRecord>>;

    /// One receipt of `tenant` by id: the tenant is part of the query, so another tenant's
    /// receipt is not found (spec 22.6).
    async fn get_receipt(
        &self,
        tenant: &str,
        receipt_id: &str,
    ) -> StoreResult<Option<ReceiptRecord>>;

    /// Appends an audit event (append-only: the schema refuses updates and deletes).
    async fn append_audit(&self, audit: NewAudit) -> StoreResult<AuditRecord>;

    /// Audit events visible under `query`, after `cursor`.
    async fn list_audit(
        &self,
        query: &AuditQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<AuditRecord>>;
}
