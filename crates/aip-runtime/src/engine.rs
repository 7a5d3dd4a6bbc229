//! The runtime entry point: one path for every binding (design.md "The path of one action").

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aip_core::{
    Ack, AckStatus, Action, ActionId, ActionMode, ActionResult, ActionResultStatus, Cancel,
    CancelTarget, Envelope, ErrorBody, ErrorCategory, Heartbeat, HeartbeatAck,
    IdempotencyCollisionBehavior, IdempotencyKeyScope, ManifestRequest, MessageBody, Principal,
    PrincipalId, PrincipalKind, ProtocolError, ReceiptType, Timestamp,
};
use aip_store::{
    ActionRecord, ActionState, Admission, AdmissionLease, AdmissionOutcome, CollisionBehavior,
    Fence, IdempotencyClaim, Lease, NewAction, NewEvent, NewJob, ReplayClaim, Store, StoreError,
    Transition, WorkerId,
};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::handler::{HandlerError, Mode, TrustedContext};
use crate::registry::{AdmittedCapability, Registry};

/// Queue name of asynchronous actions.
pub const ACTION_QUEUE: &str = "actions";
/// Idempotency reservations live this long unless the contract says otherwise.
pub const DEFAULT_IDEMPOTENCY_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// Claims of an async job before it is dead-lettered.
const MAX_ATTEMPTS: u32 = 5;

/// Settings the runtime takes from trusted configuration.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The provider principal (manifest `agent`, actor of runtime receipts).
    pub agent: Principal,
    /// Deadline of an action without `timeout_ms`.
    pub default_timeout_ms: u64,
    /// Largest accepted `timeout_ms`.
    pub max_timeout_ms: u64,
    /// Largest list page (1..=1000).
    pub max_list_limit: u32,
    /// Page size when the client names none.
    pub default_list_limit: u32,
    /// Longest bounded wait (≤ 30000 ms).
    pub max_wait_ms: u64,
    /// Async workers.
    pub async_workers: u32,
    /// Lease length of claimed work.
    pub lease_ms: u64,
    /// Signed-envelope policy.
    pub signatures: SignaturePolicy,
    /// Bounds on decoded envelopes.
    pub decode_limits: aip_core::Limits,
    /// Limits advertised in the manifest.
    pub manifest_limits: Value,
}

/// Spec 22.2-22.3 settings.
#[derive(Debug, Clone, Default)]
pub struct SignaturePolicy {
    /// Refuse unsigned envelopes.
    pub require_signed: bool,
    /// Largest accepted `|sent_at - now|`.
    pub max_skew_ms: u64,
    /// How long message ids stay claimed.
    pub replay_window_ms: u64,
    /// did:key → id of the principal it speaks for.
    pub trusted_signers: HashMap<String, String>,
}

/// A binding-independent reply: the envelope to send and its native HTTP status.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status (spec 19.1 for errors).
    pub status: u16,
    /// The response envelope.
    pub envelope: Envelope,
}

/// Which envelopes an endpoint accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /aip/v1/messages`: any supported message.
    Messages,
    /// `POST /aip/v1/actions`: actions only.
    Actions,
}

/// The AIP runtime over one store.
pub struct Runtime {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) registry: Registry,
    pub(crate) config: RuntimeConfig,
    running: Mutex<HashMap<String, CancellationToken>>,
    worker_id: WorkerId,
    work_ready: Notify,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("worker_id", &self.worker_id)
            .finish_non_exhaustive()
    }
}

/// The outcome of running a handler, ready to be committed.
struct Settled {
    state: ActionState,
    result: ActionResult,
}

impl Runtime {
    /// A runtime over `store` with an admitted capability `registry`. Call [`Runtime::start`] to recover
    /// unfinished work and run the async workers.
    pub fn new(store: Arc<dyn Store>, registry: Registry, config: RuntimeConfig) -> Arc<Self> {
        Arc::new(Self {
            store,
            registry,
            config,
            running: Mutex::new(HashMap::new()),
            worker_id: WorkerId::fresh(),
            work_ready: Notify::new(),
            shutdown: CancellationToken::new(),
        })
    }

    /// The bounds every envelope is decoded under (bindings that decode first use the same).
    pub fn decode_limits(&self) -> &aip_core::Limits {
        &self.config.decode_limits
    }

    /// The store (for readiness probes).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Recover work a crash left unfinished, then start the async workers.
    pub async fn start(self: &Arc<Self>) -> Result<(), RuntimeError> {
        self.recover().await?;
        for _ in 0..self.config.async_workers {
            let runtime = Arc::clone(self);
            tokio::spawn(async move { runtime.worker_loop().await });
        }
        Ok(())
    }

    /// Stop claiming new work (in-flight leases lapse and are re-claimed after restart).
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Decode, authenticate and serve one native envelope (spec 20.1). Never panics; every rejection is an
    /// `aip.core.v1.error` envelope with the 19.1 status.
    pub async fn handle(
        self: &Arc<Self>,
        caller: &Caller,
        bytes: &[u8],
        endpoint: Endpoint,
    ) -> Reply {
        let (envelope, raw) =
            match aip_core::decode_envelope_value(bytes, &self.config.decode_limits) {
                Ok(decoded) => decoded,
                Err(err) => return error_reply(None, &RuntimeError::Decode(err)),
            };
        self.handle_decoded(caller, &envelope, &raw, endpoint).await
    }

    /// [`Runtime::handle`] for an envelope a binding has already decoded (with
    /// [`aip_core::decode_envelope_value`] or the same limits): `raw` is the JSON as received, which
    /// signature checks hash.
    pub async fn handle_decoded(
        self: &Arc<Self>,
        caller: &Caller,
        envelope: &Envelope,
        raw: &Value,
        endpoint: Endpoint,
    ) -> Reply {
        match self.serve(caller, envelope, raw, endpoint).await {
            Ok(reply) => reply,
            Err(err) => error_reply(Some(envelope), &err),
        }
    }

    async fn serve(
        self: &Arc<Self>,
        caller: &Caller,
        envelope: &Envelope,
        raw: &Value,
        endpoint: Endpoint,
    ) -> Result<Reply, RuntimeError> {
        let caller = self.authenticate_envelope(caller, envelope, raw).await?;
        if endpoint == Endpoint::Actions && !matches!(envelope.body, MessageBody::Action(_)) {
            return Err(RuntimeError::UnsupportedMessage(format!(
                "{} on /aip/v1/actions",
                envelope.message_type.as_str()
            )));
        }
        match &envelope.body {
            MessageBody::Action(action) => self.submit(&caller, envelope, action).await,
            MessageBody::Cancel(cancel) => self.cancel_message(&caller, envelope, cancel).await,
            MessageBody::ManifestRequest(request) => {
                Ok(self.manifest_reply(&caller, envelope, request))
            }
            MessageBody::Heartbeat(heartbeat) => Ok(heartbeat_reply(envelope, heartbeat)),
            MessageBody::ActionStatusRequest(request) => {
                let mut status = self
                    .action_status(
                        &caller,
                        request.action_id.as_str(),
                        request.include_result,
                        request.include_receipts,
                        request.wait_ms,
                    )
                    .await?;
                if request.include_chunks {
                    status.chunks = self
                        .first_chunks(&caller, request.action_id.as_str(), None)
                        .await?;
                }
                Ok(ok(
                    200,
                    Envelope::reply_to(envelope, MessageBody::ActionStatus(status)),
                ))
            }
            MessageBody::ActionResultRequest(request) => {
                let result = self
                    .action_result(&caller, request.action_id.as_str(), request.wait_ms)
                    .await?;
                Ok(ok(
                    200,
                    Envelope::reply_to(envelope, MessageBody::ActionResult(result)),
                ))
            }
            MessageBody::ActionListRequest(request) => {
                let query = crate::read::ActionListQuery {
                    state: request.state.map(|s| s.as_str().to_owned()),
                    capability_id: request
                        .capability_id
                        .as_ref()
                        .map(|c| c.as_str().to_owned()),
                    session_id: request.session_id.as_ref().map(|c| c.as_str().to_owned()),
                    cursor: request.cursor.clone(),
                    limit: request.limit,
                    include_results: request.include_results,
                };
                let list = self.list_actions(&caller, &query).await?;
                Ok(ok(
                    200,
                    Envelope::reply_to(envelope, MessageBody::ActionList(list)),
                ))
            }
            MessageBody::ActionEventsRequest(request) => {
                let mut events = self
                    .action_events(
                        &caller,
                        request.action_id.as_str(),
                        request.cursor.as_deref(),
                        request.limit,
                        None,
                    )
                    .await?;
                // The first page carries the first chunks; `GET .../chunks` pages the rest.
                if request.include_chunks && request.cursor.is_none() {
                    events.chunks = self
                        .first_chunks(&caller, request.action_id.as_str(), request.limit)
                        .await?;
                }
                Ok(ok(
                    200,
                    Envelope::reply_to(envelope, MessageBody::ActionEvents(events)),
                ))
            }
            MessageBody::Handshake(handshake) => {
                let response = self.handshake(&caller, envelope, handshake).await?;
                let session_id = response.session_id.clone();
                let mut reply =
                    Envelope::reply_to(envelope, MessageBody::HandshakeResponse(response));
                reply.session_id = session_id.or(reply.session_id);
                Ok(ok(200, reply))
            }
            MessageBody::SessionRequest(request) => {
                let view = self.session(&caller, request.session_id.as_str()).await?;
                Ok(ok(
                    200,
                    Envelope::reply_to(envelope, MessageBody::SessionView(view)),
                ))
            }
            MessageBody::SessionListRequest(request) => {
                let state = request
                    .status
                    .and_then(|s| serde_json::to_value(s).ok())
                    .and_then(|v| v.as_str().map(str::to_owned));
                let list = self
                    .sessions(
                        &caller,
                        state.as_deref(),
                        request.cursor.as_deref(),
                        request.limit,
                    )
                    .await?;
                Ok(ok(
                    200,
                    Envelope::reply_to(envelope, MessageBody::SessionList(list)),
                ))
            }
            MessageBody::SessionCloseRequest(request) => {
                let view = self
                    .close_session(
                        &caller,
                        request.session_id.as_str(),
                        request.reason.as_deref(),
                    )
                    .await?;
                Ok(ok(
                    200,
                    Envelope::reply_to(envelope, MessageBody::SessionView(view)),
                ))
            }
            MessageBody::SessionResumeRequest(request) => {
                let token = request
                    .resume_token
                    .as_deref()
                    .ok_or(RuntimeError::ResumeTokenInvalid)?;
                let resumed = self
                    .resume_session(
                        &caller,
                        request.session_id.as_str(),
                        token,
                        request.last_event_cursor.as_deref(),
                    )
                    .await?;
                Ok(ok(
                    200,
                    Envelope::reply_to(envelope, MessageBody::SessionResume(resumed)),
                ))
            }
            other => Err(RuntimeError::UnsupportedMessage(
                other.message_type().as_str().to_owned(),
            )),
        }
    }

    /// Spec 11.3 step 2 for signed envelopes: signature, signer binding, `sent_at` skew, replay claim.
    async fn authenticate_envelope(
        &self,
        caller: &Caller,
        envelope: &Envelope,
        raw: &Value,
    ) -> Result<Caller, RuntimeError> {
        let policy = &self.config.signatures;
        if envelope.security.is_none() {
            if policy.require_signed {
                return Err(RuntimeError::Signature(
                    "this runtime requires signed envelopes",
                ));
            }
            return Ok(caller.clone());
        }
        let signer = aip_core::signing::verify_value(raw)
            .map_err(|_| RuntimeError::Signature("signature does not verify"))?;
        let bound = policy
            .trusted_signers
            .get(&signer.did)
            .ok_or(RuntimeError::Signature("signer is not trusted"))?;
        if *bound != caller.id {
            return Err(RuntimeError::Signature(
                "signer is bound to another principal than the bearer token",
            ));
        }
        let now = now_ms();
        let sent = envelope
            .sent_at
            .unix_millis()
            .ok_or(RuntimeError::ClockSkew)?;
        let skew = now.saturating_sub(sent).unsigned_abs();
        if skew > policy.max_skew_ms {
            return Err(RuntimeError::ClockSkew);
        }
        let retain = now.saturating_add(
            i64::try_from(policy.replay_window_ms.saturating_add(policy.max_skew_ms))
                .unwrap_or(i64::MAX),
        );
        let scope = format!("signed:{}", signer.did);
        match self
            .store
            .claim_message_id(&scope, envelope.message_id.as_str(), now, retain)
            .await?
        {
            ReplayClaim::Claimed => {}
            _ => return Err(RuntimeError::Replay),
        }
        let mut verified = caller.clone();
        verified.issuer = signer.did;
        Ok(verified)
    }

    /// Admission (spec 11.3 steps 3-10) and, for sync actions, dispatch.
    async fn submit(
        self: &Arc<Self>,
        caller: &Caller,
        envelope: &Envelope,
        action: &Action,
    ) -> Result<Reply, RuntimeError> {
        let started = Instant::now();
        // Step 3: manifest and handler lookup; capabilities the caller may not invoke are invisible.
        let cap = self
            .registry
            .get(action.capability_id.as_str())
            .filter(|_| caller.may_invoke(action.capability_id.as_str()))
            .ok_or_else(|| {
                RuntimeError::UnknownCapability(action.capability_id.as_str().to_owned())
            })?
            .clone();
        // Step 4: input schema.
        if let Some(error) = cap.input_validator.iter_errors(&action.input).next() {
            let mut text = format!("{} at {}", error, error.instance_path());
            text.truncate(300);
            return Err(RuntimeError::InvalidInput(text));
        }
        // Step 5: identity, tenant and scopes come from `caller` (trusted configuration) only; a named
        // session must be the caller's own open session.
        if let Some(session_id) = &envelope.session_id {
            self.check_session_open(caller, session_id.as_str()).await?;
        }
        // Step 6: mode, deadline, risk, contract.
        let mode = match action.mode.unwrap_or(ActionMode::Sync) {
            ActionMode::Sync => Mode::Sync,
            ActionMode::Async => Mode::Async,
            ActionMode::Streaming => Mode::Streaming,
        };
        if !cap.supports_mode(mode) {
            return Err(RuntimeError::UnsupportedMode(mode_str(mode)));
        }
        let timeout_ms = match action.timeout_ms {
            Some(t) if t == 0 || t > self.config.max_timeout_ms => {
                return Err(RuntimeError::InvalidTimeout(self.config.max_timeout_ms));
            }
            Some(t) => t,
            None => self.config.default_timeout_ms,
        };
        let now = now_ms();
        let deadline_ms = now.saturating_add(i64::try_from(timeout_ms).unwrap_or(i64::MAX));
        // Step 7: idempotency (reserved atomically with admission below).
        let key = action
            .idempotency_key
            .clone()
            .or_else(|| envelope.idempotency_key.clone());
        let input_hash = aip_core::canonical::canonical_hash(
            &json!({ "capability_id": action.capability_id, "input": action.input }),
        );
        let idempotency = match (cap.idempotency(), key.as_deref()) {
            (Some(contract), None)
                if contract.requirement == aip_core::IdempotencyRequirement::Required =>
            {
                return Err(RuntimeError::IdempotencyKeyRequired);
            }
            (None, Some(_)) => return Err(RuntimeError::IdempotencyUnsupported),
            (Some(contract), Some(key)) => {
                if key.is_empty() || key.len() > 256 {
                    return Err(RuntimeError::InvalidInput(
                        "idempotency_key must be 1..=256 bytes".into(),
                    ));
                }
                let ttl = contract.ttl_ms.unwrap_or(DEFAULT_IDEMPOTENCY_TTL_MS);
                Some(IdempotencyClaim {
                    scope: idempotency_scope(contract.key_scope, caller, action)?,
                    key: key.to_owned(),
                    input_hash: input_hash.clone(),
                    behavior: match contract.collision_behavior {
                        IdempotencyCollisionBehavior::ReturnOriginalResult => {
                            CollisionBehavior::ReturnOriginalResult
                        }
                        IdempotencyCollisionBehavior::RejectConflict => {
                            CollisionBehavior::RejectConflict
                        }
                        IdempotencyCollisionBehavior::RevalidateInputHash => {
                            CollisionBehavior::RevalidateInputHash
                        }
                    },
                    expires_at_ms: now.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)),
                })
            }
            (_, None) => None,
        };
        // Step 8: policy and approval. No approval workflow here: fail closed.
        if cap.requires_approval() {
            return Err(RuntimeError::ApprovalUnavailable);
        }
        // Step 9: durable admission, one transaction.
        let action_id = action.id.as_str().to_owned();
        let actor = caller_principal(caller);
        let mut chain =
            crate::receipts::ChainWriter::new(&action_id, caller, envelope.correlation_id.clone());
        chain.push(ReceiptType::RequestReceived, &actor, json!({ "message_id": envelope.message_id, "capability_id": action.capability_id, "input_hash": input_hash }), now);
        chain.push(
            ReceiptType::ActionAccepted,
            &self.config.agent,
            json!({ "action_id": action_id, "mode": mode_str(mode), "deadline_ms": deadline_ms }),
            now,
        );
        chain.push(ReceiptType::PolicyDecision, &self.config.agent, json!({ "decision": "allow", "basis": "configured scopes", "principal": caller.id, "tenant": caller.tenant }), now);
        // Streaming work is queued like async work (spec 11.6): a leased worker runs it, so it survives
        // restarts and its chunks are fenced.
        let initial = if mode != Mode::Sync {
            ActionState::Queued
        } else {
            ActionState::Running
        };
        let mut events = vec![self.event(
            "aip.action.accepted",
            caller,
            &action_id,
            envelope,
            json!({ "capability_id": action.capability_id, "mode": mode_str(mode) }),
            now,
        )];
        events.push(self.event(
            if mode != Mode::Sync {
                "aip.action.queued"
            } else {
                "aip.action.started"
            },
            caller,
            &action_id,
            envelope,
            json!({}),
            now,
        ));
        let request = json!({
            "action": action,
            "message_id": envelope.message_id,
            "trace": envelope.trace,
            "caller": { "id": caller.id, "kind": caller.kind, "issuer": caller.issuer, "scopes": caller.scopes, "external_account": caller.external_account },
            "idempotency_key": key,
        });
        let admission = Admission {
            action: NewAction {
                action_id: action_id.clone(),
                tenant: caller.tenant.clone(),
                principal: caller.id.clone(),
                session_id: envelope.session_id.as_ref().map(|s| s.as_str().to_owned()),
                capability: action.capability_id.as_str().to_owned(),
                correlation_id: envelope
                    .correlation_id
                    .as_ref()
                    .map(|c| c.as_str().to_owned()),
                mode: mode_str(mode).to_owned(),
                state: initial,
                input_hash: Some(input_hash),
                deadline_ms: Some(deadline_ms),
                created_at_ms: now,
                request,
            },
            idempotency,
            receipts: chain.take(),
            events,
            // Every action has a job. Async and streaming work waits in the queue; sync work is run at
            // once by this node under a lease taken in the admission transaction, so it is fenced like
            // queued work, no other node's recovery touches it while the lease lives, and if this node
            // dies a worker elsewhere takes the lapsed lease over (never re-running a mutation).
            job: Some(NewJob {
                job_id: format!("job_{action_id}"),
                queue: ACTION_QUEUE.into(),
                action_id: Some(action_id.clone()),
                tenant: caller.tenant.clone(),
                available_at_ms: now,
                max_attempts: MAX_ATTEMPTS,
                payload: json!({}),
            }),
            lease: (mode == Mode::Sync).then(|| AdmissionLease {
                worker: self.worker_id.clone(),
                lease_ms: self.lease_ms(),
            }),
        };
        let (record, lease) = match self.store.admit(admission).await {
            Ok(AdmissionOutcome::Admitted { record, lease }) => (record, lease),
            Ok(AdmissionOutcome::Replayed { original, .. }) => {
                metrics::counter!("aip_actions_cached_total").increment(1);
                return self.replay_reply(caller, envelope, original, mode).await;
            }
            Ok(AdmissionOutcome::Conflict { .. }) => return Err(RuntimeError::IdempotencyConflict),
            Ok(_) => {
                return Err(RuntimeError::Storage(StoreError::Backend(
                    "unexpected admission outcome".into(),
                )));
            }
            Err(StoreError::Duplicate { kind: "action" }) => {
                return Err(RuntimeError::DuplicateActionId);
            }
            Err(err) => return Err(err.into()),
        };
        metrics::counter!("aip_actions_admitted_total", "mode" => mode_str(mode)).increment(1);
        // Step 10: dispatch or queue.
        if mode != Mode::Sync {
            self.work_ready.notify_one();
            let ack = Ack {
                action_id: action.id.clone(),
                status: AckStatus::Queued,
                reason: None,
                retry_after_ms: None,
                queue: Some(json!({ "name": ACTION_QUEUE })),
            };
            return Ok(ok(202, Envelope::reply_to(envelope, MessageBody::Ack(ack))));
        }
        let lease = lease.ok_or_else(|| {
            RuntimeError::Storage(StoreError::Corrupt(
                "sync admission returned no lease".into(),
            ))
        })?;
        let result = self
            .execute(&cap, &record, Some(&lease.fence), chain)
            .await?;
        metrics::histogram!("aip_action_duration_seconds", "mode" => "sync")
            .record(started.elapsed().as_secs_f64());
        let ack = Ack {
            action_id: action.id.clone(),
            status: AckStatus::Accepted,
            reason: None,
            retry_after_ms: None,
            queue: None,
        };
        Ok(result_reply(envelope, result, ack))
    }

    /// A duplicate key resolved to an earlier action: never dispatch again (spec 11.4 `cached`).
    async fn replay_reply(
        &self,
        caller: &Caller,
        envelope: &Envelope,
        original: ActionRecord,
        mode: Mode,
    ) -> Result<Reply, RuntimeError> {
        let mut record = original;
        if mode == Mode::Sync && !record.state.is_terminal() {
            record = self
                .wait_terminal(caller, record, self.config.max_wait_ms)
                .await?;
        }
        let action_id = ActionId::new(record.action_id.clone());
        let ack = Ack {
            action_id: action_id.clone(),
            status: AckStatus::Cached,
            reason: Some(
                "idempotent replay: the original outcome is returned and nothing was dispatched"
                    .into(),
            ),
            retry_after_ms: None,
            queue: None,
        };
        match stored_result(&record) {
            Some(result) if mode == Mode::Sync => Ok(result_reply(envelope, result, ack)),
            _ => Ok(ok(200, Envelope::reply_to(envelope, MessageBody::Ack(ack)))),
        }
    }

    /// Run the handler under a frozen trusted context and commit the outcome. Leased work (`fence`) keeps
    /// its lease renewed while the handler runs and commits under the fence.
    async fn execute(
        &self,
        cap: &Arc<AdmittedCapability>,
        record: &ActionRecord,
        fence: Option<&Fence>,
        mut chain: crate::receipts::ChainWriter,
    ) -> Result<ActionResult, RuntimeError> {
        let token = CancellationToken::new();
        let mut ctx = self.trusted_context(record, token.clone());
        if ctx.mode == Mode::Streaming {
            ctx.chunks = crate::stream::ChunkSink::streaming(
                Arc::clone(&self.store),
                &record.action_id,
                fence.cloned(),
            );
        }
        let input = record
            .request
            .pointer("/action/input")
            .cloned()
            .unwrap_or(Value::Null);
        self.lock_running()
            .insert(record.action_id.clone(), token.clone());
        let invoke = async {
            if ctx.remaining().is_zero() {
                return Err(HandlerError::DeadlineExceeded);
            }
            match tokio::time::timeout(ctx.remaining(), cap.handler.invoke(&ctx, &input)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(if cap.handler.support().mutation {
                    HandlerError::UncertainOutcome(
                        "deadline passed while the mutation was in flight".into(),
                    )
                } else {
                    HandlerError::DeadlineExceeded
                }),
            }
        };
        let outcome = match fence {
            Some(fence) => {
                tokio::pin!(invoke);
                tokio::select! {
                    outcome = &mut invoke => outcome,
                    // The lease was lost (another worker took it over): the handler runs on, but its
                    // commit below is refused by the fence.
                    () = self.keep_lease(fence, &record.action_id, &token) => invoke.await,
                }
            }
            None => invoke.await,
        };
        self.lock_running().remove(&record.action_id);
        ctx.chunks.finish(&outcome).await;
        let settled = settle(cap, &record.action_id, outcome);
        let now = now_ms();
        chain.push(
            ReceiptType::ToolExecuted,
            &self.config.agent,
            json!({ "capability_id": record.capability, "outcome": settled.state.as_str() }),
            now,
        );
        chain.push(ReceiptType::ResultReturned, &self.config.agent, json!({ "status": result_status_str(settled.result.status), "output_hash": settled.result.output.as_ref().map(aip_core::canonical::canonical_hash) }), now);
        let mut result = settled.result;
        result.receipt = chain.last_ref();
        let caller = owner_of(record);
        let kind = match settled.state {
            ActionState::Completed => "aip.action.completed",
            ActionState::Cancelled => "aip.action.cancelled",
            ActionState::Expired => "aip.action.expired",
            _ => "aip.action.failed",
        };
        let event = self.record_event(
            kind,
            &caller,
            record,
            json!({ "status": result_status_str(result.status) }),
            now,
        );
        let transition = Transition {
            action_id: record.action_id.clone(),
            from: vec![ActionState::Running, ActionState::Cancelling],
            to: settled.state,
            result: Some(
                serde_json::to_value(&result)
                    .map_err(|e| RuntimeError::Storage(StoreError::Corrupt(e.to_string())))?,
            ),
            events: vec![event],
            receipts: chain.take(),
            fence: fence.cloned(),
            finish_job: fence.is_some(),
            now_ms: now,
        };
        self.store.transition_action(transition).await?;
        metrics::counter!("aip_actions_finished_total", "state" => settled.state.as_str())
            .increment(1);
        Ok(result)
    }

    fn trusted_context(
        &self,
        record: &ActionRecord,
        cancellation: CancellationToken,
    ) -> TrustedContext {
        let req = &record.request;
        let str_at = |p: &str| req.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let deadline_ms = record.deadline_ms.unwrap_or(record.created_at_ms);
        let remaining = u64::try_from(deadline_ms.saturating_sub(now_ms())).unwrap_or(0);
        TrustedContext {
            action_id: record.action_id.clone(),
            capability_id: record.capability.clone(),
            mode: match record.mode.as_str() {
                "async" => Mode::Async,
                "streaming" => Mode::Streaming,
                _ => Mode::Sync,
            },
            principal_id: record.principal.clone(),
            principal_kind: str_at("/caller/kind").unwrap_or_else(|| "service".into()),
            issuer: str_at("/caller/issuer").unwrap_or_else(|| "bearer".into()),
            tenant: record.tenant.clone(),
            scopes: req
                .pointer("/caller/scopes")
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default(),
            external_account: req
                .pointer("/caller/external_account")
                .and_then(|v| serde_json::from_value(v.clone()).ok()),
            idempotency_key: str_at("/idempotency_key"),
            session_id: record.session_id.clone(),
            correlation_id: record.correlation_id.clone(),
            trace: req.get("trace").filter(|t| !t.is_null()).cloned(),
            deadline_unix_ms: u64::try_from(deadline_ms).unwrap_or(0),
            deadline: Instant::now() + Duration::from_millis(remaining),
            cancellation,
            chunks: crate::stream::ChunkSink::default(),
        }
    }

    /// Appends an audit record of `caller`'s request. Best effort: the request it records has
    /// already been committed, and a lost audit line must not fail it.
    pub(crate) async fn record_audit(&self, caller: &Caller, label: &str, now: i64, data: Value) {
        let _ = self
            .store
            .append_audit(aip_store::NewAudit {
                audit_id: aip_core::generate_with_prefix("aud_"),
                tenant: caller.tenant.clone(),
                actor: caller.id.clone(),
                action_label: label.into(),
                occurred_at_ms: now,
                data,
            })
            .await;
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        // A poisoned lock only means another task panicked mid-insert; the map itself stays usable.
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Cancellation (spec 11.8): record intent durably, signal the handler, report `cancelled` only once
    /// the handler (or, for never-started work, the runtime as owner) confirms.
    pub async fn cancel(
        &self,
        caller: &Caller,
        action_id: &str,
        reason: Option<&str>,
    ) -> Result<aip_core::ActionStatus, RuntimeError> {
        let record = self.visible_action(caller, action_id).await?;
        if !caller.may_cancel(&record.tenant, &record.principal) {
            return Err(RuntimeError::CancelDenied("this action"));
        }
        if record.state.is_terminal() {
            return Err(RuntimeError::Terminal(record.state.as_str().to_owned()));
        }
        let cap = self
            .registry
            .get(&record.capability)
            .cloned()
            .ok_or(RuntimeError::NotCancellable)?;
        if !cap.supports_cancel() {
            return Err(RuntimeError::NotCancellable);
        }
        if record.state != ActionState::Cancelling {
            let now = now_ms();
            let event = self.record_event(
                "aip.action.cancel_requested",
                &owner_of(&record),
                &record,
                json!({ "requested_by": caller.id, "reason": reason }),
                now,
            );
            let transition = Transition {
                action_id: record.action_id.clone(),
                from: vec![
                    ActionState::Accepted,
                    ActionState::Queued,
                    ActionState::Running,
                ],
                to: ActionState::Cancelling,
                result: None,
                events: vec![event],
                receipts: Vec::new(),
                fence: None,
                finish_job: false,
                now_ms: now,
            };
            match self.store.transition_action(transition).await {
                Ok(_) => {}
                Err(StoreError::Terminal { state }) => return Err(RuntimeError::Terminal(state)),
                Err(StoreError::StateConflict { actual }) if actual == "cancelling" => {}
                Err(StoreError::StateConflict { actual }) => {
                    return Err(RuntimeError::Terminal(actual));
                }
                Err(err) => return Err(err.into()),
            }
            self.record_audit(
                caller,
                "action.cancel_requested",
                now,
                json!({ "action_id": record.action_id }),
            )
            .await;
        }
        if let Some(token) = self.lock_running().get(action_id) {
            token.cancel();
        }
        self.work_ready.notify_one();
        self.action_status(caller, action_id, false, false, None)
            .await
    }

    async fn cancel_message(
        &self,
        caller: &Caller,
        envelope: &Envelope,
        cancel: &Cancel,
    ) -> Result<Reply, RuntimeError> {
        match &cancel.target {
            CancelTarget::Action(id) => {
                let status = self
                    .cancel(caller, id.as_str(), cancel.reason.as_deref())
                    .await?;
                Ok(ok(
                    202,
                    Envelope::reply_to(envelope, MessageBody::ActionStatus(status)),
                ))
            }
            CancelTarget::Session(id) => Ok(self
                .cancel_session(caller, id.as_str(), cancel.reason.as_deref())
                .await?
                .reply(envelope)),
        }
    }

    fn manifest_reply(
        &self,
        caller: &Caller,
        envelope: &Envelope,
        request: &ManifestRequest,
    ) -> Reply {
        let manifest = self.manifest(caller, request.filter.as_ref(), &request.profiles);
        ok(
            200,
            Envelope::reply_to(envelope, MessageBody::Manifest(manifest)),
        )
    }

    /// The manifest `caller` may see (spec 9.1, 9.8).
    pub fn manifest(
        &self,
        caller: &Caller,
        filter: Option<&aip_core::ManifestFilter>,
        profiles: &[aip_core::ProfileId],
    ) -> aip_core::Manifest {
        self.registry.manifest(
            &self.config.agent,
            caller,
            self.config.manifest_limits.clone(),
            filter,
            profiles,
        )
    }

    // ---- async work ----

    /// Lease length of claimed (and sync) work.
    fn lease_ms(&self) -> i64 {
        i64::try_from(self.config.lease_ms).unwrap_or(30_000)
    }

    async fn worker_loop(self: Arc<Self>) {
        let lease_ms = self.lease_ms();
        while !self.shutdown.is_cancelled() {
            let claimed = self
                .store
                .claim(ACTION_QUEUE, &self.worker_id, now_ms(), lease_ms)
                .await;
            match claimed {
                Ok(Some(lease)) => {
                    if let Err(err) = self.run_job(&lease).await {
                        // The store's code tells a stale fence (another node took the work) from an outage.
                        let store = match &err {
                            RuntimeError::Storage(e) => e.code(),
                            _ => "",
                        };
                        tracing::warn!(action = ?lease.action_id, error = %err, store, "async action could not be settled");
                    }
                }
                Ok(None) => {
                    tokio::select! {
                        () = self.work_ready.notified() => {}
                        () = tokio::time::sleep(Duration::from_millis(500)) => {}
                        () = self.shutdown.cancelled() => {}
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "claiming work failed");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    async fn run_job(&self, lease: &Lease) -> Result<(), RuntimeError> {
        let fence = &lease.fence;
        let Some(action_id) = lease.action_id.as_deref() else {
            return Ok(self
                .store
                .fail_job(fence, now_ms(), None, "job without action")
                .await
                .map(|_| ())?);
        };
        let Some(record) = self.store.get_action(action_id).await? else {
            return Ok(self
                .store
                .fail_job(fence, now_ms(), None, "action missing")
                .await
                .map(|_| ())?);
        };
        if record.state.is_terminal() {
            return Ok(self.store.complete_job(fence, now_ms()).await?);
        }
        let chain = crate::receipts::ChainWriter::resume(&record, &self.store).await?;
        let Some(cap) = self.registry.get(&record.capability).cloned() else {
            let result = failed_result(
                action_id,
                "aip.discovery.capability_not_found",
                "capability is no longer admitted",
                ErrorCategory::Permanent,
            );
            return self
                .finish_without_dispatch(&record, fence, ActionState::Failed, result, chain)
                .await;
        };
        match record.state {
            ActionState::Cancelling => {
                // Never dispatched (or its handler died with a previous process).
                if record_started(&record) && cap.handler.support().mutation {
                    let result = uncertain_result(
                        action_id,
                        "the handler was interrupted while cancelling a mutation",
                    );
                    return self
                        .finish_without_dispatch(&record, fence, ActionState::Failed, result, chain)
                        .await;
                }
                let result = ActionResult {
                    action_id: ActionId::new(action_id),
                    status: ActionResultStatus::Cancelled,
                    output: None,
                    message: Vec::new(),
                    memory_update: None,
                    usage: None,
                    receipt: None,
                    error: None,
                };
                self.finish_without_dispatch(&record, fence, ActionState::Cancelled, result, chain)
                    .await
            }
            ActionState::Running if cap.handler.support().mutation => {
                // A previous attempt started this mutation and its outcome is unknown: never re-dispatch.
                let result = uncertain_result(
                    action_id,
                    "a previous attempt was interrupted; the provider outcome is unknown",
                );
                self.finish_without_dispatch(&record, fence, ActionState::Failed, result, chain)
                    .await
            }
            ActionState::Queued | ActionState::Accepted | ActionState::Running => {
                if record.deadline_ms.is_some_and(|d| d <= now_ms()) {
                    let result = failed_result(
                        action_id,
                        "aip.action.deadline_exceeded",
                        "the deadline passed before execution",
                        ErrorCategory::Permanent,
                    );
                    return self
                        .finish_without_dispatch(
                            &record,
                            fence,
                            ActionState::Expired,
                            result,
                            chain,
                        )
                        .await;
                }
                let now = now_ms();
                let record = if record.state == ActionState::Running {
                    record
                } else {
                    let event = self.record_event(
                        "aip.action.started",
                        &owner_of(&record),
                        &record,
                        json!({ "attempt": lease.attempt }),
                        now,
                    );
                    let transition = Transition {
                        action_id: record.action_id.clone(),
                        from: vec![record.state],
                        to: ActionState::Running,
                        result: None,
                        events: vec![event],
                        receipts: Vec::new(),
                        fence: Some(fence.clone()),
                        finish_job: false,
                        now_ms: now,
                    };
                    match self.store.transition_action(transition).await {
                        Ok(r) => r,
                        // Cancelled between claim and start: the next claim settles it.
                        Err(StoreError::StateConflict { .. }) => {
                            return Ok(self.store.release_job(fence, now_ms()).await?);
                        }
                        Err(err) => return Err(err.into()),
                    }
                };
                self.execute(&cap, &record, Some(fence), chain)
                    .await
                    .map(|_| ())
            }
            _ => Ok(self.store.complete_job(fence, now_ms()).await?),
        }
    }

    /// Renews the lease every third of its length while the handler runs, and relays a cancellation
    /// recorded by another node to the handler's `token`. Returns only when the lease is lost.
    async fn keep_lease(&self, fence: &Fence, action_id: &str, token: &CancellationToken) {
        let period = Duration::from_millis(self.config.lease_ms / 3);
        loop {
            tokio::time::sleep(period).await;
            match self.store.renew(fence, now_ms(), self.lease_ms()).await {
                Ok(_) => {}
                Err(err @ (StoreError::StaleLease | StoreError::NotFound { .. })) => {
                    tracing::warn!(action = %action_id, error = %err, "lease lost");
                    return;
                }
                // An outage: try again next period (the lease may still be ours).
                Err(err) => {
                    tracing::warn!(action = %action_id, error = %err, "lease renewal failed");
                    continue;
                }
            }
            if let Ok(Some(record)) = self.store.get_action(action_id).await
                && record.state == ActionState::Cancelling
            {
                token.cancel();
            }
        }
    }

    async fn finish_without_dispatch(
        &self,
        record: &ActionRecord,
        fence: &Fence,
        state: ActionState,
        mut result: ActionResult,
        mut chain: crate::receipts::ChainWriter,
    ) -> Result<(), RuntimeError> {
        let now = now_ms();
        chain.push(
            ReceiptType::ResultReturned,
            &self.config.agent,
            json!({ "status": result_status_str(result.status), "dispatched": false }),
            now,
        );
        result.receipt = chain.last_ref();
        let kind = format!("aip.action.{}", state.as_str());
        let event = self.record_event(
            &kind,
            &owner_of(record),
            record,
            json!({ "status": result_status_str(result.status) }),
            now,
        );
        let transition = Transition {
            action_id: record.action_id.clone(),
            from: vec![record.state],
            to: state,
            result: Some(
                serde_json::to_value(&result)
                    .map_err(|e| RuntimeError::Storage(StoreError::Corrupt(e.to_string())))?,
            ),
            events: vec![event],
            receipts: chain.take(),
            fence: Some(fence.clone()),
            finish_job: true,
            now_ms: now,
        };
        self.store.transition_action(transition).await?;
        Ok(())
    }

    /// Boot recovery of work no job can finish any more: actions without a job (sync work admitted by
    /// an older build) and actions whose job ran out of attempts. Everything else, sync work included,
    /// holds a job: while its lease lives its node is running it (so it is left alone, even when
    /// another node on the same database is that node), and once the lease lapses a worker takes it over
    /// under a new fence (`run_job`), settling an interrupted mutation as uncertain rather than
    /// running it twice.
    async fn recover(&self) -> Result<(), RuntimeError> {
        let now = now_ms();
        let unfinished = self
            .store
            .list_unfinished_actions(now, now, aip_store::Limit::max())
            .await?;
        for record in unfinished {
            let mutation = self
                .registry
                .get(&record.capability)
                .is_none_or(|c| c.handler.support().mutation);
            let started = record_started(&record);
            let chain = crate::receipts::ChainWriter::resume(&record, &self.store).await?;
            let (to, result) = if record.state == ActionState::Cancelling && !(started && mutation)
            {
                (
                    ActionState::Cancelled,
                    ActionResult {
                        action_id: ActionId::new(record.action_id.clone()),
                        status: ActionResultStatus::Cancelled,
                        output: None,
                        message: Vec::new(),
                        memory_update: None,
                        usage: None,
                        receipt: None,
                        error: None,
                    },
                )
            } else if started && mutation {
                (
                    ActionState::Failed,
                    uncertain_result(
                        &record.action_id,
                        "the runtime restarted while this mutation was in flight; the provider outcome is unknown",
                    ),
                )
            } else {
                // Nothing with a side effect ran: hand it to the async workers.
                self.store
                    .enqueue(NewJob {
                        job_id: format!("job_{}_r{now}", record.action_id),
                        queue: ACTION_QUEUE.into(),
                        action_id: Some(record.action_id.clone()),
                        tenant: record.tenant.clone(),
                        available_at_ms: now,
                        max_attempts: MAX_ATTEMPTS,
                        payload: json!({ "recovered": true }),
                    })
                    .await?;
                tracing::info!(action = %record.action_id, "recovered unfinished action: re-queued");
                continue;
            };
            let mut chain = chain;
            let mut result = result;
            chain.push(
                ReceiptType::ResultReturned,
                &self.config.agent,
                json!({ "status": result_status_str(result.status), "recovered": true }),
                now,
            );
            result.receipt = chain.last_ref();
            let event = self.record_event(
                &format!("aip.action.{}", to.as_str()),
                &owner_of(&record),
                &record,
                json!({ "recovered": true }),
                now,
            );
            let transition = Transition {
                action_id: record.action_id.clone(),
                from: vec![record.state],
                to,
                result: serde_json::to_value(&result).ok(),
                events: vec![event],
                receipts: chain.take(),
                fence: None,
                finish_job: false,
                now_ms: now,
            };
            if let Err(err) = self.store.transition_action(transition).await {
                tracing::warn!(action = %record.action_id, error = %err, "recovery transition failed");
            }
        }
        Ok(())
    }

    // ---- helpers ----

    pub(crate) fn event(
        &self,
        kind: &str,
        caller: &Caller,
        action_id: &str,
        envelope: &Envelope,
        data: Value,
        now: i64,
    ) -> NewEvent {
        new_event(
            kind,
            (&caller.tenant, &caller.id),
            envelope.session_id.as_ref().map(|x| x.as_str().to_owned()),
            Some(action_id.to_owned()),
            envelope
                .correlation_id
                .as_ref()
                .map(|c| c.as_str().to_owned()),
            (data, now),
        )
    }

    fn record_event(
        &self,
        kind: &str,
        caller: &Caller,
        record: &ActionRecord,
        data: Value,
        now: i64,
    ) -> NewEvent {
        new_event(
            kind,
            (&caller.tenant, &caller.id),
            record.session_id.clone(),
            Some(record.action_id.clone()),
            record.correlation_id.clone(),
            (data, now),
        )
    }
}

/// One event for the audience `(tenant, principal)`; every event of the runtime is built here.
pub(crate) fn new_event(
    kind: &str,
    (tenant, principal): (&str, &str),
    session_id: Option<String>,
    action_id: Option<String>,
    correlation_id: Option<String>,
    (data, now): (Value, i64),
) -> NewEvent {
    NewEvent {
        event_id: aip_core::EventId::generate().0,
        kind: kind.to_owned(),
        tenant: tenant.to_owned(),
        principal: Some(principal.to_owned()),
        session_id,
        action_id,
        correlation_id,
        occurred_at_ms: now,
        data,
    }
}

/// A principal with no more than an id and kind (actors of receipts, events and audit views).
pub(crate) fn bare_principal(id: &str, kind: PrincipalKind) -> Principal {
    Principal {
        id: PrincipalId::new(id),
        kind,
        display_name: None,
        trust_domain: None,
        did: None,
        external_refs: Vec::new(),
        delegated_authority: Vec::new(),
        auth_context: None,
    }
}

/// Whether a handler may have started for this action (a sync admission starts it at once).
fn record_started(record: &ActionRecord) -> bool {
    record.state == ActionState::Running
        || (record.mode != "async" && record.state == ActionState::Cancelling)
}

/// The owner of a stored action as a caller (tenant and id only; used for event audiences).
pub(crate) fn owner_of(record: &ActionRecord) -> Caller {
    Caller::owner(&record.tenant, &record.principal)
}

/// The reservation scope of an idempotency key (spec 9.5). Every scope stays inside the tenant (22.6);
/// `external_account` uses the caller's configured external account and fails closed without one.
fn idempotency_scope(
    scope: IdempotencyKeyScope,
    caller: &Caller,
    action: &Action,
) -> Result<String, RuntimeError> {
    Ok(match scope {
        IdempotencyKeyScope::Action => format!(
            "action\n{}\n{}\n{}",
            caller.tenant, action.capability_id, action.id
        ),
        IdempotencyKeyScope::Capability => {
            format!("capability\n{}\n{}", caller.tenant, action.capability_id)
        }
        IdempotencyKeyScope::Principal => format!("principal\n{}\n{}", caller.tenant, caller.id),
        IdempotencyKeyScope::Tenant => format!("tenant\n{}", caller.tenant),
        IdempotencyKeyScope::ExternalAccount => {
            let account = caller
                .external_account
                .as_ref()
                .ok_or(RuntimeError::ExternalAccountUnbound)?;
            // Lengths first, so that no choice of system and id can alias another pair.
            format!(
                "external_account\n{}\n{}:{}\n{}",
                caller.tenant,
                account.system.len(),
                account.system,
                account.id
            )
        }
    })
}

fn settle(
    cap: &AdmittedCapability,
    action_id: &str,
    outcome: Result<crate::HandlerOutput, HandlerError>,
) -> Settled {
    let id = ActionId::new(action_id);
    let base = |status| ActionResult {
        action_id: id.clone(),
        status,
        output: None,
        message: Vec::new(),
        memory_update: None,
        usage: None,
        receipt: None,
        error: None,
    };
    match outcome {
        Ok(out) => {
            if let Some(err) = cap
                .output_validator
                .as_ref()
                .and_then(|v| v.iter_errors(&out.output).next())
            {
                let mut text = format!("handler output does not match the output schema: {err}");
                text.truncate(300);
                let mut r = base(ActionResultStatus::Failed);
                r.error = Some(protocol_error(
                    "aip.action.output_schema_violation",
                    &text,
                    ErrorCategory::Connector,
                    false,
                ));
                return Settled {
                    state: ActionState::Failed,
                    result: r,
                };
            }
            let mut r = base(ActionResultStatus::Completed);
            r.output = Some(out.output);
            Settled {
                state: ActionState::Completed,
                result: r,
            }
        }
        Err(HandlerError::Cancelled) => Settled {
            state: ActionState::Cancelled,
            result: base(ActionResultStatus::Cancelled),
        },
        Err(HandlerError::DeadlineExceeded) => {
            let mut r = base(ActionResultStatus::Failed);
            r.error = Some(protocol_error(
                "aip.action.deadline_exceeded",
                "the action deadline passed",
                ErrorCategory::Temporary,
                false,
            ));
            Settled {
                state: ActionState::Expired,
                result: r,
            }
        }
        Err(HandlerError::Failed {
            code,
            message,
            retryable,
        }) => {
            let mut r = base(ActionResultStatus::Failed);
            r.error = Some(protocol_error(
                &code,
                &message,
                ErrorCategory::Connector,
                retryable,
            ));
            Settled {
                state: ActionState::Failed,
                result: r,
            }
        }
        Err(HandlerError::UncertainOutcome(message)) => Settled {
            state: ActionState::Failed,
            result: uncertain_result(action_id, &message),
        },
    }
}

fn uncertain_result(action_id: &str, message: &str) -> ActionResult {
    let mut e = protocol_error(
        "aip.connector.uncertain_outcome",
        message,
        ErrorCategory::Connector,
        false,
    );
    e.details = Some(json!({ "uncertain_outcome": true }));
    ActionResult {
        action_id: ActionId::new(action_id),
        status: ActionResultStatus::Failed,
        output: None,
        message: Vec::new(),
        memory_update: None,
        usage: None,
        receipt: None,
        error: Some(e),
    }
}

fn failed_result(
    action_id: &str,
    code: &str,
    message: &str,
    category: ErrorCategory,
) -> ActionResult {
    ActionResult {
        action_id: ActionId::new(action_id),
        status: ActionResultStatus::Failed,
        output: None,
        message: Vec::new(),
        memory_update: None,
        usage: None,
        receipt: None,
        error: Some(protocol_error(code, message, category, false)),
    }
}

fn protocol_error(
    code: &str,
    message: &str,
    category: ErrorCategory,
    retryable: bool,
) -> ProtocolError {
    ProtocolError {
        code: code.to_owned(),
        message: message.to_owned(),
        category,
        retryable: Some(retryable),
        retry_after_ms: None,
        details: None,
        source: None,
    }
}

/// The stored final result of an action record, if it has one.
pub(crate) fn stored_result(record: &ActionRecord) -> Option<ActionResult> {
    record
        .result
        .as_ref()
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

fn caller_principal(caller: &Caller) -> Principal {
    let kind = serde_json::from_value(Value::String(caller.kind.clone()))
        .unwrap_or(PrincipalKind::Service);
    bare_principal(&caller.id, kind)
}

pub(crate) fn mode_str(mode: Mode) -> &'static str {
    match mode {
        Mode::Sync => "sync",
        Mode::Async => "async",
        Mode::Streaming => "streaming",
    }
}

pub(crate) fn result_status_str(status: ActionResultStatus) -> &'static str {
    match status {
        ActionResultStatus::Completed => "completed",
        ActionResultStatus::Failed => "failed",
        ActionResultStatus::Cancelled => "cancelled",
        ActionResultStatus::PendingApproval => "pending_approval",
        ActionResultStatus::RequiresHuman => "requires_human",
    }
}

fn ok(status: u16, envelope: Envelope) -> Reply {
    Reply { status, envelope }
}

/// A sync action's final result, with the acknowledgement (accepted or cached) in `extensions.ack`.
fn result_reply(request: &Envelope, result: ActionResult, ack: Ack) -> Reply {
    let mut envelope = Envelope::reply_to(request, MessageBody::ActionResult(result));
    envelope.extensions = Some(json!({ "ack": ack }));
    ok(200, envelope)
}

fn heartbeat_reply(request: &Envelope, heartbeat: &Heartbeat) -> Reply {
    let ack = HeartbeatAck {
        sequence: heartbeat.sequence,
        received_at: Timestamp::now(),
    };
    ok(
        200,
        Envelope::reply_to(request, MessageBody::HeartbeatAck(ack)),
    )
}

/// An `aip.core.v1.error` envelope with the 19.1 status.
pub fn error_reply(request: Option<&Envelope>, err: &RuntimeError) -> Reply {
    let body = MessageBody::Error(ErrorBody {
        error: err.to_protocol_error(),
    });
    let envelope = match request {
        Some(request) => Envelope::reply_to(request, body),
        None => Envelope::new(body),
    };
    Reply {
        status: err.http_status(),
        envelope,
    }
}
