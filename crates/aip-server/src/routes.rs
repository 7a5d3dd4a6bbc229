//! Native HTTP routes over the runtime (spec 20.1 and the read-route layout of the notes).

use std::sync::Arc;

use aip_runtime::read::ActionListQuery;
use aip_runtime::{Caller, Endpoint, Reply, Runtime, RuntimeError};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::http::AppState;
use aip_core::ErrorCategory;

/// Media type of a complete envelope (spec 20.1).
pub const AIP_JSON: &str = "application/aip+json";

/// The protected AIP routes; [`crate::http::router`] adds authentication and guards.
pub fn aip_routes() -> Router<AppState> {
    Router::new()
        .route("/aip/v1/manifest", get(manifest))
        .route("/aip/v1/messages", post(messages))
        .route("/aip/v1/actions", post(actions).get(list_actions))
        .route("/aip/v1/actions/{action_id}", get(action_status))
        .route("/aip/v1/actions/{action_id}/result", get(action_result))
        .route("/aip/v1/actions/{action_id}/events", get(action_events))
        .route("/aip/v1/actions/{action_id}/chunks", get(action_chunks))
        .route("/aip/v1/actions/{action_id}/cancel", post(cancel))
        .route("/aip/v1/events", get(events))
        .route("/aip/v1/ws", get(crate::ws::upgrade))
        .route("/aip/v1/receipts/{chain_id}", get(receipt_chain))
        .route(
            "/aip/v1/receipts/by-receipt/{receipt_id}",
            get(receipt_by_id),
        )
        .route("/aip/v1/audit/events", get(audit))
        .route("/aip/v1/sessions", get(sessions))
        .route("/aip/v1/sessions/{session_id}", get(session))
        .route("/aip/v1/sessions/{session_id}/close", post(close_session))
        .route("/aip/v1/sessions/{session_id}/cancel", post(cancel_session))
        .route("/aip/v1/sessions/{session_id}/resume", post(resume_session))
}

fn runtime(state: &AppState) -> &Arc<Runtime> {
    &state.runtime
}

async fn manifest(State(state): State<AppState>, Extension(caller): Extension<Caller>) -> Response {
    axum::Json(runtime(&state).manifest(&caller, None, &[])).into_response()
}

async fn messages(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    envelope_endpoint(&state, &caller, &headers, body, Endpoint::Messages).await
}

async fn actions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    envelope_endpoint(&state, &caller, &headers, body, Endpoint::Actions).await
}

async fn envelope_endpoint(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
    endpoint: Endpoint,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if media != AIP_JSON && media != "application/json" {
        return ApiError {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: "aip.transport.unsupported_media_type".into(),
            category: ErrorCategory::Permanent,
            message: format!("Content-Type must be {AIP_JSON}"),
        }
        .into_envelope_response();
    }
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let status = rejection.status();
            return ApiError {
                status,
                code: "aip.transport.body_rejected".into(),
                category: ErrorCategory::Permanent,
                message: rejection.body_text(),
            }
            .into_envelope_response();
        }
    };
    let reply = runtime(state).handle(caller, &body, endpoint).await;
    if crate::sse::wants_sse(headers) {
        return crate::sse::submitted(runtime(state), caller, reply, state.streaming);
    }
    envelope_response(reply)
}

fn envelope_response(reply: Reply) -> Response {
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, reply.envelope.to_json_vec()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(AIP_JSON));
    response
}

/// A read-endpoint answer: JSON on success, `{"error": ...}` with the 19.1 status on failure.
fn read_response<T: Serialize>(result: Result<T, RuntimeError>) -> Response {
    match result {
        Ok(value) => axum::Json(value).into_response(),
        Err(err) => runtime_error(&err),
    }
}

/// 202 with what the runtime requested (cancellations complete later), or its typed error.
fn accepted<T: Serialize>(result: Result<T, RuntimeError>) -> Response {
    match result {
        Ok(value) => (StatusCode::ACCEPTED, axum::Json(value)).into_response(),
        Err(err) => runtime_error(&err),
    }
}

fn runtime_error(err: &RuntimeError) -> Response {
    let status =
        StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        axum::Json(serde_json::json!({ "error": err.to_protocol_error() })),
    )
        .into_response()
}

/// Query parameters of a read route; a malformed or unknown parameter is answered with the typed
/// `aip.read.invalid_query` error (400) rather than axum's plain-text rejection.
struct ReadQuery<T>(T);

impl<T, S> FromRequestParts<S> for ReadQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(params)) => Ok(Self(params)),
            Err(rejection) => Err(ApiError {
                status: StatusCode::BAD_REQUEST,
                code: "aip.read.invalid_query".into(),
                category: ErrorCategory::Permanent,
                message: rejection.body_text(),
            }
            .into_response()),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusParams {
    #[serde(default)]
    include_result: bool,
    #[serde(default)]
    include_receipts: bool,
    #[serde(default)]
    include_chunks: bool,
    wait_ms: Option<u64>,
}

async fn action_status(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(action_id): Path<String>,
    ReadQuery(p): ReadQuery<StatusParams>,
) -> Response {
    let mut status = runtime(&state)
        .action_status(
            &caller,
            &action_id,
            p.include_result,
            p.include_receipts,
            p.wait_ms,
        )
        .await;
    if p.include_chunks {
        status = match status {
            Ok(mut status) => runtime(&state)
                .first_chunks(&caller, &action_id, None)
                .await
                .map(|chunks| {
                    status.chunks = chunks;
                    status
                }),
            Err(err) => Err(err),
        };
    }
    read_response(status)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitParams {
    wait_ms: Option<u64>,
}

async fn action_result(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(action_id): Path<String>,
    ReadQuery(p): ReadQuery<WaitParams>,
) -> Response {
    read_response(
        runtime(&state)
            .action_result(&caller, &action_id, p.wait_ms)
            .await,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageParams {
    cursor: Option<String>,
    limit: Option<u32>,
    wait_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventPageParams {
    cursor: Option<String>,
    limit: Option<u32>,
    wait_ms: Option<u64>,
    #[serde(default)]
    include_chunks: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChunkParams {
    cursor: Option<String>,
    limit: Option<u32>,
}

async fn action_chunks(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(action_id): Path<String>,
    ReadQuery(p): ReadQuery<ChunkParams>,
) -> Response {
    read_response(
        runtime(&state)
            .action_chunks(&caller, &action_id, p.cursor.as_deref(), p.limit)
            .await,
    )
}

async fn action_events(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(action_id): Path<String>,
    headers: HeaderMap,
    ReadQuery(p): ReadQuery<EventPageParams>,
) -> Response {
    if crate::sse::wants_sse(&headers) {
        return crate::sse::action_stream(
            runtime(&state),
            &caller,
            action_id,
            &headers,
            state.streaming,
        );
    }
    let mut events = runtime(&state)
        .action_events(&caller, &action_id, p.cursor.as_deref(), p.limit, p.wait_ms)
        .await;
    // The first page of events carries the first chunks (at most `limit`); later ones page with
    // `/chunks`, whose cursors are the stream's own.
    if p.include_chunks && p.cursor.is_none() {
        events = match events {
            Ok(mut events) => runtime(&state)
                .first_chunks(&caller, &action_id, p.limit)
                .await
                .map(|chunks| {
                    events.chunks = chunks;
                    events
                }),
            Err(err) => Err(err),
        };
    }
    read_response(events)
}

async fn events(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    ReadQuery(p): ReadQuery<PageParams>,
) -> Response {
    if crate::sse::wants_sse(&headers) {
        return crate::sse::event_feed(runtime(&state), &caller, &headers, state.streaming);
    }
    read_response(
        runtime(&state)
            .events(&caller, p.cursor.as_deref(), p.limit, p.wait_ms)
            .await,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    state: Option<String>,
    capability_id: Option<String>,
    session_id: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
    #[serde(default)]
    include_results: bool,
}

async fn list_actions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<ListParams>,
) -> Response {
    let query = ActionListQuery {
        state: p.state,
        capability_id: p.capability_id,
        session_id: p.session_id,
        cursor: p.cursor,
        limit: p.limit,
        include_results: p.include_results,
    };
    read_response(runtime(&state).list_actions(&caller, &query).await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    reason: Option<String>,
}

async fn cancel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(action_id): Path<String>,
    body: Bytes,
) -> Response {
    let reason = match optional_reason(&body) {
        Ok(reason) => reason,
        Err(err) => return err.into_response(),
    };
    accepted(
        runtime(&state)
            .cancel(&caller, &action_id, reason.as_deref())
            .await,
    )
}

async fn receipt_chain(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(chain_id): Path<String>,
) -> Response {
    read_response(runtime(&state).receipt_chain(&caller, &chain_id).await)
}

async fn receipt_by_id(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(receipt_id): Path<String>,
) -> Response {
    read_response(
        runtime(&state)
            .receipt_chain_by_receipt(&caller, &receipt_id)
            .await,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditParams {
    cursor: Option<String>,
    limit: Option<u32>,
}

async fn audit(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<AuditParams>,
) -> Response {
    read_response(
        runtime(&state)
            .audit(&caller, p.cursor.as_deref(), p.limit)
            .await,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionListParams {
    status: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
}

async fn sessions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<SessionListParams>,
) -> Response {
    read_response(
        runtime(&state)
            .sessions(&caller, p.status.as_deref(), p.cursor.as_deref(), p.limit)
            .await,
    )
}

async fn session(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(session_id): Path<String>,
) -> Response {
    read_response(runtime(&state).session(&caller, &session_id).await)
}

async fn close_session(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(session_id): Path<String>,
    body: Bytes,
) -> Response {
    let reason = match optional_reason(&body) {
        Ok(reason) => reason,
        Err(err) => return err.into_response(),
    };
    read_response(
        runtime(&state)
            .close_session(&caller, &session_id, reason.as_deref())
            .await,
    )
}

/// `POST /aip/v1/sessions/{id}/cancel`: the `{"session": id}` cancel target of spec 11.8 over a plain
/// route; 202 with what was requested (the session stays open).
async fn cancel_session(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(session_id): Path<String>,
    body: Bytes,
) -> Response {
    let reason = match optional_reason(&body) {
        Ok(reason) => reason,
        Err(err) => return err.into_response(),
    };
    accepted(
        runtime(&state)
            .cancel_session(&caller, &session_id, reason.as_deref())
            .await,
    )
}

/// Body of `POST /aip/v1/sessions/{id}/resume`: the token travels in the body, never in the URL (10.5).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResumeBody {
    resume_token: String,
    last_event_cursor: Option<String>,
}

async fn resume_session(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(session_id): Path<String>,
    body: Bytes,
) -> Response {
    let body = match optional_json::<ResumeBody>(&body) {
        Ok(Some(b)) => b,
        Ok(None) => {
            return invalid_body(
                "body must be {\"resume_token\": string, \"last_event_cursor\"?: string}",
            )
            .into_response();
        }
        Err(err) => return err.into_response(),
    };
    read_response(
        runtime(&state)
            .resume_session(
                &caller,
                &session_id,
                &body.resume_token,
                body.last_event_cursor.as_deref(),
            )
            .await,
    )
}

/// The optional `{"reason": …}` body of the cancel and close routes.
fn optional_reason(body: &Bytes) -> Result<Option<String>, ApiError> {
    Ok(optional_json::<CancelBody>(body)?.and_then(|b| b.reason))
}

fn optional_json<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<Option<T>, ApiError> {
    if body.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|_| invalid_body("the request body does not match this endpoint"))
}

fn invalid_body(message: &str) -> ApiError {
    ApiError {
        status: StatusCode::BAD_REQUEST,
        code: "aip.read.invalid_query".into(),
        category: ErrorCategory::Permanent,
        message: message.into(),
    }
}
