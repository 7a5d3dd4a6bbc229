//! Callback delivery reads (spec 16, 17.3) and the operator's re-drive. A delivery is visible to
//! whoever may read its action; others get "not found", and lists never count what they hide.

use aip_core::{
    ActionId, Callback, CallbackDeliveryAttempt, CallbackDeliveryList, CallbackDeliveryListRequest,
    CallbackDeliveryPolicy, CallbackDeliveryQueryRequest, CallbackDeliveryRecord,
    CallbackDeliveryStatus, CorrelationId, MessageId, ProfileId, SessionId,
};
use aip_store::{DeliveryQuery, DeliveryRecord, DeliveryStatus, StoreError};

use super::DeliverySpec;
use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::{CallbackError, RuntimeError};
use crate::read::views::{corrupt, ts};
use crate::runtime::Runtime;
use crate::scope::{SCOPE_ALL, SCOPE_CALLBACKS_REDRIVE};

impl Runtime {
    /// `callback_delivery_query_request`: one delivery the caller may read.
    pub async fn read_callback_delivery(
        &self,
        caller: &Caller,
        request: &CallbackDeliveryQueryRequest,
    ) -> Result<CallbackDeliveryRecord, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        let delivery = self.visible_delivery(caller, &request.delivery_id).await?;
        self.delivery_view(&delivery, request.include_receipts)
            .await
    }

    /// `callback_delivery_list_request`: the deliveries the caller may read that match every
    /// filter, oldest first.
    pub async fn read_callback_deliveries(
        &self,
        caller: &Caller,
        request: &CallbackDeliveryListRequest,
    ) -> Result<CallbackDeliveryList, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        let limit = self.limit(request.limit)?;
        let Ok(principal) = self.reader_bound(caller, None) else {
            return Ok(CallbackDeliveryList {
                deliveries: Vec::new(),
                cursor: None,
            });
        };
        let query = DeliveryQuery {
            tenant: caller.tenant.clone(),
            principal,
            action_id: request.action_id.as_ref().map(|a| a.as_str().to_owned()),
            status: request.status.map(store_status),
            profile: request.profile.as_ref().map(|p| p.as_str().to_owned()),
            target: request.target.clone(),
        };
        let page = self
            .store()
            .list_deliveries(&query, request.cursor.as_deref(), limit)
            .await?;
        let mut deliveries = Vec::with_capacity(page.items.len());
        for d in &page.items {
            deliveries.push(self.delivery_view(d, request.include_receipts).await?);
        }
        Ok(CallbackDeliveryList {
            deliveries,
            cursor: Some(page.next_cursor),
        })
    }

    /// Queues a failed or dead-lettered delivery again (same delivery id and message) with the
    /// attempts its policy allows. Needs [`crate::scope::SCOPE_CALLBACKS_REDRIVE`] (or `*`); audited.
    pub async fn redrive_callback_delivery(
        &self,
        caller: &Caller,
        delivery_id: &str,
    ) -> Result<CallbackDeliveryRecord, RuntimeError> {
        let delivery = self.visible_delivery(caller, delivery_id).await?;
        if !caller
            .scopes
            .iter()
            .any(|s| s == SCOPE_ALL || s == SCOPE_CALLBACKS_REDRIVE)
        {
            return Err(RuntimeError::ScopeDenied(SCOPE_CALLBACKS_REDRIVE.into()));
        }
        let spec = spec_of(&delivery)?;
        let now = now_ms();
        let redriven = self
            .store()
            .redrive_delivery(&caller.tenant, delivery_id, spec.max_attempts, now)
            .await
            .map_err(|e| match e {
                StoreError::StateConflict { actual } => CallbackError::NotRedrivable(actual).into(),
                other => RuntimeError::from(other),
            })?;
        self.callbacks_ready().notify_one();
        self.record_audit(
            caller,
            "callback.redrive",
            now,
            serde_json::json!({ "delivery_id": delivery_id, "previous_status": delivery.status.as_str() }),
            (Some(&delivery.action_id), None),
        )
        .await?;
        self.delivery_view(&redriven, false).await
    }

    async fn visible_delivery(
        &self,
        caller: &Caller,
        delivery_id: &str,
    ) -> Result<DeliveryRecord, RuntimeError> {
        match self
            .store()
            .get_delivery(&caller.tenant, delivery_id)
            .await?
        {
            Some(d) if caller.may_read(&d.tenant, &d.principal) => Ok(d),
            _ => Err(RuntimeError::NotFound("callback delivery")),
        }
    }

    async fn delivery_view(
        &self,
        d: &DeliveryRecord,
        include_receipts: bool,
    ) -> Result<CallbackDeliveryRecord, RuntimeError> {
        let spec = spec_of(d)?;
        let receipt_chain = if include_receipts {
            Some(self.chain_of(&d.tenant, &d.delivery_id).await?)
        } else {
            None
        };
        let opt_ts = |ms: Option<i64>| ms.map(ts).transpose();
        let mut attempts = Vec::with_capacity(d.attempts.len());
        for a in &d.attempts {
            attempts.push(CallbackDeliveryAttempt {
                attempt: a.attempt,
                started_at: ts(a.started_at_ms)?,
                finished_at: opt_ts(a.finished_at_ms)?,
                error: a.error.clone(),
            });
        }
        Ok(CallbackDeliveryRecord {
            delivery_id: d.delivery_id.clone(),
            policy: CallbackDeliveryPolicy {
                delivery_id: d.delivery_id.clone(),
                target: Callback {
                    profile: ProfileId::new(spec.profile.clone()),
                    target: spec.target.clone(),
                    metadata: None,
                },
                max_attempts: spec.max_attempts,
                timeout_ms: spec.timeout_ms,
                retry_backoff_ms: spec.retry_backoff_ms.clone(),
                idempotency_key: d.delivery_id.clone(),
                sign_payload: spec.sign_payload,
                terminal_only: spec.terminal_only,
            },
            message_id: MessageId::new(d.message_id.clone()),
            message_type: message_type(d).to_owned(),
            action_id: Some(ActionId::new(d.action_id.clone())),
            session_id: d.session_id.clone().map(SessionId::new),
            correlation_id: d.correlation_id.clone().map(CorrelationId::new),
            tenant_id: Some(d.tenant.clone()),
            status: wire_status(d.status),
            attempts,
            next_attempt_at: opt_ts(d.next_attempt_at_ms)?,
            leased_by: d.leased_by.clone(),
            lease_expires_at: opt_ts(d.lease_expires_at_ms)?,
            last_error: d.last_error.clone(),
            dead_letter_reason: d.dead_letter_reason.clone(),
            receipt_chain,
            created_at: ts(d.created_at_ms)?,
            updated_at: ts(d.updated_at_ms)?,
            completed_at: opt_ts(d.completed_at_ms)?,
        })
    }
}

/// The message type a delivery carries: an action result for a terminal state (see `deliver`).
fn message_type(d: &DeliveryRecord) -> &'static str {
    if d.action_state.is_terminal() {
        "aip.core.v1.action_result"
    } else {
        "aip.lifecycle.v1.action_status"
    }
}

fn spec_of(d: &DeliveryRecord) -> Result<DeliverySpec, RuntimeError> {
    serde_json::from_value(d.spec.clone())
        .map_err(|e| corrupt(format!("delivery {} spec: {e}", d.delivery_id)))
}

fn store_status(s: CallbackDeliveryStatus) -> DeliveryStatus {
    match s {
        CallbackDeliveryStatus::Pending => DeliveryStatus::Pending,
        CallbackDeliveryStatus::Running => DeliveryStatus::Running,
        CallbackDeliveryStatus::Delivered => DeliveryStatus::Delivered,
        CallbackDeliveryStatus::Failed => DeliveryStatus::Failed,
        CallbackDeliveryStatus::DeadLettered => DeliveryStatus::DeadLettered,
    }
}

fn wire_status(s: DeliveryStatus) -> CallbackDeliveryStatus {
    match s {
        DeliveryStatus::Pending => CallbackDeliveryStatus::Pending,
        DeliveryStatus::Running => CallbackDeliveryStatus::Running,
        DeliveryStatus::Delivered => CallbackDeliveryStatus::Delivered,
        DeliveryStatus::Failed => CallbackDeliveryStatus::Failed,
        // The store's set is closed for this version; a new status would be a new match arm.
        _ => CallbackDeliveryStatus::DeadLettered,
    }
}
