//! Events and audit records the runtime writes (spec 16.1, 18.3): every event is built here, with the
//! audience it is safe for.

use aip_core::{Principal, PrincipalId, PrincipalKind};
use aip_store::{ActionRecord, NewAudit, NewEvent};
use serde_json::Value;

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// One event for the audience `(tenant, principal)`.
pub(crate) fn new_event(
    kind: &str,
    (tenant, principal): (&str, &str),
    session_id: Option<String>,
    action_id: Option<String>,
    correlation_id: Option<String>,
    (data, now): (Value, i64),
) -> NewEvent {
    NewEvent {
        event_id: aip_core::EventId::generate().0,
        kind: kind.to_owned(),
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
pub(crate) fn action_event(kind: &str, record: &ActionRecord, data: Value, now: i64) -> NewEvent {
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
