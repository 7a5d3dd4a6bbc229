//! Wire views of stored records (spec 16). Stored data that does not decode is corruption and an
//! error, never a default: a reader must not be shown an invented state, time or receipt.

use std::collections::BTreeMap;

use aip_core::{
    ActionId, ActionLifecycleState, ActionStatus, CapabilityId, CorrelationId, Event, EventId,
    PrincipalKind, Receipt, ReceiptChain, SessionId, Timestamp,
};
use aip_store::{ActionRecord, ActionState, EventRecord, ReceiptRecord, StoreError};

use crate::action::result;
use crate::admission::admitted::AdmittedParts;
use crate::error::RuntimeError;
use crate::events::bare_principal;

/// The stored state of each wire state (spec 11.5). Exhaustive over the wire's states, so a state
/// the protocol adds does not build until the store has it.
pub(crate) fn stored_state(state: ActionLifecycleState) -> ActionState {
    use ActionLifecycleState as W;
    match state {
        W::Unknown => ActionState::Unknown,
        W::Accepted => ActionState::Accepted,
        W::Queued => ActionState::Queued,
        W::Running => ActionState::Running,
        W::Streaming => ActionState::Streaming,
        W::PendingApproval => ActionState::PendingApproval,
        W::Cancelling => ActionState::Cancelling,
        W::Cancelled => ActionState::Cancelled,
        W::Completed => ActionState::Completed,
        W::Failed => ActionState::Failed,
        W::Expired => ActionState::Expired,
        W::DeadLettered => ActionState::DeadLettered,
    }
}

/// The wire state of a stored one: the inverse of [`stored_state`]. A stored state without a wire
/// state is corruption, never a guess.
pub(crate) fn wire_state(state: ActionState) -> Result<ActionLifecycleState, RuntimeError> {
    ActionLifecycleState::ALL
        .iter()
        .copied()
        .find(|wire| stored_state(*wire) == state)
        .ok_or_else(|| corrupt(format!("action state {state} has no wire state")))
}

/// An action's status view; links are the binding's to add.
pub(crate) fn status(
    record: &ActionRecord,
    include_result: bool,
    receipt_chain: Option<ReceiptChain>,
) -> Result<ActionStatus, RuntimeError> {
    let state = wire_state(record.state)?;
    let result = result::stored(record)?;
    let admitted = AdmittedParts::of(record)?;
    let transaction_id = admitted
        .transaction
        .as_ref()
        .map(|slot| aip_core::TransactionId::new(slot.transaction_id.clone()));
    Ok(ActionStatus {
        action_id: ActionId::new(record.action_id.clone()),
        capability_id: Some(CapabilityId::new(record.capability.clone())),
        session_id: record.session_id.clone().map(SessionId::new),
        correlation_id: record.correlation_id.clone().map(CorrelationId::new),
        state,
        queued_state: None,
        result_status: result.as_ref().map(|r| r.status),
        approval_id: admitted.approval_id.clone().map(aip_core::ApprovalId::new),
        transaction_id,
        delegation_id: admitted
            .delegation
            .as_ref()
            .map(|d| aip_core::DelegationId::new(d.delegation_id.clone())),
        started_at: Some(ts(record.created_at_ms)?),
        updated_at: ts(record.updated_at_ms)?,
        completed_at: if record.state.is_terminal() {
            Some(ts(record.updated_at_ms)?)
        } else {
            None
        },
        retry: None,
        lease: None,
        result: if include_result { result } else { None },
        receipt_chain,
        chunks: Vec::new(),
        links: delegation_links(&admitted),
    })
}

/// The wire form of a stored event.
pub(crate) fn event(e: &EventRecord) -> Result<Event, RuntimeError> {
    Ok(Event {
        id: EventId::new(e.event_id.clone()),
        kind: e.kind.clone(),
        occurred_at: ts(e.occurred_at_ms)?,
        session_id: e.session_id.clone().map(SessionId::new),
        action_id: e.action_id.clone().map(ActionId::new),
        correlation_id: e.correlation_id.clone().map(CorrelationId::new),
        actor: e
            .principal
            .as_deref()
            .map(|p| bare_principal(p, PrincipalKind::Service)),
        data: Some(e.data.clone()),
    })
}

/// The wire form of stored events.
pub(crate) fn events(records: &[EventRecord]) -> Result<Vec<Event>, RuntimeError> {
    records.iter().map(event).collect()
}

/// A receipt chain with its root hash (spec 18.2).
pub(crate) fn chain(
    chain_id: &str,
    records: &[ReceiptRecord],
) -> Result<ReceiptChain, RuntimeError> {
    let receipts = records
        .iter()
        .map(|r| {
            serde_json::from_value::<Receipt>(r.body.clone())
                .map_err(|e| corrupt(format!("receipt {}: {e}", r.receipt_id)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let root_hash = (!records.is_empty())
        .then(|| aip_core::chain::root_hash(records.iter().map(|r| r.hash.as_str())));
    Ok(ReceiptChain {
        chain_id: chain_id.to_owned(),
        receipts,
        root_hash,
    })
}

/// A stored epoch-millisecond time on the wire.
/// The delegation graph of an action as links (spec 14.5): a child names its parent action and
/// peer, a parent its child action and peer.
fn delegation_links(admitted: &AdmittedParts) -> BTreeMap<String, String> {
    let mut links = BTreeMap::new();
    if let Some(d) = &admitted.delegation {
        for (member, link) in [
            (&d.parent_action_id, "delegation_parent_action"),
            (&d.child_action_id, "delegation_child_action"),
            (&d.peer, "delegation_peer"),
        ] {
            if let Some(v) = member {
                links.insert(link.to_owned(), v.clone());
            }
        }
    }
    // The conversation the action was about (spec 11.1), by id.
    if let Some(id) = admitted.conversation_id() {
        links.insert("conversation".to_owned(), id.to_owned());
    }
    links
}

pub(crate) fn ts(ms: i64) -> Result<Timestamp, RuntimeError> {
    Timestamp::from_unix_millis(ms).ok_or_else(|| corrupt(format!("timestamp {ms}")))
}

pub(crate) fn corrupt(what: String) -> RuntimeError {
    RuntimeError::Storage(StoreError::Corrupt(what))
}

#[cfg(test)]
mod state_tests {
    use super::{stored_state, wire_state};
    use aip_core::ActionLifecycleState;
    use aip_store::ActionState;

    #[test]
    fn every_stored_action_state_has_its_wire_state_and_back() {
        for state in ActionState::ALL {
            let wire = wire_state(*state).unwrap();
            assert_eq!(wire.as_str(), state.as_str());
            assert_eq!(stored_state(wire), *state);
        }
        assert_eq!(ActionLifecycleState::ALL.len(), ActionState::ALL.len());
    }
}
