//! Economic settlement (spec 18.4), optional and never on the execution path: a capability whose
//! manifest `cost` states a per-call price (`{"per_call": {"amount_minor": 25, "currency": "USD"}}`)
//! accrues that price for each of its completed actions, per tenant and external account (the
//! account bound to the caller by configuration, else the principal). Closing a batch
//! (`aip.economic.v1.batch_settlement` with no records, `POST /aip/v1/settlements`, `aip settlement
//! close`) settles every completed, unsettled action at once: the batch is a native envelope signed
//! by the node's key, with one record per action (linked to the root hash of the action's receipt
//! chain), and its own receipt chain whose `settlement_recorded` receipt binds the batch hash.
//! Each action is settled once: the batch claims it in the transaction that records the batch.

use std::collections::BTreeMap;

use aip_core::{BatchSettlement, Envelope, MessageBody, ReceiptChain, ReceiptType};
use aip_store::{Limit, NewSettlement, StoreError};
use serde::Serialize;
use serde_json::{Value, json};

use crate::admission::admitted::AdmittedRequest;
use crate::caller::Caller;
use crate::chain::ChainWriter;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::read::views;
use crate::runtime::Runtime;
use crate::scope::{SCOPE_ALL, SCOPE_SETTLEMENT};

/// The one settlement model: a fixed price per completed action.
pub const MODEL_PER_CALL: &str = "per_call";
/// Most actions one batch settles; the rest wait for the next batch.
pub const MAX_BATCH_ACTIONS: u32 = 1000;

/// A capability's per-call price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerCall {
    /// Price in the currency's minor unit.
    pub amount_minor: u64,
    /// ISO 4217 code.
    pub currency: String,
}

/// The per-call price a manifest `cost` states: `None` without `per_call` (the cost is then only a
/// hint and nothing is settled); an error for a `per_call` that is not a valid price.
pub fn per_call(cost: Option<&Value>) -> Result<Option<PerCall>, String> {
    let Some(price) = cost.and_then(|c| c.get("per_call")) else {
        return Ok(None);
    };
    let amount = price
        .get("amount_minor")
        .and_then(Value::as_u64)
        .ok_or("cost.per_call.amount_minor must be a non-negative integer")?;
    let currency = price
        .get("currency")
        .and_then(Value::as_str)
        .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()))
        .ok_or("cost.per_call.currency must be a three-letter upper-case ISO 4217 code")?;
    Ok(Some(PerCall {
        amount_minor: amount,
        currency: currency.to_owned(),
    }))
}

/// A recorded batch: the signed envelope and its receipt chain.
#[derive(Debug, Clone, Serialize)]
pub struct SettlementView {
    /// The `aip.economic.v1.batch_settlement` envelope, signed by the node key.
    pub envelope: Value,
    /// The batch's receipt chain (verifiable with `aip receipts verify`).
    pub receipt_chain: ReceiptChain,
}

impl Caller {
    fn may_settle(&self) -> bool {
        self.has(SCOPE_ALL) || self.has(SCOPE_SETTLEMENT)
    }
}

impl Runtime {
    /// Closes the batch `request.id` of the caller's tenant (an existing batch of that id is
    /// returned as it was recorded).
    pub async fn close_settlement(
        &self,
        caller: &Caller,
        request: &BatchSettlement,
    ) -> Result<SettlementView, RuntimeError> {
        if !caller.may_settle() {
            return Err(RuntimeError::ScopeDenied(format!(
                "closing a settlement batch (it needs {SCOPE_SETTLEMENT})"
            )));
        }
        if request.id.is_empty()
            || request.id.len() > 128
            || !request.id.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(RuntimeError::InvalidInput(
                "a batch id is 1 to 128 visible ASCII characters".into(),
            ));
        }
        if request.model != MODEL_PER_CALL {
            return Err(RuntimeError::InvalidInput(format!(
                "settlement model {:?} is not supported: this runtime settles `{MODEL_PER_CALL}`",
                request.model
            )));
        }
        if !request.records.is_empty() {
            return Err(RuntimeError::InvalidInput(
                "a batch is requested without records: the runtime computes them from completed actions".into(),
            ));
        }
        if self
            .store()
            .get_settlement(&caller.tenant, &request.id)
            .await?
            .is_some()
        {
            return self.read_settlement(caller, &request.id).await;
        }
        let key = self.node_key().ok_or(RuntimeError::UnsupportedMessage(
            "settlement needs the node's signing key".into(),
        ))?;
        let mut prices = BTreeMap::new();
        for admitted in self.registry().all() {
            if let Ok(Some(price)) = per_call(admitted.capability.cost.as_ref()) {
                prices.insert(admitted.capability.id.as_str().to_owned(), price);
            }
        }
        let capabilities: Vec<String> = prices.keys().cloned().collect();
        let limit = Limit::new(MAX_BATCH_ACTIONS).map_err(RuntimeError::Storage)?;
        let actions = self
            .store()
            .unsettled_actions(&caller.tenant, &capabilities, limit)
            .await?;
        let mut records = Vec::with_capacity(actions.len());
        let mut totals: BTreeMap<(String, String), u64> = BTreeMap::new();
        for action in &actions {
            let Some(price) = prices.get(&action.capability) else {
                continue;
            };
            let account = match AdmittedRequest::of(action)?.caller.external_account {
                Some(a) => format!("{}:{}", a.system, a.id),
                None => format!("principal:{}", action.principal),
            };
            let receipts = self
                .store()
                .list_receipts(&action.tenant, &action.action_id, Limit::max())
                .await?;
            // A chain purged by retention is still named by the root its tombstone kept.
            let purged = match receipts.is_empty() {
                true => self
                    .store()
                    .chain_tombstone(&action.tenant, &action.action_id)
                    .await?
                    .map(|t| t.root_hash),
                false => None,
            };
            let root = purged.unwrap_or_else(|| {
                aip_core::chain::root_hash(receipts.iter().map(|r| r.hash.as_str()))
            });
            let total = totals
                .entry((account.clone(), price.currency.clone()))
                .or_default();
            *total = total.saturating_add(price.amount_minor);
            records.push(json!({
                "action_id": action.action_id, "capability_id": action.capability,
                "principal": action.principal, "account": account,
                "amount_minor": price.amount_minor, "currency": price.currency,
                "completed_at": views::ts(action.updated_at_ms)?, "receipt_root_hash": root,
            }));
        }
        let batch = BatchSettlement {
            id: request.id.clone(),
            model: MODEL_PER_CALL.into(),
            records,
        };
        let now = now_ms();
        let mut envelope = Envelope::new(MessageBody::BatchSettlement(batch.clone()));
        envelope.sent_at = views::ts(now)?;
        envelope.from = Some(self.config().agent.clone());
        let signed = aip_core::signing::sign_envelope(&envelope, key)
            .map_err(|_| RuntimeError::Internal("the settlement envelope could not be signed"))?;
        let records_hash = aip_core::canonical::canonical_hash(
            &serde_json::to_value(&batch.records)
                .map_err(|_| RuntimeError::Internal("unserializable settlement records"))?,
        );
        let totals: Vec<Value> = totals
            .into_iter()
            .map(|((account, currency), amount)| {
                json!({ "account": account, "currency": currency, "amount_minor": amount })
            })
            .collect();
        let mut chain = ChainWriter::new(&batch.id, caller, None);
        chain.push(
            ReceiptType::SettlementRecorded,
            &self.config().agent,
            json!({ "batch_id": batch.id, "model": batch.model, "records": batch.records.len(),
                    "records_hash": records_hash, "totals": totals,
                    "message_id": envelope.message_id, "signer": signed.pointer("/security/did") }),
            now,
        );
        let audit = crate::events::new_audit(
            caller,
            "settlement.closed",
            now,
            json!({ "batch_id": batch.id, "records": batch.records.len(), "records_hash": records_hash }),
            (None, None),
        );
        let written = self
            .store()
            .record_settlement(NewSettlement {
                batch_id: batch.id.clone(),
                tenant: caller.tenant.clone(),
                model: batch.model.clone(),
                body: signed,
                action_ids: actions.iter().map(|a| a.action_id.clone()).collect(),
                receipts: chain.take(),
                audit,
                now_ms: now,
            })
            .await;
        match written {
            Ok(_) => {}
            // Another close took the id or one of these actions first: the caller reads the batch
            // that exists, or closes again.
            // (the batch id is the close's idempotency key).
            Err(StoreError::Duplicate { .. }) => return Err(RuntimeError::IdempotencyConflict),
            Err(other) => return Err(other.into()),
        }
        self.read_settlement(caller, &batch.id).await
    }

    /// A recorded batch of the caller's tenant, with its receipt chain; `NotFound` without the
    /// settlement scope, exactly as for an unknown batch.
    pub async fn read_settlement(
        &self,
        caller: &Caller,
        batch_id: &str,
    ) -> Result<SettlementView, RuntimeError> {
        if !caller.may_settle() {
            return Err(RuntimeError::NotFound("settlement batch"));
        }
        let record = self
            .store()
            .get_settlement(&caller.tenant, batch_id)
            .await?
            .ok_or(RuntimeError::NotFound("settlement batch"))?;
        let receipts = self
            .store()
            .list_receipts(&caller.tenant, batch_id, Limit::max())
            .await?;
        Ok(SettlementView {
            envelope: record.body,
            receipt_chain: views::chain(batch_id, &receipts)?,
        })
    }
}
