//! Delegation's part of admission (spec 14.5): the action's place in the delegation graph. A child
//! records its parent; a parent whose capability a peer serves records the child it will make
//! (its ids follow from the parent's), receipts it, and queues the timer that follows it up.

use aip_core::ReceiptType;
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::admission::admitted::DelegationLink;
use crate::admission::draft::Draft;
use crate::error::RuntimeError;
use crate::registry::AdmittedCapability;

/// Adds the action's delegation link to `draft`: `delegation` is the link a child was sent with.
pub(crate) fn contribute(
    draft: &mut Draft<'_>,
    delegation: Option<&Value>,
    capability: &AdmittedCapability,
    deadline_ms: i64,
) -> Result<(), RuntimeError> {
    if let Some(delegation) = delegation {
        // Set only by the runtime's own delegation path, always with its id.
        draft.admitted.delegation = Some(
            DelegationLink::deserialize(delegation)
                .map_err(|_| RuntimeError::Internal("a delegation link that does not decode"))?,
        );
        return Ok(());
    }
    let Some(peer) = capability.handler.delegation_peer() else {
        return Ok(());
    };
    let tenant = &draft.caller.tenant;
    let (delegation_id, child_action_id) = crate::delegation::ids_of(tenant, &draft.action_id);
    // The receipt binds the parent to the one child it may have (spec 18.1 `delegation_made`).
    let mut made = json!({ "delegation_id": delegation_id, "parent_action_id": draft.action_id,
                           "child_action_id": child_action_id, "peer": peer });
    let mut rest = serde_json::Map::new();
    rest.insert("role".into(), json!("parent"));
    if let Some(identity) = capability.handler.delegation_identity() {
        made["peer_identity"] = identity.clone();
        rest.insert("peer_identity".into(), identity);
    }
    // Durable from the first moment: if the parent ends with its child's outcome unknown, this
    // timer follows the child up.
    let timer = crate::delegation::follow::timer(tenant, &draft.action_id, deadline_ms);
    draft.timers.push(timer);
    draft.receipt(ReceiptType::DelegationMade, made);
    draft.admitted.delegation = Some(DelegationLink {
        delegation_id,
        parent_action_id: None,
        child_action_id: Some(child_action_id),
        peer: Some(peer.to_owned()),
        rest,
    });
    Ok(())
}
