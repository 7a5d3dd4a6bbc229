//! Escalations (spec 12.7): a principal's request for human input, takeover or exception handling,
//! stored durably, listed to those who may see it and resolved once with one of its allowed
//! decisions. An escalation is never an approval: resolving one (even `approve` on an escalation of
//! kind `approval`) writes nothing to any approval or action, and an approval id is not an
//! escalation id. Who may resolve is the trusted directory's answer (the `escalation:resolve` scope),
//! never the payload's `resolved_by`.

use std::sync::Arc;

use aip_core::{
    Envelope, Escalation, EscalationDecision, EscalationResolution, EscalationResolutionStatus,
    MessageBody, Timestamp,
};
use aip_store::{
    EscalationCreated, EscalationQuery, EscalationRecord, EscalationResolve, EscalationState,
    Lease, NewEscalation, NewJob, StoreError,
};
use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::read::views;
use crate::read::views::corrupt;
use crate::reply::Reply;
use crate::runtime::Runtime;
use crate::scope::SCOPE_ESCALATION_RESOLVE;
use crate::worker::JobKind;

/// Queue of escalation expiry timers.
pub const ESCALATION_QUEUE: &str = "escalations";
/// An escalation without `timeout_ms` stays open this long.
pub const DEFAULT_ESCALATION_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;
/// Longest accepted escalation timeout (30 days).
pub const MAX_ESCALATION_TIMEOUT_MS: u64 = 30 * 24 * 60 * 60 * 1000;

/// An escalation as its readers see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EscalationView {
    /// Escalation id (the raising envelope's message id).
    pub escalation_id: String,
    /// `open`, or how it ended.
    pub status: &'static str,
    /// The raising principal (authenticated).
    pub requester: String,
    /// The escalation as raised.
    pub escalation: Escalation,
    /// The raising envelope's correlation id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The raising envelope's session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
    /// When it expires unresolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// The resolution, once resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<EscalationResolution>,
}

/// A page of escalations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EscalationPage {
    /// The escalations, oldest first.
    pub escalations: Vec<EscalationView>,
    /// Continue after these with this cursor.
    pub cursor: String,
}

/// Filters of an escalation list; they never widen what the reader may see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EscalationFilter {
    /// `open`, `approved`, `rejected`, `modified`, `handoff_completed`, `expired` or `cancelled`.
    pub status: Option<String>,
    /// `approval`, `input`, `handoff` or `policy_exception`.
    pub kind: Option<String>,
    /// Only escalations raised by this principal.
    pub requester: Option<String>,
    /// Continue from this cursor.
    pub cursor: Option<String>,
    /// Page size.
    pub limit: Option<u32>,
}

/// The decision a client-sent resolution status stands for; `expired` is the runtime's.
fn decision_of(status: EscalationResolutionStatus) -> Option<EscalationDecision> {
    Some(match status {
        EscalationResolutionStatus::Approved => EscalationDecision::Approve,
        EscalationResolutionStatus::Rejected => EscalationDecision::Reject,
        EscalationResolutionStatus::Modified => EscalationDecision::Modify,
        EscalationResolutionStatus::HandoffCompleted => EscalationDecision::Handoff,
        EscalationResolutionStatus::Cancelled => EscalationDecision::Cancel,
        EscalationResolutionStatus::Expired => return None,
    })
}

fn state_of(status: EscalationResolutionStatus) -> EscalationState {
    match status {
        EscalationResolutionStatus::Approved => EscalationState::Approved,
        EscalationResolutionStatus::Rejected => EscalationState::Rejected,
        EscalationResolutionStatus::Modified => EscalationState::Modified,
        EscalationResolutionStatus::HandoffCompleted => EscalationState::HandoffCompleted,
        EscalationResolutionStatus::Expired => EscalationState::Expired,
        EscalationResolutionStatus::Cancelled => EscalationState::Cancelled,
    }
}

/// The decisions an escalation allows: its list, or all five when it names none.
fn allowed(escalation: &Escalation) -> Vec<EscalationDecision> {
    if escalation.allowed_decisions.is_empty() {
        vec![
            EscalationDecision::Approve,
            EscalationDecision::Reject,
            EscalationDecision::Modify,
            EscalationDecision::Handoff,
            EscalationDecision::Cancel,
        ]
    } else {
        escalation.allowed_decisions.clone()
    }
}

fn encode<T: Serialize>(value: &T) -> Result<Value, RuntimeError> {
    serde_json::to_value(value).map_err(|e| corrupt(e.to_string()))
}

impl Runtime {
    /// `aip.core.v1.escalation`: stores the escalation under the envelope's message id (with its
    /// expiry timer) and answers with it as stored (202); the same escalation sent again answers with
    /// its current state, its resolution once resolved (200).
    pub(crate) async fn raise_escalation(
        &self,
        caller: &Caller,
        request: &Envelope,
        escalation: &Escalation,
    ) -> Result<Reply, RuntimeError> {
        if escalation.requested_by.id.as_str() != caller.id {
            return Err(RuntimeError::PrincipalMismatch("requested_by"));
        }
        let timeout = escalation
            .timeout_ms
            .unwrap_or(DEFAULT_ESCALATION_TIMEOUT_MS);
        if timeout == 0 || timeout > MAX_ESCALATION_TIMEOUT_MS {
            return Err(RuntimeError::InvalidTimeout(MAX_ESCALATION_TIMEOUT_MS));
        }
        let now = now_ms();
        let expires_at_ms = now.saturating_add(i64::try_from(timeout).unwrap_or(i64::MAX));
        let escalation_id = request.message_id.as_str().to_owned();
        let body = encode(escalation)?;
        let new = NewEscalation {
            escalation_id: escalation_id.clone(),
            tenant: caller.tenant.clone(),
            requester: caller.id.clone(),
            kind: escalation.kind.as_str().to_owned(),
            correlation_id: request
                .correlation_id
                .as_ref()
                .map(|c| c.as_str().to_owned()),
            session_id: request.session_id.as_ref().map(|s| s.as_str().to_owned()),
            expires_at_ms: Some(expires_at_ms),
            created_at_ms: now,
            body: body.clone(),
        };
        let timer = NewJob {
            job_id: aip_core::generate_with_prefix("job_"),
            queue: ESCALATION_QUEUE.into(),
            action_id: None,
            tenant: caller.tenant.clone(),
            available_at_ms: expires_at_ms,
            max_attempts: self.config().max_attempts.max(1),
            payload: json!({ "escalation_id": escalation_id }),
        };
        let record = match self.store().create_escalation(new, Some(timer)).await? {
            EscalationCreated::Created(record) => {
                metrics::counter!("aip_escalations_raised_total").increment(1);
                self.record_audit(
                    caller,
                    "escalation.raised",
                    now,
                    json!({ "escalation_id": escalation_id, "kind": escalation.kind.as_str() }),
                    (None, record.session_id.as_deref()),
                )
                .await?;
                record
            }
            // A re-send of the same escalation by its requester is delivery; anything else that
            // reuses the id is a conflict (and another principal learns nothing about it).
            EscalationCreated::Existing(record) => {
                let same = record.requester == caller.id && record.body == body;
                if !same {
                    return Err(RuntimeError::EscalationConflict);
                }
                record
            }
            _ => return Err(RuntimeError::Internal("unknown escalation outcome")),
        };
        let view = view(&record)?;
        Ok(match view.resolution {
            Some(resolution) => Reply::done(request, MessageBody::EscalationResolution(resolution)),
            None => Reply::accepted(request, MessageBody::Escalation(view.escalation)),
        })
    }

    /// The escalation if `caller` may see it (its requester, resolvers, tenant-wide readers);
    /// `NotFound` otherwise, exactly as for a missing id.
    async fn visible_escalation(
        &self,
        caller: &Caller,
        escalation_id: &str,
    ) -> Result<EscalationRecord, RuntimeError> {
        let record = self
            .store()
            .get_escalation(&caller.tenant, escalation_id)
            .await?
            .ok_or(RuntimeError::NotFound("escalation"))?;
        if record.requester == caller.id
            || caller.may_resolve_escalations()
            || caller.reads_whole_tenant()
        {
            Ok(record)
        } else {
            Err(RuntimeError::NotFound("escalation"))
        }
    }

    /// One escalation as `caller` may see it.
    pub async fn read_escalation(
        &self,
        caller: &Caller,
        escalation_id: &str,
    ) -> Result<EscalationView, RuntimeError> {
        view(&self.visible_escalation(caller, escalation_id).await?)
    }

    /// The escalations `caller` may see, oldest first: its own, or the tenant's for resolvers and
    /// tenant-wide readers.
    pub async fn read_escalations(
        &self,
        caller: &Caller,
        filter: &EscalationFilter,
    ) -> Result<EscalationPage, RuntimeError> {
        let limit = self.limit(filter.limit)?;
        let state = match filter.status.as_deref() {
            Some(s) => Some(
                EscalationState::parse(s)
                    .ok_or(RuntimeError::InvalidQuery("unknown escalation status"))?,
            ),
            None => None,
        };
        if let Some(kind) = filter.kind.as_deref()
            && !["approval", "input", "handoff", "policy_exception"].contains(&kind)
        {
            return Err(RuntimeError::InvalidQuery("unknown escalation kind"));
        }
        let sees_tenant = caller.may_resolve_escalations() || caller.reads_whole_tenant();
        let query = EscalationQuery {
            tenant: caller.tenant.clone(),
            requester_only: (!sees_tenant).then(|| caller.id.clone()),
            state,
            requester: filter.requester.clone(),
            kind: filter.kind.clone(),
        };
        let page = self
            .store()
            .list_escalations(&query, filter.cursor.as_deref(), limit)
            .await?;
        Ok(EscalationPage {
            escalations: page.items.iter().map(view).collect::<Result<_, _>>()?,
            cursor: page.next_cursor,
        })
    }

    /// `aip.core.v1.escalation_resolution` (its `in_response_to` names the escalation) and the REST
    /// resolution: records the one resolution of an open escalation. The resolver is the
    /// authenticated principal, which must hold `escalation:resolve` (the requester may only cancel
    /// its own); the status must be one of the escalation's allowed decisions. The same resolution
    /// again is answered with the escalation; any other on a closed escalation is refused.
    pub async fn resolve_escalation(
        &self,
        caller: &Caller,
        escalation_id: &str,
        resolution: &EscalationResolution,
    ) -> Result<EscalationView, RuntimeError> {
        if resolution.resolved_by.id.as_str() != caller.id {
            return Err(RuntimeError::PrincipalMismatch("resolved_by"));
        }
        let record = self.visible_escalation(caller, escalation_id).await?;
        let escalation: Escalation = serde_json::from_value(record.body.clone())
            .map_err(|e| corrupt(format!("escalation {escalation_id}: {e}")))?;
        if !record.state.is_open() {
            let replay = record.resolver.as_deref() == Some(caller.id.as_str())
                && record.state == state_of(resolution.status)
                && stored_resolution(&record)?.is_some_and(|r| r.result == resolution.result);
            return if replay {
                view(&record)
            } else {
                Err(RuntimeError::EscalationClosed(
                    record.state.as_str().to_owned(),
                ))
            };
        }
        let Some(decision) = decision_of(resolution.status) else {
            return Err(RuntimeError::ResolutionNotAllowed(
                "`expired` is recorded by the runtime's timer, not sent",
            ));
        };
        if !allowed(&escalation).contains(&decision) {
            return Err(RuntimeError::ResolutionNotAllowed(
                "the status is not among the escalation's allowed decisions",
            ));
        }
        let own = record.requester == caller.id;
        if own && decision != EscalationDecision::Cancel {
            return Err(RuntimeError::ResolutionNotAllowed(
                "the requester may only cancel its own escalation",
            ));
        }
        if !own && !caller.may_resolve_escalations() {
            return Err(RuntimeError::ScopeDenied(format!(
                "escalation {escalation_id} (it needs {SCOPE_ESCALATION_RESOLVE})"
            )));
        }
        if decision == EscalationDecision::Modify && resolution.result.is_none() {
            return Err(RuntimeError::ResolutionNotAllowed(
                "`modified` carries the modified payload in `result`",
            ));
        }
        let now = now_ms();
        // The stored resolution names the authenticated resolver and the runtime's time.
        let stored = EscalationResolution {
            status: resolution.status,
            resolved_by: caller.principal(),
            resolved_at: views::ts(now)?,
            result: resolution.result.clone(),
        };
        let written = self
            .store()
            .resolve_escalation(EscalationResolve {
                tenant: record.tenant.clone(),
                escalation_id: record.escalation_id.clone(),
                expected_version: record.version,
                to: state_of(resolution.status),
                resolver: Some(caller.id.clone()),
                resolution: encode(&stored)?,
                finish_job: None,
                now_ms: now,
            })
            .await;
        match written {
            Ok(done) => {
                metrics::counter!("aip_escalations_resolved_total").increment(1);
                self.record_audit(
                    caller,
                    "escalation.resolved",
                    now,
                    json!({ "escalation_id": escalation_id, "status": done.state.as_str() }),
                    (None, done.session_id.as_deref()),
                )
                .await?;
                view(&done)
            }
            // Resolved by someone else meanwhile: answer as for a closed escalation.
            Err(StoreError::StateConflict { .. }) => {
                Box::pin(self.resolve_escalation(caller, escalation_id, resolution)).await
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Serves `aip.core.v1.escalation_resolution`: `in_response_to` must name the escalation.
    pub(crate) async fn serve_escalation_resolution(
        &self,
        caller: &Caller,
        request: &Envelope,
        resolution: &EscalationResolution,
    ) -> Result<Reply, RuntimeError> {
        let Some(target) = request.in_response_to.as_ref() else {
            return Err(RuntimeError::InvalidQuery(
                "escalation_resolution needs in_response_to naming the escalation",
            ));
        };
        let view = self
            .resolve_escalation(caller, target.as_str(), resolution)
            .await?;
        let stored = view.resolution.ok_or_else(|| {
            corrupt(format!(
                "escalation {} has no resolution",
                view.escalation_id
            ))
        })?;
        Ok(Reply::done(
            request,
            MessageBody::EscalationResolution(stored),
        ))
    }

    /// Runs one claimed expiry timer: a still-open escalation expires; otherwise it only completes.
    async fn expire_escalation(&self, lease: &Lease) -> Result<(), RuntimeError> {
        let fence = &lease.fence;
        let found = match lease.payload.get("escalation_id").and_then(Value::as_str) {
            Some(id) => self.store().get_escalation(&lease.tenant, id).await?,
            None => None,
        };
        let Some(record) = found else {
            self.store()
                .fail_job(fence, now_ms(), None, "timer without its escalation")
                .await?;
            return Ok(());
        };
        let now = now_ms();
        if !record.state.is_open() {
            return Ok(self.store().complete_job(fence, now).await?);
        }
        if let Some(due) = record.expires_at_ms
            && now < due
        {
            // Due early (the clocks of two nodes differ): come back at the expiry.
            self.store()
                .fail_job(fence, now, Some(due), "not yet due")
                .await?;
            return Ok(());
        }
        let resolution = EscalationResolution {
            status: EscalationResolutionStatus::Expired,
            resolved_by: crate::events::bare_principal(
                self.config().agent.id.as_str(),
                aip_core::PrincipalKind::System,
            ),
            resolved_at: views::ts(now)?,
            result: None,
        };
        let written = self
            .store()
            .resolve_escalation(EscalationResolve {
                tenant: record.tenant.clone(),
                escalation_id: record.escalation_id.clone(),
                expected_version: record.version,
                to: EscalationState::Expired,
                resolver: None,
                resolution: encode(&resolution)?,
                finish_job: Some(fence.clone()),
                now_ms: now,
            })
            .await;
        match written {
            Ok(_) => {
                metrics::counter!("aip_escalations_expired_total").increment(1);
                Ok(())
            }
            // Resolved meanwhile: the timer has nothing left to do.
            Err(StoreError::StateConflict { .. }) => {
                Ok(self.store().complete_job(fence, now_ms()).await?)
            }
            Err(err) => Err(err.into()),
        }
    }
}

fn stored_resolution(
    record: &EscalationRecord,
) -> Result<Option<EscalationResolution>, RuntimeError> {
    record
        .resolution
        .clone()
        .map(|r| {
            serde_json::from_value(r).map_err(|e| {
                corrupt(format!(
                    "resolution of escalation {}: {e}",
                    record.escalation_id
                ))
            })
        })
        .transpose()
}

/// The read view of a stored escalation.
fn view(record: &EscalationRecord) -> Result<EscalationView, RuntimeError> {
    Ok(EscalationView {
        escalation_id: record.escalation_id.clone(),
        status: record.state.as_str(),
        requester: record.requester.clone(),
        escalation: serde_json::from_value(record.body.clone())
            .map_err(|e| corrupt(format!("escalation {}: {e}", record.escalation_id)))?,
        correlation_id: record.correlation_id.clone(),
        session_id: record.session_id.clone(),
        created_at: views::ts(record.created_at_ms)?,
        expires_at: record.expires_at_ms.map(views::ts).transpose()?,
        resolution: stored_resolution(record)?,
    })
}

/// Jobs of the `escalations` queue.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct EscalationTimers;

#[async_trait]
impl JobKind for EscalationTimers {
    fn queue(&self) -> &'static str {
        ESCALATION_QUEUE
    }

    async fn run(&self, runtime: &Arc<Runtime>, lease: &Lease) -> Result<(), RuntimeError> {
        runtime.expire_escalation(lease).await
    }

    async fn failed(&self, runtime: &Arc<Runtime>, lease: &Lease, error: RuntimeError) {
        // Retried while attempts remain; an escalation whose timer cannot run stays open.
        crate::worker::retry_timer(runtime, lease, &error, "escalation").await;
    }

    async fn sweep(&self, _runtime: &Arc<Runtime>) -> Result<(), RuntimeError> {
        Ok(())
    }
}
