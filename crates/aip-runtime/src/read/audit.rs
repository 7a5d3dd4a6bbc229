//! Audit browsing (spec 18.3): needs `audit:read`; scoped to the reader's tenant. Export (16.7) is a
//! separate operation with its own authority and is not offered here.

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
        if !caller.may_read_audit() {
            return Err(RuntimeError::NotFound("audit events"));
        }
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        if request.export {
            return Err(RuntimeError::InvalidQuery(
                "audit export is a separate operation that needs audit:export; it is not offered",
            ));
        }
        if request.action_id.is_some()
            || request.session_id.is_some()
            || request.transaction_id.is_some()
            || request.from.is_some()
            || request.to.is_some()
            || request.include_receipts
        {
            return Err(RuntimeError::InvalidQuery(
                "audit filters other than principal_id are not supported by this store yet",
            ));
        }
        let limit = self.limit(request.limit)?;
        let page = self
            .store()
            .list_audit(
                &AuditQuery {
                    tenant: caller.tenant.clone(),
                    actor: request.principal_id.as_ref().map(|p| p.as_str().to_owned()),
                },
                request.cursor.as_deref(),
                limit,
            )
            .await?;
        let events = page
            .items
            .iter()
            .map(|a| {
                Ok(AuditEvent {
                    id: a.audit_id.clone(),
                    actor: bare_principal(&a.actor, PrincipalKind::Service),
                    identity: None,
                    action: a.action_label.clone(),
                    occurred_at: views::ts(a.occurred_at_ms)?,
                    data: Some(a.data.clone()),
                })
            })
            .collect::<Result<Vec<_>, RuntimeError>>()?;
        Ok(AuditQueryResult {
            events,
            receipt_chains: Vec::new(),
            cursor: Some(page.next_cursor),
        })
    }
}
