//! Approval reads (spec 16.3, 16.6): an approval is visible to its requester, to the principals its
//! rule names (by id, role or group from the trusted resolver), and to tenant-wide readers; anything
//! else answers "not found" and is never counted. Ordinary views never carry the governed input;
//! the evidence payload needs `approval:export` and is audited.

use aip_core::{
    ApprovalDecision, ApprovalEvidencePayload, ApprovalList, ApprovalListRequest,
    ApprovalQueryRequest, ApprovalRecordView, PrincipalId,
};
use aip_store::{ApprovalQuery, ApprovalRecord, ApprovalState};
use serde_json::json;

use crate::approval::stored_request;
use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::read::views;
use crate::runtime::Runtime;

impl Runtime {
    /// The approval if `caller` may see it; `NotFound` otherwise, exactly as for a missing id.
    pub(crate) async fn visible_approval(
        &self,
        caller: &Caller,
        approval_id: &str,
    ) -> Result<ApprovalRecord, RuntimeError> {
        let record = self
            .store()
            .get_approval(&caller.tenant, approval_id)
            .await?
            .ok_or(RuntimeError::NotFound("approval"))?;
        let keys = caller.resolver_keys();
        let visible = record.requester == caller.id
            || caller.reads_whole_tenant()
            || record.approvers.iter().any(|k| keys.contains(k));
        if visible {
            Ok(record)
        } else {
            Err(RuntimeError::NotFound("approval"))
        }
    }

    /// `approval_query_request`: one approval view. The evidence payload (the governed input) needs
    /// `approval:export` beside visibility; its export is audited.
    pub async fn read_approval(
        &self,
        caller: &Caller,
        request: &ApprovalQueryRequest,
    ) -> Result<ApprovalRecordView, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        let record = self
            .visible_approval(caller, request.approval_id.as_str())
            .await?;
        self.approval_view(
            caller,
            &record,
            request.include_action_status,
            request.include_receipts,
            request.include_evidence_payload,
        )
        .await
    }

    /// Every recorded decision of an approval `caller` may see, oldest first (the 1.0 view carries
    /// only the last one; an approver's quorum progress needs them all). `GET
    /// /aip/v1/approvals/{id}/decisions`.
    pub async fn read_decisions(
        &self,
        caller: &Caller,
        approval_id: &str,
    ) -> Result<Vec<ApprovalDecision>, RuntimeError> {
        let record = self.visible_approval(caller, approval_id).await?;
        self.store()
            .list_decisions(&record.tenant, &record.approval_id)
            .await?
            .iter()
            .map(decoded)
            .collect()
    }

    /// `approval_list_request`: the approvals `caller` may see (an approver's inbox with `approver`
    /// set to itself), oldest first. Filters never widen visibility.
    pub async fn read_approvals(
        &self,
        caller: &Caller,
        request: &ApprovalListRequest,
    ) -> Result<ApprovalList, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        let limit = self.limit(request.limit)?;
        let state = match request.status.as_deref() {
            Some(s) => Some(
                ApprovalState::parse(s)
                    .ok_or(RuntimeError::InvalidQuery("unknown approval status"))?,
            ),
            None => None,
        };
        let approver_keys = match request.approver.as_ref().map(PrincipalId::as_str) {
            None => None,
            Some(id) if id == caller.id => Some(caller.resolver_keys()),
            // Another principal's inbox: only a tenant-wide reader may ask, through the directory.
            Some(id) if caller.reads_whole_tenant() => Some(
                self.config()
                    .directory
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| vec![format!("principal:{id}")]),
            ),
            Some(_) => {
                return Ok(ApprovalList {
                    approvals: Vec::new(),
                    cursor: None,
                });
            }
        };
        let query = ApprovalQuery {
            tenant: caller.tenant.clone(),
            reader: (!caller.reads_whole_tenant())
                .then(|| (caller.id.clone(), caller.resolver_keys())),
            state,
            requester: request.requester.as_ref().map(|p| p.as_str().to_owned()),
            approver_keys,
        };
        let page = self
            .store()
            .list_approvals(&query, request.cursor.as_deref(), limit)
            .await?;
        let mut approvals = Vec::with_capacity(page.items.len());
        for record in &page.items {
            approvals.push(
                self.approval_view(
                    caller,
                    record,
                    request.include_action_status,
                    request.include_receipts,
                    false,
                )
                .await?,
            );
        }
        Ok(ApprovalList {
            approvals,
            cursor: Some(page.next_cursor),
        })
    }

    /// The wire view of a stored approval as `caller` reads it.
    pub(crate) async fn approval_view(
        &self,
        caller: &Caller,
        record: &ApprovalRecord,
        include_action_status: bool,
        include_receipts: bool,
        include_evidence: bool,
    ) -> Result<ApprovalRecordView, RuntimeError> {
        let request = stored_request(record)?.request;
        let decisions = self
            .store()
            .list_decisions(&record.tenant, &record.approval_id)
            .await?;
        let decision = decisions.last().map(decoded).transpose()?;
        let action_status = if include_action_status {
            // Seeing the approval grants seeing its governed action's status (never its input or
            // result): an approver must know what it is deciding on and whether it still waits.
            let action = self
                .store()
                .get_action(&record.tenant, &record.action_id)
                .await?
                .ok_or_else(|| {
                    views::corrupt(format!("approval {} has no action", record.approval_id))
                })?;
            Some(views::status(&action, false, None)?)
        } else {
            None
        };
        let receipt_chain = if include_receipts {
            Some(self.chain_of(&record.tenant, &record.action_id).await?)
        } else {
            None
        };
        let evidence_payload = if include_evidence {
            // Spec 16.6: visibility alone is not enough to see the governed input.
            if !caller.may_export_approvals() {
                return Err(RuntimeError::ScopeDenied(
                    "approval evidence (it needs approval:export and approval:sensitive)".into(),
                ));
            }
            let action = self
                .store()
                .get_action(&record.tenant, &record.action_id)
                .await?
                .ok_or(RuntimeError::NotFound("action"))?;
            self.record_audit(
                caller,
                "approval.evidence_exported",
                now_ms(),
                json!({ "approval_id": record.approval_id, "action_id": record.action_id }),
                (Some(&record.action_id), action.session_id.as_deref()),
            )
            .await?;
            Some(ApprovalEvidencePayload {
                action_id: request.action_id.clone(),
                capability_id: request.capability_id.clone(),
                input_hash: action.input_hash.clone().unwrap_or_default(),
                input: crate::admission::admitted::AdmittedRequest::of(&action)?
                    .action
                    .input,
                transaction: None,
                identity: None,
            })
        } else {
            None
        };
        Ok(ApprovalRecordView {
            request,
            decision,
            status: record.state.as_str().to_owned(),
            action_status,
            receipt_chain,
            evidence_payload,
            created_at: views::ts(record.created_at_ms)?,
            updated_at: views::ts(record.updated_at_ms)?,
        })
    }
}

/// A stored decision as the wire type, without the runtime's bookkeeping members.
fn decoded(d: &aip_store::DecisionRecord) -> Result<ApprovalDecision, RuntimeError> {
    serde_json::from_value::<ApprovalDecision>(strip_internal(d.body.clone())).map_err(|e| {
        views::corrupt(format!(
            "decision {} of {}: {e}",
            d.decision_id, d.approval_id
        ))
    })
}

/// A stored decision without the runtime's bookkeeping members.
fn strip_internal(mut body: serde_json::Value) -> serde_json::Value {
    if let Some(object) = body.as_object_mut() {
        object.remove("authority_keys");
    }
    body
}
