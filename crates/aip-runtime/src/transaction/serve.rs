//! The transaction messages (spec 13, 16): `aip.transaction.v1.request` admits its action through
//! the same admission as any action and answers with a `transaction_result` (or an ack while it
//! runs); `aip.transaction.v1.query_request` answers with the durable `transaction_view`.

use std::sync::Arc;

use aip_core::{
    ActionTransaction, Envelope, MessageBody, TransactionId, TransactionProtocolStatus,
    TransactionQueryRequest, TransactionRequest, TransactionResult, TransactionView,
};
use aip_store::{ActionRecord, TransactionRecord};

use crate::action::{Submitted, result};
use crate::admission::ActionRequest;
use crate::caller::Caller;
use crate::error::{RuntimeError, TransactionError};
use crate::reply::Reply;
use crate::runtime::Runtime;
use crate::transaction::status::{self, Outcome};
use crate::transaction::{Slot, slot_of};

impl Runtime {
    /// `aip.transaction.v1.request`: the action runs under its transaction context (13.1: the
    /// request's transaction id must agree with the action's; the requester is the caller).
    pub(crate) async fn serve_transaction_request(
        self: &Arc<Self>,
        caller: &Caller,
        request: &Envelope,
        body: &TransactionRequest,
    ) -> Result<Reply, RuntimeError> {
        if body.requested_by.id.as_str() != caller.id {
            return Err(RuntimeError::PrincipalMismatch("requested_by"));
        }
        let mut action = body.action.clone();
        let Some(context) = action.transaction.as_mut() else {
            return Err(TransactionError::ModeUnsupported(
                "a transaction request's action carries a transaction context".into(),
            )
            .into());
        };
        match &context.transaction_id {
            Some(id) if *id != body.transaction_id => {
                return Err(TransactionError::PlanMismatch(
                    "the request's transaction_id differs from the action's".into(),
                )
                .into());
            }
            Some(_) => {}
            None => context.transaction_id = Some(body.transaction_id.clone()),
        }
        if body.provider_operation.is_some() || body.reconciliation_cursor.is_some() {
            self.check_reconciliation_request(caller, body).await?;
        }
        let submitted = self
            .submit_action(caller, ActionRequest::from_envelope(request, &action))
            .await?;
        match submitted {
            Submitted::Result { result, .. } => {
                let result = self
                    .transaction_result_of(caller, result.action_id.as_str())
                    .await?;
                Ok(Reply::done(request, MessageBody::TransactionResult(result)))
            }
            other => Ok(crate::action::reply(request, other)),
        }
    }

    /// A request may name the provider operation and the reconciliation cursor it expects (spec
    /// 13.6): they must be the ones the runtime retained for the caller's transaction.
    async fn check_reconciliation_request(
        &self,
        caller: &Caller,
        body: &TransactionRequest,
    ) -> Result<(), RuntimeError> {
        let record = self
            .store()
            .get_transaction(&caller.tenant, body.transaction_id.as_str())
            .await?
            .filter(|r| r.principal == caller.id);
        if let Some(named) = &body.provider_operation {
            let stored = record.as_ref().and_then(|r| r.operation.clone());
            if stored != serde_json::to_value(named).ok() {
                return Err(TransactionError::PlanMismatch(
                    "provider_operation is not the transaction's recorded operation".into(),
                )
                .into());
            }
        }
        if let Some(cursor) = &body.reconciliation_cursor {
            let retained = match &record {
                Some(record) => self.derive(record).await?.reconciliation_cursor,
                None => None,
            };
            if retained.as_deref() != Some(cursor.as_str()) {
                return Err(TransactionError::PlanMismatch(
                    "reconciliation_cursor is not the one the last reconciliation returned".into(),
                )
                .into());
            }
        }
        Ok(())
    }

    /// The `transaction_result` of one transactional action of the caller's.
    pub(crate) async fn transaction_result_of(
        &self,
        caller: &Caller,
        action_id: &str,
    ) -> Result<TransactionResult, RuntimeError> {
        let record = self.visible_action(caller, action_id).await?;
        let mut slot = slot_of(&record)?.ok_or(RuntimeError::NotFound("transaction"))?;
        // A commit's operation is what its provider reported, once it has (recorded on the row).
        if let Some((row, _)) = self
            .store()
            .transaction_of_action(&record.tenant, &record.action_id)
            .await?
            && row.commit_action_id.as_deref() == Some(record.action_id.as_str())
            && let Some(operation) = row.operation.and_then(|o| serde_json::from_value(o).ok())
        {
            slot.operation = Some(operation);
        }
        step_result(&record, &slot)
    }

    /// `aip.transaction.v1.query_request` and `GET /aip/v1/transactions/...`: the transaction by id,
    /// plan id or action id, visible to its principal and to readers of its whole tenant; any other
    /// reader gets `NotFound`, exactly as for a missing id (spec 16.3).
    pub async fn read_transaction(
        &self,
        caller: &Caller,
        query: &TransactionQueryRequest,
    ) -> Result<TransactionView, RuntimeError> {
        self.check_tenant(caller, query.tenant_id.as_deref())?;
        let store = self.store();
        let tenant = &caller.tenant;
        let found = match (&query.transaction_id, &query.plan_id, &query.action_id) {
            (Some(id), None, None) => store.get_transaction(tenant, id.as_str()).await?,
            (None, Some(plan), None) => store.transaction_by_plan(tenant, plan).await?,
            (None, None, Some(action)) => store
                .transaction_of_action(tenant, action.as_str())
                .await?
                .map(|(r, _)| r),
            _ => {
                return Err(RuntimeError::InvalidQuery(
                    "name exactly one of transaction_id, plan_id and action_id",
                ));
            }
        };
        let record = found
            .filter(|r| caller.may_read(&r.tenant, &r.principal))
            .ok_or(RuntimeError::NotFound("transaction"))?;
        let mut view = self
            .transaction_view(
                caller,
                &record,
                query.include_result,
                query.include_receipts,
            )
            .await?;
        // The planned input is its owner's: a tenant-wide reader sees the plan without it (its
        // hash still binds the plan).
        if record.principal != caller.id
            && let Some(plan) = view.plan.as_mut()
        {
            plan.input_snapshot = None;
        }
        Ok(view)
    }

    /// The view of `record` for `caller`: the current step's result is withheld, exactly as on
    /// the action's own reads, when its data is sensitive and `caller` is neither its owner nor a
    /// `data:sensitive` reader (spec 9.6, 16.3).
    async fn transaction_view(
        &self,
        caller: &Caller,
        record: &TransactionRecord,
        include_result: bool,
        include_receipts: bool,
    ) -> Result<TransactionView, RuntimeError> {
        let derived = self.derive(record).await?;
        let current = match derived.current_action.as_deref() {
            Some(id) => self.store().get_action(&record.tenant, id).await?,
            None => None,
        };
        let current = current.ok_or_else(|| {
            RuntimeError::Storage(aip_store::StoreError::Corrupt(format!(
                "transaction {} has no current action",
                record.transaction_id
            )))
        })?;
        let slot = slot_of(&current)?;
        let plan = record
            .plan
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| RuntimeError::Storage(aip_store::StoreError::Corrupt(e.to_string())))?;
        let result = if include_result {
            let stored = result::stored(&current)?;
            match self.withheld_output(caller, &current) {
                Some(_) => stored.map(crate::read::withhold),
                None => stored,
            }
        } else {
            None
        };
        let receipt_chain = if include_receipts {
            Some(self.chain_of(&current.tenant, &current.action_id).await?)
        } else {
            None
        };
        let time = |ms: i64| {
            aip_core::Timestamp::from_unix_millis(ms).ok_or_else(|| {
                RuntimeError::Storage(aip_store::StoreError::Corrupt("transaction time".into()))
            })
        };
        Ok(TransactionView {
            transaction_id: TransactionId::new(record.transaction_id.clone()),
            action_id: aip_core::ActionId::new(current.action_id.clone()),
            capability_id: aip_core::CapabilityId::new(current.capability.clone()),
            transaction: slot.as_ref().map_or_else(
                || ActionTransaction {
                    mode: aip_core::TransactionMode::Execute,
                    transaction_id: Some(TransactionId::new(record.transaction_id.clone())),
                    plan_id: None,
                    compensation_for: None,
                },
                context_of,
            ),
            status: derived.label().to_owned(),
            plan,
            result,
            receipt_chain,
            created_at: time(record.created_at_ms)?,
            updated_at: time(record.updated_at_ms.max(current.updated_at_ms))?,
        })
    }
}

/// The wire transaction context a slot stands for.
pub(crate) fn context_of(slot: &Slot) -> ActionTransaction {
    ActionTransaction {
        mode: slot.mode,
        transaction_id: Some(TransactionId::new(slot.transaction_id.clone())),
        plan_id: slot.plan_id.clone(),
        compensation_for: slot
            .compensates
            .as_ref()
            .map(|c| aip_core::ActionId::new(c.action_id.clone())),
    }
}

/// The `transaction_result` of one step (spec 13.5): a failed one carries its error (the action
/// result's, which the result also carries), a planned one its plan (13.3).
pub(crate) fn step_result(
    record: &ActionRecord,
    slot: &Slot,
) -> Result<TransactionResult, RuntimeError> {
    let stored = result::stored(record)?;
    let status =
        status::of_step(slot.mode, record).unwrap_or(TransactionProtocolStatus::Committing);
    let error = match status {
        TransactionProtocolStatus::Failed
        | TransactionProtocolStatus::OutcomeUnknown
        | TransactionProtocolStatus::Cancelled => stored.as_ref().and_then(|r| r.error.clone()),
        _ => None,
    };
    let (reconcile_after, reconciliation_cursor) = match status::reconciled(stored.as_ref()) {
        Some(Outcome::Pending(at, cursor)) => {
            (at.and_then(aip_core::Timestamp::from_unix_millis), cursor)
        }
        _ => (None, None),
    };
    // Only a plan step carries its plan: a result's plan must name the result's own action
    // (spec 13.3), and a commit is another action than the plan's.
    let plan = match slot.mode {
        aip_core::TransactionMode::Plan => slot.plan.clone(),
        _ => None,
    };
    Ok(TransactionResult {
        transaction_id: TransactionId::new(slot.transaction_id.clone()),
        action_id: aip_core::ActionId::new(record.action_id.clone()),
        capability_id: aip_core::CapabilityId::new(record.capability.clone()),
        transaction: context_of(slot),
        status,
        plan,
        result: stored,
        error,
        receipt_chain: None,
        provider_operation: slot.operation.clone(),
        reconciliation_cursor,
        reconcile_after,
    })
}
