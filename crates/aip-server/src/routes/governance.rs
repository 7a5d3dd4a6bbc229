//! Approval and escalation routes (spec 12, 16.3, 16.6): each builds the wire request and calls the
//! runtime's read or decision for it, the same code the envelope path runs.

use super::PathId;
use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ApprovalListParams {
    status: Option<String>,
    approver: Option<String>,
    requester: Option<String>,
    tenant_id: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
    #[serde(default)]
    include_action_status: bool,
    #[serde(default)]
    include_receipts: bool,
}

/// `GET /aip/v1/approvals`: `approval_list_request` (an approver's inbox with `approver=<self>`).
pub(super) async fn approvals(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<ApprovalListParams>,
) -> Response {
    let request = ApprovalListRequest {
        status: p.status,
        approver: p.approver.map(PrincipalId::new),
        requester: p.requester.map(PrincipalId::new),
        tenant_id: p.tenant_id,
        cursor: p.cursor,
        limit: p.limit,
        include_action_status: p.include_action_status,
        include_receipts: p.include_receipts,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .read_approvals(&caller, &request)
            .await
            .map(|mut list| {
                list.approvals.iter_mut().for_each(crate::links::approval);
                list
            }),
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ApprovalParams {
    tenant_id: Option<String>,
    #[serde(default)]
    include_action_status: bool,
    #[serde(default)]
    include_receipts: bool,
    #[serde(default)]
    include_evidence_payload: bool,
}

/// `GET /aip/v1/approvals/{id}`: `approval_query_request`.
pub(super) async fn approval(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(approval_id): PathId,
    ReadQuery(p): ReadQuery<ApprovalParams>,
) -> Response {
    let request = ApprovalQueryRequest {
        approval_id: ApprovalId::new(approval_id),
        tenant_id: p.tenant_id,
        include_action_status: p.include_action_status,
        include_receipts: p.include_receipts,
        include_evidence_payload: p.include_evidence_payload,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .read_approval(&caller, &request)
            .await
            .map(|mut view| {
                crate::links::approval(&mut view);
                view
            }),
    )
}

/// `GET /aip/v1/approvals/{id}/decisions`: every recorded decision, oldest first (quorum progress).
pub(super) async fn decisions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(approval_id): PathId,
    ReadQuery(_): ReadQuery<NoParams>,
) -> Response {
    read_response(
        runtime(&state)
            .read_decisions(&caller, &approval_id)
            .await
            .map(|decisions| serde_json::json!({ "approval_id": approval_id, "decisions": decisions })),
    )
}

/// Body of `POST /aip/v1/approvals/{id}/decision`: the decision without what the route and the
/// authentication already say (the approval id; the approver, unless given to be checked).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: aip_core::ApprovalDecisionKind,
    reason: Option<String>,
    decision_id: Option<String>,
    policy_hash: Option<String>,
    #[serde(default)]
    constraints: Vec<aip_core::ApprovalConstraint>,
    #[serde(default)]
    evidence: Vec<aip_core::EvidenceArtifact>,
    target_decision_id: Option<String>,
    /// When present it must name the authenticated principal (approval spoofing is refused).
    approver: Option<aip_core::Principal>,
}

/// `POST /aip/v1/approvals/{id}/decision`: `approval_decision` (spec 12.4); the approval as it
/// then stands.
pub(super) async fn decide(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(approval_id): PathId,
    body: Bytes,
) -> Response {
    let body = match optional_json::<DecisionBody>(&body) {
        Ok(Some(b)) => b,
        Ok(None) => {
            return invalid_body(
                "body must be {\"decision\": \"approved\"|\"denied\"|\"revoked\", \"reason\"?, \"decision_id\"?, \"policy_hash\"?, ...}",
            )
            .into_response();
        }
        Err(err) => return err.into_response(),
    };
    let approver = body.approver.unwrap_or_else(|| caller.principal());
    let decision = ApprovalDecision {
        approval_id: ApprovalId::new(approval_id),
        decision: body.decision,
        approver,
        decided_at: Timestamp::now(),
        reason: body.reason,
        constraints: body.constraints,
        evidence: body.evidence,
        decision_id: body.decision_id,
        policy_hash: body.policy_hash,
        authority_path: Vec::new(),
        target_decision_id: body.target_decision_id,
    };
    if let Err(refused) = semantic(&decision) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .decide_approval(&caller, &decision)
            .await
            .map(|mut view| {
                crate::links::approval(&mut view);
                view
            }),
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EscalationListParams {
    status: Option<String>,
    kind: Option<String>,
    requester: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
}

/// `GET /aip/v1/escalations`: the escalations the caller may see (its own; the tenant's for
/// `escalation:resolve` holders and tenant-wide readers), oldest first.
pub(super) async fn escalations(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<EscalationListParams>,
) -> Response {
    let filter = aip_runtime::escalation::EscalationFilter {
        status: p.status,
        kind: p.kind,
        requester: p.requester,
        cursor: p.cursor,
        limit: p.limit,
    };
    read_response(runtime(&state).read_escalations(&caller, &filter).await)
}

/// `GET /aip/v1/escalations/{id}`: one escalation with its resolution.
pub(super) async fn escalation(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(escalation_id): PathId,
    ReadQuery(_): ReadQuery<NoParams>,
) -> Response {
    read_response(
        runtime(&state)
            .read_escalation(&caller, &escalation_id)
            .await,
    )
}

/// Body of `POST /aip/v1/escalations/{id}/resolution`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolutionBody {
    status: aip_core::EscalationResolutionStatus,
    result: Option<serde_json::Value>,
    /// When present it must name the authenticated principal.
    resolved_by: Option<aip_core::Principal>,
}

/// `POST /aip/v1/escalations/{id}/resolution`: `escalation_resolution` (spec 12.7); the escalation
/// as it then stands. Never an approval decision.
pub(super) async fn resolve_escalation(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(escalation_id): PathId,
    body: Bytes,
) -> Response {
    let body = match optional_json::<ResolutionBody>(&body) {
        Ok(Some(b)) => b,
        Ok(None) => {
            return invalid_body(
                "body must be {\"status\": \"approved\"|\"rejected\"|\"modified\"|\"handoff_completed\"|\"cancelled\", \"result\"?}",
            )
            .into_response();
        }
        Err(err) => return err.into_response(),
    };
    let resolution = aip_core::EscalationResolution {
        status: body.status,
        resolved_by: body.resolved_by.unwrap_or_else(|| caller.principal()),
        resolved_at: Timestamp::now(),
        result: body.result,
    };
    if let Err(refused) = semantic(&resolution) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .resolve_escalation(&caller, &escalation_id, &resolution)
            .await,
    )
}
