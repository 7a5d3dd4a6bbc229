//! Step 9: durable admission in one store transaction (action row, idempotency reservation,
//! receipts, events, and the job: queued, or for sync work already leased to this node), and the
//! answer when an earlier action owns the id or the key. Each feature adds its part to the
//! [`Draft`] from its own `admit.rs` (approval, transaction, delegation; the callback subscription
//! is checked in step 6); this module assembles and writes them.

use std::sync::Arc;

use aip_core::canonical::canonical_hash;
use aip_store::{ActionRecord, AdmissionOutcome, IdempotencyClaim, NewAction, NewJob, StoreError};
use serde_json::json;

use crate::action::ACTION_QUEUE;
use crate::admission::admitted::AdmittedRequest;
use crate::admission::contract::Contract;
use crate::admission::draft::{self, Draft};
use crate::admission::policy::PolicyDecision;
use crate::admission::{ActionRequest, Admission, Admitted, Existing};
use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::registry::AdmittedCapability;
use crate::runtime::Runtime;

/// What steps 3-8 settled.
pub(crate) struct Decided {
    pub(crate) capability: Arc<AdmittedCapability>,
    pub(crate) contract: Contract,
    pub(crate) idempotency: Option<IdempotencyClaim>,
    pub(crate) decision: PolicyDecision,
    pub(crate) transaction: crate::transaction::Checked,
    /// The action's callback subscription, validated (spec 17.1).
    pub(crate) callback: Option<aip_store::CallbackSubscription>,
}

pub(crate) async fn admit(
    runtime: &Runtime,
    caller: &Caller,
    request: &ActionRequest,
    decided: Decided,
) -> Result<Admission, RuntimeError> {
    let Decided {
        capability,
        contract,
        idempotency,
        decision,
        transaction,
        callback,
    } = decided;
    let transaction = crate::transaction::admit::prepare(transaction)?;
    let input_hash = crate::admission::idempotency::input_hash(request);
    let mut draft = Draft::open(runtime, caller, request, &contract, &input_hash);
    let approval = crate::approval::admit::contribute(
        &mut draft,
        &capability,
        decision,
        &input_hash,
        &transaction.stored,
    )?;
    crate::transaction::admit::contribute(&mut draft, &transaction);
    let mode = contract.mode;
    let start = draft::start(&draft, request, mode, approval.as_ref());
    let delegation = request.delegation.as_ref();
    crate::delegation::admit::contribute(
        &mut draft,
        delegation,
        &capability,
        contract.deadline_ms,
    )?;
    let audit = vec![draft::audit(&draft, request, mode, start.state)];
    let approval_id = draft.admitted.approval_id.clone();
    let (commits, link) = (transaction.commits(), transaction.link);
    let admission = aip_store::Admission {
        action: NewAction {
            action_id: draft.action_id.clone(),
            tenant: caller.tenant.clone(),
            principal: caller.id.clone(),
            session_id: request.session_id.clone(),
            capability: request.action.capability_id.as_str().to_owned(),
            correlation_id: request.correlation_id.clone(),
            mode: mode.as_str().to_owned(),
            state: start.state,
            input_hash: Some(input_hash),
            deadline_ms: Some(contract.deadline_ms),
            created_at_ms: draft.now,
            request: draft.admitted.to_value()?,
        },
        idempotency,
        receipts: draft.chain.take(),
        events: start.events,
        job: Some(start.job),
        lease: start.lease,
        approval,
        transaction: link,
        timers: draft.timers,
        callback,
        audit,
        quota: runtime.quotas().of(caller),
    };
    match runtime.store().admit(admission).await {
        Ok(AdmissionOutcome::Admitted { record, lease }) => Ok(Admission::Admitted(Admitted {
            record,
            capability,
            mode,
            lease,
            chain: draft.chain,
            approval_id,
        })),
        outcome => {
            not_admitted(
                runtime,
                caller,
                request,
                outcome,
                (transaction.deferred, commits),
            )
            .await
        }
    }
}

/// The answer to an admission the store did not make: an earlier action's, or the refusal.
/// `deferred` is the transaction checks' refusal, returned unless an earlier action answers;
/// `commits` says whether the step claimed a plan.
async fn not_admitted(
    runtime: &Runtime,
    caller: &Caller,
    request: &ActionRequest,
    outcome: Result<AdmissionOutcome, StoreError>,
    (deferred, commits): (Option<RuntimeError>, bool),
) -> Result<Admission, RuntimeError> {
    match outcome {
        Ok(AdmissionOutcome::Replayed { original, .. }) => {
            let why = if is_resend(caller, request, &original) {
                Existing::Redelivery
            } else {
                Existing::Replay
            };
            Ok(Admission::Existing { original, why })
        }
        Ok(AdmissionOutcome::Conflict { reservation }) => {
            // The key's owner may be this very action, re-sent: that is delivery, not a collision.
            if reservation.action_id == request.action.id.as_str() {
                resend_of(runtime, caller, request)
                    .await?
                    .ok_or(RuntimeError::IdempotencyConflict)
            } else {
                Err(RuntimeError::IdempotencyConflict)
            }
        }
        Ok(_) => Err(RuntimeError::Internal("unexpected admission outcome")),
        Err(StoreError::QuotaExceeded { bucket, limit }) => {
            metrics::counter!("aip_quota_exceeded_total", "bucket" => bucket).increment(1);
            Err(RuntimeError::QuotaExceeded { bucket, limit })
        }
        Err(StoreError::QueueFull { limit }) => {
            metrics::counter!("aip_queue_full_total").increment(1);
            Err(RuntimeError::QueueFull { limit })
        }
        Err(StoreError::Duplicate { kind: "action" }) => resend_of(runtime, caller, request)
            .await?
            .ok_or(RuntimeError::DuplicateActionId),
        // The transaction moved since it was checked (another commit claimed the plan first), or
        // the request was refused and no earlier action answers it.
        Err(StoreError::StateConflict { .. }) if deferred.is_some() || commits => Err(deferred
            .unwrap_or_else(|| {
                crate::error::TransactionError::PlanClaimed(
                    "another commit claimed it first".into(),
                )
                .into()
            })),
        Err(StoreError::StateConflict { .. }) => Err(crate::error::TransactionError::Conflict(
            "the transaction moved while this step was admitted; retry".into(),
        )
        .into()),
        Err(err) => Err(err.into()),
    }
}

/// The job that runs an action: queued now (a sync admission leases it at once).
pub(crate) fn action_job(runtime: &Runtime, tenant: &str, action_id: &str, now: i64) -> NewJob {
    NewJob {
        // Job ids are store-wide: action ids are unique only within their tenant.
        job_id: aip_core::generate_with_prefix("job_"),
        queue: ACTION_QUEUE.into(),
        action_id: Some(action_id.to_owned()),
        tenant: tenant.to_owned(),
        available_at_ms: now,
        max_attempts: runtime.config().max_attempts.max(1),
        payload: json!({}),
    }
}

/// The stored action with `request`'s id when `request` re-sends it, as an answer.
async fn resend_of(
    runtime: &Runtime,
    caller: &Caller,
    request: &ActionRequest,
) -> Result<Option<Admission>, RuntimeError> {
    let original = runtime
        .store()
        .get_action(&caller.tenant, request.action.id.as_str())
        .await?;
    Ok(original
        .filter(|original| is_resend(caller, request, original))
        .map(|original| Admission::Existing {
            original,
            why: Existing::Redelivery,
        }))
}

/// Whether `request` is the stored action re-sent: same id, tenant and principal, and the same
/// canonical request (action, idempotency key in force and session).
fn is_resend(caller: &Caller, request: &ActionRequest, original: &ActionRecord) -> bool {
    original.action_id == request.action.id.as_str()
        && original.tenant == caller.tenant
        && original.principal == caller.id
        && stored_request_hash(original).as_deref() == Some(request_hash(request).as_str())
}

/// The canonical hash of what makes a request the same request.
fn request_hash(request: &ActionRequest) -> String {
    canonical_hash(&json!({
        "action": request.action,
        "idempotency_key": request.key(),
        "session_id": request.session_id,
    }))
}

/// The request hash of a stored action, from the members its stored request holds. Computed only
/// when an id or key is already taken, so admission itself pays nothing for re-send detection.
fn stored_request_hash(record: &ActionRecord) -> Option<String> {
    let admitted = AdmittedRequest::of(record).ok()?;
    Some(canonical_hash(&json!({
        "action": admitted.action,
        "idempotency_key": admitted.idempotency_key,
        "session_id": record.session_id,
    })))
}
