//! Audit events, audit queries and batch settlement (spec 18.3, 18.4).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{
    ActionId, Checker, IdentityContext, Principal, PrincipalId, ReceiptChain, SessionId, Timestamp,
    TransactionId, Validate,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Audit event payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditEvent {
    /// Event id.
    pub id: String,
    /// Actor.
    pub actor: Principal,
    /// Identity context used by policy, tenant, and credential audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityContext>,
    /// Audit action.
    pub action: String,
    /// Timestamp.
    pub occurred_at: Timestamp,
    /// Structured audit data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Validate for AuditEvent {
    fn validate(&self, v: &mut Checker) {
        v.field("actor", |v| self.actor.validate(v));
        if let Some(x) = &self.identity {
            v.field("identity", |v| x.validate(v));
        }
        v.field("occurred_at", |v| self.occurred_at.validate(v));
    }
}

/// Request for filtered audit event records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditQueryRequest {
    /// Action id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<ActionId>,
    /// Session id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// Principal id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_id: Option<PrincipalId>,
    /// Transaction id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<TransactionId>,
    /// Tenant id filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Inclusive lower timestamp bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Timestamp>,
    /// Inclusive upper timestamp bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Timestamp>,
    /// Opaque page cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Maximum number of records to return.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::num::opt_u32"
    )]
    pub limit: Option<u32>,
    /// Include related receipt chains.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub include_receipts: bool,
    /// Treat the query as an evidence export requiring export authority.
    ///
    /// Export mode is intentionally explicit so normal audit browsing can use
    /// `audit:read`, while evidence packages that may leave the runtime trust
    /// boundary require `audit:export`.
    #[serde(default, skip_serializing_if = "crate::num::is_false")]
    pub export: bool,
}

impl Validate for AuditQueryRequest {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.from {
            v.field("from", |v| x.validate(v));
        }
        if let Some(x) = &self.to {
            v.field("to", |v| x.validate(v));
        }
        crate::rules::audit_query_request(self, v);
    }
}

/// Filtered audit query result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditQueryResult {
    /// Audit events visible to the caller.
    pub events: Vec<AuditEvent>,
    /// Receipt chains linked to returned events.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receipt_chains: Vec<ReceiptChain>,
    /// Cursor for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl Validate for AuditQueryResult {
    fn validate(&self, v: &mut Checker) {
        v.field("events", |v| v.each(&self.events));
        v.field("receipt_chains", |v| v.each(&self.receipt_chains));
        crate::rules::audit_query_result(self, v);
    }
}

/// Optional economic settlement batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchSettlement {
    /// Batch id.
    pub id: String,
    /// Settlement model.
    pub model: String,
    /// Settlement records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<Value>,
}

impl Validate for BatchSettlement {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}
