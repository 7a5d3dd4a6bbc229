//! Events and audit records the runtime writes (spec 16.1, 18.3): every event is built here, with the
//! audience it is safe for.

use aip_core::{Principal, PrincipalId, PrincipalKind};
use aip_store::{ActionRecord, NewAudit, NewEvent};
use serde_json::Value;

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

use aip_store::ActionState;

macro_rules! event_kinds {
    ($( $(#[$meta:meta])* $variant:ident = $kind:literal, )+) => {
        /// The event kinds this runtime emits (spec 16.1, 25.2): one closed list, so every
        /// emitter names a kind from it and a new kind is one new line here.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum EventKind {
            $( $(#[$meta])* $variant, )+
            /// An action reached a final state (spec 11.5): `aip.action.<state>`.
            ActionEnded(ActionState),
        }

        impl EventKind {
            /// The kinds without a state, in declaration order.
            #[cfg(test)]
            const FLAT: &'static [EventKind] = &[$(EventKind::$variant),+];

            /// The namespaced kind on the wire.
            pub(crate) fn name(self) -> std::borrow::Cow<'static, str> {
                match self {
                    $(EventKind::$variant => $kind.into(),)+
                    EventKind::ActionEnded(state) => format!("aip.action.{}", state.as_str()).into(),
                }
            }
        }
    };
}

event_kinds! {
    /// Admitted (spec 11.3).
    ActionAccepted = "aip.action.accepted",
    /// Waiting for a worker.
    ActionQueued = "aip.action.queued",
    /// A handler took it up.
    ActionStarted = "aip.action.started",
    /// Waiting for an approval decision (spec 12).
    ActionPendingApproval = "aip.action.pending_approval",
    /// Cancellation was asked for (spec 11.7).
    ActionCancelRequested = "aip.action.cancel_requested",
    /// The approval an action waited for was granted.
    ApprovalGranted = "aip.approval.granted",
    /// ... denied.
    ApprovalDenied = "aip.approval.denied",
    /// ... revoked.
    ApprovalRevoked = "aip.approval.revoked",
    /// ... expired undecided.
    ApprovalExpired = "aip.approval.expired",
    /// A parent learned its delegated child's outcome (spec 14.5).
    DelegationReconciled = "aip.delegation.reconciled",
    /// A session was opened (spec 10.3).
    SessionCreated = "aip.session.created",
    /// ... became active.
    SessionActivated = "aip.session.activated",
    /// ... was asked to cancel its actions.
    SessionCancelRequested = "aip.session.cancel_requested",
    /// ... was cancelled.
    SessionCancelled = "aip.session.cancelled",
    /// ... settled: closed for good.
    SessionSettled = "aip.session.settled",
}

/// One event for the audience `(tenant, principal)`.
pub(crate) fn new_event(
    kind: EventKind,
    (tenant, principal): (&str, &str),
    session_id: Option<String>,
    action_id: Option<String>,
    correlation_id: Option<String>,
    (data, now): (Value, i64),
) -> NewEvent {
    NewEvent {
        event_id: aip_core::EventId::generate().0,
        kind: kind.name().into_owned(),
        tenant: tenant.to_owned(),
        principal: Some(principal.to_owned()),
        session_id,
        action_id,
        correlation_id,
        occurred_at_ms: now,
        data,
    }
}

/// An event of a stored action, addressed to its owner.
pub(crate) fn action_event(
    kind: EventKind,
    record: &ActionRecord,
    data: Value,
    now: i64,
) -> NewEvent {
    new_event(
        kind,
        (&record.tenant, &record.principal),
        record.session_id.clone(),
        Some(record.action_id.clone()),
        record.correlation_id.clone(),
        (data, now),
    )
}

/// A principal with no more than an id and kind (actors of receipts, events and audit views).
pub(crate) fn bare_principal(id: &str, kind: PrincipalKind) -> Principal {
    Principal {
        id: PrincipalId::new(id),
        kind,
        display_name: None,
        trust_domain: None,
        did: None,
        external_refs: Vec::new(),
        delegated_authority: Vec::new(),
        auth_context: None,
    }
}

impl Runtime {
    /// Appends an audit record of `caller`'s request about an action and/or session. Not best
    /// effort (spec 18.3): an audit event that cannot be written fails the request with the storage
    /// error, so nothing security-relevant happens unrecorded without its caller being told.
    pub(crate) async fn record_audit(
        &self,
        caller: &Caller,
        label: &str,
        now: i64,
        data: Value,
        ids: (Option<&str>, Option<&str>),
    ) -> Result<(), RuntimeError> {
        self.store()
            .append_audit(new_audit(caller, label, now, data, ids))
            .await
            .map(|_| ())
            .map_err(|err| {
                tracing::error!(label, error = %err, "audit record not written");
                RuntimeError::Storage(err)
            })
    }

    /// `err` as answered after its audit event (`label`) is written, when it refuses the request for
    /// a security reason ([`RuntimeError::is_security_refusal`]); a refusal whose audit event
    /// cannot be written is answered with the storage error instead (fail closed).
    pub(crate) async fn audit_refusal(
        &self,
        caller: &Caller,
        label: &str,
        err: RuntimeError,
        mut data: Value,
        ids: (Option<&str>, Option<&str>),
    ) -> RuntimeError {
        if !err.is_security_refusal() {
            return err;
        }
        data["code"] = Value::String(err.code().as_str().to_owned());
        match self
            .record_audit(caller, label, crate::clock::now_ms(), data, ids)
            .await
        {
            Ok(()) => err,
            Err(unwritten) => unwritten,
        }
    }
}

/// The member of an audit record's stored data that keeps its actor's principal kind (spec 18.3:
/// the actor as it is, a human shown as a human); reads move it back into the event's actor.
pub(crate) const ACTOR_KIND: &str = "actor_kind";

/// An audit event of `caller`'s request, for a store write that appends it (alone or with the
/// transition it records).
pub(crate) fn new_audit(
    caller: &Caller,
    label: &str,
    now: i64,
    data: Value,
    (action_id, session_id): (Option<&str>, Option<&str>),
) -> NewAudit {
    let mut data = data;
    if let Value::Object(fields) = &mut data {
        fields.insert(
            ACTOR_KIND.into(),
            serde_json::to_value(caller.kind).unwrap_or(Value::Null),
        );
    }
    NewAudit {
        audit_id: aip_core::generate_with_prefix("aud_"),
        tenant: caller.tenant.clone(),
        actor: caller.id.clone(),
        action_label: label.into(),
        occurred_at_ms: now,
        data,
        action_id: action_id.map(str::to_owned),
        session_id: session_id.map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::EventKind;
    use aip_store::ActionState;

    #[test]
    fn every_event_kind_is_namespaced_and_named_once() {
        let mut names: Vec<_> = EventKind::FLAT.iter().map(|k| k.name()).collect();
        assert!(
            names
                .iter()
                .all(|n| n.starts_with("aip.") && n.split('.').count() == 3)
        );
        let all = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all);
    }

    #[test]
    fn an_action_ending_is_named_by_its_final_state() {
        let kind = EventKind::ActionEnded(ActionState::DeadLettered);
        assert_eq!(kind.name(), "aip.action.dead_lettered");
        assert_eq!(
            EventKind::ActionEnded(ActionState::Cancelled).name(),
            "aip.action.cancelled"
        );
    }
}
