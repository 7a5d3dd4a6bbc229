//! The `peer` handler: a capability served by a peer node (spec 14, 26.3). The parent action is
//! admitted here like any other; running it sends an `aip.agent.v1.delegation_request` signed with
//! this node's key to the peer, whose answer must be a `delegation_result` signed with the peer's
//! pinned did:key (an unsigned or otherwise signed answer is never taken as the child's result).
//! The child's ids are derived from the parent's, so a re-run of the parent (a retry, a restart,
//! another node) re-attaches to the same child: the peer admits it once. The parent follows the
//! child by re-sending the request with a bounded wait until the child is terminal; cancelling the
//! parent sends the peer a signed cancel for the child.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aip_core::{
    CancelTarget, DelegationRequest, DelegationStatus, Envelope, ErrorCode, MessageBody, Principal,
};
use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    ActionHandler, HandlerError, HandlerOutput, HandlerSupport, Mode, Reconciliation,
    TrustedContext,
};
use crate::delegation::{Peer, ids_of};

/// Largest answer read from a peer.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// How long the peer may hold one request waiting for the child to finish.
const FOLLOW_WAIT_MS: u64 = 10_000;
/// How long before the parent's deadline the handler stops following, to cancel the child and say
/// that its outcome is unknown (the runtime cuts the handler off at the deadline itself).
const DEADLINE_MARGIN: Duration = Duration::from_millis(500);

/// Sends one request to a peer over NATS and returns the reply's payload (the NATS binding
/// provides it: the runtime does not speak NATS).
#[async_trait]
pub trait PeerRequester: Send + Sync + 'static {
    /// Requests `subject` with `body`; the reply's payload, or why there is none.
    async fn request(
        &self,
        subject: String,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, String>;
}

/// The NATS requester, filled by the NATS binding once it connects (routes are built before).
pub type RequesterSlot = Arc<OnceLock<Arc<dyn PeerRequester>>>;

/// How the peer is reached.
#[derive(Clone)]
pub enum PeerTransport {
    /// Native HTTP: the peer's base URL (`https://host[:port]`; `http://` inside a protected local
    /// boundary); envelopes go to `/aip/v1/messages`.
    Http(String),
    /// Native NATS (spec 20.4): the peer's service subject prefix
    /// (`aip.v1.<trust-domain>.<service>.<service-version>`), and this node's connection.
    Nats {
        /// The subject prefix.
        prefix: String,
        /// This node's NATS connection, once up.
        requester: RequesterSlot,
    },
}

impl std::fmt::Debug for PeerTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerTransport::Http(url) => f.debug_tuple("Http").field(url).finish(),
            PeerTransport::Nats { prefix, .. } => f.debug_tuple("Nats").field(prefix).finish(),
        }
    }
}

/// Where and how a capability is delegated.
#[derive(Debug, Clone)]
pub struct PeerRoute {
    /// The peer.
    pub peer: Peer,
    /// How it is reached.
    pub transport: PeerTransport,
    /// The capability the peer runs.
    pub capability: String,
    /// The scope delegated with each child (whitespace-separated labels, e.g.
    /// `invoke:cap:demo:echo`).
    pub scope: String,
    /// The digest of the execution contract the peer must be running
    /// (`delegation::contract_digest` of this capability's contract).
    pub contract_digest: String,
    /// The modes the capability is offered in here.
    pub modes: BTreeSet<Mode>,
    /// Whether the delegated capability mutates (any side effect beyond `read`, or no contract):
    /// a parent interrupted while its child may have run is then an uncertain outcome that the
    /// follow-up timer reconciles, never a re-run (spec 13.6, 14.5).
    pub mutation: bool,
}

/// Delegates each action to a peer.
pub struct PeerHandler {
    route: PeerRoute,
    key: Arc<ed25519_dalek::SigningKey>,
    me: Principal,
    client: reqwest::Client,
}

impl std::fmt::Debug for PeerHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerHandler")
            .field("route", &self.route)
            .finish_non_exhaustive()
    }
}

/// What one exchange with the peer gave.
enum Answer {
    /// The child's state, from a verified `delegation_result`.
    State(Box<aip_core::DelegationResult>),
    /// The peer refused (its error envelope).
    Refused(aip_core::ProtocolError),
}

impl PeerHandler {
    /// A handler for `route`; `me` is this node's agent principal (its `did` and trust domain are
    /// what the peer checks), `key` the node key whose did:key `me` names.
    pub fn new(
        route: PeerRoute,
        key: Arc<ed25519_dalek::SigningKey>,
        me: Principal,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .use_rustls_tls()
            .min_tls_version(reqwest::tls::Version::TLS_1_2)
            .build()?;
        Ok(Self {
            route,
            key,
            me,
            client,
        })
    }

    fn delegate(&self) -> Principal {
        let mut delegate: Principal = serde_json::from_value(json!({
            "id": format!("peer:{}", self.route.peer.name), "kind": "agent",
        }))
        .unwrap_or_else(|_| self.me.clone());
        delegate.did = Some(self.route.peer.did.clone());
        delegate.trust_domain = Some(self.route.peer.trust_domain.clone());
        delegate
    }

    /// The delegation request of the parent in `ctx`: byte-stable across re-runs.
    fn request(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<DelegationRequest, HandlerError> {
        let (delegation_id, child_id) = ids_of(&ctx.tenant, &ctx.action_id);
        let delegated_at = aip_core::Timestamp::from_unix_millis(
            i64::try_from(ctx.admitted_unix_ms).unwrap_or(i64::MAX),
        )
        .ok_or_else(|| failed("the parent's admission time is out of range", false))?;
        let mut chain = ctx.delegation_chain.clone();
        // The tenant and region constraints this parent received travel on (spec 14.3).
        let scope = crate::delegation::hop_scope(chain.last(), &self.route.scope).map_err(|e| {
            HandlerError::Failed {
                code: e.code().as_str().to_owned(),
                message: e.to_string(),
                retryable: false,
            }
        })?;
        chain.push(aip_core::DelegationEntry {
            from: self.me.clone(),
            to: self.delegate(),
            scope: scope.clone(),
            delegated_at,
        });
        let timeout_ms = ctx
            .deadline_unix_ms
            .saturating_sub(ctx.admitted_unix_ms)
            .max(1);
        let mut child = json!({
            "id": child_id, "capability_id": self.route.capability, "input": input, "mode": "async",
            "timeout_ms": timeout_ms, "delegation_chain": chain,
        });
        // The parent's key goes with the child: the peer's collision rules then apply to it too.
        if let Some(key) = &ctx.idempotency_key {
            child["idempotency_key"] = json!(key);
        }
        serde_json::from_value(json!({
            "delegation_id": delegation_id,
            "parent_action_id": ctx.action_id,
            "child_action": child,
            "requested_by": self.me,
            "delegate": self.delegate(),
            "scope": scope,
            "metadata": { "contract_digest": self.route.contract_digest, "wait_ms": FOLLOW_WAIT_MS },
        }))
        .map_err(|e| failed(&format!("the delegation request is malformed: {e}"), false))
    }

    /// Sends one signed envelope carrying `body` to the peer; returns its answer, verified.
    async fn exchange(&self, body: MessageBody, timeout: Duration) -> Result<Answer, String> {
        let mut envelope = Envelope::new(body);
        envelope.from = Some(self.me.clone());
        let signed = aip_core::signing::sign_envelope(&envelope, &self.key)
            .map_err(|e| format!("signing: {e}"))?;
        let bytes = match &self.route.transport {
            PeerTransport::Http(base) => {
                let url = format!("{}/aip/v1/messages", base.trim_end_matches('/'));
                let response = self
                    .client
                    .post(url)
                    .header("content-type", "application/aip+json")
                    .timeout(timeout)
                    .body(signed.to_string())
                    .send()
                    .await
                    .map_err(|e| format!("the peer could not be reached: {e}"))?;
                bounded(response).await?
            }
            PeerTransport::Nats { prefix, requester } => {
                let requester = requester
                    .get()
                    .ok_or_else(|| "NATS is not connected on this node".to_owned())?;
                let subject = format!(
                    "{prefix}.{}",
                    envelope.message_type.as_str().replace('.', "_")
                );
                let bytes = requester
                    .request(subject, signed.to_string().into_bytes(), timeout)
                    .await?;
                if bytes.len() > MAX_ANSWER_BYTES {
                    return Err("the peer's answer is too large".into());
                }
                bytes
            }
        };
        let (decoded, raw) = aip_core::decode_envelope_value(&bytes, &aip_core::Limits::default())
            .map_err(|e| format!("the peer's answer is not an envelope: {e}"))?;
        match decoded.body {
            MessageBody::DelegationResult(result) => {
                // Spec 14.4: only the authenticated child workflow's answer is evidence.
                let signer = aip_core::signing::verify_value(&raw)
                    .map_err(|_| "the peer's delegation result is not signed".to_owned())?;
                if signer.did != self.route.peer.did {
                    return Ok(Answer::Refused(
                        ErrorCode::DelegationPeerUnauthenticated.error(format!(
                            "the delegation result is signed by {}, not by the peer",
                            signer.did
                        )),
                    ));
                }
                Ok(Answer::State(Box::new(result)))
            }
            // A refusal needs no signature to be believed: it can only make the parent fail.
            MessageBody::Error(e) => Ok(Answer::Refused(e.error)),
            MessageBody::Ack(_) => Ok(Answer::Refused(
                ErrorCode::Internal.error("the peer acknowledged without an answer"),
            )),
            other => Err(format!(
                "the peer answered {} to a delegation",
                other.message_type().as_str()
            )),
        }
    }

    /// Asks the peer to cancel the child (spec 14.5); best effort, the following continues.
    async fn cancel_child(&self, child_id: &str) {
        let body = MessageBody::Cancel(aip_core::Cancel {
            target: CancelTarget::Action(aip_core::ActionId::new(child_id)),
            reason: Some("the parent action was cancelled".into()),
        });
        if let Err(e) = self.exchange(body, Duration::from_secs(10)).await {
            tracing::warn!(child = child_id, error = %e, "cancel of a delegated child not sent");
        }
    }
}

#[async_trait]
impl ActionHandler for PeerHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: self.route.modes.clone(),
            cancellable: true,
            // A read re-run re-attaches to the one child the peer admitted (its id is the
            // parent's); a mutation interrupted is reconciled instead (its child may have acted).
            mutation: self.route.mutation,
            transactions: None,
        }
    }

    fn delegation_peer(&self) -> Option<&str> {
        Some(&self.route.peer.name)
    }

    fn delegation_identity(&self) -> Option<Value> {
        Some(json!({ "did": self.route.peer.did, "trust_domain": self.route.peer.trust_domain }))
    }

    async fn follow_child(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<Reconciliation, HandlerError> {
        let mut request = self.request(ctx, input)?;
        request.metadata =
            Some(json!({ "contract_digest": self.route.contract_digest, "wait_ms": 2_000 }));
        let answer = self
            .exchange(
                MessageBody::DelegationRequest(request),
                Duration::from_secs(10),
            )
            .await
            .map_err(|e| failed(&e, true))?;
        match answer {
            Answer::State(result) => Ok(match result.status {
                DelegationStatus::Completed => Reconciliation::Committed {
                    output: result.result.and_then(|r| r.output).unwrap_or(Value::Null),
                },
                DelegationStatus::Failed | DelegationStatus::Cancelled => {
                    Reconciliation::NotCommitted
                }
                _ => Reconciliation::Pending {
                    retry_after_ms: 5_000,
                    cursor: None,
                },
            }),
            Answer::Refused(error) => Err(HandlerError::Failed {
                code: error.code.clone(),
                message: error.message.clone(),
                retryable: true,
            }),
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let request = self.request(ctx, input)?;
        let child_id = request.child_action.id.as_str().to_owned();
        let mut cancel_sent = false;
        let mut backoff = Duration::from_millis(200);
        // Whether a request may have reached the peer: from then on the child may exist there.
        let mut sent = false;
        let mut last_state = None;
        loop {
            let remaining = ctx
                .deadline
                .saturating_duration_since(tokio::time::Instant::now().into_std())
                .saturating_sub(DEADLINE_MARGIN);
            if remaining.is_zero() {
                if !sent {
                    return Err(HandlerError::DeadlineExceeded);
                }
                // Spec 14.5: the child's outcome is unknown here; it is asked to stop, and the
                // parent says so instead of claiming either outcome.
                let _ =
                    tokio::time::timeout(DEADLINE_MARGIN / 2, self.cancel_child(&child_id)).await;
                return Err(HandlerError::UncertainOutcome(format!(
                    "the deadline passed while child {child_id} on {} was {}; a cancel was sent",
                    self.route.peer.name,
                    last_state.map_or("unconfirmed", DelegationStatus::as_str)
                )));
            }
            let timeout = remaining.min(Duration::from_millis(FOLLOW_WAIT_MS + 5_000));
            sent = true;
            // The peer holds the request at most as long as this node waits for its answer.
            let mut this = request.clone();
            let hold = u64::try_from(timeout.saturating_sub(Duration::from_secs(1)).as_millis())
                .unwrap_or(0)
                .min(FOLLOW_WAIT_MS);
            this.metadata =
                Some(json!({ "contract_digest": self.route.contract_digest, "wait_ms": hold }));
            let body = MessageBody::DelegationRequest(this);
            let answer = tokio::select! {
                answer = self.exchange(body, timeout) => answer,
                () = ctx.cancellation.cancelled(), if !cancel_sent => {
                    cancel_sent = true;
                    self.cancel_child(&child_id).await;
                    continue;
                }
            };
            match answer {
                Ok(Answer::State(result)) => {
                    if result.child_action_id.as_str() != child_id
                        || result.delegation_id != request.delegation_id
                    {
                        return Err(failed("the peer answered for another delegation", false));
                    }
                    last_state = Some(result.status);
                    match result.status {
                        DelegationStatus::Completed => {
                            let output =
                                result.result.and_then(|r| r.output).unwrap_or(Value::Null);
                            return Ok(HandlerOutput {
                                output,
                                message: Vec::new(),
                            });
                        }
                        DelegationStatus::Cancelled if cancel_sent => {
                            return Err(HandlerError::Cancelled);
                        }
                        DelegationStatus::Failed | DelegationStatus::Cancelled => {
                            let error = result
                                .result
                                .and_then(|r| r.error)
                                .or(result.error)
                                .unwrap_or_else(|| {
                                    ErrorCode::DelegationChildFailed
                                        .error("the delegated child failed")
                                });
                            return Err(HandlerError::Failed {
                                code: error.code.clone(),
                                message: format!(
                                    "delegated to {}: {}",
                                    self.route.peer.name, error.message
                                ),
                                retryable: error.retryable.unwrap_or(false),
                            });
                        }
                        // Accepted, running, waiting for a human there: follow on.
                        _ => backoff = Duration::from_millis(200),
                    }
                }
                Ok(Answer::Refused(error)) => {
                    return Err(HandlerError::Failed {
                        code: error.code.clone(),
                        message: format!(
                            "{} refused the delegation: {}",
                            self.route.peer.name, error.message
                        ),
                        retryable: error.retryable.unwrap_or(false),
                    });
                }
                // The peer is unreachable or answered nonsense: the request is idempotent (the
                // child's id is fixed), so asking again is safe.
                Err(e) => {
                    tracing::warn!(peer = %self.route.peer.name, error = %e, "delegation exchange failed; retrying");
                    // Never past the time left: the deadline branch above must run before the
                    // runtime cuts the handler off, so the child is cancelled and the parent says
                    // its outcome is unknown.
                    let left = ctx
                        .deadline
                        .saturating_duration_since(tokio::time::Instant::now().into_std())
                        .saturating_sub(DEADLINE_MARGIN);
                    tokio::select! {
                        () = tokio::time::sleep(backoff.min(left)) => {}
                        () = ctx.cancellation.cancelled(), if !cancel_sent => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

fn failed(message: &str, retryable: bool) -> HandlerError {
    HandlerError::Failed {
        code: ErrorCode::DelegationChildFailed.as_str().to_owned(),
        message: message.to_owned(),
        retryable,
    }
}

async fn bounded(response: reqwest::Response) -> Result<Vec<u8>, String> {
    read_bounded(response, MAX_ANSWER_BYTES).await
}

/// The body of `response`, refused (not cut) past `limit` bytes: an answer from another agent is
/// only taken whole.
pub async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if out.len() + chunk.len() > limit {
            return Err(format!("the answer is larger than {limit} bytes"));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
