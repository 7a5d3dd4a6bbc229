//! Built-in demo capabilities, usable with no configuration: `cap:demo:echo`, `cap:demo:sleep`,
//! `cap:demo:book` (a mutation whose duplicates are observable), `cap:demo:bookings`, the
//! streaming `cap:demo:count`, the approval-gated `cap:demo:transfer`, and (in `payment`) the
//! transactional `cap:demo:payment` with its compensating `cap:demo:refund`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use aip_core::{Capability, ErrorCode, StreamChunkKind};
use aip_store::{AppRecord, Store, StoreError};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::stream::MAX_CHUNK_BATCH;

use crate::registry::CapabilityEntry;

use super::{ActionHandler, HandlerError, HandlerOutput, HandlerSupport, Mode, TrustedContext};

/// Longest sleep the demo accepts; bounded like every other wait.
pub const MAX_SLEEP_MS: u64 = 600_000;

/// `cap:demo:echo`: returns its input unchanged as the output.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoHandler;

#[async_trait]
impl ActionHandler for EchoHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: false,
            mutation: false,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        _ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        Ok(HandlerOutput {
            output: input.clone(),
            message: Vec::new(),
        })
    }
}

/// `cap:demo:sleep`: waits `{"ms": n}` milliseconds, observing cancellation and the deadline.
#[derive(Debug, Default, Clone, Copy)]
pub struct SleepHandler;

#[async_trait]
impl ActionHandler for SleepHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: true,
            mutation: false,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let ms = input
            .get("ms")
            .and_then(Value::as_u64)
            .ok_or_else(|| HandlerError::Failed {
                code: ErrorCode::DemoInvalidInput.as_str().into(),
                message: "`ms` must be a non-negative integer".into(),
                retryable: false,
            })?;
        if ms > MAX_SLEEP_MS {
            return Err(HandlerError::Failed {
                code: ErrorCode::DemoInvalidInput.as_str().into(),
                message: format!("`ms` must be at most {MAX_SLEEP_MS}"),
                retryable: false,
            });
        }
        let wanted = Duration::from_millis(ms);
        let budget = ctx.remaining();
        tokio::select! {
            () = ctx.cancellation.cancelled() => Err(HandlerError::Cancelled),
            () = tokio::time::sleep(wanted.min(budget)) => {
                if wanted > budget { Err(HandlerError::DeadlineExceeded) } else { Ok(HandlerOutput { output: json!({ "slept_ms": ms }), message: Vec::new() }) }
            }
        }
    }
}

/// Collection of the demo bookings in the store's application records.
pub const BOOKINGS: &str = "demo.bookings";

/// `cap:demo:book`: a mutation with required idempotency that records one booking per key in the store,
/// so a duplicate dispatch would be observable (a second insert of the same booking is refused).
#[derive(Clone)]
pub struct BookHandler {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for BookHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BookHandler").finish_non_exhaustive()
    }
}

impl BookHandler {
    /// A booking handler writing to `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl ActionHandler for BookHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: false,
            mutation: true,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        // The contract makes the key required, so admission guarantees it; stay fail-closed anyway.
        let Some(key) = ctx.idempotency_key.as_deref() else {
            return Err(HandlerError::Failed {
                code: ErrorCode::IdempotencyKeyRequired.as_str().into(),
                message: "booking needs an idempotency key".into(),
                retryable: false,
            });
        };
        let booking_id = format!(
            "bkg_{}",
            &aip_core::canonical::sha256_hex(format!("{}\n{key}", ctx.tenant).as_bytes())[..24]
        );
        let body = json!({
            "booking_id": booking_id,
            "name": input.get("name"),
            "party_size": input.get("party_size"),
            "time": input.get("time"),
            "action_id": ctx.action_id,
            "booked_by": ctx.principal_id,
        });
        let record = AppRecord {
            collection: BOOKINGS.into(),
            record_id: booking_id.clone(),
            tenant: ctx.tenant.clone(),
            created_at_ms: crate::clock::now_ms(),
            body: body.clone(),
        };
        match self.store.insert_record(record).await {
            Ok(()) => Ok(HandlerOutput {
                output: body,
                message: Vec::new(),
            }),
            Err(StoreError::Duplicate { .. }) => Err(HandlerError::Failed {
                code: ErrorCode::DemoDuplicateBooking.as_str().into(),
                message: "this booking was already recorded".into(),
                retryable: false,
            }),
            Err(_) => Err(HandlerError::UncertainOutcome(
                "booking store failed".into(),
            )),
        }
    }
}

/// `cap:demo:bookings`: lists the caller's tenant's bookings, so duplicate dispatches are observable.
#[derive(Clone)]
pub struct BookingsHandler {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for BookingsHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BookingsHandler").finish_non_exhaustive()
    }
}

#[async_trait]
impl ActionHandler for BookingsHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync]),
            cancellable: false,
            mutation: false,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        _input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let failed = |_| HandlerError::Failed {
            code: ErrorCode::DemoStoreUnavailable.as_str().into(),
            message: "bookings unavailable".into(),
            retryable: true,
        };
        let count = self
            .store
            .count_records(BOOKINGS, &ctx.tenant)
            .await
            .map_err(failed)?;
        let limit = aip_store::Limit::new(100).map_err(failed)?;
        let bookings: Vec<Value> = self
            .store
            .list_records(BOOKINGS, &ctx.tenant, limit)
            .await
            .map_err(failed)?
            .into_iter()
            .map(|r| r.body)
            .collect();
        Ok(HandlerOutput {
            output: json!({ "count": count, "bookings": bookings }),
            message: Vec::new(),
        })
    }
}

/// The built-in demo capabilities with their handlers (spec 9.2).
pub fn demo_capabilities(store: Arc<dyn Store>) -> Vec<CapabilityEntry> {
    let read_contract = |cancel: bool| {
        json!({
            "side_effects": ["read"],
            "idempotency": { "requirement": "optional", "collision_behavior": "return_original_result", "key_scope": "principal" },
            "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": cancel,
                           "supports_retry": true, "expected_completion": "any", "retry_safety": "safe" },
            "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
        })
    };
    let echo = json!({
        "id": "cap:demo:echo", "name": "Echo", "kind": "tool", "risk": "low", "stability": "stable",
        "description": "Returns its input unchanged.",
        "input_schema": { "type": "object" },
        "contract": read_contract(false),
    });
    let sleep = json!({
        "id": "cap:demo:sleep", "name": "Sleep", "kind": "tool", "risk": "low", "stability": "stable",
        "description": "Waits the requested milliseconds; cancellable.",
        "input_schema": { "type": "object", "properties": { "ms": { "type": "integer", "minimum": 0, "maximum": MAX_SLEEP_MS } },
                          "required": ["ms"], "additionalProperties": false },
        "output_schema": { "type": "object", "properties": { "slept_ms": { "type": "integer" } }, "required": ["slept_ms"] },
        "contract": read_contract(true),
    });
    let book = json!({
        "id": "cap:demo:book", "name": "Book a table", "kind": "tool", "risk": "medium", "stability": "stable",
        "description": "Records a booking; requires an idempotency key; duplicates are observable.",
        "input_schema": { "type": "object", "properties": {
            "name": { "type": "string", "minLength": 1, "maxLength": 200 },
            "party_size": { "type": "integer", "minimum": 1, "maximum": 50 },
            "time": { "type": "string", "minLength": 1, "maxLength": 64 } },
            "required": ["name", "party_size", "time"], "additionalProperties": false },
        "output_schema": { "type": "object", "required": ["booking_id"] },
        "contract": {
            "side_effects": ["write"],
            "idempotency": { "requirement": "required", "collision_behavior": "reject_conflict", "key_scope": "tenant" },
            "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": false, "expected_completion": "any", "retry_safety": "safe_with_idempotency_key" },
            "data": { "sensitivity": "confidential", "contains_pii": true, "redaction_required": false }
        },
    });
    let bookings = json!({
        "id": "cap:demo:bookings", "name": "List bookings", "kind": "tool", "risk": "low", "stability": "stable",
        "description": "Lists the first 100 bookings of the caller's tenant and their count.",
        "input_schema": { "type": "object", "additionalProperties": false },
        "output_schema": { "type": "object", "required": ["count", "bookings"] },
        "contract": {
            "side_effects": ["read"],
            "idempotency": { "requirement": "unsupported", "collision_behavior": "reject_conflict", "key_scope": "principal" },
            "execution": { "supports_sync": true, "supports_async": false, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": true, "expected_completion": "sync", "retry_safety": "safe" },
            "data": { "sensitivity": "confidential", "contains_pii": true, "redaction_required": false }
        },
    });
    let handlers: [(Value, Arc<dyn ActionHandler>); 6] = [
        (echo, Arc::new(EchoHandler)),
        (sleep, Arc::new(SleepHandler)),
        (book, Arc::new(BookHandler::new(Arc::clone(&store)))),
        (
            bookings,
            Arc::new(BookingsHandler {
                store: Arc::clone(&store),
            }),
        ),
        (count_capability(), Arc::new(CountHandler)),
        (
            transfer_capability(),
            Arc::new(TransferHandler::new(Arc::clone(&store))),
        ),
    ];
    let mut entries: Vec<CapabilityEntry> = handlers
        .into_iter()
        .filter_map(
            |(value, handler)| match serde_json::from_value::<Capability>(value) {
                Ok(capability) => {
                    let approval_tiers = if capability.id.as_str() == TRANSFER {
                        transfer_tiers()
                    } else {
                        Vec::new()
                    };
                    Some(CapabilityEntry {
                        capability,
                        handler,
                        approval_tiers,
                        approval_excluded_roles: Vec::new(),
                        allow_without_approval: false,
                    })
                }
                Err(err) => {
                    // The literals above are fixed; a failure here is a wire-model change caught by tests.
                    tracing::error!(%err, "demo capability does not decode");
                    None
                }
            },
        )
        .collect();
    entries.extend(super::payment::capabilities(&store));
    entries
}

/// Id of the approval-gated demo transfer.
pub const TRANSFER: &str = "cap:demo:transfer";
/// Collection of the demo transfers in the store's application records.
pub const TRANSFERS: &str = "demo.transfers";
/// Transfers of at least this many minor units need two distinct approvers.
pub const TRANSFER_DUAL_CONTROL_MINOR: u64 = 100_000;
/// Largest demo transfer.
pub const MAX_TRANSFER_MINOR: u64 = 1_000_000_000_000;

/// The manifest entry of `cap:demo:transfer`: every transfer needs one principal with role
/// `approver` who is not the requester (the contract's policy); from
/// [`TRANSFER_DUAL_CONTROL_MINOR`] up, two distinct ones ([`transfer_tiers`]).
pub fn transfer_capability() -> Value {
    json!({
        "id": TRANSFER, "name": "Transfer funds", "kind": "tool", "risk": "high", "stability": "stable",
        "description": "Records a transfer once it is approved: one approver (role `approver`, not the requester); two distinct approvers from 100000 minor units.",
        "input_schema": { "type": "object", "properties": {
            "amount_minor": { "type": "integer", "minimum": 1, "maximum": MAX_TRANSFER_MINOR },
            "to": { "type": "string", "minLength": 1, "maxLength": 200 } },
            "required": ["amount_minor", "to"], "additionalProperties": false },
        "output_schema": { "type": "object", "required": ["transfer_id", "amount_minor", "to"] },
        "requires_human_approval": true,
        "contract": {
            "side_effects": ["write", "financial"],
            "idempotency": { "requirement": "optional", "collision_behavior": "reject_conflict", "key_scope": "tenant" },
            "execution": { "supports_sync": false, "supports_async": true, "supports_streaming": false, "supports_cancel": true,
                           "supports_retry": false, "expected_completion": "async", "retry_safety": "safe_with_idempotency_key" },
            "data": { "sensitivity": "confidential", "contains_pii": false, "redaction_required": false },
            "approval": transfer_policy(1),
        },
    })
}

/// The demo transfer's policy needing `approvers` distinct principals with role `approver`.
fn transfer_policy(approvers: u32) -> Value {
    let rule = if approvers == 1 {
        json!({ "operator": "role", "name": "approver" })
    } else {
        json!({ "operator": "quorum", "required": approvers, "distinct_principals": true,
                "rules": [{ "operator": "role", "name": "approver" }] })
    };
    json!({
        "required": true,
        "reason": if approvers == 1 { "every transfer is approved by an approver" } else { "large transfers need two distinct approvers" },
        "approver_selector": { "type": "role", "name": "approver" },
        "rule": rule,
        "minimum_distinct_principals": approvers,
        "separation_of_duties": { "requester_must_differ": true },
        "ttl_ms": 24 * 60 * 60 * 1000,
        "evidence_requirements": ["input_snapshot", "policy_decision"],
        "policy_version": format!("demo-transfer-{approvers}"),
    })
}

/// The dual-control tier of `cap:demo:transfer`.
pub fn transfer_tiers() -> Vec<crate::approval::ApprovalTier> {
    demo_tier(
        &format!("amount_minor >= {TRANSFER_DUAL_CONTROL_MINOR}"),
        transfer_policy(2),
    )
}

/// One approval tier of a demo capability: `policy` for inputs matching `when`.
pub(crate) fn demo_tier(when: &str, policy: Value) -> Vec<crate::approval::ApprovalTier> {
    let when = crate::approval::predicate::Predicate::parse(when);
    let policy = serde_json::from_value(policy);
    match (when, policy) {
        (Ok(when), Ok(policy)) => vec![crate::approval::ApprovalTier {
            when: Some(when),
            policy,
        }],
        // Fixed literals: a failure is a model change, caught by the demo tests (and the
        // capability then admits with its contract's own policy only).
        _ => {
            tracing::error!("demo approval tier does not decode");
            Vec::new()
        }
    }
}

/// `cap:demo:transfer`: a mutation that records one transfer per action, so a second dispatch of
/// the same approved action is observable (it is refused by the record's key).
#[derive(Clone)]
pub struct TransferHandler {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for TransferHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransferHandler").finish_non_exhaustive()
    }
}

impl TransferHandler {
    /// A transfer handler writing to `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl ActionHandler for TransferHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Async]),
            cancellable: true,
            mutation: true,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let transfer_id = format!(
            "trf_{}",
            &aip_core::canonical::sha256_hex(
                format!("{}\n{}", ctx.tenant, ctx.action_id).as_bytes()
            )[..24]
        );
        let body = json!({
            "transfer_id": transfer_id,
            "amount_minor": input.get("amount_minor"),
            "to": input.get("to"),
            "action_id": ctx.action_id,
            "requested_by": ctx.principal_id,
        });
        let record = AppRecord {
            collection: TRANSFERS.into(),
            record_id: transfer_id,
            tenant: ctx.tenant.clone(),
            created_at_ms: crate::clock::now_ms(),
            body: body.clone(),
        };
        match self.store.insert_record(record).await {
            Ok(()) => Ok(HandlerOutput {
                output: body,
                message: Vec::new(),
            }),
            Err(StoreError::Duplicate { .. }) => Err(HandlerError::Failed {
                code: ErrorCode::DemoDuplicateTransfer.as_str().into(),
                message: "this action's transfer was already recorded".into(),
                retryable: false,
            }),
            Err(_) => Err(HandlerError::UncertainOutcome(
                "transfer store failed".into(),
            )),
        }
    }
}

/// Longest count `cap:demo:count` accepts.
pub const MAX_COUNT: u64 = 100_000;
/// Longest interval between two counted chunks.
pub const MAX_INTERVAL_MS: u64 = 60_000;

/// Largest per-chunk padding of `cap:demo:count` (bytes; used to exercise slow consumers).
pub const MAX_PAD: u64 = 16_384;

/// `cap:demo:count`: streams `{"n": N, "interval_ms": I, "pad": P, "batch": B}` as N `data` chunks
/// (`{"i": k}`, padded with P bytes) with a `progress` chunk every tenth, then `done`; cancellable
/// between chunks. With `batch` > 1 it persists up to B chunks per write (a bursty producer).
#[derive(Debug, Default, Clone, Copy)]
pub struct CountHandler;

#[async_trait]
impl ActionHandler for CountHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async, Mode::Streaming]),
            cancellable: true,
            mutation: false,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let n = input.get("n").and_then(Value::as_u64).unwrap_or(0);
        let interval = input
            .get("interval_ms")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let pad = input.get("pad").and_then(Value::as_u64).unwrap_or(0);
        let batch = input.get("batch").and_then(Value::as_u64).unwrap_or(1);
        let max_batch = MAX_CHUNK_BATCH as u64;
        if n > MAX_COUNT
            || interval > MAX_INTERVAL_MS
            || pad > MAX_PAD
            || !(1..=max_batch).contains(&batch)
        {
            return Err(HandlerError::Failed {
                code: ErrorCode::DemoInvalidInput.as_str().into(),
                message: format!(
                    "n ≤ {MAX_COUNT}, interval_ms ≤ {MAX_INTERVAL_MS}, pad ≤ {MAX_PAD}, 1 ≤ batch ≤ {MAX_CHUNK_BATCH}"
                ),
                retryable: false,
            });
        }
        let batch = usize::try_from(batch).unwrap_or(1);
        let mut pending = Vec::with_capacity(batch + 1);
        for i in 1..=n {
            if ctx.cancellation.is_cancelled() {
                return Err(HandlerError::Cancelled);
            }
            if interval > 0 {
                tokio::select! {
                    () = ctx.cancellation.cancelled() => return Err(HandlerError::Cancelled),
                    () = tokio::time::sleep(Duration::from_millis(interval)) => {}
                }
            }
            let chunk = if pad == 0 {
                json!({ "i": i })
            } else {
                json!({ "i": i, "pad": "x".repeat(usize::try_from(pad).unwrap_or(0)) })
            };
            pending.push((StreamChunkKind::Data, Some(chunk)));
            if i % 10 == 0 {
                pending.push((
                    StreamChunkKind::Progress,
                    Some(json!({ "done": i, "total": n })),
                ));
            }
            if pending.len() >= batch {
                ctx.chunks.emit_batch(std::mem::take(&mut pending)).await?;
            }
        }
        pending.push((StreamChunkKind::Done, None));
        ctx.chunks.emit_batch(pending).await?;
        Ok(HandlerOutput {
            output: json!({ "count": n }),
            message: Vec::new(),
        })
    }
}

/// The manifest entry of `cap:demo:count`.
pub fn count_capability() -> Value {
    json!({
        "id": "cap:demo:count", "name": "Count", "kind": "tool", "risk": "low", "stability": "stable",
        "description": "Streams n data chunks (one every interval_ms), a progress chunk every tenth, then done; cancellable. batch: chunks persisted per durable write.",
        "input_schema": { "type": "object", "properties": {
            "n": { "type": "integer", "minimum": 0, "maximum": MAX_COUNT },
            "interval_ms": { "type": "integer", "minimum": 0, "maximum": MAX_INTERVAL_MS },
            "pad": { "type": "integer", "minimum": 0, "maximum": MAX_PAD },
            "batch": { "type": "integer", "minimum": 1, "maximum": crate::stream::MAX_CHUNK_BATCH } },
            "required": ["n"], "additionalProperties": false },
        "output_schema": { "type": "object", "properties": { "count": { "type": "integer" } }, "required": ["count"] },
        "contract": {
            "side_effects": ["read"],
            "idempotency": { "requirement": "optional", "collision_behavior": "return_original_result", "key_scope": "principal" },
            "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": true, "supports_cancel": true,
                           "supports_retry": true, "expected_completion": "any", "retry_safety": "safe" },
            "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
        },
    })
}
