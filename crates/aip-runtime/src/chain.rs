//! Per-action receipt chains (spec 18.1-18.2): the runtime seals each receipt onto the chain's last hash
//! and hands the store rows that must extend the chain exactly (the store refuses forks).

use std::sync::Arc;

use aip_core::{CorrelationId, Principal, Receipt, ReceiptId, ReceiptRef, ReceiptType, Timestamp};
use aip_store::{ActionRecord, Limit, NewReceipt, Store};
use serde_json::Value;

use crate::caller::Caller;
use crate::error::RuntimeError;

/// Builds the next receipts of one chain.
#[derive(Debug)]
pub struct ChainWriter {
    chain_id: String,
    action_id: String,
    tenant: String,
    principal: String,
    correlation_id: Option<CorrelationId>,
    last: Option<(String, String)>,
    pending: Vec<NewReceipt>,
}

impl ChainWriter {
    /// A new chain for an action being admitted by `caller`.
    pub fn new(action_id: &str, caller: &Caller, correlation_id: Option<CorrelationId>) -> Self {
        Self {
            chain_id: action_id.to_owned(),
            action_id: action_id.to_owned(),
            tenant: caller.tenant.clone(),
            principal: caller.id.clone(),
            correlation_id,
            last: None,
            pending: Vec::new(),
        }
    }

    /// Continue the stored chain of an admitted action.
    pub async fn resume(
        record: &ActionRecord,
        store: &Arc<dyn Store>,
    ) -> Result<Self, RuntimeError> {
        Self::resume_chain(
            (&record.action_id, &record.action_id),
            (&record.tenant, &record.principal),
            record.correlation_id.clone().map(CorrelationId::new),
            store,
        )
        .await
    }

    /// Continue the stored chain `chain_id` about `action_id` (an action's own chain, or the
    /// chain of one of its callback deliveries), owned by `principal` of `tenant`.
    pub(crate) async fn resume_chain(
        (chain_id, action_id): (&str, &str),
        (tenant, principal): (&str, &str),
        correlation_id: Option<CorrelationId>,
        store: &Arc<dyn Store>,
    ) -> Result<Self, RuntimeError> {
        let stored = store.list_receipts(tenant, chain_id, Limit::max()).await?;
        let last = stored
            .last()
            .map(|r| (r.receipt_id.clone(), r.hash.clone()));
        Ok(Self {
            chain_id: chain_id.to_owned(),
            action_id: action_id.to_owned(),
            tenant: tenant.to_owned(),
            principal: principal.to_owned(),
            correlation_id,
            last,
            pending: Vec::new(),
        })
    }

    /// Seal and queue one receipt. `data` holds ids, decisions and hashes, never payloads or secrets.
    pub fn push(&mut self, receipt_type: ReceiptType, actor: &Principal, data: Value, now_ms: i64) {
        let mut receipt = Receipt {
            id: ReceiptId::generate(),
            receipt_type,
            actor: actor.clone(),
            occurred_at: Timestamp::from_unix_millis(now_ms).unwrap_or_else(Timestamp::now),
            correlation_id: self.correlation_id.clone(),
            data: Some(data),
            previous_hash: None,
            hash: None,
        };
        let previous = self.last.as_ref().map(|(_, h)| h.clone());
        aip_core::chain::seal(&mut receipt, previous.as_deref());
        // `seal` always sets the hash.
        let hash = receipt.hash.clone().unwrap_or_default();
        self.pending.push(NewReceipt {
            receipt_id: receipt.id.as_str().to_owned(),
            chain_id: self.chain_id.clone(),
            tenant: self.tenant.clone(),
            principal: Some(self.principal.clone()),
            action_id: Some(self.action_id.clone()),
            receipt_type: receipt_type.as_str().to_owned(),
            hash: hash.clone(),
            previous_hash: previous,
            created_at_ms: now_ms,
            // Serializing a receipt cannot fail: its map keys are strings and no impl returns an error.
            body: serde_json::to_value(&receipt).unwrap_or(Value::Null),
        });
        self.last = Some((receipt.id.as_str().to_owned(), hash));
    }

    /// The receipts sealed since the last take, for one store transaction.
    pub fn take(&mut self) -> Vec<NewReceipt> {
        std::mem::take(&mut self.pending)
    }

    /// A reference to the chain's last receipt (for `ActionResult.receipt`).
    pub fn last_ref(&self) -> Option<ReceiptRef> {
        self.last.as_ref().map(|(id, hash)| ReceiptRef {
            id: ReceiptId::new(id.clone()),
            hash: hash.clone(),
        })
    }
}
