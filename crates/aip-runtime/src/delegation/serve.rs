//! The receiving side of a delegation (spec 14.1-14.4, 26.3): a `delegation_request` from a
//! configured peer, answered with a `delegation_result` signed with this node's key. A re-sent
//! request (same child action) re-attaches to the child admitted first: that is how the
//! delegating node follows the child until it is terminal, across its own retries and restarts.

use std::sync::Arc;

use aip_core::{
    ActionLifecycleState, DelegationRequest, DelegationResult, DelegationStatus, Envelope,
    MessageBody,
};
use serde_json::{Value, json};

use super::{contract_digest, is_me};
use crate::admission::ActionRequest;
use crate::caller::Caller;
use crate::error::{DelegationError, RuntimeError};
use crate::reply::Reply;
use crate::runtime::Runtime;

impl Runtime {
    /// `aip.agent.v1.delegation_request`: admit the child as the authenticated peer's principal and
    /// answer with its state (after a bounded wait for a terminal one, `metadata.wait_ms`).
    pub(crate) async fn serve_delegation_request(
        self: &Arc<Self>,
        caller: &Caller,
        request: &Envelope,
        body: &DelegationRequest,
    ) -> Result<Reply, RuntimeError> {
        let policy = &self.config().delegation;
        let peer = policy
            .peer_by_did(&caller.issuer)
            .filter(|p| p.principal == caller.id)
            .ok_or(DelegationError::PeerUnauthenticated)?;
        let requester = &body.requested_by;
        if requester.did.as_deref() != Some(peer.did.as_str())
            || requester.trust_domain.as_deref() != Some(peer.trust_domain.as_str())
        {
            return Err(DelegationError::PeerMismatch(
                "requested_by is not the authenticated peer".into(),
            )
            .into());
        }
        if !is_me(&body.delegate, &self.config().agent) {
            return Err(
                DelegationError::PeerMismatch("the delegate is not this node".into()).into(),
            );
        }
        let child = &body.child_action;
        // The chain first (admission checks it again): a loop or an overlong chain is refused as
        // such, whatever else is wrong with the request.
        super::check_chain(self, caller, child)?;
        let hop = child.delegation_chain.last().ok_or_else(|| {
            DelegationError::ChainInvalid("the child action carries no entry for this hop".into())
        })?;
        if hop.scope != body.scope || hop.from.id != requester.id {
            return Err(DelegationError::ChainInvalid(
                "the child's last chain entry is not this delegation".into(),
            )
            .into());
        }
        let metadata = body.metadata.as_ref();
        let stated = metadata
            .and_then(|m| m.get("contract_digest"))
            .and_then(Value::as_str)
            .ok_or(DelegationError::ContractMismatch)?;
        // An invisible or unknown capability is refused by admission below, as for any caller.
        if let Some(capability) = self.registry().get(child.capability_id.as_str())
            && contract_digest(capability.capability.contract.as_ref()) != stated
        {
            return Err(DelegationError::ContractMismatch.into());
        }
        let wait_ms = metadata
            .and_then(|m| m.get("wait_ms"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
            .min(self.max_wait_ms());
        let admitted = ActionRequest {
            action: child.clone(),
            message_id: request.message_id.as_str().to_owned(),
            session_id: None,
            correlation_id: request
                .correlation_id
                .as_ref()
                .map(|c| c.as_str().to_owned()),
            trace: None,
            idempotency_key: None,
            delegation: Some(json!({
                "delegation_id": body.delegation_id,
                "parent_action_id": body.parent_action_id,
                "requested_by": requester.id,
                "peer": peer.name,
                "role": "child",
            })),
            checked: None,
        };
        self.submit_action(caller, admitted).await?;
        let status = self
            .action_status(caller, child.id.as_str(), true, false, Some(wait_ms))
            .await?;
        let delegation_status = match status.state {
            ActionLifecycleState::Completed => DelegationStatus::Completed,
            ActionLifecycleState::Cancelled => DelegationStatus::Cancelled,
            ActionLifecycleState::Failed
            | ActionLifecycleState::DeadLettered
            | ActionLifecycleState::Expired => DelegationStatus::Failed,
            ActionLifecycleState::PendingApproval => DelegationStatus::RequiresHuman,
            ActionLifecycleState::Running => DelegationStatus::Running,
            _ => DelegationStatus::Accepted,
        };
        let terminal = matches!(
            delegation_status,
            DelegationStatus::Completed | DelegationStatus::Failed | DelegationStatus::Cancelled
        );
        let result = status.result.filter(|_| terminal);
        let error = (terminal && result.is_none()).then(|| {
            aip_core::ErrorCode::DelegationChildFailed.error(format!(
                "the child action ended {} without a result",
                delegation_status.as_str()
            ))
        });
        let answer = DelegationResult {
            delegation_id: body.delegation_id.clone(),
            parent_action_id: body.parent_action_id.clone(),
            child_action_id: child.id.clone(),
            status: delegation_status,
            result,
            error,
            receipt_chain: None,
            callback: None,
        };
        let mut reply = Reply::done(request, MessageBody::DelegationResult(answer));
        self.sign_reply(&mut reply)?;
        Ok(reply)
    }

    /// Signs a reply envelope with the node key (spec 22.2), so a peer can hold the answer as
    /// evidence of what this node's workflow did.
    pub(crate) fn sign_reply(&self, reply: &mut Reply) -> Result<(), RuntimeError> {
        let Some(key) = self.node_key() else {
            return Err(RuntimeError::Internal(
                "this node has no key to sign delegation results",
            ));
        };
        reply.envelope.from = Some(self.config().agent.clone());
        let signed = aip_core::signing::sign_envelope(&reply.envelope, key)
            .map_err(|_| RuntimeError::Internal("a reply could not be signed"))?;
        reply.envelope.security = signed.get("security").cloned();
        Ok(())
    }
}
