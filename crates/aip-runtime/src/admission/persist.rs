//! Step 9: durable admission in one store transaction (action row, idempotency reservation,
//! receipts, events, and the job: queued, or for sync work already leased to this node), and the
//! answer when an earlier action owns the id or the key.

use std::sync::Arc;

use aip_core::{ReceiptType, canonical::canonical_hash};
use aip_store::{
    ActionRecord, ActionState, AdmissionLease, AdmissionOutcome, IdempotencyClaim, NewAction,
    NewJob, StoreError,
};
use serde_json::{Value, json};

use crate::action::ACTION_QUEUE;
use crate::admission::admitted::{AdmittedRequest, DelegationLink};
use crate::admission::contract::Contract;
use crate::admission::policy::PolicyDecision;
use crate::admission::{ActionRequest, Admission, Admitted, Existing};
use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::events::{bare_principal, new_event};
use crate::handler::Mode;
use crate::receipts::ChainWriter;
use crate::registry::AdmittedCapability;
use crate::runtime::Runtime;
use serde::Deserialize as _;

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
    let (slot, link, deferred) = match transaction {
        crate::transaction::Checked::None => (Value::Null, None, None),
        crate::transaction::Checked::Admit(t) => (
            serde_json::to_value(&t.slot).map_err(|e| {
                RuntimeError::Storage(StoreError::Corrupt(format!("transaction slot: {e}")))
            })?,
            Some(t.link),
            None,
        ),
        // Refused unless an earlier action answers: the unwritable link makes sure nothing new
        // is admitted.
        crate::transaction::Checked::Refuse(err) => (
            Value::Null,
            Some(crate::transaction::unwritable_link()),
            Some(err),
        ),
    };
    let committing = link
        .as_ref()
        .is_some_and(|l| l.role == aip_store::TransactionRole::Commit);
    let action = &request.action;
    let action_id = action.id.as_str().to_owned();
    let (mode, now) = (contract.mode, contract.now_ms);
    let input_hash = crate::admission::idempotency::input_hash(request);
    let agent = &runtime.config().agent;
    let actor = bare_principal(&caller.id, caller.kind);
    let correlation = request
        .correlation_id
        .clone()
        .map(aip_core::CorrelationId::new);
    let mut chain = ChainWriter::new(&action_id, caller, correlation);
    chain.push(
        ReceiptType::RequestReceived,
        &actor,
        json!({ "message_id": request.message_id, "capability_id": action.capability_id, "input_hash": input_hash }),
        now,
    );
    chain.push(
        ReceiptType::ActionAccepted,
        agent,
        json!({ "action_id": action_id, "mode": mode.as_str(), "deadline_ms": contract.deadline_ms }),
        now,
    );
    let gate = match decision {
        PolicyDecision::Allow { basis } => {
            chain.push(
                ReceiptType::PolicyDecision,
                agent,
                json!({ "decision": "allow", "basis": basis, "principal": caller.id, "tenant": caller.tenant }),
                now,
            );
            None
        }
        PolicyDecision::RequireApproval {
            policy,
            excluded_roles,
        } => {
            let approval = crate::approval::request_for(
                caller,
                &capability,
                &action_id,
                &input_hash,
                (*policy, excluded_roles),
                &slot,
                now,
            )?;
            chain.push(
                ReceiptType::PolicyDecision,
                agent,
                json!({ "decision": "approval_required", "approval_id": approval.approval_id, "policy_hash": approval.policy_hash, "principal": caller.id, "tenant": caller.tenant }),
                now,
            );
            chain.push(
                ReceiptType::ApprovalRequested,
                agent,
                json!({ "approval_id": approval.approval_id, "policy_hash": approval.policy_hash, "expires_at_ms": approval.expires_at_ms }),
                now,
            );
            Some(approval)
        }
    };
    // The claim of a plan (or of a direct execution) is receipted with the admission that makes it,
    // and its reconciliation timer is queued with it (spec 13.6: durable from the first moment).
    let mut timers = Vec::new();
    if matches!(slot["mode"].as_str(), Some("commit" | "execute")) {
        if let Some(timer) = crate::transaction::reconcile::timer(
            runtime,
            &caller.tenant,
            &action_id,
            slot["transaction_id"].as_str().unwrap_or_default(),
            now,
        ) {
            timers.push(timer);
        }
        chain.push(
            ReceiptType::TransactionCommitStarted,
            agent,
            json!({ "transaction_id": slot["transaction_id"], "mode": slot["mode"], "plan_id": slot.get("plan_id"),
                    "plan_hash": slot.get("plan_hash"), "provider_operation": slot.get("operation") }),
            now,
        );
    }
    // Streaming work is queued like async work (spec 11.6): a leased worker runs it, so it survives
    // restarts and its chunks are fenced.
    let queued = mode != Mode::Sync;
    let event = |kind: &str, data: Value| {
        new_event(
            kind,
            (&caller.tenant, &caller.id),
            request.session_id.clone(),
            Some(action_id.clone()),
            request.correlation_id.clone(),
            (data, now),
        )
    };
    let mut events = vec![event(
        "aip.action.accepted",
        json!({ "capability_id": action.capability_id, "mode": mode.as_str() }),
    )];
    let (state, job, lease) = match &gate {
        // Waiting for approval: no worker may take it; the job is the approval's expiry timer.
        Some(approval) => {
            events.push(event(
                "aip.action.pending_approval",
                json!({ "approval_id": approval.approval_id, "expires_at_ms": approval.expires_at_ms }),
            ));
            (
                ActionState::PendingApproval,
                crate::approval::expiry::timer(runtime, caller, &action_id, approval),
                None,
            )
        }
        // Every other action has a job. Queued work waits for a worker; sync work is run at once by
        // this node under a lease taken in this transaction, so it is fenced like queued work, no
        // other node's recovery touches it while the lease lives, and if this node dies a worker
        // elsewhere takes the lapsed lease over (never re-running a mutation).
        None => {
            events.push(event(
                if queued {
                    "aip.action.queued"
                } else {
                    "aip.action.started"
                },
                json!({}),
            ));
            (
                if queued {
                    ActionState::Queued
                } else {
                    ActionState::Running
                },
                action_job(runtime, &caller.tenant, &action_id, now),
                (!queued).then(|| AdmissionLease {
                    worker: runtime.worker_id().clone(),
                    lease_ms: runtime.lease_ms(),
                }),
            )
        }
    };
    let mut admitted = AdmittedRequest::new(
        action.clone(),
        request.message_id.clone(),
        request.trace.clone(),
        caller,
        request.key().map(str::to_owned),
    );
    admitted.approval_id = gate.as_ref().map(|a| a.approval_id.clone());
    admitted.transaction = (!slot.is_null()).then_some(slot);
    // The delegation graph (spec 14.5): a child records its parent; a parent whose capability a
    // peer serves records the child it will make (its ids follow from the parent's).
    if let Some(delegation) = &request.delegation {
        // Set only by the runtime's own delegation path, always with its id.
        admitted.delegation = Some(
            DelegationLink::deserialize(delegation)
                .map_err(|_| RuntimeError::Internal("a delegation link that does not decode"))?,
        );
    } else if let Some(peer) = capability.handler.delegation_peer() {
        let (delegation_id, child_action_id) =
            crate::delegation::ids_of(&caller.tenant, &action_id);
        // The receipt binds the parent to the one child it may have (spec 18.1 `delegation_made`).
        let identity = capability.handler.delegation_identity();
        let mut made = json!({ "delegation_id": delegation_id, "parent_action_id": action_id,
                               "child_action_id": child_action_id, "peer": peer });
        let mut rest = serde_json::Map::new();
        rest.insert("role".into(), json!("parent"));
        if let Some(identity) = identity {
            made["peer_identity"] = identity.clone();
            rest.insert("peer_identity".into(), identity);
        }
        chain.push(ReceiptType::DelegationMade, agent, made, now);
        admitted.delegation = Some(DelegationLink {
            delegation_id,
            parent_action_id: None,
            child_action_id: Some(child_action_id),
            peer: Some(peer.to_owned()),
            rest,
        });
        // Durable from the first moment: if the parent ends with its child's outcome unknown, this
        // timer follows the child up (spec 14.5).
        timers.push(crate::delegation::follow::timer(
            &caller.tenant,
            &action_id,
            contract.deadline_ms,
        ));
    }
    let approval_id = gate.as_ref().map(|a| a.approval_id.clone());
    // The admission decision's audit event (spec 18.3), in the admission transaction. A principal
    // acting under a configuration-bound external account is recorded with it.
    let mut audit_data = json!({ "capability_id": action.capability_id, "mode": mode.as_str(),
        "state": state.as_str(), "decision": if approval_id.is_some() { "approval_required" } else { "allow" },
        "issuer": caller.issuer });
    if let Some(id) = &approval_id {
        audit_data["approval_id"] = json!(id);
    }
    if let Some(account) = &caller.external_account {
        audit_data["external_account"] = json!(account);
    }
    let audit = vec![crate::events::new_audit(
        caller,
        "action.admitted",
        now,
        audit_data,
        (Some(&action_id), request.session_id.as_deref()),
    )];
    let admission = aip_store::Admission {
        action: NewAction {
            action_id: action_id.clone(),
            tenant: caller.tenant.clone(),
            principal: caller.id.clone(),
            session_id: request.session_id.clone(),
            capability: action.capability_id.as_str().to_owned(),
            correlation_id: request.correlation_id.clone(),
            mode: mode.as_str().to_owned(),
            state,
            input_hash: Some(input_hash),
            deadline_ms: Some(contract.deadline_ms),
            created_at_ms: now,
            request: admitted.to_value()?,
        },
        idempotency,
        receipts: chain.take(),
        events,
        job: Some(job),
        lease,
        approval: gate,
        transaction: link,
        timers,
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
            chain,
            approval_id,
        })),
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
            if reservation.action_id == action_id {
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
        Err(StoreError::StateConflict { .. }) if deferred.is_some() || committing => Err(deferred
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
