//! Streamable HTTP (MCP 2025-03-26 and later, spec 21.1): the checks run cheapest first, nothing is
//! parsed before it is allowed (notes 6.1): body size (413), Accept and Content-Type (406/415),
//! `MCP-Protocol-Version` (400), session id (400/404), then the JSON-RPC message.
// A refusal is the handler's finished HTTP answer, returned early; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use aip_runtime::{Caller, RuntimeError};
use aip_store::SessionState;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::rpc::{self, Message};
use super::tools::{self, Call, Outgoing, Progress};
use super::{McpState, Version};
use crate::http::AppState;

/// Header carrying the session id.
const SESSION_HEADER: &str = "mcp-session-id";
/// Header carrying the negotiated version on every request after `initialize`.
const VERSION_HEADER: &str = "mcp-protocol-version";
/// Most messages in one batch (2025-03-26 only).
const MAX_BATCH: usize = 64;
/// Progress notifications queued for one response stream before the call waits for the reader.
const PROGRESS_QUEUE: usize = 64;
/// Longest client name or version kept from `clientInfo`.
const MAX_CLIENT_INFO: usize = 128;

/// `POST /mcp`: one JSON-RPC message (a batch at 2025-03-26).
pub async fn post(
    State(app): State<AppState>,
    Extension(mcp): Extension<Arc<McpState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return body_refused(&rejection),
    };
    if !accepts(&headers, &["application/json", "text/event-stream"]) {
        return http_error(
            StatusCode::NOT_ACCEPTABLE,
            rpc::INVALID_REQUEST,
            "Accept must list application/json and text/event-stream",
        );
    }
    if let Err(refused) = require_json(&headers) {
        return refused;
    }
    let header_version = match header_version(&headers) {
        Ok(v) => v,
        Err(response) => return response,
    };
    let decoded = match rpc::decode(&body) {
        Ok(decoded) => decoded,
        Err(refused) => return undecodable(refused),
    };
    let session_id = headers
        .get(SESSION_HEADER)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let endpoint = Endpoint {
        app: &app,
        mcp: &mcp,
        caller: &caller,
    };
    let message = match decoded {
        rpc::Body::Batch(batch) => return endpoint.batch(batch, session_id, header_version).await,
        rpc::Body::Single(message) => message,
    };
    match (&message, session_id) {
        (Message::Request { id, method, params }, None) if method == "initialize" => {
            endpoint.initialize(id, params).await
        }
        (Message::Request { id, method, .. }, _) if method == "server/discover" => discover(id),
        (Message::Request { id, method, .. }, Some(_)) if method == "initialize" => http_json(
            StatusCode::BAD_REQUEST,
            rpc::error(
                id,
                rpc::INVALID_REQUEST,
                "initialize opens a session: send it without Mcp-Session-Id",
                None,
            ),
        ),
        (_, session_id) => {
            let session = match endpoint
                .streamable_session(
                    session_id,
                    header_version,
                    "Mcp-Session-Id is required after initialize",
                )
                .await
            {
                Ok(session) => session,
                Err(response) => return response,
            };
            let followed = mcp.log_levels.get(&session.id).is_some() || session.answers.any();
            if wants_stream(&message, followed) {
                return progress_stream(
                    app.clone(),
                    Arc::clone(&mcp),
                    caller.clone(),
                    session,
                    message,
                );
            }
            match endpoint.one(&session, message).await {
                Some(reply) => http_json(StatusCode::OK, reply),
                None => StatusCode::ACCEPTED.into_response(),
            }
        }
    }
}

/// `GET /mcp`: with `Last-Event-ID`, resumes a call's response stream of the caller's session;
/// without, opens the session's standalone server-to-client stream (`standalone.rs`: bounded per
/// session, carrying resource update notifications until the session ends, the server shuts down
/// or the client goes away).
pub async fn get(
    State(app): State<AppState>,
    Extension(mcp): Extension<Arc<McpState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    let last = headers.get("last-event-id");
    if !accepts(&headers, &["text/event-stream"]) {
        return http_error(
            StatusCode::NOT_ACCEPTABLE,
            rpc::INVALID_REQUEST,
            "Accept must admit text/event-stream",
        );
    }
    let header_version = match header_version(&headers) {
        Ok(v) => v,
        Err(response) => return response,
    };
    let session_id = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
    let endpoint = Endpoint {
        app: &app,
        mcp: &mcp,
        caller: &caller,
    };
    let session = match endpoint
        .streamable_session(session_id, header_version, "Mcp-Session-Id is required")
        .await
    {
        Ok(session) => session,
        Err(response) => return response,
    };
    let Some(last) = last else {
        return super::standalone::open(&endpoint, &mcp, session);
    };
    let Ok(last) = last.to_str() else {
        return http_error(
            StatusCode::BAD_REQUEST,
            rpc::INVALID_REQUEST,
            "Last-Event-ID is not text",
        );
    };
    resume(endpoint, session, last).await
}

/// Whether a session in `state` is over (its id answers 404).
pub(super) fn ended(state: SessionState) -> bool {
    matches!(
        state,
        SessionState::Cancelled
            | SessionState::Settled
            | SessionState::Failed
            | SessionState::Completed
    )
}

/// `DELETE /mcp`: ends the session; admitted actions run on (spec 20.1: losing a connection or a
/// session never cancels admitted work).
pub async fn delete(
    State(app): State<AppState>,
    Extension(mcp): Extension<Arc<McpState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    let session_id = headers
        .get(SESSION_HEADER)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let endpoint = Endpoint {
        app: &app,
        mcp: &mcp,
        caller: &caller,
    };
    let session_id = match endpoint
        .streamable_session(session_id, None, "Mcp-Session-Id is required")
        .await
    {
        Ok(session) => session.id,
        Err(response) => return response,
    };
    match app
        .runtime
        .close_session(&caller, &session_id, Some("MCP session deleted"))
        .await
    {
        Ok(_) => {
            mcp.subscriptions.forget(&session_id);
            mcp.log_levels.remove(&session_id);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(RuntimeError::NotFound(_) | RuntimeError::SessionState(_)) => session_not_found(),
        Err(err) => http_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            rpc::INTERNAL_ERROR,
            &err.to_string(),
        ),
    }
}

/// A session resolved for a request: its id and negotiated version.
pub(super) struct Session {
    pub(super) id: String,
    pub(super) version: Version,
    pub(super) initialized: bool,
    /// Opened by the legacy SSE binding (its messages come only through that binding).
    pub(super) legacy: bool,
    /// The server-to-client requests its client answers (as negotiated).
    pub(super) answers: super::relay::Answers,
    /// The runtime's check of the session as this request read it, handed to admission.
    pub(super) checked: aip_runtime::SessionCheck,
}

/// One request's view of the profile: who calls, through which server.
pub(super) struct Endpoint<'a> {
    pub(super) app: &'a AppState,
    pub(super) mcp: &'a Arc<McpState>,
    pub(super) caller: &'a Caller,
}

impl Endpoint<'_> {
    /// `initialize`: negotiate (the client's version when supported, else the latest, spec 23.3)
    /// and open a session owned by the caller.
    async fn initialize(&self, id: &Value, params: &Map<String, Value>) -> Response {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let version = requested
            .and_then(Version::parse)
            .unwrap_or(Version::LATEST);
        let client = params.get("clientInfo").and_then(Value::as_object);
        let info = |k: &str| {
            client
                .and_then(|c| c.get(k))
                .and_then(Value::as_str)
                .map(|s| s.chars().take(MAX_CLIENT_INFO).collect::<String>())
        };
        let declared = |k: &str| {
            params
                .get("capabilities")
                .and_then(|c| c.get(k))
                .is_some_and(Value::is_object)
        };
        let data = json!({
            "protocol_version": version.as_str(),
            "client": { "name": info("name"), "version": info("version") },
            "answers": { "sampling": declared("sampling"), "elicitation": declared("elicitation") },
        });
        let session = match self
            .app
            .runtime
            .open_profile_session(self.caller, super::PROFILE, data)
            .await
        {
            Ok(session) => session,
            Err(err) => {
                return http_json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    rpc::error(id, rpc::INTERNAL_ERROR, &err.to_string(), None),
                );
            }
        };
        // Subscriptions are delivered on the standalone stream, which the legacy binding lacks.
        let result = init_result(version, !self.mcp.prompts.is_empty(), true);
        let mut response = http_json(StatusCode::OK, rpc::result(id, result));
        if let Ok(value) = HeaderValue::from_str(&session.session_id) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
        response
    }

    /// The caller's own open Streamable HTTP session named by `id`: 400 with `missing` when the
    /// request names none, 404 for a legacy session (its messages go through its own binding).
    async fn streamable_session(
        &self,
        id: Option<&str>,
        header: Option<Version>,
        missing: &str,
    ) -> Result<Session, Response> {
        let Some(id) = id else {
            return Err(http_error(
                StatusCode::BAD_REQUEST,
                rpc::INVALID_REQUEST,
                missing,
            ));
        };
        match self.session(id, header).await {
            Ok(session) if !session.legacy => Ok(session),
            Ok(_) => Err(session_not_found()),
            Err(response) => Err(response),
        }
    }

    /// The caller's own open session, checked against the version header (400 on a mismatch).
    pub(super) async fn session(
        &self,
        session_id: &str,
        header: Option<Version>,
    ) -> Result<Session, Response> {
        let (record, checked) = match self
            .app
            .runtime
            .checked_session(self.caller, session_id)
            .await
        {
            Ok(found) => found,
            Err(RuntimeError::NotFound(_)) => return Err(session_not_found()),
            Err(err) => {
                return Err(http_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    rpc::INTERNAL_ERROR,
                    &err.to_string(),
                ));
            }
        };
        let data = record.data.get("profile_data");
        let version = data
            .and_then(|d| d.get("protocol_version"))
            .and_then(Value::as_str)
            .and_then(Version::parse);
        let is_mcp = record
            .data
            .get("profiles")
            .and_then(Value::as_array)
            .is_some_and(|p| p.iter().any(|p| p == super::PROFILE));
        let (Some(version), true) = (version, is_mcp) else {
            // A native session is not an MCP session.
            return Err(session_not_found());
        };
        if ended(record.state) {
            return Err(session_not_found());
        }
        if header.is_some_and(|h| h != version) {
            return Err(http_error(
                StatusCode::BAD_REQUEST,
                rpc::INVALID_REQUEST,
                &format!(
                    "MCP-Protocol-Version differs from the negotiated {}",
                    version.as_str()
                ),
            ));
        }
        let legacy = data
            .and_then(|d| d.get("transport"))
            .is_some_and(|t| t == "legacy-sse");
        let declared = |k: &str| {
            data.and_then(|d| d.pointer(&format!("/answers/{k}")))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let answers = super::relay::Answers {
            sampling: declared("sampling"),
            // Never sent below 2025-06-18 (notes 5, item 4).
            elicitation: declared("elicitation") && version >= Version::V2025_06_18,
        };
        Ok(Session {
            id: record.session_id,
            version,
            initialized: record.state != SessionState::New,
            legacy,
            answers,
            checked,
        })
    }

    /// One message of a session: a reply for a request, nothing for a notification or response.
    pub(super) async fn one(&self, session: &Session, message: Message) -> Option<Value> {
        self.one_with_progress(session, message, None).await
    }

    /// [`Endpoint::one`], sending a tool call's `notifications/progress` to `progress` when the
    /// call asked for them (`_meta.progressToken`).
    pub(super) async fn one_with_progress(
        &self,
        session: &Session,
        message: Message,
        progress: Option<Progress>,
    ) -> Option<Value> {
        match message {
            Message::Request { id, method, params } => {
                Some(self.request(session, &id, &method, &params, progress).await)
            }
            Message::Notification { method, params } => {
                self.notification(session, &method, &params).await;
                None
            }
            Message::Response { id, outcome } => {
                self.mcp.relay.answer(&session.id, &id, outcome);
                None
            }
        }
    }

    async fn request(
        &self,
        session: &Session,
        id: &Value,
        method: &str,
        params: &Map<String, Value>,
        progress: Option<Progress>,
    ) -> Value {
        if method == "ping" {
            return rpc::result(id, json!({}));
        }
        if !session.initialized {
            return rpc::error(
                id,
                rpc::INVALID_REQUEST,
                "the session is not initialized: send notifications/initialized first",
                None,
            );
        }
        match method {
            "tools/list" => self.tools_list(session, id, params),
            "tools/call" => {
                let facade = params
                    .get("name")
                    .and_then(Value::as_str)
                    .and_then(super::facade::find);
                let outcome = match facade {
                    Some(f) => {
                        let args = match params.get("arguments") {
                            None | Some(Value::Null) => Map::new(),
                            Some(Value::Object(args)) => args.clone(),
                            Some(_) => {
                                return rpc::error(
                                    id,
                                    rpc::INVALID_PARAMS,
                                    "arguments must be an object",
                                    None,
                                );
                            }
                        };
                        super::facade::call(
                            &self.app.runtime,
                            &self.mcp.tools,
                            f,
                            self.caller,
                            session.version,
                            args,
                        )
                        .await
                    }
                    None => {
                        let call = Call {
                            caller: self.caller,
                            session_id: &session.id,
                            version: session.version,
                            request_id: id,
                            progress,
                            log_level: self.mcp.log_levels.get(&session.id),
                            answers: session.answers,
                            checked: &session.checked,
                        };
                        tools::call(&self.app.runtime, self.mcp, call, params).await
                    }
                };
                match outcome {
                    Ok(result) => rpc::result(id, result),
                    Err((code, message)) => rpc::error(id, code, &message, None),
                }
            }
            // From then on, a tool call's log messages at or above the level (an upstream MCP
            // tool's, as stream chunks) reach the client on the call's response stream.
            "logging/setLevel" => match params
                .get("level")
                .and_then(Value::as_str)
                .and_then(|l| super::LOG_LEVELS.iter().position(|k| *k == l))
            {
                Some(severity) => {
                    self.mcp.log_levels.set(&session.id, severity as u8);
                    rpc::result(id, json!({}))
                }
                None => rpc::error(id, rpc::INVALID_PARAMS, "unknown log level", None),
            },
            "resources/list"
            | "resources/read"
            | "resources/templates/list"
            | "prompts/list"
            | "prompts/get" => {
                let runtime = &self.app.runtime;
                let outcome = match method {
                    "resources/list" => {
                        super::resources::list(runtime, self.caller, session.version, params).await
                    }
                    "resources/read" => {
                        match super::resources::read(runtime, self.caller, params).await {
                            Err((code, _))
                                if code == super::resources::RESOURCE_NOT_FOUND
                                    && !self.mcp.templates.is_empty() =>
                            {
                                let uri = params.get("uri").and_then(Value::as_str);
                                let uri = uri.unwrap_or_default();
                                super::templates::read(
                                    runtime,
                                    &self.mcp.templates,
                                    self.caller,
                                    uri,
                                )
                                .await
                            }
                            other => other,
                        }
                    }
                    "resources/templates/list" => Ok(super::templates::list(
                        &self.mcp.templates,
                        self.caller,
                        session.version,
                    )),
                    "prompts/list" => Ok(super::resources::prompts_list(
                        &self.mcp.prompts,
                        session.version,
                    )),
                    _ => super::resources::prompts_get(&self.mcp.prompts, params),
                };
                match outcome {
                    Ok(result) => rpc::result(id, result),
                    Err((code, message)) => rpc::error(id, code, &message, None),
                }
            }
            "resources/subscribe" | "resources/unsubscribe" if !session.legacy => {
                let outcome = match method {
                    "resources/subscribe" => {
                        super::standalone::subscribe(self, session, params).await
                    }
                    _ => super::standalone::unsubscribe(self.mcp, session, params),
                };
                match outcome {
                    Ok(result) => rpc::result(id, result),
                    Err((code, message)) => rpc::error(id, code, &message, None),
                }
            }
            "completion/complete" if !self.mcp.prompts.is_empty() => {
                match super::resources::complete(&self.mcp.prompts, params) {
                    Ok(result) => rpc::result(id, result),
                    Err((code, message)) => rpc::error(id, code, &message, None),
                }
            }
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel"
                if session.version >= Version::V2025_11_25 =>
            {
                let runtime = &self.app.runtime;
                let outcome = match method {
                    "tasks/get" => super::tasks::get(runtime, self.caller, params).await,
                    "tasks/cancel" => super::tasks::cancel(runtime, self.caller, params).await,
                    "tasks/list" => super::tasks::list(runtime, self.caller, params).await,
                    _ => {
                        super::tasks::result(
                            runtime,
                            self.mcp,
                            self.caller,
                            session.version,
                            params,
                        )
                        .await
                    }
                };
                match outcome {
                    Ok(result) => rpc::result(id, result),
                    Err((code, message)) => rpc::error(id, code, &message, None),
                }
            }
            "initialize" => rpc::error(
                id,
                rpc::INVALID_REQUEST,
                "the session is already initialized",
                None,
            ),
            _ => rpc::error(
                id,
                rpc::METHOD_NOT_FOUND,
                &format!("method not found: {method}"),
                None,
            ),
        }
    }

    fn tools_list(&self, session: &Session, id: &Value, params: &Map<String, Value>) -> Value {
        if params.get("cursor").is_some_and(|c| !c.is_null()) {
            return rpc::error(
                id,
                rpc::INVALID_PARAMS,
                "unknown cursor: tools/list returns one page",
                None,
            );
        }
        let manifest = self.app.runtime.manifest(self.caller, None, &[]);
        let facade = super::facade::described(session.version).iter().cloned();
        let capabilities = manifest.capabilities.iter().filter_map(|c| {
            self.mcp
                .tools
                .name_of(&c.id)
                .map(|name| tools::describe(c, name, session.version))
        });
        let tools: Vec<Value> = facade.chain(capabilities).collect();
        rpc::result(id, json!({ "tools": tools }))
    }

    async fn notification(&self, session: &Session, method: &str, params: &Map<String, Value>) {
        match method {
            "notifications/initialized" => {
                if let Err(err) = self
                    .app
                    .runtime
                    .activate_profile_session(self.caller, &session.id)
                    .await
                {
                    tracing::warn!(error = %err, "MCP session could not be activated");
                }
            }
            "notifications/cancelled" => {
                let Some(request_id) = params.get("requestId") else {
                    return;
                };
                let Some(action_id) = self.mcp.calls.get(&session.id, request_id) else {
                    return;
                };
                let reason = params
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("cancelled by the MCP client");
                if let Err(err) = self
                    .app
                    .runtime
                    .cancel(self.caller, &action_id, Some(reason))
                    .await
                {
                    tracing::info!(error = %err, action_id, "MCP cancellation not applied");
                }
            }
            // Progress, roots and other client notifications carry nothing this server acts on.
            _ => {}
        }
    }

    /// A JSON-RPC batch: accepted only on a 2025-03-26 session (the one version that has them).
    async fn batch(
        &self,
        batch: Vec<Result<Message, rpc::Invalid>>,
        session_id: Option<&str>,
        header: Option<Version>,
    ) -> Response {
        let refuse = |m: &str| {
            http_json(
                StatusCode::BAD_REQUEST,
                rpc::error(&Value::Null, rpc::INVALID_REQUEST, m, None),
            )
        };
        let session = match self
            .streamable_session(session_id, header, "a batch cannot open a session")
            .await
        {
            Ok(session) => session,
            Err(response) => return response,
        };
        if session.version != Version::V2025_03_26 {
            return refuse("JSON-RPC batches exist only at MCP 2025-03-26");
        }
        if batch.is_empty() || batch.len() > MAX_BATCH {
            return refuse("a batch holds 1-64 messages");
        }
        let mut replies = Vec::new();
        for item in batch {
            match item {
                Ok(Message::Request { id, method, .. }) if method == "initialize" => {
                    replies.push(rpc::error(
                        &id,
                        rpc::INVALID_REQUEST,
                        "initialize cannot be batched",
                        None,
                    ));
                }
                Ok(message) => replies.extend(self.one(&session, message).await),
                Err(invalid) => replies.push(rpc::error(
                    &invalid.id,
                    rpc::INVALID_REQUEST,
                    invalid.message,
                    None,
                )),
            }
        }
        if replies.is_empty() {
            return StatusCode::ACCEPTED.into_response();
        }
        http_json(StatusCode::OK, Value::Array(replies))
    }
}

/// The `initialize` result at `version`: only what this server serves, in that version's terms.
pub(super) fn init_result(version: Version, prompts: bool, subscribe: bool) -> Value {
    let mut server_info = json!({ "name": "aip", "version": env!("CARGO_PKG_VERSION") });
    if version >= Version::V2025_06_18 {
        server_info["title"] = json!("aip: AIP runtime (MCP compatibility profile)");
    }
    let mut capabilities = json!({
        "tools": { "listChanged": false },
        "resources": { "subscribe": subscribe, "listChanged": false },
        "logging": {},
    });
    if prompts {
        capabilities["prompts"] = json!({ "listChanged": false });
        // Completions of prompt arguments; the capability exists from 2025-03-26.
        if version >= Version::V2025_03_26 {
            capabilities["completions"] = json!({});
        }
    }
    if version >= Version::V2025_11_25 {
        capabilities["tasks"] =
            json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } });
    }
    json!({
        "protocolVersion": version.as_str(),
        "capabilities": capabilities,
        "serverInfo": server_info,
        "instructions": "Tools are AIP capabilities; each call is a durable AIP action. A call awaiting approval or still running is reported as an error naming its action.",
    })
}

/// A `tools/call` answered as a stream: it asks for progress (`_meta.progressToken`), or its
/// session is `followed` (it set a log level, or its client answers sampling or elicitation: the
/// call's log messages and requests travel on the stream).
fn wants_stream(message: &Message, followed: bool) -> bool {
    matches!(message, Message::Request { method, params, .. }
        if method == "tools/call"
            && (followed || params.get("_meta").and_then(|m| m.get("progressToken")).is_some()))
}

/// Answers a request as an SSE stream (Streamable HTTP): its `notifications/progress`, then its
/// response, then the end of the stream. Losing the connection does not cancel the action.
fn progress_stream(
    app: AppState,
    mcp: Arc<McpState>,
    caller: Caller,
    session: Session,
    message: Message,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(PROGRESS_QUEUE);
    let heartbeat = app.streaming.heartbeat;
    tokio::spawn(async move {
        let endpoint = Endpoint {
            app: &app,
            mcp: &mcp,
            caller: &caller,
        };
        let reply = endpoint
            .one_with_progress(&session, message, Some(tx.clone()))
            .await;
        if let Some(reply) = reply {
            let _ = tx
                .send(Outgoing {
                    id: None,
                    message: reply,
                })
                .await;
        }
    });
    sse_response(rx, heartbeat)
}

/// The SSE response carrying `rx`'s messages (with their event ids) until the sender is done.
pub(super) fn sse_response(
    rx: tokio::sync::mpsc::Receiver<Outgoing>,
    heartbeat: std::time::Duration,
) -> Response {
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        // The server shutting down ends every stream (its call runs on, durably: the client
        // resumes it with `Last-Event-ID`); what was queued before is sent first.
        let out = tokio::select! {
            biased;
            out = rx.recv() => out?,
            () = crate::http::shutting_down() => return None,
        };
        let mut event = axum::response::sse::Event::default()
            .event("message")
            .data(out.message.to_string());
        if let Some(id) = out.id {
            event = event.id(id);
        }
        Some((Ok::<_, std::convert::Infallible>(event), rx))
    });
    // A stream its producer ended because the server shuts down says so last.
    let events = futures_util::StreamExt::chain(events, crate::http::sse_end());
    axum::response::sse::Sse::new(events)
        .keep_alive(axum::response::sse::KeepAlive::new().interval(heartbeat))
        .into_response()
}

/// `GET /mcp` with `Last-Event-ID`: resumes a call's response stream after that event, with the
/// progress it has not seen and then its response. Only the session's own calls resume, for the
/// principal that made them (the cursor is bound to the reader and the action); any other id, or
/// one that does not decode, is refused (404 or 400), never answered with data.
async fn resume(endpoint: Endpoint<'_>, session: Session, last_event_id: &str) -> Response {
    let bad = || {
        http_error(
            StatusCode::BAD_REQUEST,
            rpc::INVALID_REQUEST,
            "Last-Event-ID is not an event of this session's streams",
        )
    };
    let Some((action_id, request_id, token, cursor)) = tools::parse_event_id(last_event_id) else {
        return bad();
    };
    let runtime = &endpoint.app.runtime;
    match runtime.visible_action(endpoint.caller, &action_id).await {
        // A call of this session, or a keyed call (which belongs to no session) of this principal.
        Ok(record)
            if record.session_id.as_deref() == Some(session.id.as_str())
                || (record.session_id.is_none() && record.principal == endpoint.caller.id) => {}
        Ok(_) | Err(RuntimeError::NotFound(_)) => return session_not_found(),
        Err(err) => {
            return http_error(
                StatusCode::SERVICE_UNAVAILABLE,
                rpc::INTERNAL_ERROR,
                &err.to_string(),
            );
        }
    }
    let after = match runtime.parse_stream_cursor(endpoint.caller, &action_id, &cursor) {
        Ok(aip_runtime::StreamPosition::After(n)) => n,
        Ok(aip_runtime::StreamPosition::End) => u64::MAX,
        Err(_) => return bad(),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(PROGRESS_QUEUE);
    let heartbeat = endpoint.app.streaming.heartbeat;
    let (app, mcp, caller) = (
        endpoint.app.clone(),
        Arc::clone(endpoint.mcp),
        endpoint.caller.clone(),
    );
    let version = session.version;
    tokio::spawn(async move {
        let stream = tools::Followed {
            action_id: &action_id,
            request_id: &request_id,
            token: &token,
            after: if after == u64::MAX { 0 } else { after },
            log_level: mcp.log_levels.get(&session.id),
            asks: None,
        };
        let reply = match tools::follow_to_result(&app.runtime, &mcp, &caller, stream, &tx, version)
            .await
        {
            Ok(result) => rpc::result(&request_id, result),
            Err((code, message)) => rpc::error(&request_id, code, &message, None),
        };
        let _ = tx
            .send(Outgoing {
                id: None,
                message: reply,
            })
            .await;
    });
    sse_response(rx, heartbeat)
}

/// A newer client's `server/discover` probe: the handshake era's answer, so it falls back to
/// `initialize` (notes 1.1: 400 with -32022 and the supported versions; never 5xx).
fn discover(id: &Value) -> Response {
    let supported: Vec<&str> = Version::SUPPORTED.iter().map(|v| v.as_str()).collect();
    http_json(
        StatusCode::BAD_REQUEST,
        rpc::error(
            id,
            rpc::UNSUPPORTED_VERSION,
            "Unsupported protocol version: this server negotiates with initialize",
            Some(json!({ "supported": supported })),
        ),
    )
}

/// 415 unless the body is `application/json`.
pub(super) fn require_json(headers: &HeaderMap) -> Result<(), Response> {
    if media_type(headers).as_deref() == Some("application/json") {
        return Ok(());
    }
    Err(http_error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        rpc::INVALID_REQUEST,
        "Content-Type must be application/json",
    ))
}

/// 400 with the JSON-RPC error of a body [`rpc::decode`] refused.
pub(super) fn undecodable((code, invalid): (i64, rpc::Invalid)) -> Response {
    http_json(
        StatusCode::BAD_REQUEST,
        rpc::error(&invalid.id, code, invalid.message, None),
    )
}

/// A body refused while it was read (413 over the limit), as a JSON-RPC error.
pub(super) fn body_refused(rejection: &BytesRejection) -> Response {
    http_error(
        rejection.status(),
        rpc::INVALID_REQUEST,
        &rejection.body_text(),
    )
}

/// The `MCP-Protocol-Version` header: absent, or a supported version (400 otherwise).
fn header_version(headers: &HeaderMap) -> Result<Option<Version>, Response> {
    match headers.get(VERSION_HEADER) {
        None => Ok(None),
        Some(value) => value.to_str().ok().and_then(Version::parse).map(Some).ok_or_else(|| {
            http_error(
                StatusCode::BAD_REQUEST,
                rpc::INVALID_REQUEST,
                "unsupported MCP-Protocol-Version: this server speaks 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05",
            )
        }),
    }
}

/// The media type of `Content-Type`, lowercased, without parameters.
fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(value.split(';').next()?.trim().to_ascii_lowercase())
}

/// Whether `Accept` admits every one of `wanted` (a `*/*` or `type/*` range admits it too).
pub(super) fn accepts(headers: &HeaderMap, wanted: &[&str]) -> bool {
    let ranges: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|r| r.split(';').next())
        .map(|r| r.trim().to_ascii_lowercase())
        .collect();
    wanted.iter().all(|w| {
        let major = w.split('/').next().unwrap_or_default();
        ranges
            .iter()
            .any(|r| r == w || r == "*/*" || *r == format!("{major}/*"))
    })
}

pub(super) fn session_not_found() -> Response {
    http_error(
        StatusCode::NOT_FOUND,
        rpc::SESSION_NOT_FOUND,
        "Session not found",
    )
}

pub(super) fn http_error(status: StatusCode, code: i64, message: &str) -> Response {
    http_json(status, rpc::error(&Value::Null, code, message, None))
}

pub(super) fn http_json(status: StatusCode, body: Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn accept_must_admit_both_json_and_event_streams() {
        let both = ["application/json", "text/event-stream"];
        assert!(accepts(
            &with_accept("application/json, text/event-stream"),
            &both
        ));
        assert!(accepts(&with_accept("*/*"), &both));
        assert!(accepts(&with_accept("application/json;q=1, text/*"), &both));
        assert!(!accepts(&with_accept("application/json"), &both));
        assert!(!accepts(&HeaderMap::new(), &both));
    }
}
