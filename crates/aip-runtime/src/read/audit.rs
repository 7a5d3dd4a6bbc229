//! Audit browsing (spec 18.3): needs `audit:read`; scoped to the reader's tenant; filters by
//! principal, action, session and time. Export (16.7, `export: true`) is a separate operation with its
//! own authority (`audit:export`): it returns the receipt chains of the exported events' actions and
//! is itself recorded as an audit event.

use aip_core::{AuditEvent, AuditQueryRequest, AuditQueryResult, PrincipalKind};
use aip_store::AuditQuery;

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::events::bare_principal;
use crate::read::views;
use crate::runtime::Runtime;

impl Runtime {
    /// `audit_query_request`: the tenant's audit events matching every filter.
    pub async fn read_audit(
        &self,
        caller: &Caller,
        request: &AuditQueryRequest,
    ) -> Result<AuditQueryResult, RuntimeError> {
        self.read_audit_of(caller, request, &caller.tenant).await
    }

    /// The node's security log (refusals before a tenant was known, spec 18.3), read with the same
    /// filters: for holders of `audit:read` in the admin principal's tenant; `NotFound` for anyone
    /// else. It is browsed, never exported.
    pub async fn read_node_audit(
        &self,
        caller: &Caller,
        request: &AuditQueryRequest,
    ) -> Result<AuditQueryResult, RuntimeError> {
        if caller.tenant != self.config().refusals.admin_tenant || !caller.may_read_audit() {
            return Err(RuntimeError::NotFound("audit events"));
        }
        if request.export || request.include_receipts {
            return Err(RuntimeError::InvalidQuery(
                "the node's security log is browsed, without export or receipts",
            ));
        }
        self.read_audit_of(caller, request, crate::security::refusals::NODE_LOG_TENANT)
            .await
    }

    async fn read_audit_of(
        &self,
        caller: &Caller,
        request: &AuditQueryRequest,
        tenant: &str,
    ) -> Result<AuditQueryResult, RuntimeError> {
        if request.export {
            if !caller.may_export_audit() {
                return Err(RuntimeError::ScopeDenied(
                    "audit export (it needs audit:export)".into(),
                ));
            }
        } else if !caller.may_read_audit() {
            return Err(RuntimeError::NotFound("audit events"));
        }
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        let limit = self.limit(request.limit)?;
        let millis = |t: Option<&aip_core::Timestamp>| match t {
            Some(t) => t.unix_millis().map(Some).ok_or(RuntimeError::InvalidQuery(
                "from and to must be valid instants",
            )),
            None => Ok(None),
        };
        let page = self
            .store()
            .list_audit(
                &AuditQuery {
                    tenant: tenant.to_owned(),
                    actor: request.principal_id.as_ref().map(|p| p.as_str().to_owned()),
                    action_id: request.action_id.as_ref().map(|a| a.as_str().to_owned()),
                    session_id: request.session_id.as_ref().map(|s| s.as_str().to_owned()),
                    from_ms: millis(request.from.as_ref())?,
                    to_ms: millis(request.to.as_ref())?,
                    // The events about the transaction's actions (its steps and compensations).
                    transaction_id: request
                        .transaction_id
                        .as_ref()
                        .map(|t| t.as_str().to_owned()),
                },
                request.cursor.as_deref(),
                limit,
            )
            .await?;
        let events = page
            .items
            .iter()
            .map(|a| {
                let (kind, data) = actor_kind(&a.data);
                Ok(AuditEvent {
                    id: a.audit_id.clone(),
                    actor: bare_principal(&a.actor, kind),
                    identity: None,
                    action: a.action_label.clone(),
                    occurred_at: views::ts(a.occurred_at_ms)?,
                    data: Some(data),
                })
            })
            .collect::<Result<Vec<_>, RuntimeError>>()?;
        // With `include_receipts`, the chains of the actions the page's events are about, once each
        // and only those the reader may read.
        let mut receipt_chains = Vec::new();
        if request.include_receipts || request.export {
            let mut seen = std::collections::BTreeSet::new();
            for action_id in page.items.iter().filter_map(|a| a.action_id.as_deref()) {
                if !seen.insert(action_id) {
                    continue;
                }
                // An export carries the evidence of every exported event (its authority is the
                // tenant's audit); browsing only the chains the reader may read anyway.
                let chain = if request.export {
                    Some(self.chain_of(&caller.tenant, action_id).await?)
                } else {
                    self.receipt_chain(caller, action_id).await.ok()
                };
                receipt_chains.extend(chain.filter(|c| !c.receipts.is_empty()));
            }
        }
        if request.export {
            self.record_audit(
                caller,
                "audit.exported",
                crate::clock::now_ms(),
                serde_json::json!({
                    "events": events.len(),
                    "receipt_chains": receipt_chains.len(),
                    "filters": {
                        "action_id": request.action_id, "session_id": request.session_id,
                        "principal_id": request.principal_id, "from": request.from, "to": request.to,
                    },
                }),
                (None, None),
            )
            .await?;
        }
        Ok(AuditQueryResult {
            events,
            receipt_chains,
            cursor: Some(page.next_cursor),
        })
    }
}

/// The actor's kind kept in a stored audit record's data, and the data without it. Records written
/// before the kind was kept name none: their actors were services.
fn actor_kind(stored: &serde_json::Value) -> (PrincipalKind, serde_json::Value) {
    let mut data = stored.clone();
    let kind = data
        .as_object_mut()
        .and_then(|d| d.remove(crate::events::ACTOR_KIND))
        .and_then(|k| serde_json::from_value(k).ok())
        .unwrap_or(PrincipalKind::Service);
    (kind, data)
}
