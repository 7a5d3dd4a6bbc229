//! Delegation requests and results (spec 14).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{
    Action, ActionId, ActionResult, Callback, Checker, DelegationId, Principal, ProtocolError,
    ReceiptChain, Validate,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// First-class request to delegate an action to another AIP participant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegationRequest {
    /// Stable delegation id for the parent-child graph edge.
    pub delegation_id: DelegationId,
    /// Parent action that created this delegation.
    pub parent_action_id: ActionId,
    /// Child action to execute on the delegate.
    pub child_action: Action,
    /// Principal creating the delegation.
    pub requested_by: Principal,
    /// Principal expected to execute the child action.
    pub delegate: Principal,
    /// Delegated authorization scope.
    pub scope: String,
    /// Optional callback target for the final delegation result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback: Option<Callback>,
    /// Routing, scheduling, or product-specific delegation metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Validate for DelegationRequest {
    fn validate(&self, v: &mut Checker) {
        v.field("child_action", |v| self.child_action.validate(v));
        v.field("requested_by", |v| self.requested_by.validate(v));
        v.field("delegate", |v| self.delegate.validate(v));
        if let Some(x) = &self.callback {
            v.field("callback", |v| x.validate(v));
        }
        crate::rules::delegation_request(self, v);
    }
}

/// Result of a first-class delegation request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegationResult {
    /// Delegation id from the original request.
    pub delegation_id: DelegationId,
    /// Parent action that created this delegation.
    pub parent_action_id: ActionId,
    /// Child action executed for this delegation.
    pub child_action_id: ActionId,
    /// Final delegation status.
    pub status: DelegationStatus,
    /// Final child action result when execution reached the child handler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ActionResult>,
    /// Protocol-level error when scheduling or execution failed before a child result existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProtocolError>,
    /// Receipt chain proving the delegation was made and observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_chain: Option<ReceiptChain>,
    /// Dispatcher metadata for callback delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback: Option<Value>,
}

impl Validate for DelegationResult {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.result {
            v.field("result", |v| x.validate(v));
        }
        if let Some(x) = &self.error {
            v.field("error", |v| x.validate(v));
        }
        if let Some(x) = &self.receipt_chain {
            v.field("receipt_chain", |v| x.validate(v));
        }
        crate::rules::delegation_result(self, v);
    }
}

/// Delegation lifecycle status.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DelegationStatus {
    /// Delegation was accepted but has not started.
    Accepted,
    /// Delegated child action is running.
    Running,
    /// Delegated child action completed.
    Completed,
    /// Delegated child action failed.
    Failed,
    /// Delegated child action was cancelled.
    Cancelled,
    /// Delegated child action is waiting for human input or approval.
    RequiresHuman,
}

crate::wire_enum!(DelegationStatus { Accepted => "accepted", Running => "running", Completed => "completed", Failed => "failed", Cancelled => "cancelled", RequiresHuman => "requires_human" });
