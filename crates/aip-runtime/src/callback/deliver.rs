//! The `callbacks` job kind (spec 17.2-17.3): one job per delivery, claimed under a fenced lease.
//! An attempt is recorded before the target is called and settled after it answers: a 2xx is
//! recorded before the delivery counts as delivered; a retryable failure waits its backoff while
//! attempts remain, then dead-letters; a permanent refusal fails it. A retry re-sends the same
//! message (same delivery id, message id and idempotency key) and never re-runs the action.

use std::sync::Arc;
use std::time::Duration;

use aip_core::{CorrelationId, Envelope, MessageBody, MessageId, ReceiptType, SessionId};
use aip_store::{CALLBACK_QUEUE, DeliveryOutcome, DeliveryRecord, Lease};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{DeliverySpec, HTTP_PROFILE, NATS_PROFILE, SendError, sign};
use crate::action::result;
use crate::chain::ChainWriter;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::read::views;
use crate::runtime::Runtime;
use crate::worker::{JobKind, retry_timer};

/// Why the sweep dead-letters a delivery whose attempts were all interrupted.
const STRANDED: &str =
    "max_attempts_exhausted: the last attempt's worker stopped before the target answered";

/// The callback delivery job kind.
pub(crate) struct CallbackDeliveries;

#[async_trait]
impl JobKind for CallbackDeliveries {
    fn queue(&self) -> &'static str {
        CALLBACK_QUEUE
    }

    fn wake<'r>(&self, runtime: &'r Runtime) -> Option<&'r Notify> {
        Some(runtime.callbacks_ready())
    }

    async fn run(&self, runtime: &Arc<Runtime>, lease: &Lease) -> Result<(), RuntimeError> {
        let store = runtime.store();
        let delivery = store.start_delivery_attempt(&lease.fence, now_ms()).await?;
        if delivery.status.is_terminal() {
            return Ok(store.complete_job(&lease.fence, now_ms()).await?);
        }
        let spec: DeliverySpec = serde_json::from_value(delivery.spec.clone())
            .map_err(|e| views::corrupt(format!("delivery {} spec: {e}", delivery.delivery_id)))?;
        let attempt = delivery.attempts.last().map_or(1, |a| a.attempt);
        let sent = match prepare(runtime, &delivery, &spec, attempt).await? {
            Ok((headers, body)) => send(runtime, &spec, &headers, body).await,
            Err(refused) => Err(refused),
        };
        let now = now_ms();
        let outcome = match sent {
            Ok(()) => DeliveryOutcome::Delivered,
            Err(SendError::Retry(error)) if lease.attempt < spec.max_attempts => {
                DeliveryOutcome::Retry {
                    at_ms: now.saturating_add(backoff_ms(&spec, lease.attempt)),
                    error,
                }
            }
            Err(SendError::Retry(error)) => DeliveryOutcome::DeadLettered {
                error,
                reason: format!("max_attempts_exhausted: {} attempts", spec.max_attempts),
            },
            Err(SendError::Permanent(error)) => DeliveryOutcome::Failed { error },
        };
        let receipts = receipts(runtime, &delivery, attempt, &outcome, now).await?;
        match &outcome {
            DeliveryOutcome::Delivered => {
                metrics::counter!("aip_callback_deliveries_total", "outcome" => "delivered")
                    .increment(1);
            }
            other => {
                tracing::info!(delivery = %delivery.delivery_id, attempt, outcome = ?other, "callback not delivered");
                metrics::counter!("aip_callback_deliveries_total", "outcome" => "not_delivered")
                    .increment(1);
            }
        }
        store
            .finish_delivery_attempt(&lease.fence, outcome, receipts, now)
            .await?;
        Ok(())
    }

    async fn failed(&self, runtime: &Arc<Runtime>, lease: &Lease, error: RuntimeError) {
        retry_timer(runtime, lease, &error, "callback delivery").await;
    }

    async fn sweep(&self, runtime: &Arc<Runtime>) -> Result<(), RuntimeError> {
        let stranded = runtime
            .store()
            .dead_letter_stranded(now_ms(), STRANDED)
            .await?;
        for d in stranded {
            tracing::warn!(delivery = %d.delivery_id, "callback delivery dead-lettered: {STRANDED}");
        }
        Ok(())
    }
}

/// The wait before the attempt after `attempt` (the schedule's last entry repeats).
fn backoff_ms(spec: &DeliverySpec, attempt: u32) -> i64 {
    let index = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
    let wait = spec
        .retry_backoff_ms
        .get(index)
        .or(spec.retry_backoff_ms.last())
        .copied()
        .unwrap_or(1_000);
    i64::try_from(wait).unwrap_or(i64::MAX)
}

type Prepared = Result<(Vec<(String, String)>, Vec<u8>), SendError>;

/// The message of `delivery` and the headers of this attempt; a message that cannot be delivered
/// (too large) is a permanent failure.
async fn prepare(
    runtime: &Runtime,
    delivery: &DeliveryRecord,
    spec: &DeliverySpec,
    attempt: u32,
) -> Result<Prepared, RuntimeError> {
    let action = runtime
        .store()
        .get_action(&delivery.tenant, &delivery.action_id)
        .await?
        .ok_or_else(|| {
            views::corrupt(format!(
                "delivery {} of a missing action",
                delivery.delivery_id
            ))
        })?;
    let (body, rendered_headers) = match runtime.delivery_renderer(&spec.profile) {
        Some(renderer) => {
            // The status as delivered, with the result once terminal.
            let status = status_as_delivered(&action, delivery, true)?;
            match renderer.render(&status, spec.metadata.as_ref()) {
                Ok(r) => {
                    let mut headers = r.headers;
                    headers.push(("content-type".into(), r.content_type));
                    (r.body, headers)
                }
                Err(e) => return Ok(Err(SendError::Permanent(format!("render: {e}")))),
            }
        }
        None => (message_bytes(runtime, &action, delivery, spec)?, Vec::new()),
    };
    let policy = &runtime.config().callbacks;
    if body.len() > policy.max_request_bytes {
        return Ok(Err(SendError::Permanent(format!(
            "the message is {} bytes, above callbacks.max_request_bytes ({})",
            body.len(),
            policy.max_request_bytes
        ))));
    }
    let timestamp = now_ms() / 1000;
    let mut headers = vec![
        (sign::DELIVERY_ID.to_owned(), delivery.delivery_id.clone()),
        (sign::ATTEMPT.to_owned(), attempt.to_string()),
        (sign::TIMESTAMP.to_owned(), timestamp.to_string()),
        (
            sign::IDEMPOTENCY_KEY.to_owned(),
            delivery.delivery_id.clone(),
        ),
    ];
    if let (true, Some(key)) = (spec.sign_payload, runtime.node_key()) {
        headers.push((
            sign::SIGNER.to_owned(),
            aip_core::signing::did_key(&key.verifying_key()),
        ));
        headers.push((
            sign::SIGNATURE.to_owned(),
            sign::sign(key, &delivery.delivery_id, timestamp, &body),
        ));
    }
    headers.extend(rendered_headers);
    Ok(Ok((headers, body)))
}

/// The delivered envelope, byte-identical on every attempt: the action's result for a terminal
/// state (its status when no result was stored), else its status as of the transition; signed with
/// the node key when the policy signs.
fn message_bytes(
    runtime: &Runtime,
    action: &aip_store::ActionRecord,
    delivery: &DeliveryRecord,
    spec: &DeliverySpec,
) -> Result<Vec<u8>, RuntimeError> {
    let terminal = delivery.action_state.is_terminal();
    let body: MessageBody = match result::stored(action)? {
        Some(result) if terminal => result.into(),
        _ => status_as_delivered(action, delivery, false)?.into(),
    };
    let mut envelope = Envelope::new(body);
    envelope.message_id = MessageId::new(delivery.message_id.clone());
    envelope.sent_at = views::ts(delivery.created_at_ms)?;
    envelope.session_id = delivery.session_id.clone().map(SessionId::new);
    envelope.correlation_id = delivery.correlation_id.clone().map(CorrelationId::new);
    envelope.idempotency_key = Some(delivery.delivery_id.clone());
    envelope.from = Some(runtime.config().agent.clone());
    let value: Value = match (spec.sign_payload, runtime.node_key()) {
        (true, Some(key)) => aip_core::signing::sign_envelope(&envelope, key)
            .map_err(|_| RuntimeError::Internal("a delivery envelope could not be signed"))?,
        _ => envelope.to_value(),
    };
    serde_json::to_vec(&value).map_err(|_| RuntimeError::Internal("unserializable delivery"))
}

/// The action's status as of the delivered transition (with its result once terminal, when
/// `with_result`).
fn status_as_delivered(
    action: &aip_store::ActionRecord,
    delivery: &DeliveryRecord,
    with_result: bool,
) -> Result<aip_core::ActionStatus, RuntimeError> {
    let terminal = delivery.action_state.is_terminal();
    let mut status = views::status(action, with_result && terminal, None)?;
    status.state = views::wire_state(delivery.action_state)?;
    status.updated_at = views::ts(delivery.created_at_ms)?;
    if !terminal {
        status.completed_at = None;
        status.result_status = None;
        status.result = None;
    }
    Ok(status)
}

/// Sends one attempt to the target's profile, bounded by the policy timeout (and by half the
/// lease, so the lease outlives the attempt).
async fn send(
    runtime: &Runtime,
    spec: &DeliverySpec,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Result<(), SendError> {
    let lease_half = u64::try_from(runtime.lease_ms() / 2).unwrap_or(1);
    let timeout = Duration::from_millis(spec.timeout_ms.min(lease_half).max(1));
    let rendered = runtime.delivery_renderer(&spec.profile).is_some();
    match spec.profile.as_str() {
        // A rendering profile's deliveries go over the same guarded HTTP sender.
        profile if profile == HTTP_PROFILE || rendered => {
            let client = runtime
                .callback_client()
                .map_err(|e| SendError::Retry(format!("client: {e}")))?;
            super::http::send(
                client,
                &runtime.config().callbacks,
                &spec.target,
                headers,
                body,
                timeout,
            )
            .await
        }
        NATS_PROFILE => match runtime.callback_publisher() {
            Some(publisher) => {
                let mut headers = headers.to_vec();
                headers.push(("content-type".into(), "application/aip+json".into()));
                publisher
                    .request(&spec.target, &headers, body, timeout)
                    .await
            }
            None => Err(SendError::Retry(
                "NATS is not connected on this node".into(),
            )),
        },
        other => Err(SendError::Permanent(format!(
            "callback profile {other} is not supported"
        ))),
    }
}

/// The receipts of one attempt on the delivery's own chain: attempted, then delivered or (when
/// the delivery stops) failed.
async fn receipts(
    runtime: &Runtime,
    delivery: &DeliveryRecord,
    attempt: u32,
    outcome: &DeliveryOutcome,
    now: i64,
) -> Result<Vec<aip_store::NewReceipt>, RuntimeError> {
    let mut chain = ChainWriter::resume_chain(
        (&delivery.delivery_id, &delivery.action_id),
        (&delivery.tenant, &delivery.principal),
        delivery.correlation_id.clone().map(CorrelationId::new),
        runtime.store(),
    )
    .await?;
    let agent = &runtime.config().agent;
    let base = json!({ "delivery_id": delivery.delivery_id, "action_id": delivery.action_id,
                       "message_id": delivery.message_id, "profile": delivery.profile, "attempt": attempt });
    chain.push(
        ReceiptType::CallbackDeliveryAttempted,
        agent,
        base.clone(),
        now,
    );
    let last = match outcome {
        DeliveryOutcome::Delivered => Some((ReceiptType::CallbackDelivered, "delivered")),
        DeliveryOutcome::Retry { .. } => None,
        DeliveryOutcome::Failed { .. } => Some((ReceiptType::CallbackDeliveryFailed, "failed")),
        DeliveryOutcome::DeadLettered { .. } => {
            Some((ReceiptType::CallbackDeliveryFailed, "dead_lettered"))
        }
    };
    if let Some((kind, status)) = last {
        let mut data = base;
        data["status"] = json!(status);
        chain.push(kind, agent, data, now);
    }
    Ok(chain.take())
}
