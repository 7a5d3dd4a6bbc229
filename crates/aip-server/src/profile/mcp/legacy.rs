//! The legacy HTTP+SSE binding, restricted to MCP `2024-11-05` (spec 21.1): `GET /mcp/legacy/sse`
//! opens a session and its stream (first event `endpoint`), `POST /mcp/legacy/messages?sessionId=`
//! carries the client's messages (202) whose replies travel on the stream as `message` events.
//!
//! The stream is bound to the node that holds the connection: a POST reaching another node, or a
//! session whose stream is gone, is answered 404. Closing the stream ends the session; a shutdown
//! ends the stream. Admitted work runs on either way.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use aip_runtime::Caller;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::rpc::{self, Message};
use super::tools::Outgoing;
use super::transport::{Endpoint, http_error, init_result, session_not_found};
use super::{McpState, Version};
use crate::http::AppState;

/// Replies queued for one stream before the slowest consumer is cut off.
const STREAM_QUEUE: usize = 64;
/// Longest a reply waits for room on a full stream.
const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Open legacy streams on this node, by session id.
#[derive(Debug, Default)]
pub struct Streams(Mutex<HashMap<String, mpsc::Sender<Outgoing>>>);

impl Streams {
    fn insert(&self, session: &str, tx: mpsc::Sender<Outgoing>) {
        if let Ok(mut map) = self.0.lock() {
            map.insert(session.to_owned(), tx);
        }
    }

    fn remove(&self, session: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(session);
        }
    }

    fn sender(&self, session: &str) -> Option<mpsc::Sender<Outgoing>> {
        self.0.lock().ok().and_then(|map| map.get(session).cloned())
    }
}

/// Ends the session when its stream is dropped (the client went away, or shutdown).
struct StreamGuard {
    app: AppState,
    mcp: Arc<McpState>,
    caller: Caller,
    session: String,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.mcp.legacy.remove(&self.session);
        let (app, caller, session) = (self.app.clone(), self.caller.clone(), self.session.clone());
        tokio::spawn(async move {
            if let Err(err) = app
                .runtime
                .close_session(&caller, &session, Some("MCP legacy SSE stream closed"))
                .await
            {
                tracing::debug!(error = %err, "legacy MCP session not closed");
            }
        });
    }
}

/// `GET /mcp/legacy/sse`: a new `2024-11-05` session and its stream.
pub async fn open(
    State(app): State<AppState>,
    Extension(mcp): Extension<Arc<McpState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    if headers.contains_key(axum::http::header::ACCEPT)
        && !super::transport::accepts(&headers, &["text/event-stream"])
    {
        return http_error(
            StatusCode::NOT_ACCEPTABLE,
            rpc::INVALID_REQUEST,
            "Accept must admit text/event-stream",
        );
    }
    let data =
        json!({ "protocol_version": Version::V2024_11_05.as_str(), "transport": "legacy-sse" });
    let session = match app
        .runtime
        .open_profile_session(&caller, super::PROFILE, data)
        .await
    {
        Ok(session) => session.session_id,
        Err(err) => {
            return http_error(
                StatusCode::SERVICE_UNAVAILABLE,
                rpc::INTERNAL_ERROR,
                &err.to_string(),
            );
        }
    };
    let (tx, rx) = mpsc::channel::<Outgoing>(STREAM_QUEUE);
    mcp.legacy.insert(&session, tx);
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("/mcp/legacy/messages?sessionId={session}"));
    let heartbeat = app.streaming.heartbeat;
    let guard = StreamGuard {
        app,
        mcp,
        caller,
        session,
    };
    let first = futures_util::stream::once(async move { Ok::<Event, Infallible>(endpoint) });
    let rest = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        let message = tokio::select! {
            message = rx.recv() => message,
            () = crate::http::shutting_down() => None,
        };
        let message = message?;
        let event = Event::default()
            .event("message")
            .data(message.message.to_string());
        Some((Ok::<Event, Infallible>(event), (rx, guard)))
    });
    // The legacy transport has no cursor to resume from: a stream ended by the shutdown only
    // tells the client to reconnect (a new session) once the node is back.
    let rest = futures_util::StreamExt::chain(rest, crate::http::sse_end());
    Sse::new(futures_util::StreamExt::chain(first, rest))
        .keep_alive(KeepAlive::new().interval(heartbeat))
        .into_response()
}

/// `?sessionId=` (or `session_id`, which some clients send).
#[derive(Debug, serde::Deserialize)]
pub struct SessionQuery {
    #[serde(rename = "sessionId", alias = "session_id")]
    session_id: Option<String>,
}

/// `POST /mcp/legacy/messages?sessionId=`: one message of a legacy session; the reply goes on its
/// stream.
pub async fn message(
    State(app): State<AppState>,
    Extension(mcp): Extension<Arc<McpState>>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<SessionQuery>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return super::transport::body_refused(&rejection),
    };
    if let Err(refused) = super::transport::require_json(&headers) {
        return refused;
    }
    if let Some(version) = headers.get("mcp-protocol-version")
        && version.as_bytes() != Version::V2024_11_05.as_str().as_bytes()
    {
        return http_error(
            StatusCode::BAD_REQUEST,
            rpc::INVALID_REQUEST,
            "the legacy SSE binding speaks only MCP 2024-11-05",
        );
    }
    let Some(session_id) = query.session_id else {
        return http_error(
            StatusCode::BAD_REQUEST,
            rpc::INVALID_REQUEST,
            "sessionId is required",
        );
    };
    let endpoint = Endpoint {
        app: &app,
        mcp: &mcp,
        caller: &caller,
    };
    let session = match endpoint.session(&session_id, None).await {
        Ok(session) if session.legacy => session,
        Ok(_) => return session_not_found(),
        Err(response) => return response,
    };
    let Some(stream) = mcp.legacy.sender(&session_id) else {
        // The stream is closed, or held by another node.
        return session_not_found();
    };
    let message = match rpc::decode(&body) {
        Ok(rpc::Body::Single(message)) => message,
        Ok(rpc::Body::Batch(_)) => {
            return http_error(
                StatusCode::BAD_REQUEST,
                rpc::INVALID_REQUEST,
                "a JSON-RPC message is an object: batches are not part of MCP 2024-11-05",
            );
        }
        Err(refused) => return super::transport::undecodable(refused),
    };
    // Notifications take effect before the 202 (a client sends its next message only then, so
    // `notifications/initialized` is in force for it). Requests are answered apart from the POST,
    // which is answered at once (a long tool call must not hold it), in order of completion.
    let request = match message {
        Message::Request { id, method, params } => (id, method, params),
        other => {
            endpoint.one(&session, other).await;
            return (StatusCode::ACCEPTED, "Accepted").into_response();
        }
    };
    let (app, mcp) = (app.clone(), Arc::clone(&mcp));
    tokio::spawn(async move {
        let endpoint = Endpoint {
            app: &app,
            mcp: &mcp,
            caller: &caller,
        };
        let (id, method, params) = request;
        let reply = if method == "initialize" {
            if session.initialized {
                rpc::error(
                    &id,
                    rpc::INVALID_REQUEST,
                    "the session is already initialized",
                    None,
                )
            } else {
                rpc::result(
                    &id,
                    init_result(Version::V2024_11_05, !mcp.prompts.is_empty(), false),
                )
            }
        } else {
            // Progress notifications of a tool call travel on the same stream, before its reply.
            endpoint
                .one_with_progress(
                    &session,
                    Message::Request { id, method, params },
                    Some(stream.clone()),
                )
                .await
                .unwrap_or(Value::Null)
        };
        let reply = Outgoing {
            id: None,
            message: reply,
        };
        if stream.send_timeout(reply, SEND_TIMEOUT).await.is_err() {
            tracing::info!(session = %session_id, "legacy MCP reply dropped: the stream is gone or stalled");
        }
    });
    (StatusCode::ACCEPTED, "Accepted").into_response()
}
