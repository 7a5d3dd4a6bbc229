//! Running an admitted action (spec 11.2, 11.5): the handler gets a frozen trusted context, its
//! lease is renewed while it runs, and its outcome is committed under the lease's fence, so a
//! worker that lost the lease cannot settle the action. A panicking handler settles its action like
//! a failure (an uncertain outcome for a mutation) instead of taking its worker down.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aip_core::{ActionResult, ErrorCode, ReceiptType};
use aip_store::{ActionRecord, ActionState, Fence, StoreError, Transition};
use futures_util::FutureExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::action::result::{self, status_str};
use crate::admission::admitted::AdmittedRequest;
use crate::chain::ChainWriter;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::events::{EventKind, action_event};
use crate::handler::{HandlerError, Mode, TrustedContext};
use crate::registry::AdmittedCapability;
use crate::runtime::Runtime;
use crate::stream::ChunkSink;

impl Runtime {
    /// Runs the handler of `record` and commits the outcome (under `fence` when the work is leased).
    pub(crate) async fn execute(
        &self,
        capability: &Arc<AdmittedCapability>,
        record: &ActionRecord,
        fence: Option<&Fence>,
        mut chain: ChainWriter,
    ) -> Result<ActionResult, RuntimeError> {
        // Counted from the handler's start to its commit: a drain waits for both.
        let _run = self.count_run();
        let token = CancellationToken::new();
        let admitted = AdmittedRequest::of(record)?;
        let slot = admitted.slot(record)?;
        let mut ctx = trusted_context(record, &admitted, token.clone())?;
        ctx.fence = fence.cloned();
        ctx.transaction = slot.as_ref().map(crate::transaction::Slot::context);
        if ctx.mode == Mode::Streaming {
            ctx.chunks = ChunkSink::streaming(Arc::clone(self.store()), record, fence.cloned());
        }
        let input = admitted.action.input;
        let running_key = (record.tenant.clone(), record.action_id.clone());
        let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mutation = crate::transaction::runs_mutation(Some(capability), slot.as_ref());
        self.running().insert(
            running_key.clone(),
            crate::runtime::RunningHandler {
                token: token.clone(),
                fence: fence.cloned(),
                released: Arc::clone(&released),
                mutation,
            },
        );
        let invoke = async {
            if ctx.remaining().is_zero() {
                return Err(HandlerError::DeadlineExceeded);
            }
            let call = AssertUnwindSafe(crate::transaction::run::step(
                capability,
                &ctx,
                &input,
                slot.as_ref(),
            ))
            .catch_unwind();
            match tokio::time::timeout(ctx.remaining(), call).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_panic)) => {
                    tracing::error!(action = %record.action_id, capability = %record.capability, "handler panicked");
                    Err(if mutation {
                        HandlerError::UncertainOutcome(
                            "the handler panicked while the mutation was in flight".into(),
                        )
                    } else {
                        HandlerError::Failed {
                            code: ErrorCode::HandlerPanicked.as_str().into(),
                            message: "the capability handler panicked".into(),
                            retryable: false,
                        }
                    })
                }
                Err(_elapsed) => Err(if mutation {
                    HandlerError::UncertainOutcome(
                        "deadline passed while the mutation was in flight".into(),
                    )
                } else {
                    HandlerError::DeadlineExceeded
                }),
            }
        };
        let outcome = match fence {
            Some(fence) => {
                tokio::pin!(invoke);
                tokio::select! {
                    outcome = &mut invoke => outcome,
                    // The lease was lost (another worker took it over): the handler runs on, but its
                    // commit below is refused by the fence.
                    () = self.keep_action_lease(fence, record, &token) => invoke.await,
                }
            }
            None => invoke.await,
        };
        self.running().remove(&running_key);
        if released.load(std::sync::atomic::Ordering::SeqCst) {
            // The drain gave the lease back and interrupted the handler: its outcome (a
            // cancellation, most likely) is not the action's; the next claim settles it.
            return Err(RuntimeError::Draining);
        }
        ctx.chunks.finish(&outcome).await;
        // A dry run, plan or reconciliation answers with its own output, not the capability's.
        let check_output = slot.as_ref().is_none_or(crate::transaction::Slot::mutates);
        let mut settled = result::settle(capability, &record.action_id, outcome, check_output);
        let reported = slot.as_ref().and_then(|slot| {
            crate::transaction::reported_operation(
                slot,
                ctx.provider_operation.reported(),
                &mut settled.result,
            )
        });
        let now = now_ms();
        chain.push(
            ReceiptType::ToolExecuted,
            &self.config().agent,
            json!({ "capability_id": record.capability, "outcome": settled.state.as_str() }),
            now,
        );
        let mut event_data = json!({});
        if let Some(slot) = &slot {
            if let Some((kind, body)) =
                crate::transaction::receipt_for(slot, settled.state, &settled.result)
            {
                chain.push(kind, &self.config().agent, body, now);
            }
            event_data = crate::transaction::event_data(slot, settled.state, &settled.result);
        }
        chain.push(
            ReceiptType::ResultReturned,
            &self.config().agent,
            json!({ "status": status_str(settled.result.status), "output_hash": settled.result.output.as_ref().map(aip_core::canonical::canonical_hash) }),
            now,
        );
        let result = self
            .commit_final(
                record,
                fence,
                vec![ActionState::Running, ActionState::Cancelling],
                (settled.state, settled.result),
                chain,
                (event_data, reported),
            )
            .await?;
        Ok(result)
    }

    /// Renews the lease while the handler runs and relays a cancellation recorded by another node to
    /// the handler's `token`. Returns only when the lease is lost.
    async fn keep_action_lease(
        &self,
        fence: &Fence,
        record: &ActionRecord,
        token: &CancellationToken,
    ) {
        crate::worker::keep_lease(self, fence, || async {
            if let Ok(Some(now)) = self
                .store()
                .get_action(&record.tenant, &record.action_id)
                .await
                && now.state == ActionState::Cancelling
            {
                token.cancel();
            }
        })
        .await;
        tracing::warn!(action = %record.action_id, "lease lost while the handler ran");
    }

    /// Settles `record` without running its handler (it must not or cannot run), under `fence`.
    pub(crate) async fn finish_without_dispatch(
        &self,
        record: &ActionRecord,
        fence: Option<&Fence>,
        state: ActionState,
        result: ActionResult,
        mut chain: ChainWriter,
        data: Value,
    ) -> Result<(), RuntimeError> {
        let now = now_ms();
        let mut receipt = json!({ "status": status_str(result.status), "dispatched": false });
        if let (Value::Object(receipt), Value::Object(extra)) = (&mut receipt, &data) {
            receipt.extend(extra.clone());
        }
        let mut data = data;
        if let Some(slot) = crate::transaction::slot_of(record)? {
            if let Some((kind, body)) = crate::transaction::receipt_for(&slot, state, &result) {
                chain.push(kind, &self.config().agent, body, now);
            }
            let tx = crate::transaction::event_data(&slot, state, &result);
            if let (Value::Object(data), Value::Object(tx)) = (&mut data, tx) {
                data.extend(tx);
            }
        }
        chain.push(
            ReceiptType::ResultReturned,
            &self.config().agent,
            receipt,
            now,
        );
        self.commit_final(
            record,
            fence,
            vec![record.state],
            (state, result),
            chain,
            (data, None),
        )
        .await
        .map(|_| ())
    }

    /// Commits a final `state` and `result` (compare-and-set from `from`) with the chain's pending
    /// receipts and one event carrying `event_data`, under `fence` (which also completes the job).
    async fn commit_final(
        &self,
        record: &ActionRecord,
        fence: Option<&Fence>,
        from: Vec<ActionState>,
        (state, mut result): (ActionState, ActionResult),
        mut chain: ChainWriter,
        (event_data, operation): (Value, Option<aip_store::ReportedOperation>),
    ) -> Result<ActionResult, RuntimeError> {
        let now = now_ms();
        result.receipt = chain.last_ref();
        let mut data = json!({ "status": status_str(result.status) });
        if let (Value::Object(data), Value::Object(extra)) = (&mut data, event_data) {
            data.extend(extra);
        }
        let event = action_event(EventKind::ActionEnded(state), record, data, now);
        let transition = Transition {
            tenant: record.tenant.clone(),
            action_id: record.action_id.clone(),
            from,
            to: state,
            result: Some(result_value(&result)?),
            events: vec![event],
            receipts: chain.take(),
            fence: fence.cloned(),
            finish_job: fence.is_some(),
            now_ms: now,
            operation,
        };
        self.transition_action(transition).await?;
        metrics::counter!("aip_actions_finished_total", "state" => state.as_str()).increment(1);
        Ok(result)
    }
}

fn result_value(result: &ActionResult) -> Result<Value, RuntimeError> {
    serde_json::to_value(result)
        .map_err(|e| RuntimeError::Storage(StoreError::Corrupt(e.to_string())))
}

fn corrupt(record: &ActionRecord, what: &str) -> RuntimeError {
    RuntimeError::Storage(StoreError::Corrupt(format!(
        "action {}: {what}",
        record.action_id
    )))
}

/// The frozen trusted context of spec 11.2, rebuilt from the stored admission (never from the
/// request's claims). Anything stored that does not decode is corruption, not a default.
pub(crate) fn trusted_context(
    record: &ActionRecord,
    admitted: &AdmittedRequest,
    cancellation: CancellationToken,
) -> Result<TrustedContext, RuntimeError> {
    let mode = Mode::parse(&record.mode)
        .ok_or_else(|| corrupt(record, &format!("mode {:?}", record.mode)))?;
    let deadline_ms = record
        .deadline_ms
        .ok_or_else(|| corrupt(record, "no deadline"))?;
    let remaining = u64::try_from(deadline_ms.saturating_sub(now_ms())).unwrap_or(0);
    Ok(TrustedContext {
        action_id: record.action_id.clone(),
        capability_id: record.capability.clone(),
        mode,
        principal_id: record.principal.clone(),
        principal_kind: admitted.caller.kind,
        issuer: admitted.caller.issuer.clone(),
        tenant: record.tenant.clone(),
        scopes: admitted.caller.scopes.clone(),
        external_account: admitted.caller.external_account.clone(),
        idempotency_key: admitted.idempotency_key.clone(),
        session_id: record.session_id.clone(),
        correlation_id: record.correlation_id.clone(),
        trace: admitted.trace.clone().filter(|t| !t.is_null()),
        deadline_unix_ms: u64::try_from(deadline_ms).unwrap_or(0),
        admitted_unix_ms: u64::try_from(record.created_at_ms).unwrap_or(0),
        delegation_chain: admitted.action.delegation_chain.clone(),
        deadline: Instant::now() + Duration::from_millis(remaining),
        cancellation,
        chunks: ChunkSink::default(),
        // Set by the caller, which has parsed the stored slot already.
        transaction: None,
        fence: None,
        provider_operation: crate::handler::OperationReport::default(),
    })
}
