//! The admitted request (spec 9.2 step 9, 11.1): what admission stores with an action, written once
//! as this type and decoded once into it, so no reader walks the stored JSON by pointer. Rows
//! written before the record had a version decode as version 1, which is this layout.

use aip_core::{Action, PrincipalKind};
use aip_store::{ActionRecord, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::caller::{Caller, ExternalAccount};
use crate::error::RuntimeError;

/// The layout written by this build.
const VERSION: u32 = 1;

fn version_1() -> u32 {
    1
}

/// What the runtime admitted, as stored with the action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AdmittedRequest {
    /// The record's layout (absent on rows written before it had one: version 1).
    #[serde(default = "version_1")]
    pub(crate) version: u32,
    /// The action as the caller sent it.
    pub(crate) action: Action,
    /// The id of the message that carried it.
    pub(crate) message_id: String,
    /// The request's trace context (spec 11.2).
    #[serde(default)]
    pub(crate) trace: Option<Value>,
    /// Who was admitted, as authenticated then.
    pub(crate) caller: AdmittedCaller,
    /// The idempotency key in force (the action's, else the message's).
    #[serde(default)]
    pub(crate) idempotency_key: Option<String>,
    /// The approval gating it (spec 12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) approval_id: Option<String>,
    /// Its transaction slot (spec 13), exactly as stored: the approval's policy hash covers these
    /// bytes, so it is kept as written and decoded on use ([`AdmittedRequest::slot`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) transaction: Option<Value>,
    /// Its place in a delegation graph (spec 14.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) delegation: Option<DelegationLink>,
}

/// The admitted caller: what authorized the action at admission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AdmittedCaller {
    pub(crate) id: String,
    pub(crate) kind: PrincipalKind,
    pub(crate) issuer: String,
    pub(crate) scopes: Vec<String>,
    #[serde(default)]
    pub(crate) external_account: Option<ExternalAccount>,
}

/// An action's link in a delegation graph: a child names its parent, a parent the child it makes.
/// Members beyond the graph's are kept as stored (a child's link is the delegation context it was
/// sent with).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DelegationLink {
    pub(crate) delegation_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) parent_action_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) child_action_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) peer: Option<String>,
    #[serde(flatten)]
    pub(crate) rest: serde_json::Map<String, Value>,
}

impl AdmittedRequest {
    /// The record of `caller`'s `action`, carried by message `message_id`.
    pub(crate) fn new(
        action: Action,
        message_id: String,
        trace: Option<Value>,
        caller: &Caller,
        idempotency_key: Option<String>,
    ) -> Self {
        AdmittedRequest {
            version: VERSION,
            action,
            message_id,
            trace,
            caller: AdmittedCaller {
                id: caller.id.clone(),
                kind: caller.kind,
                issuer: caller.issuer.clone(),
                scopes: caller.scopes.clone(),
                external_account: caller.external_account.clone(),
            },
            idempotency_key,
            approval_id: None,
            transaction: None,
            delegation: None,
        }
    }

    /// The stored request of `record`, decoded; one that does not decode is corruption.
    pub(crate) fn of(record: &ActionRecord) -> Result<Self, RuntimeError> {
        let admitted = Self::deserialize(&record.request)
            .map_err(|e| corrupt(record, &format!("the stored request does not decode: {e}")))?;
        known_version(record, admitted.version)?;
        Ok(admitted)
    }

    /// The value to store.
    pub(crate) fn to_value(&self) -> Result<Value, RuntimeError> {
        serde_json::to_value(self).map_err(|e| {
            RuntimeError::Storage(StoreError::Corrupt(format!("admitted request: {e}")))
        })
    }

    /// The transaction slot, decoded (spec 13); one that does not decode is corruption, never
    /// "not transactional".
    pub(crate) fn slot(
        &self,
        record: &ActionRecord,
    ) -> Result<Option<crate::transaction::Slot>, RuntimeError> {
        match &self.transaction {
            None | Some(Value::Null) => Ok(None),
            Some(v) => crate::transaction::Slot::deserialize(v)
                .map(Some)
                .map_err(|e| corrupt(record, &format!("transaction slot: {e}"))),
        }
    }

    /// The requester as the approval's policy hash saw it (spec 12.3): tenant, principal, kind and
    /// external account, with no scopes.
    pub(crate) fn requester(&self, record: &ActionRecord) -> Caller {
        let mut caller = Caller::owner(&record.tenant, &record.principal);
        caller.kind = self.caller.kind;
        caller.external_account = self.caller.external_account.clone();
        caller
    }

    /// The requester with the scopes it was admitted with: whom the action's follow-up work
    /// runs as when no identity configuration says otherwise.
    pub(crate) fn owner(&self, record: &ActionRecord) -> Caller {
        let mut caller = self.requester(record);
        caller.scopes = self.caller.scopes.clone();
        caller
    }
}

/// The parts of an admitted request that links and per-run checks read (approval, transaction
/// slot, delegation link, conversation), decoded on their own: every listed action's view and every
/// run reads them, and the action's input, bounded but possibly large, is not copied for that. The
/// layout is [`AdmittedRequest`]'s; members not named here are skipped unread.
#[derive(Debug, Deserialize)]
pub(crate) struct AdmittedParts {
    #[serde(default = "version_1")]
    version: u32,
    #[serde(default)]
    pub(crate) approval_id: Option<String>,
    #[serde(default)]
    pub(crate) transaction: Option<crate::transaction::Slot>,
    #[serde(default)]
    pub(crate) delegation: Option<DelegationLink>,
    #[serde(default)]
    action: Option<PartsOfAction>,
}

#[derive(Debug, Deserialize)]
struct PartsOfAction {
    #[serde(default)]
    conversation: Option<PartsOfConversation>,
}

#[derive(Debug, Deserialize)]
struct PartsOfConversation {
    id: String,
}

impl AdmittedParts {
    /// The parts of `record`'s stored request; a request that does not decode is corruption.
    pub(crate) fn of(record: &ActionRecord) -> Result<Self, RuntimeError> {
        let parts = Self::deserialize(&record.request)
            .map_err(|e| corrupt(record, &format!("the stored request does not decode: {e}")))?;
        known_version(record, parts.version)?;
        Ok(parts)
    }

    /// The id of the conversation the action was about (spec 11.1).
    pub(crate) fn conversation_id(&self) -> Option<&str> {
        self.action
            .as_ref()
            .and_then(|a| a.conversation.as_ref())
            .map(|c| c.id.as_str())
    }
}

/// The action a stored record admitted, as the caller sent it (for a binding that renders what
/// the action asked for, such as its callback); a record that does not decode is corruption.
pub fn admitted_action(record: &ActionRecord) -> Result<Action, RuntimeError> {
    AdmittedRequest::of(record).map(|admitted| admitted.action)
}

/// Refuses a stored layout this build does not know (a row written by a later build).
fn known_version(record: &ActionRecord, version: u32) -> Result<(), RuntimeError> {
    if version == VERSION {
        Ok(())
    } else {
        Err(corrupt(
            record,
            &format!("stored request version {version} is not known"),
        ))
    }
}

fn corrupt(record: &ActionRecord, what: &str) -> RuntimeError {
    RuntimeError::Storage(StoreError::Corrupt(format!(
        "action {}: {what}",
        record.action_id
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(request: Value) -> ActionRecord {
        ActionRecord {
            action_id: "act_1".into(),
            tenant: "t1".into(),
            principal: "alice".into(),
            session_id: None,
            capability: "cap:demo:echo".into(),
            correlation_id: None,
            mode: "sync".into(),
            state: aip_store::ActionState::Completed,
            idempotency_scope: None,
            idempotency_key: None,
            input_hash: None,
            deadline_ms: Some(1),
            created_at_ms: 1,
            updated_at_ms: 1,
            version: 1,
            request,
            result: None,
        }
    }

    /// A stored request as the build before this record wrote it (no version member), with every
    /// optional part: a parent's delegation link with its peer identity, a slot and an approval.
    fn unversioned() -> Value {
        json!({
            "action": { "id": "act_1", "capability_id": "cap:demo:echo", "input": { "text": "hi" } },
            "message_id": "msg_1",
            "trace": null,
            "caller": { "id": "alice", "kind": "agent", "issuer": "bearer", "scopes": ["actions:write"],
                        "external_account": { "system": "crm", "id": "acct-7" } },
            "idempotency_key": "k-1",
            "approval_id": "apr_1",
            "transaction": { "transaction_id": "txn_1", "mode": "dry_run" },
            "delegation": { "delegation_id": "dlg_1", "child_action_id": "act_2", "peer": "peer-a",
                            "role": "parent", "peer_identity": { "did": "did:key:z6Mk" } },
        })
    }

    #[test]
    fn a_request_stored_before_the_record_had_a_version_decodes_whole() {
        let stored = unversioned();
        let admitted = AdmittedRequest::of(&record(stored.clone())).unwrap();
        assert_eq!(admitted.version, 1);
        assert_eq!(admitted.action.input, json!({ "text": "hi" }));
        assert_eq!(admitted.caller.kind, PrincipalKind::Agent);
        assert_eq!(admitted.caller.scopes, ["actions:write"]);
        assert_eq!(admitted.approval_id.as_deref(), Some("apr_1"));
        let link = admitted.delegation.as_ref().unwrap();
        assert_eq!(link.child_action_id.as_deref(), Some("act_2"));
        assert_eq!(link.rest["peer_identity"], json!({ "did": "did:key:z6Mk" }));
        // Written back, it is the same record plus its version: nothing dropped or renamed.
        let mut again = admitted.to_value().unwrap();
        assert_eq!(
            again.as_object_mut().unwrap().remove("version"),
            Some(json!(1))
        );
        assert_eq!(again, stored);
    }

    #[test]
    fn the_parts_read_for_views_and_runs_are_those_of_the_whole_record() {
        let mut stored = unversioned();
        stored["action"]["conversation"] =
            json!({ "id": "conv_1", "channel": {}, "status": "open" });
        let record = record(stored);
        let (whole, parts) = (
            AdmittedRequest::of(&record),
            AdmittedParts::of(&record).unwrap(),
        );
        let whole = whole.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(parts.approval_id, whole.approval_id);
        assert_eq!(parts.delegation, whole.delegation);
        assert_eq!(
            parts.transaction.as_ref().map(|s| s.transaction_id.clone()),
            whole.slot(&record).unwrap().map(|s| s.transaction_id)
        );
        assert_eq!(parts.conversation_id(), Some("conv_1"));
    }

    #[test]
    fn a_stored_request_that_does_not_decode_or_has_an_unknown_version_is_corruption() {
        let mut missing = unversioned();
        missing.as_object_mut().unwrap().remove("caller");
        let mut later = unversioned();
        later["version"] = json!(2);
        let mut extra = unversioned();
        extra["unexpected"] = json!(true);
        for stored in [missing, later, extra] {
            let err = AdmittedRequest::of(&record(stored)).unwrap_err();
            assert!(
                matches!(err, RuntimeError::Storage(StoreError::Corrupt(_))),
                "{err:?}"
            );
        }
    }
}
