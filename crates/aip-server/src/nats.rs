//! Native NATS binding, profile `aip.native.nats.v1` (spec 20.4): request/reply on
//! `aip.v1.<trust-domain>.<service>.<service-version>.<message-type>`, one service-wide queue-group
//! subscription per node so several nodes share the load, the `TransportMessage` wrapper (a bare envelope
//! is accepted too) and the standard `AIP-*` headers.
//!
//! Streams (spec 20.4, 11.6): an admitted async or streaming action submitted here is published, chunk by
//! chunk and then its final result, on `<prefix>.stream.<correlation-id>` (the request's `correlation_id`,
//! else the action id; sanitised like every component). The publisher reads the persisted chunks
//! (`Runtime::follow_action`), never the handler, so the stream is complete and ordered whichever node runs
//! the action. Every stream message carries `AIP-Stream-Sequence` (chunk sequence; the final message is one
//! past the last chunk; heartbeats repeat the last one) so a client can detect gaps and duplicates. A
//! client that missed messages sends an `action_status_request` for the action with the header
//! `AIP-Stream-After: <n>`: any node answers with the status and publishes the stream again from chunk
//! `n + 1`.
//!
//! Subject access is transport authorization only (spec 20.4, 22.5): every message is authenticated
//! (a signature by a configured trusted signer, or the principal bound to this node's NATS credentials in
//! configuration) and then served by the same runtime entry point as HTTP, which authorizes it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::time::Duration;

use aip_core::{Envelope, ErrorBody, Heartbeat, MessageBody};
use aip_runtime::{Accept, ActionFollower, Caller, Reply, Runtime, RuntimeError, StreamItem};
use async_nats::HeaderMap;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use crate::auth::AuthIndex;
use crate::config::Config;

/// Profile id of this binding (spec 20.4).
pub const PROFILE: &str = "aip.native.nats.v1";
/// The profiles this binding serves when it is enabled.
pub const PROFILES: &[&str] = &[PROFILE];

/// Standard headers (spec 20.4).
pub const HEADER_VERSION: &str = "AIP-Version";
/// Message type header.
pub const HEADER_MESSAGE_TYPE: &str = "AIP-Message-Type";
/// Message id header.
pub const HEADER_MESSAGE_ID: &str = "AIP-Message-Id";
/// Session id header (when the envelope has one).
pub const HEADER_SESSION_ID: &str = "AIP-Session-Id";
/// Correlation id header (when the envelope has one).
pub const HEADER_CORRELATION_ID: &str = "AIP-Correlation-Id";

/// Stream position of a stream message: the chunk sequence; the final message is one past the last chunk
/// and a heartbeat repeats the last chunk's sequence. Also on a resume reply (the position resumed after).
pub const HEADER_STREAM_SEQUENCE: &str = "AIP-Stream-Sequence";
/// `true` on the last message of a stream (the result, or an error).
pub const HEADER_STREAM_FINAL: &str = "AIP-Stream-Final";
/// The action a stream message belongs to.
pub const HEADER_ACTION_ID: &str = "AIP-Action-Id";
/// On an `action_status_request`: republish the action's stream after this chunk sequence (0 = all).
pub const HEADER_STREAM_AFTER: &str = "AIP-Stream-After";

/// Idle time after which a stream publishes a heartbeat (spec 11.9), as SSE does.
const STREAM_HEARTBEAT: Duration = Duration::from_secs(15);

pub use crate::config::nats::{NatsConfig, sanitize};

/// The request/reply subject of `message_type` under `prefix`.
pub fn subject(prefix: &str, message_type: &str) -> String {
    format!("{prefix}.{}", sanitize(message_type))
}

/// The stream subject of `correlation_id` under `prefix`; `None` when the sanitised id is no single
/// literal subject token (empty, a wildcard or a control character).
pub fn stream_subject(prefix: &str, correlation_id: &str) -> Option<String> {
    let token = sanitize(correlation_id);
    if token.is_empty() || token.contains(['*', '>']) || token.chars().any(char::is_control) {
        return None;
    }
    Some(format!("{prefix}.stream.{token}"))
}

/// Why the binding could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// A secret file could not be read.
    #[error("nats: {path}: {source}")]
    Secret {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A secret file is readable by group or others, or empty.
    #[error("nats: {0} must be a non-empty file not readable by group or others (chmod 600)")]
    SecretPermissions(PathBuf),
    /// `nats.principal` names no configured principal.
    #[error("nats: principal {0} is not configured")]
    UnknownPrincipal(String),
    /// Connecting failed.
    #[error("nats: cannot connect: {0}")]
    Connect(String),
    /// Subscribing failed.
    #[error("nats: cannot subscribe: {0}")]
    Subscribe(String),
}

/// A running binding: dropping it stops serving; [`NatsBinding::finish`] waits for its drain.
pub struct NatsBinding {
    task: Option<tokio::task::JoinHandle<()>>,
    /// The service-wide subject this node serves (`<prefix>.>`).
    pub subscription: String,
}

impl NatsBinding {
    /// Waits (at most [`DRAIN_TIMEOUT`] and a second) until the binding, which drains its
    /// subscription once the server shuts down, has answered every request it took.
    pub async fn finish(mut self) {
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(DRAIN_TIMEOUT + Duration::from_secs(1), task).await;
        }
    }
}

impl Drop for NatsBinding {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The longest the binding waits, once its subscription is drained, for the requests it took to be
/// answered before the connection is flushed.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `subscriber` with at most `max_in_flight` requests at once. A request past the bound is
/// answered at once with the typed retryable `aip.runtime.overloaded` (spec 22.8), never queued
/// without bound in the client. Once the server shuts down (the drain is over), the subscription
/// is drained (spec 20.4: the server routes no more requests here, the queue group's other members
/// take them), the requests already delivered are answered, and the connection is flushed.
async fn serve_subscription(
    mut subscriber: async_nats::Subscriber,
    service: Arc<Service>,
    max_in_flight: usize,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(max_in_flight));
    let mut draining = false;
    let mut answered_after_drain = 0u64;
    loop {
        let message = if draining {
            subscriber.next().await
        } else {
            tokio::select! {
                message = subscriber.next() => message,
                () = crate::http::shutting_down() => {
                    draining = true;
                    if let Err(err) = subscriber.drain().await {
                        tracing::warn!(error = %err, "NATS subscription could not be drained");
                        break;
                    }
                    continue;
                }
            }
        };
        let Some(message) = message else { break };
        answered_after_drain += u64::from(draining);
        match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => {
                let service = Arc::clone(&service);
                tokio::spawn(async move {
                    service.serve(message).await;
                    drop(permit);
                });
            }
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                metrics::counter!("aip_nats_overloaded_total").increment(1);
                service.refuse_overloaded(&message, max_in_flight).await;
            }
            Err(tokio::sync::TryAcquireError::Closed) => break,
        }
    }
    // Every request taken is answered (bounded) before the connection is flushed.
    let all = u32::try_from(max_in_flight).unwrap_or(u32::MAX);
    let settled = tokio::time::timeout(DRAIN_TIMEOUT, permits.acquire_many(all))
        .await
        .is_ok();
    let flushed = service.client.flush().await.is_ok();
    tracing::info!(
        answered_after_drain,
        settled,
        flushed,
        "NATS subscription drained"
    );
    println!(
        "aip serve: NATS subscription drained: {answered_after_drain} request(s) delivered after the drain answered; {}",
        if settled && flushed {
            "every reply sent"
        } else {
            "some replies may be missing (timed out)"
        }
    );
}

/// Connect with the configured options and serve `<prefix>.>` in the configured queue group.
pub async fn start(
    config: &Config,
    auth: Arc<AuthIndex>,
    runtime: Arc<Runtime>,
    peers: &aip_runtime::handler::peer::RequesterSlot,
) -> Result<Option<NatsBinding>, NatsError> {
    let nats = &config.nats;
    let Some(url) = nats.url.as_deref() else {
        return Ok(None);
    };
    let bound = match &nats.principal {
        Some(id) => Some(
            auth.principal(id)
                .cloned()
                .ok_or_else(|| NatsError::UnknownPrincipal(id.clone()))?,
        ),
        None => None,
    };
    let signers = config
        .security
        .trusted_signers
        .iter()
        .map(|s| (s.did.clone(), s.principal.clone()))
        .chain(
            config
                .peers
                .iter()
                .map(|p| (p.did.clone(), p.principal_id())),
        )
        .collect();
    let options = connect_options(nats).await?;
    let client = options
        .connect(url)
        .await
        .map_err(|e| NatsError::Connect(e.to_string()))?;
    // Callback deliveries to subjects (spec 17) go out on this connection.
    runtime.set_callback_publisher(Arc::new(crate::callbacks::NatsPublisher::new(
        client.clone(),
    )));
    // Delegations to peers over NATS (spec 14, 20.4) too.
    let _already = peers.set(Arc::new(PeerRequests(client.clone())));
    let prefix = nats.subject_prefix();
    let subscription = format!("{prefix}.>");
    let subscriber = client
        .queue_subscribe(subscription.clone(), nats.queue_group.clone())
        .await
        .map_err(|e| NatsError::Subscribe(e.to_string()))?;
    // A round trip to the server: once it returns, the subscription is registered there, so a
    // request sent after startup is reported can never meet "no responders".
    client
        .flush()
        .await
        .map_err(|e| NatsError::Subscribe(e.to_string()))?;
    let service = Arc::new(Service {
        client,
        runtime,
        auth,
        bound,
        signers,
        prefix,
    });
    let max_in_flight = nats.max_in_flight;
    let task = tokio::spawn(serve_subscription(subscriber, service, max_in_flight));
    Ok(Some(NatsBinding {
        task: Some(task),
        subscription,
    }))
}

struct Service {
    client: async_nats::Client,
    runtime: Arc<Runtime>,
    auth: Arc<AuthIndex>,
    bound: Option<Caller>,
    signers: HashMap<String, String>,
    prefix: String,
}

/// An action stream to publish after the reply.
struct Follow {
    caller: Caller,
    action_id: String,
    subject: String,
    correlation_id: Option<aip_core::CorrelationId>,
    /// Set for a resume (created before the reply so that a bad position is refused in it).
    follower: Option<ActionFollower>,
}

/// How the request arrived, so the reply uses the same form.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Wrapped,
    Bare,
}

impl Service {
    /// Answers `message` with the typed overload refusal (its request is decoded only to name it
    /// and to answer in its form; nothing else is done).
    async fn refuse_overloaded(&self, message: &async_nats::Message, limit: usize) {
        let Some(reply_to) = message.reply.clone() else {
            return;
        };
        let err = RuntimeError::Overloaded {
            limit: u32::try_from(limit).unwrap_or(u32::MAX),
        };
        let (form, decoded) =
            decode_request(message.payload.as_ref(), self.runtime.decode_limits());
        let reply = match &decoded {
            Ok((envelope, _)) => Reply::error(Some(envelope), &err),
            Err(_) => Reply::error(None, &err),
        };
        let (headers, payload) = encode_reply(&reply, form);
        if let Err(err) = self
            .client
            .publish_with_headers(reply_to, headers, payload.into())
            .await
        {
            tracing::warn!(error = %err, "NATS overload refusal could not be published");
        }
    }

    async fn serve(self: Arc<Self>, message: async_nats::Message) {
        // Stream messages published by nodes carry no reply subject: they are not requests.
        let Some(reply_to) = message.reply.clone() else {
            tracing::debug!(subject = %message.subject, "NATS message without a reply subject ignored");
            return;
        };
        let (form, reply, follow) = self.answer(&message).await;
        let (mut headers, payload) = encode_reply(&reply, form);
        if let Some(Follow {
            follower: Some(f), ..
        }) = &follow
        {
            headers.insert(HEADER_STREAM_SEQUENCE, f.position().to_string().as_str());
        }
        if let Err(err) = self
            .client
            .publish_with_headers(reply_to, headers, payload.into())
            .await
        {
            tracing::warn!(error = %err, "NATS reply could not be published");
        }
        if let Some(follow) = follow {
            tokio::spawn(self.publish_stream(follow));
        }
    }

    async fn answer(&self, message: &async_nats::Message) -> (Form, Reply, Option<Follow>) {
        let limits = self.runtime.decode_limits();
        let (form, decoded) = decode_request(message.payload.as_ref(), limits);
        let (envelope, raw) = match decoded {
            Ok(decoded) => decoded,
            Err(err) => {
                let raw = readable_request(message.payload.as_ref(), limits, &err);
                return (form, Reply::undecodable(raw.as_ref(), err), None);
            }
        };
        let refuse = |err: RuntimeError| (form, Reply::error(Some(&envelope), &err), None);
        let suffix = message
            .subject
            .as_str()
            .strip_prefix(&self.prefix)
            .and_then(|s| s.strip_prefix('.'))
            .unwrap_or_default();
        if suffix != sanitize(envelope.message_type.as_str()) {
            return refuse(RuntimeError::UnsupportedMessage(format!(
                "subject names {suffix:?} but the envelope is {}",
                envelope.message_type.as_str()
            )));
        }
        let Some(caller) = self.caller(&raw) else {
            return refuse(RuntimeError::Signature(
                "unsigned NATS messages are refused: no principal is bound to this connection",
            ));
        };
        let mut reply = self
            .runtime
            .handle_decoded(&caller, &envelope, &raw, Accept::AnyMessage)
            .await;
        crate::links::add(&mut reply.envelope.body);
        let resume_after = message
            .headers
            .as_ref()
            .and_then(|h| h.get(HEADER_STREAM_AFTER));
        let follow = match (&reply.envelope.body, resume_after) {
            (MessageBody::Ack(ack), _) => {
                let action_id = ack.action_id.as_str().to_owned();
                let correlation = envelope.correlation_id.clone();
                self.follow(caller, action_id, correlation)
            }
            (MessageBody::ActionStatus(status), Some(after)) => {
                let Ok(after) = after.as_str().trim().parse::<u64>() else {
                    return refuse(RuntimeError::InvalidCursor);
                };
                let action_id = status.action_id.as_str().to_owned();
                let Some(mut follow) =
                    self.follow(caller, action_id, status.correlation_id.clone())
                else {
                    return refuse(RuntimeError::InvalidCursor);
                };
                match self
                    .runtime
                    .follow_action(&follow.caller, &follow.action_id, after, STREAM_HEARTBEAT)
                    .await
                {
                    Ok(follower) => follow.follower = Some(follower),
                    Err(err) => return refuse(err),
                }
                Some(follow)
            }
            _ => None,
        };
        (form, reply, follow)
    }

    /// The stream of `action_id`, named by its correlation id (else its id); `None` when that id makes no
    /// literal subject token.
    fn follow(
        &self,
        caller: Caller,
        action_id: String,
        correlation_id: Option<aip_core::CorrelationId>,
    ) -> Option<Follow> {
        let name = correlation_id
            .as_ref()
            .map_or(action_id.as_str(), |c| c.as_str());
        let Some(subject) = stream_subject(&self.prefix, name) else {
            tracing::warn!(action = %action_id, "correlation id makes no NATS subject token; not streamed");
            return None;
        };
        Some(Follow {
            caller,
            action_id,
            subject,
            correlation_id,
            follower: None,
        })
    }

    /// Publishes the action's persisted chunks, then its result (or an error), in store order.
    async fn publish_stream(self: Arc<Self>, follow: Follow) {
        let Follow {
            caller,
            action_id,
            subject,
            correlation_id,
            follower,
        } = follow;
        let mut follower = match follower {
            Some(f) => f,
            None => match self
                .runtime
                .follow_action(&caller, &action_id, 0, STREAM_HEARTBEAT)
                .await
            {
                Ok(f) => f,
                Err(err) => {
                    let body = MessageBody::Error(ErrorBody {
                        error: err.to_protocol_error(),
                    });
                    self.publish_item(&subject, &action_id, &correlation_id, body, 1, true)
                        .await;
                    return;
                }
            },
        };
        let mut beat = 0_u64;
        loop {
            let (body, sequence, last) = match follower.next().await {
                Ok(Some(StreamItem::Chunk(chunk))) => {
                    let sequence = chunk.sequence;
                    (MessageBody::StreamChunk(chunk), sequence, false)
                }
                Ok(Some(StreamItem::Result(result))) => (
                    MessageBody::ActionResult(*result),
                    follower.position() + 1,
                    true,
                ),
                Ok(Some(StreamItem::Idle)) => {
                    beat += 1;
                    let heartbeat = Heartbeat {
                        sequence: beat,
                        status: Some("streaming".into()),
                        progress: None,
                    };
                    (
                        MessageBody::Heartbeat(heartbeat),
                        follower.position(),
                        false,
                    )
                }
                Ok(Some(_)) => continue,
                Ok(None) => return,
                Err(err) => (
                    MessageBody::Error(ErrorBody {
                        error: err.to_protocol_error(),
                    }),
                    follower.position() + 1,
                    true,
                ),
            };
            if !self
                .publish_item(&subject, &action_id, &correlation_id, body, sequence, last)
                .await
                || last
            {
                return;
            }
        }
    }

    /// One stream message; `false` when the connection is gone.
    async fn publish_item(
        &self,
        subject: &str,
        action_id: &str,
        correlation_id: &Option<aip_core::CorrelationId>,
        body: MessageBody,
        sequence: u64,
        last: bool,
    ) -> bool {
        let mut envelope = Envelope::new(body);
        // Spec 6.2: chunks and the result of one action share its correlation id.
        envelope.correlation_id.clone_from(correlation_id);
        let mut headers = envelope_headers(&envelope);
        headers.insert(HEADER_ACTION_ID, action_id);
        headers.insert(HEADER_STREAM_SEQUENCE, sequence.to_string().as_str());
        if last {
            headers.insert(HEADER_STREAM_FINAL, "true");
        }
        let payload = json!({ "envelope": envelope.to_value() }).to_string();
        match self
            .client
            .publish_with_headers(subject.to_owned(), headers, payload.into())
            .await
        {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(error = %err, action = %action_id, "NATS stream message not published");
                false
            }
        }
    }

    /// The principal a message acts as: the trusted signer's principal when the envelope names one
    /// (the runtime then verifies the signature and the binding), else the connection's bound principal.
    fn caller(&self, raw: &Value) -> Option<Caller> {
        let signer = raw
            .pointer("/security/did")
            .and_then(Value::as_str)
            .and_then(|did| self.signers.get(did))
            .and_then(|principal| self.auth.principal(principal));
        match signer {
            Some(caller) => Some(caller.clone()),
            None => self.bound.clone(),
        }
    }
}

/// Decodes a request payload, parsing it once: a bare envelope, or a `TransportMessage`
/// (`{"envelope": {...}, "metadata"?: {...}}`) whose envelope is bounded as if it had been sent alone.
/// Errors are exactly those of [`aip_core::decode_envelope_value`] on the envelope's bytes.
fn decode_request(
    payload: &[u8],
    limits: &aip_core::Limits,
) -> (Form, Result<(Envelope, Value), aip_core::DecodeError>) {
    // Bound before parsing anything (spec 20: size policy is a binding responsibility): the
    // decoder's own size check names the error.
    if payload.len() > limits.max_bytes {
        return (Form::Bare, aip_core::decode_envelope_value(payload, limits));
    }
    let Ok(value) = serde_json::from_slice::<Value>(payload) else {
        // Not JSON: the decoder names the failure (a limit, or malformed JSON).
        return (Form::Bare, aip_core::decode_envelope_value(payload, limits));
    };
    match transport_envelope(value) {
        Ok(envelope) => {
            // Serializing a `Value` cannot fail (its map keys are strings).
            let bytes = serde_json::to_vec(&envelope).unwrap_or_default();
            let decoded = limits
                .prescan(&bytes)
                .and_then(|()| aip_core::envelope_from_value(&envelope))
                .map(|e| (e, envelope));
            (Form::Wrapped, decoded)
        }
        Err(value) => {
            let decoded = limits
                .prescan(payload)
                .and_then(|()| aip_core::envelope_from_value(&value))
                .map(|e| (e, value));
            (Form::Bare, decoded)
        }
    }
}

/// The envelope of a `TransportMessage`, or the value back when it is not one.
/// The envelope JSON of a request that failed to decode past the size and depth bounds (so that
/// the error can name the request it answers); `None` otherwise.
fn readable_request(
    payload: &[u8],
    limits: &aip_core::Limits,
    err: &aip_core::DecodeError,
) -> Option<Value> {
    use aip_core::DecodeError;
    if matches!(
        err,
        DecodeError::Limit { .. } | DecodeError::MalformedJson { .. }
    ) || payload.len() > limits.max_bytes
    {
        return None;
    }
    let value = serde_json::from_slice::<Value>(payload).ok()?;
    Some(transport_envelope(value).unwrap_or_else(|bare| bare))
}

fn transport_envelope(value: Value) -> Result<Value, Value> {
    let is_transport = value.as_object().is_some_and(|object| {
        !object.contains_key("aip_version")
            && object.contains_key("envelope")
            && object.keys().all(|k| k == "envelope" || k == "metadata")
    });
    if !is_transport {
        return Err(value);
    }
    match value {
        Value::Object(mut object) => object.remove("envelope").ok_or(Value::Object(object)),
        other => Err(other),
    }
}

/// Reply headers (spec 20.4) and payload in the request's form.
fn encode_reply(reply: &Reply, form: Form) -> (HeaderMap, Vec<u8>) {
    let envelope = &reply.envelope;
    let headers = envelope_headers(envelope);
    let value = envelope.to_value();
    let body = match form {
        Form::Wrapped => json!({ "envelope": value }),
        Form::Bare => value,
    };
    (headers, body.to_string().into_bytes())
}

/// The standard headers of `envelope` (spec 20.4).
fn envelope_headers(envelope: &Envelope) -> HeaderMap {
    let mut headers = HeaderMap::new();
    // The only version of this runtime (spec 6.1); the envelope type admits no other.
    headers.insert(HEADER_VERSION, "1.0");
    headers.insert(HEADER_MESSAGE_TYPE, envelope.message_type.as_str());
    headers.insert(HEADER_MESSAGE_ID, envelope.message_id.as_str());
    if let Some(session) = &envelope.session_id {
        headers.insert(HEADER_SESSION_ID, session.as_str());
    }
    if let Some(correlation) = &envelope.correlation_id {
        headers.insert(HEADER_CORRELATION_ID, correlation.as_str());
    }
    headers
}

async fn connect_options(nats: &NatsConfig) -> Result<async_nats::ConnectOptions, NatsError> {
    let mut options = async_nats::ConnectOptions::new()
        .name("aip serve")
        .require_tls(nats.tls_required);
    if let (Some(user), Some(file)) = (&nats.user, &nats.password_file) {
        options = options.user_and_password(user.clone(), read_secret(file)?);
    }
    if let Some(file) = &nats.token_file {
        options = options.token(read_secret(file)?);
    }
    if let Some(file) = &nats.nkey_seed_file {
        options = options.nkey(read_secret(file)?);
    }
    if let Some(file) = &nats.credentials_file {
        let creds = read_secret_file(file)?;
        options = options
            .credentials(&creds)
            .map_err(|source| NatsError::Secret {
                path: file.clone(),
                source,
            })?;
    }
    if let Some(ca) = &nats.tls_ca_file {
        options = options.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&nats.tls_client_cert_file, &nats.tls_client_key_file) {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    Ok(options)
}

/// A secret from a file that only its owner can read, trimmed.
fn read_secret(path: &Path) -> Result<String, NatsError> {
    Ok(read_secret_file(path)?.trim().to_owned())
}

/// The whole text of a secret file that only its owner can read. A `.creds` file is kept as written:
/// its decorated blocks must each end with a line break to parse (one is added when the file lacks
/// a final one).
fn read_secret_file(path: &Path) -> Result<String, NatsError> {
    use std::os::unix::fs::PermissionsExt as _;
    let io = |source| NatsError::Secret {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(NatsError::SecretPermissions(path.to_path_buf()));
    }
    let mut text = std::fs::read_to_string(path).map_err(io)?;
    if text.trim().is_empty() {
        return Err(NatsError::SecretPermissions(path.to_path_buf()));
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// Requests to peers over this node's connection (delegations, spec 14): the signed envelope as a
/// bare payload with the version header; the reply's payload is the peer's envelope.
struct PeerRequests(async_nats::Client);

#[async_trait::async_trait]
impl aip_runtime::handler::peer::PeerRequester for PeerRequests {
    async fn request(
        &self,
        subject: String,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, String> {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_VERSION, "1.0");
        let request = self.0.request_with_headers(subject, headers, body.into());
        match tokio::time::timeout(timeout, request).await {
            Err(_) => Err("the peer did not answer in time".into()),
            Ok(Err(e)) => Err(format!("NATS request failed: {e}")),
            Ok(Ok(reply)) => Ok(reply.payload.to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn subject_components_replace_dots_spaces_and_slashes_with_underscores() {
        let config = NatsConfig {
            trust_domain: "example.com".into(),
            service: "gate way/x\\y".into(),
            ..NatsConfig::default()
        };
        assert_eq!(
            config.subject_prefix(),
            "aip.v1.example_com.gate_way_x_y.v1"
        );
        assert_eq!(
            subject("aip.v1.example_com.gateway.v1", "aip.core.v1.action"),
            "aip.v1.example_com.gateway.v1.aip_core_v1_action"
        );
        assert_eq!(
            NatsConfig::default().subject_prefix(),
            "aip.v1.local.aip.v1"
        );
    }

    #[test]
    fn wildcards_in_subject_components_and_two_auth_methods_are_refused() {
        let wild = NatsConfig {
            service: "*".into(),
            ..NatsConfig::default()
        };
        assert!(wild.check().is_err());
        let two = NatsConfig {
            token_file: Some("/t".into()),
            nkey_seed_file: Some("/n".into()),
            ..NatsConfig::default()
        };
        assert!(two.check().is_err());
        assert!(NatsConfig::default().check().is_ok());
    }

    #[test]
    fn a_transport_message_is_unwrapped_and_a_bare_envelope_is_not() {
        let unwrap = |raw: &str| transport_envelope(serde_json::from_str(raw).unwrap());
        let wrapped = unwrap(r#"{"envelope":{"aip_version":"1.0"},"metadata":{"k":"v"}}"#);
        assert_eq!(wrapped, Ok(json!({ "aip_version": "1.0" })));
        assert!(unwrap(r#"{"aip_version":"1.0","envelope":{}}"#).is_err());
        assert!(unwrap(r#"{"envelope":{},"extra":1}"#).is_err());
        assert!(unwrap(r#"{"metadata":{}}"#).is_err());
    }

    #[test]
    fn a_request_decodes_like_the_envelope_alone_in_either_form() {
        let limits = aip_core::Limits::default();
        let envelope = json!({
            "aip_version": "1.0",
            "message_type": "aip.core.v1.heartbeat",
            "message_id": "msg_1",
            "sent_at": "2026-01-01T00:00:00Z",
            "body": { "heartbeat": { "sequence": 1, "status": "alive" } }
        });
        let bare = serde_json::to_vec(&envelope).unwrap();
        let wrapped = serde_json::to_vec(&json!({ "envelope": envelope })).unwrap();
        for (payload, expected) in [(&bare, Form::Bare), (&wrapped, Form::Wrapped)] {
            let (form, decoded) = decode_request(payload, &limits);
            assert!(form == expected);
            let reference = aip_core::decode_envelope_value(&bare, &limits);
            match (decoded, reference) {
                (Ok((a, raw)), Ok((b, _))) => {
                    assert_eq!(a.message_id, b.message_id);
                    assert_eq!(raw, envelope);
                }
                (a, b) => panic!("{a:?} vs {b:?}"),
            }
        }
        // Every failure is the decoder's own error for the same bytes.
        let tight = aip_core::Limits {
            max_bytes: 64,
            ..aip_core::Limits::default()
        };
        for payload in [&b"not json"[..], &b"{\"aip_version\":1}"[..], &bare[..]] {
            let (_, decoded) = decode_request(payload, &tight);
            let reference = aip_core::decode_envelope_value(payload, &tight);
            assert_eq!(
                decoded.map(|_| ()).unwrap_err().to_string(),
                reference.map(|_| ()).unwrap_err().to_string()
            );
        }
        // A wrapped envelope is bounded as if sent alone.
        let (_, decoded) = decode_request(&wrapped, &tight);
        let alone = aip_core::decode_envelope_value(&bare, &tight);
        assert_eq!(
            decoded.map(|_| ()).unwrap_err().to_string(),
            alone.map(|_| ()).unwrap_err().to_string()
        );
    }
}
