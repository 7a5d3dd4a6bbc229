//! Admission (spec 11.3), one step per file, run in the spec's order by `Runtime::admit_action`:
//!
//! 1-2. envelope and schema validation, authentication and replay claim: done before this (the
//!      decoder and `crate::security`);
//! 3.   `lookup`: manifest and handler lookup;
//! 4.   `input`: capability input schema;
//! 5.   `identity`: identity, tenant and session, from trusted state only;
//! 6.   `contract`: mode, deadline and the action's contexts against what the runtime implements
//!      (a callback target against deployment policy: `crate::callback`);
//! 7.   `idempotency`: the key reservation to make atomically with admission;
//! 8.   `policy`: the policy gate (`policy::PolicyGate`), where approval plugs in;
//! 9.   `persist`: durable admission in one transaction;
//! 10.  dispatch or queue: `crate::action`.
//!
//! The entry takes an `ActionRequest`, not an envelope, so profiles (MCP, A2A) admit through the
//! same steps. Every step fails closed with a typed error and writes nothing.

pub(crate) mod admitted;
pub(crate) mod contract;
pub(crate) mod draft;
pub(crate) mod idempotency;
pub(crate) mod identity;
pub(crate) mod input;
pub(crate) mod lookup;
pub(crate) mod persist;
pub mod policy;

use std::sync::Arc;

use aip_core::{Action, Envelope};
use aip_store::{ActionRecord, Lease};
use serde_json::Value;

use crate::caller::Caller;
use crate::chain::ChainWriter;
use crate::error::RuntimeError;
use crate::handler::Mode;
use crate::registry::AdmittedCapability;
use crate::runtime::Runtime;

/// An action to admit, with the envelope members admission needs: what a binding or a profile
/// presents, independent of how it arrived.
#[derive(Debug, Clone)]
pub struct ActionRequest {
    /// The action.
    pub action: Action,
    /// The id of the message that carried it (recorded in the first receipt).
    pub message_id: String,
    /// The session the action belongs to, if any; it must be the caller's own open session.
    pub session_id: Option<String>,
    /// Correlation id of the request, copied to events, receipts and the stream.
    pub correlation_id: Option<String>,
    /// Trace context of the request (spec 11.2), handed to the handler.
    pub trace: Option<Value>,
    /// The message-level idempotency key, used when the action has none of its own.
    pub idempotency_key: Option<String>,
    /// The delegation this action is the child of (spec 14), recorded with it for the read model;
    /// set only by the runtime's delegation path.
    pub delegation: Option<Value>,
    /// The runtime's own check of `session_id`, when the transport just read the session
    /// (`Runtime::checked_session`): admission then does not read it again.
    pub checked: Option<crate::session::SessionCheck>,
}

impl ActionRequest {
    /// `action` on its own, in no session, under a fresh message id: how a compatibility profile
    /// submits what its protocol asked for.
    pub fn plain(action: Action) -> Self {
        Self {
            action,
            message_id: aip_core::MessageId::generate().as_str().to_owned(),
            session_id: None,
            correlation_id: None,
            trace: None,
            idempotency_key: None,
            delegation: None,
            checked: None,
        }
    }

    /// The request carried by `envelope`, whose body is `action`.
    pub fn from_envelope(envelope: &Envelope, action: &Action) -> Self {
        Self {
            action: action.clone(),
            message_id: envelope.message_id.as_str().to_owned(),
            session_id: envelope.session_id.as_ref().map(|s| s.as_str().to_owned()),
            correlation_id: envelope
                .correlation_id
                .as_ref()
                .map(|c| c.as_str().to_owned()),
            trace: envelope
                .trace
                .as_ref()
                .and_then(|t| serde_json::to_value(t).ok()),
            idempotency_key: envelope.idempotency_key.clone(),
            delegation: None,
            checked: None,
        }
    }

    /// The idempotency key in force: the action's own, else the message's.
    pub(crate) fn key(&self) -> Option<&str> {
        self.action
            .idempotency_key
            .as_deref()
            .or(self.idempotency_key.as_deref())
    }
}

/// What admission decided. Built once per request and moved, never stored: the variants' sizes do
/// not matter.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Admission {
    /// Newly admitted: the handler may run (sync, under `lease`) or a worker will (queued).
    Admitted(Admitted),
    /// An earlier action answers this request; nothing was written and nothing may be dispatched.
    Existing {
        /// The earlier action, in its current state.
        original: ActionRecord,
        /// Why it answers.
        why: Existing,
    },
}

/// Why an earlier action answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    /// The same action re-sent (same id, principal and canonical request): a re-delivery.
    Redelivery,
    /// Another action reusing an idempotency key, answered by the key's collision behaviour (9.5).
    Replay,
}

/// A newly admitted action.
#[derive(Debug)]
pub(crate) struct Admitted {
    pub(crate) record: ActionRecord,
    pub(crate) capability: Arc<AdmittedCapability>,
    pub(crate) mode: Mode,
    /// The sync action's first lease, taken in the admission transaction.
    pub(crate) lease: Option<Lease>,
    /// The receipt chain, continued by execution.
    pub(crate) chain: ChainWriter,
    /// The approval the action waits for, when its policy required one (it does not run yet).
    pub(crate) approval_id: Option<String>,
}

impl Runtime {
    /// Steps 3-9 of spec 11.3 for `request` from `caller` (already authenticated).
    pub(crate) async fn admit_action(
        &self,
        caller: &Caller,
        request: &ActionRequest,
    ) -> Result<Admission, RuntimeError> {
        let action = &request.action;
        let capability = lookup::capability(self, caller, action)?;
        let reconciles = action
            .transaction
            .as_ref()
            .is_some_and(|t| t.mode == aip_core::TransactionMode::Reconcile);
        if reconciles {
            // A reconciliation queries the recorded operation; it has no business input.
            if action.input.as_object().is_none_or(|o| !o.is_empty()) {
                return Err(RuntimeError::InvalidInput(
                    "a reconciliation carries an empty input object".into(),
                ));
            }
        } else {
            input::check(&capability, &action.input)?;
        }
        identity::check(self, caller, request).await?;
        let contract = contract::check(self, caller, &capability, action)?;
        let callback = match &action.callback {
            Some(c) => Some(crate::callback::admit(self, c).await?),
            None => None,
        };
        if let Some(conversation) = &action.conversation {
            self.check_conversation_reference(caller, conversation)
                .await?;
        }
        let idempotency = idempotency::claim(&capability, caller, request, contract.now_ms)?;
        let transaction = self
            .check_transaction(
                caller,
                &capability,
                request,
                &idempotency::input_hash(request),
                contract.now_ms,
            )
            .await;
        let mut decision = self
            .policy()
            .evaluate(&policy::PolicySubject {
                caller,
                capability: &capability,
                action,
                mode: contract.mode,
            })
            .await?;
        // A dry run, a plan or a reconciliation commits nothing: its approval is the commit's
        // (spec 26.2; the plan records whether one is required).
        if let crate::transaction::Checked::Admit(t) = &transaction
            && !t.slot.mutates()
            && matches!(decision, policy::PolicyDecision::RequireApproval { .. })
        {
            decision = policy::PolicyDecision::Allow {
                basis: format!(
                    "transaction {}: no side effect; approval applies to the commit",
                    t.slot.mode.as_str()
                ),
            };
        }
        persist::admit(
            self,
            caller,
            request,
            persist::Decided {
                capability,
                contract,
                idempotency,
                decision,
                transaction,
                callback,
            },
        )
        .await
    }
}
