//! Settlement batches (spec 18.4) as the store keeps them.

use serde_json::Value;

use super::{NewAudit, NewReceipt};

/// A batch to record with the actions it settles.
#[derive(Debug, Clone)]
pub struct NewSettlement {
    /// Batch id (unique per tenant).
    pub batch_id: String,
    /// Tenant.
    pub tenant: String,
    /// Settlement model.
    pub model: String,
    /// The signed batch envelope.
    pub body: Value,
    /// The actions it settles (each at most once per tenant).
    pub action_ids: Vec<String>,
    /// The batch's receipts.
    pub receipts: Vec<NewReceipt>,
    /// The close's audit event.
    pub audit: NewAudit,
    /// Time, epoch ms.
    pub now_ms: i64,
}

/// A recorded batch.
#[derive(Debug, Clone, PartialEq)]
pub struct SettlementRecord {
    /// Batch id.
    pub batch_id: String,
    /// Tenant.
    pub tenant: String,
    /// Settlement model.
    pub model: String,
    /// The signed batch envelope.
    pub body: Value,
    /// Recorded, epoch ms.
    pub created_at_ms: i64,
}
