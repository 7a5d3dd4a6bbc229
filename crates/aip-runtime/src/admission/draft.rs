//! The admission being assembled (spec 11.3 step 9): the receipts, timers and stored request that
//! each feature's `admit.rs` adds to before one store transaction writes them together.

use aip_core::ReceiptType;
use aip_store::{ActionState, AdmissionLease, NewApproval, NewEvent, NewJob};
use serde_json::{Value, json};

use crate::admission::ActionRequest;
use crate::admission::admitted::AdmittedRequest;
use crate::admission::contract::Contract;
use crate::caller::Caller;
use crate::chain::ChainWriter;
use crate::events::{EventKind, bare_principal, new_event};
use crate::handler::Mode;
use crate::runtime::Runtime;

/// An admission in the making.
pub(crate) struct Draft<'a> {
    pub(crate) runtime: &'a Runtime,
    pub(crate) caller: &'a Caller,
    pub(crate) action_id: String,
    pub(crate) now: i64,
    /// The action's receipt chain, opened with its first two receipts (spec 18.1).
    pub(crate) chain: ChainWriter,
    /// Jobs queued with the action, each durable from the first moment.
    pub(crate) timers: Vec<NewJob>,
    /// What is stored with the action.
    pub(crate) admitted: AdmittedRequest,
}

impl<'a> Draft<'a> {
    /// The admission of `request`, its chain opened with `request_received` (by the caller) and
    /// `action_accepted` (by this agent).
    pub(crate) fn open(
        runtime: &'a Runtime,
        caller: &'a Caller,
        request: &ActionRequest,
        contract: &Contract,
        input_hash: &str,
    ) -> Self {
        let action = &request.action;
        let action_id = action.id.as_str().to_owned();
        let now = contract.now_ms;
        let correlation = request
            .correlation_id
            .clone()
            .map(aip_core::CorrelationId::new);
        let mut chain = ChainWriter::new(&action_id, caller, correlation);
        chain.push(
            ReceiptType::RequestReceived,
            &bare_principal(&caller.id, caller.kind),
            json!({ "message_id": request.message_id, "capability_id": action.capability_id, "input_hash": input_hash }),
            now,
        );
        let admitted = AdmittedRequest::new(
            action.clone(),
            request.message_id.clone(),
            request.trace.clone(),
            caller,
            request.key().map(str::to_owned),
        );
        let mut draft = Draft {
            runtime,
            caller,
            action_id,
            now,
            chain,
            timers: Vec::new(),
            admitted,
        };
        draft.receipt(
            ReceiptType::ActionAccepted,
            json!({ "action_id": draft.action_id, "mode": contract.mode.as_str(), "deadline_ms": contract.deadline_ms }),
        );
        draft
    }

    /// Appends a receipt this agent issues now.
    pub(crate) fn receipt(&mut self, receipt_type: ReceiptType, data: Value) {
        let agent = &self.runtime.config().agent;
        self.chain.push(receipt_type, agent, data, self.now);
    }
}

/// Where an admitted action starts: its state, its job, its first lease and its first events.
pub(crate) struct Start {
    pub(crate) state: ActionState,
    pub(crate) job: NewJob,
    pub(crate) lease: Option<AdmissionLease>,
    pub(crate) events: Vec<NewEvent>,
}

/// The start of `draft`'s action in `mode`, gated or not by `approval`.
pub(crate) fn start(
    draft: &Draft<'_>,
    request: &ActionRequest,
    mode: Mode,
    approval: Option<&NewApproval>,
) -> Start {
    let (runtime, caller, action_id, now) =
        (draft.runtime, draft.caller, &draft.action_id, draft.now);
    let event = |kind: EventKind, data: Value| {
        new_event(
            kind,
            (&caller.tenant, &caller.id),
            request.session_id.clone(),
            Some(action_id.clone()),
            request.correlation_id.clone(),
            (data, now),
        )
    };
    let accepted = event(
        EventKind::ActionAccepted,
        json!({ "capability_id": request.action.capability_id, "mode": mode.as_str() }),
    );
    match approval {
        // Waiting for approval: no worker may take it; the job is the approval's expiry timer.
        Some(approval) => Start {
            state: ActionState::PendingApproval,
            job: crate::approval::expiry::timer(runtime, caller, action_id, approval),
            lease: None,
            events: vec![
                accepted,
                event(
                    EventKind::ActionPendingApproval,
                    json!({ "approval_id": approval.approval_id, "expires_at_ms": approval.expires_at_ms }),
                ),
            ],
        },
        // Streaming work is queued like async work (spec 11.6): a leased worker runs it, so it
        // survives restarts and its chunks are fenced.
        None if mode != Mode::Sync => Start {
            state: ActionState::Queued,
            job: crate::admission::persist::action_job(runtime, &caller.tenant, action_id, now),
            lease: None,
            events: vec![accepted, event(EventKind::ActionQueued, json!({}))],
        },
        // Sync work is run at once by this node under a lease taken in this transaction, so it is
        // fenced like queued work, no other node's recovery touches it while the lease lives, and
        // if this node dies a worker elsewhere takes the lapsed lease over (never re-running a
        // mutation).
        None => Start {
            state: ActionState::Running,
            job: crate::admission::persist::action_job(runtime, &caller.tenant, action_id, now),
            lease: Some(AdmissionLease {
                worker: runtime.worker_id().clone(),
                lease_ms: runtime.lease_ms(),
            }),
            events: vec![accepted, event(EventKind::ActionStarted, json!({}))],
        },
    }
}

/// The admission decision's audit event (spec 18.3), written in the admission transaction. A
/// principal acting under a configuration-bound external account is recorded with it.
pub(crate) fn audit(
    draft: &Draft<'_>,
    request: &ActionRequest,
    mode: Mode,
    state: ActionState,
) -> aip_store::NewAudit {
    let caller = draft.caller;
    let approval_id = draft.admitted.approval_id.as_ref();
    let mut data = json!({ "capability_id": request.action.capability_id, "mode": mode.as_str(),
        "state": state.as_str(), "decision": if approval_id.is_some() { "approval_required" } else { "allow" },
        "issuer": caller.issuer });
    if let Some(id) = approval_id {
        data["approval_id"] = json!(id);
    }
    if let Some(account) = &caller.external_account {
        data["external_account"] = json!(account);
    }
    crate::events::new_audit(
        caller,
        "action.admitted",
        draft.now,
        data,
        (Some(&draft.action_id), request.session_id.as_deref()),
    )
}
