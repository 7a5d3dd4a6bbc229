//! Approval decisions (spec 12.4): every check the spec lists, then one compare-and-set write that
//! records the decision and, when it settles the approval, moves the governed action in the same
//! transaction: resumed (queued with a new job, run exactly once by a leased worker), or ended
//! without dispatch (denied, revoked).

use aip_core::{
    ActionResult, ApprovalDecision, ApprovalDecisionKind, ApprovalPolicy, ApprovalRecordView,
    ErrorCode, EvidenceRequirement, ReceiptType,
};
use aip_store::{
    ActionRecord, ActionState, ApprovalRecord, ApprovalState, ApprovalWrite, ApprovalWritten,
    DecisionRecord, NewDecision, StoreError, Transition,
};
use serde_json::{Value, json};

use crate::action::result;
use crate::approval::predicate::{self, Op};
use crate::approval::{Vote, effective_rule, eligible, governs, satisfied, stored_request};
use crate::caller::Caller;
use crate::chain::ChainWriter;
use crate::clock::now_ms;
use crate::error::{ApprovalError, RuntimeError};
use crate::events::{EventKind, action_event};
use crate::read::views::corrupt;
use crate::runtime::Runtime;

/// Concurrent deciders retry their compare-and-set this often before giving up (each retry re-reads
/// and re-verifies).
const MAX_RETRIES: usize = 8;
/// Most constraints one decision may carry.
const MAX_CONSTRAINTS: usize = 16;

impl Runtime {
    /// Verifies and records `decision` from `caller` (spec 12.4) and returns the approval as it then
    /// stands. A decision replayed under its decision id is answered with the approval, and nothing
    /// is recorded twice.
    pub async fn decide_approval(
        &self,
        caller: &Caller,
        decision: &ApprovalDecision,
    ) -> Result<ApprovalRecordView, RuntimeError> {
        // Approval spoofing: the decision must be the authenticated principal's own.
        if decision.approver.id.as_str() != caller.id {
            return Err(ApprovalError::ApproverMismatch.into());
        }
        if decision.decision == ApprovalDecisionKind::Expired {
            return Err(ApprovalError::ExpiredIsTheRuntimes.into());
        }
        let decision_id = decision
            .decision_id
            .clone()
            .unwrap_or_else(|| derived_decision_id(decision));
        for _ in 0..MAX_RETRIES {
            let record = self
                .visible_approval(caller, decision.approval_id.as_str())
                .await?;
            let decisions = self
                .store()
                .list_decisions(&record.tenant, &record.approval_id)
                .await?;
            if let Some(earlier) = decisions.iter().find(|d| d.decision_id == decision_id) {
                return self.replayed(caller, &record, earlier, decision).await;
            }
            let write = self
                .verified_write(caller, decision, &decision_id, &record, &decisions)
                .await?;
            match self.write_approval(write).await {
                Ok(ApprovalWritten::Written(_)) => {
                    let fresh = self.visible_approval(caller, &record.approval_id).await?;
                    return self
                        .approval_view(caller, &fresh, false, false, false)
                        .await;
                }
                Ok(ApprovalWritten::Replayed(earlier)) => {
                    return self.replayed(caller, &record, &earlier, decision).await;
                }
                Ok(_) => return Err(RuntimeError::Internal("unexpected approval write outcome")),
                // Another decision (or the timer, or a cancellation) wrote first: verify again
                // against what it wrote.
                Err(StoreError::StateConflict { .. }) => continue,
                Err(StoreError::Terminal { state }) => {
                    return Err(
                        ApprovalError::Closed(format!("closed: its action is {state}")).into(),
                    );
                }
                Err(err) => return Err(err.into()),
            }
        }
        Err(RuntimeError::Storage(StoreError::Unavailable(
            "too many concurrent decisions on one approval; try again".into(),
        )))
    }

    /// The answer to a decision whose id was already recorded: the approval as it stands, when it
    /// is the same decision; a conflict when the id was used for another one.
    async fn replayed(
        &self,
        caller: &Caller,
        record: &ApprovalRecord,
        earlier: &DecisionRecord,
        decision: &ApprovalDecision,
    ) -> Result<ApprovalRecordView, RuntimeError> {
        if earlier.approver != caller.id || earlier.kind != decision.decision.as_str() {
            return Err(ApprovalError::DecisionConflict.into());
        }
        let fresh = self.visible_approval(caller, &record.approval_id).await?;
        self.approval_view(caller, &fresh, false, false, false)
            .await
    }

    /// Every check of spec 12.4 against the stored approval, then the write that records the
    /// decision and whatever it settles.
    async fn verified_write(
        &self,
        caller: &Caller,
        decision: &ApprovalDecision,
        decision_id: &str,
        record: &ApprovalRecord,
        decisions: &[DecisionRecord],
    ) -> Result<ApprovalWrite, RuntimeError> {
        let snapshot = stored_request(record)?;
        let policy = &snapshot.policy;
        let keys = caller.resolver_keys();
        // Authority from the trusted resolver only: nothing in the decision payload counts.
        if !eligible(&effective_rule(policy), &keys) {
            return Err(ApprovalError::NotEligible.into());
        }
        if caller
            .roles
            .iter()
            .any(|r| snapshot.excluded_roles.contains(r))
        {
            return Err(ApprovalError::SeparationOfDuties(
                "a role this principal holds is excluded from approving this capability",
            )
            .into());
        }
        let separation = &policy.separation_of_duties;
        if record.requester == caller.id
            && (separation.requester_must_differ
                || separation.operator_must_differ
                || !separation.allow_self_approval)
        {
            return Err(ApprovalError::SeparationOfDuties("the requester may not decide").into());
        }
        let now = now_ms();
        let action = self
            .store()
            .get_action(&record.tenant, &record.action_id)
            .await?
            .ok_or_else(|| {
                corrupt(format!(
                    "approval {} without its action",
                    record.approval_id
                ))
            })?;
        let revoking = decision.decision == ApprovalDecisionKind::Revoked;
        let open = record.state.is_open()
            || (revoking
                && record.state == ApprovalState::Approved
                && action.state == ActionState::Queued);
        if !open {
            return Err(ApprovalError::Closed(record.state.as_str().to_owned()).into());
        }
        if now >= record.expires_at_ms {
            return Err(ApprovalError::Expired.into());
        }
        if decision
            .policy_hash
            .as_ref()
            .is_some_and(|h| *h != record.policy_hash)
            || !governs(record, &snapshot, &action)?
        {
            return Err(ApprovalError::PolicyHashMismatch.into());
        }
        let admitted = crate::admission::admitted::AdmittedRequest::of(&action)?;
        check_constraints(decision, &admitted.action.input)?;
        check_evidence(policy, decision)?;
        let body = decision_body(decision, decision_id, &keys)?;
        let new_decision = NewDecision {
            decision_id: decision_id.to_owned(),
            approver: caller.id.clone(),
            kind: decision.decision.as_str().to_owned(),
            decided_at_ms: now,
            body,
        };
        let base = ApprovalWrite {
            tenant: record.tenant.clone(),
            approval_id: record.approval_id.clone(),
            expected_version: record.version,
            decision: Some(new_decision),
            to: None,
            action: None,
            job: None,
            receipts: Vec::new(),
            events: Vec::new(),
            finish_job: None,
            audit: vec![crate::events::new_audit(
                caller,
                "approval.decided",
                now,
                serde_json::json!({ "approval_id": record.approval_id, "decision_id": decision_id,
                    "decision": decision.decision.as_str(), "policy_hash": record.policy_hash }),
                (Some(&action.action_id), None),
            )],
            now_ms: now,
        };
        match decision.decision {
            ApprovalDecisionKind::Approved => {
                let votes = approving_votes(decisions, caller, &keys);
                if !satisfied(policy, &votes) {
                    // Recorded; the approval waits for more authority.
                    return Ok(base);
                }
                let resumed = self.resume_transition(&action, record, policy, now).await?;
                let job = crate::admission::persist::action_job(
                    self,
                    &action.tenant,
                    &action.action_id,
                    now,
                );
                metrics::counter!("aip_approvals_granted_total").increment(1);
                Ok(ApprovalWrite {
                    to: Some(ApprovalState::Approved),
                    action: Some(resumed),
                    job: Some(job),
                    ..base
                })
            }
            ApprovalDecisionKind::Denied => {
                let ended = self
                    .end_transition(
                        &action,
                        Ending::before_dispatch(
                            record,
                            (ReceiptType::ApprovalDenied, ErrorCode::ApprovalDenied),
                            "the approval was denied; the action did not run",
                        ),
                        now,
                    )
                    .await?;
                metrics::counter!("aip_approvals_denied_total").increment(1);
                Ok(ApprovalWrite {
                    to: Some(ApprovalState::Denied),
                    action: Some(ended),
                    ..base
                })
            }
            ApprovalDecisionKind::Revoked => {
                let ended = self
                    .end_transition(
                        &action,
                        Ending::before_dispatch(
                            record,
                            (ReceiptType::ApprovalRevoked, ErrorCode::ApprovalRevoked),
                            "the approval was revoked before the action ran",
                        ),
                        now,
                    )
                    .await?;
                Ok(ApprovalWrite {
                    to: Some(ApprovalState::Revoked),
                    action: Some(ended),
                    ..base
                })
            }
            ApprovalDecisionKind::Expired => Err(ApprovalError::ExpiredIsTheRuntimes.into()),
        }
    }

    /// The governed action resumed: queued for a worker, with the granted receipt on its chain.
    async fn resume_transition(
        &self,
        action: &ActionRecord,
        record: &ApprovalRecord,
        policy: &ApprovalPolicy,
        now: i64,
    ) -> Result<Transition, RuntimeError> {
        let mut chain = ChainWriter::resume(action, self.store()).await?;
        chain.push(
            ReceiptType::ApprovalGranted,
            &self.config().agent,
            json!({ "approval_id": record.approval_id, "policy_hash": record.policy_hash, "policy_version": policy.policy_version }),
            now,
        );
        Ok(Transition {
            tenant: action.tenant.clone(),
            action_id: action.action_id.clone(),
            from: vec![ActionState::PendingApproval],
            to: ActionState::Queued,
            result: None,
            events: vec![
                action_event(
                    EventKind::ApprovalGranted,
                    action,
                    json!({ "approval_id": record.approval_id }),
                    now,
                ),
                action_event(EventKind::ActionQueued, action, json!({}), now),
            ],
            receipts: chain.take(),
            fence: None,
            finish_job: false,
            now_ms: now,
            operation: None,
        })
    }

    /// The governed action ended without dispatch (denied, revoked or expired): the approval's
    /// receipt and event, the failed result, the action's final state.
    pub(crate) async fn end_transition(
        &self,
        action: &ActionRecord,
        end: Ending<'_>,
        now: i64,
    ) -> Result<Transition, RuntimeError> {
        let agent = &self.config().agent;
        let mut chain = ChainWriter::resume(action, self.store()).await?;
        chain.push(end.receipt, agent, end.receipt_data.clone(), now);
        chain.push(
            ReceiptType::ResultReturned,
            agent,
            json!({ "status": "failed", "dispatched": false }),
            now,
        );
        let mut failed: ActionResult =
            result::failed_with(&action.action_id, end.code, end.message);
        failed.receipt = chain.last_ref();
        let outcome = match end.receipt {
            ReceiptType::ApprovalDenied => EventKind::ApprovalDenied,
            ReceiptType::ApprovalRevoked => EventKind::ApprovalRevoked,
            ReceiptType::ApprovalExpired => EventKind::ApprovalExpired,
            _ => {
                return Err(RuntimeError::Internal(
                    "an approval ending without its receipt",
                ));
            }
        };
        let approval_id = end
            .receipt_data
            .get("approval_id")
            .cloned()
            .unwrap_or(Value::Null);
        Ok(Transition {
            tenant: action.tenant.clone(),
            action_id: action.action_id.clone(),
            from: end.from,
            to: end.to,
            result: Some(serde_json::to_value(&failed).map_err(|e| corrupt(e.to_string()))?),
            events: vec![
                action_event(outcome, action, json!({ "approval_id": approval_id }), now),
                action_event(
                    EventKind::ActionEnded(end.to),
                    action,
                    json!({ "status": "failed" }),
                    now,
                ),
            ],
            receipts: chain.take(),
            fence: None,
            finish_job: false,
            now_ms: now,
            operation: None,
        })
    }
}

/// How an approval ends its governed action without dispatch.
pub(crate) struct Ending<'a> {
    pub(crate) receipt: ReceiptType,
    /// Data of the approval's receipt (it names the approval).
    pub(crate) receipt_data: Value,
    pub(crate) code: ErrorCode,
    pub(crate) message: &'a str,
    pub(crate) from: Vec<ActionState>,
    pub(crate) to: ActionState,
}

impl<'a> Ending<'a> {
    /// A decision (deny, revoke) ends the action, waiting or granted-but-queued, as failed.
    fn before_dispatch(
        record: &ApprovalRecord,
        (receipt, code): (ReceiptType, ErrorCode),
        message: &'a str,
    ) -> Self {
        Ending {
            receipt,
            receipt_data: json!({ "approval_id": record.approval_id }),
            code,
            message,
            from: vec![ActionState::PendingApproval, ActionState::Queued],
            to: ActionState::Failed,
        }
    }
}

/// The approving votes so far plus this caller's, one per principal, each with the resolver keys it
/// held when it decided.
fn approving_votes(decisions: &[DecisionRecord], caller: &Caller, keys: &[String]) -> Vec<Vote> {
    let mut votes: Vec<Vote> = Vec::new();
    for d in decisions.iter().filter(|d| d.kind == "approved") {
        if votes.iter().any(|v| v.principal == d.approver) {
            continue;
        }
        let keys = d
            .body
            .get("authority_keys")
            .and_then(|k| serde_json::from_value::<Vec<String>>(k.clone()).ok())
            .unwrap_or_default();
        votes.push(Vote {
            principal: d.approver.clone(),
            keys,
        });
    }
    if !votes.iter().any(|v| v.principal == caller.id) {
        votes.push(Vote {
            principal: caller.id.clone(),
            keys: keys.to_vec(),
        });
    }
    votes
}

/// A decision's constraints must be known comparisons that the (immutable) governed input
/// satisfies; they are checked again before dispatch by the policy hash, which pins that input.
fn check_constraints(decision: &ApprovalDecision, input: &Value) -> Result<(), RuntimeError> {
    if decision.constraints.len() > MAX_CONSTRAINTS {
        return Err(ApprovalError::ConstraintInvalid("count: at most 16".into()).into());
    }
    for c in &decision.constraints {
        let op = Op::from_name(&c.operator).ok_or_else(|| {
            ApprovalError::ConstraintInvalid(format!(
                "{:?}: unknown operator {:?} (lt, lte, gt, gte, eq, ne)",
                c.field, c.operator
            ))
        })?;
        let value = predicate::field(input, &c.field).ok_or_else(|| {
            ApprovalError::ConstraintInvalid(format!("{:?}: no such input member", c.field))
        })?;
        if predicate::compare(value, op, &c.value) != Some(true) {
            return Err(ApprovalError::ConstraintInvalid(format!(
                "{:?} {} {}: not satisfied by the governed input",
                c.field, c.operator, c.value
            ))
            .into());
        }
    }
    Ok(())
}

/// The evidence the policy requires of a decision (`reason`, an external ticket, an attachment);
/// the input snapshot and the policy decision are the runtime's own.
fn check_evidence(
    policy: &ApprovalPolicy,
    decision: &ApprovalDecision,
) -> Result<(), RuntimeError> {
    for required in &policy.evidence_requirements {
        let present = match required {
            EvidenceRequirement::Reason => decision
                .reason
                .as_ref()
                .is_some_and(|r| !r.trim().is_empty()),
            EvidenceRequirement::ExternalTicket => decision
                .evidence
                .iter()
                .any(|e| e.kind == "external_ticket"),
            EvidenceRequirement::Attachment => {
                decision.evidence.iter().any(|e| e.kind == "attachment")
            }
            EvidenceRequirement::InputSnapshot | EvidenceRequirement::PolicyDecision => true,
        };
        if !present {
            return Err(ApprovalError::EvidenceRequired(required.as_str()).into());
        }
    }
    Ok(())
}

/// The decision as retained: what was sent, with the authority the resolver gave the approver.
fn decision_body(
    decision: &ApprovalDecision,
    decision_id: &str,
    keys: &[String],
) -> Result<Value, RuntimeError> {
    let mut body = serde_json::to_value(decision).map_err(|e| corrupt(e.to_string()))?;
    body["decision_id"] = json!(decision_id);
    body["authority_path"] = json!(keys);
    body["authority_keys"] = json!(keys);
    Ok(body)
}

/// A decision without an id is identified by its content, so sending it again is a replay.
fn derived_decision_id(decision: &ApprovalDecision) -> String {
    let digest = aip_core::canonical::canonical_hash(&json!({
        "approval_id": decision.approval_id,
        "approver": decision.approver.id,
        "decision": decision.decision,
        "decided_at": decision.decided_at,
    }));
    format!("dec_{}", &digest[..32])
}

impl Runtime {
    /// Cancels an action still waiting for its approval: the runtime owns it (nothing was
    /// dispatched), so the approval closes as `cancelled` and the action ends `cancelled` in one
    /// write. A decision that wins the race makes this a state conflict for the caller to re-read.
    pub(crate) async fn cancel_pending_approval(
        &self,
        action: &ActionRecord,
    ) -> Result<(), RuntimeError> {
        let admitted = crate::admission::admitted::AdmittedRequest::of(action)?;
        let approval_id = admitted.approval_id.as_deref().ok_or_else(|| {
            corrupt(format!(
                "action {} waits without an approval",
                action.action_id
            ))
        })?;
        let record = self
            .store()
            .get_approval(&action.tenant, approval_id)
            .await?
            .ok_or_else(|| corrupt(format!("approval {approval_id} is missing")))?;
        let now = now_ms();
        let mut chain = ChainWriter::resume(action, self.store()).await?;
        chain.push(
            ReceiptType::ResultReturned,
            &self.config().agent,
            json!({ "status": "cancelled", "dispatched": false, "approval_id": approval_id }),
            now,
        );
        let mut cancelled = result::cancelled(&action.action_id);
        cancelled.receipt = chain.last_ref();
        let transition = Transition {
            tenant: action.tenant.clone(),
            action_id: action.action_id.clone(),
            from: vec![ActionState::PendingApproval],
            to: ActionState::Cancelled,
            result: Some(serde_json::to_value(&cancelled).map_err(|e| corrupt(e.to_string()))?),
            events: vec![action_event(
                EventKind::ActionEnded(ActionState::Cancelled),
                action,
                json!({ "status": "cancelled", "approval_id": approval_id }),
                now,
            )],
            receipts: chain.take(),
            fence: None,
            finish_job: false,
            now_ms: now,
            operation: None,
        };
        self.write_approval(ApprovalWrite {
            tenant: record.tenant.clone(),
            approval_id: record.approval_id.clone(),
            expected_version: record.version,
            decision: None,
            to: Some(ApprovalState::Cancelled),
            action: Some(transition),
            job: None,
            receipts: Vec::new(),
            events: Vec::new(),
            finish_job: None,
            audit: Vec::new(),
            now_ms: now,
        })
        .await?;
        Ok(())
    }
}
