//! Native HTTP routes over the runtime (spec 20.1 and the read-route layout of the notes).

use std::sync::Arc;

use aip_core::{
    ActionEventsRequest, ActionId, ActionLifecycleState, ActionListRequest, ActionResultRequest,
    ActionStatusRequest, ApprovalDecision, ApprovalId, ApprovalListRequest, ApprovalQueryRequest,
    AuditQueryRequest, CapabilityId, ErrorCode, EventStreamRequest, PrincipalId, ReceiptId,
    ReceiptQueryRequest, SessionId, SessionListRequest, SessionRequest, Timestamp, TransactionId,
};
use aip_runtime::{Accept, Caller, Reply, Runtime, RuntimeError};
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

mod callbacks;
mod channels;
mod governance;
mod resources;
mod settlements;
mod transactions;

use callbacks::{deliveries, delivery, redrive};
use channels::{conversation, conversation_messages, conversations};
use governance::{
    approval, approvals, decide, decisions, escalation, escalations, resolve_escalation,
};
use resources::{resource, resources, whoami};
use settlements::{close_settlement, settlement};
use transactions::{transaction, transaction_by_action, transaction_by_plan};

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
        .route("/aip/v1/approvals", get(approvals))
        .route("/aip/v1/approvals/{approval_id}", get(approval))
        .route("/aip/v1/approvals/{approval_id}/decision", post(decide))
        .route("/aip/v1/approvals/{approval_id}/decisions", get(decisions))
        .route("/aip/v1/whoami", get(whoami))
        .route("/aip/v1/transactions/{transaction_id}", get(transaction))
        .route(
            "/aip/v1/transactions/by-plan/{plan_id}",
            get(transaction_by_plan),
        )
        .route(
            "/aip/v1/transactions/by-action/{action_id}",
            get(transaction_by_action),
        )
        .route("/aip/v1/callbacks", get(deliveries))
        .route("/aip/v1/callback-deliveries", get(deliveries))
        .route("/aip/v1/callbacks/{delivery_id}", get(delivery))
        .route("/aip/v1/callback-deliveries/{delivery_id}", get(delivery))
        .route("/aip/v1/callbacks/{delivery_id}/redrive", post(redrive))
        .route("/aip/v1/conversations", get(conversations))
        .route("/aip/v1/conversations/{conversation_id}", get(conversation))
        .route(
            "/aip/v1/conversations/{conversation_id}/messages",
            get(conversation_messages),
        )
        .route("/aip/v1/settlements", post(close_settlement))
        .route("/aip/v1/settlements/{batch_id}", get(settlement))
        .route("/aip/v1/resources", get(resources))
        .route("/aip/v1/resources/{resource_id}", get(resource))
        .route("/aip/v1/escalations", get(escalations))
        .route("/aip/v1/escalations/{escalation_id}", get(escalation))
        .route(
            "/aip/v1/escalations/{escalation_id}/resolution",
            post(resolve_escalation),
        )
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
    caller: Option<Extension<Caller>>,
    remote: Option<Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let caller = match caller {
        Some(Extension(caller)) => caller,
        // No bearer token: only a configured peer's signed envelope may come in (the runtime then
        // verifies the signature against the peer's pinned key).
        None => match body.as_ref().ok().and_then(|b| peer_of(&state, b)) {
            Some(peer) => peer,
            None => {
                let source =
                    remote.map_or_else(|| "unknown".to_owned(), |r| r.0.0.ip().to_string());
                crate::http::note_refusal_from(
                    &state,
                    source,
                    aip_runtime::RefusalReason::MissingCredentials,
                    serde_json::json!({ "method": "POST", "path": "/aip/v1/messages" }),
                );
                return ApiError::unauthenticated().into_envelope_response();
            }
        },
    };
    envelope_endpoint(&state, &caller, &headers, body, Accept::AnyMessage).await
}

/// The configured peer whose did:key an envelope names as its signer.
fn peer_of(state: &AppState, body: &[u8]) -> Option<Caller> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let did = value.pointer("/security/did")?.as_str()?;
    state.auth.peer(did).cloned()
}

async fn actions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    envelope_endpoint(&state, &caller, &headers, body, Accept::ActionsOnly).await
}

async fn envelope_endpoint(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
    accept: Accept,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if media != AIP_JSON && media != "application/json" {
        return ApiError::new(
            ErrorCode::UnsupportedMediaType,
            format!("Content-Type must be {AIP_JSON}"),
        )
        .into_envelope_response();
    }
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            return ApiError::with_status(
                rejection.status(),
                ErrorCode::BodyRejected,
                rejection.body_text(),
            )
            .into_envelope_response();
        }
    };
    let mut reply = runtime(state).handle(caller, &body, accept).await;
    crate::links::add(&mut reply.envelope.body);
    if crate::sse::wants_sse(headers) {
        return crate::sse::submitted(runtime(state), caller, reply, state.streaming);
    }
    envelope_response(reply)
}

fn envelope_response(reply: Reply) -> Response {
    let status = crate::status::of_reply(&reply);
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
    (
        crate::status::of_error(err),
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
            Err(rejection) => {
                Err(ApiError::new(ErrorCode::InvalidQuery, rejection.body_text()).into_response())
            }
        }
    }
}

/// One path segment of a route (`{action_id}`, ...): a segment that is not valid UTF-8 (or not
/// decodable) answers the typed `aip.read.invalid_query` error (400) like any other bad request,
/// never axum's plain-text rejection.
pub(crate) struct PathId(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(segment)) => Ok(Self(segment)),
            Err(rejection) => {
                Err(ApiError::new(ErrorCode::InvalidQuery, rejection.body_text()).into_response())
            }
        }
    }
}

// ---- read routes: each builds the wire request and calls the runtime's read for it, the same
// code the envelope path runs ----

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
    tenant_id: Option<String>,
}

async fn action_status(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(action_id): PathId,
    ReadQuery(p): ReadQuery<StatusParams>,
) -> Response {
    let request = ActionStatusRequest {
        action_id: ActionId::new(action_id),
        tenant_id: p.tenant_id,
        include_result: p.include_result,
        include_receipts: p.include_receipts,
        include_chunks: p.include_chunks,
        wait_ms: p.wait_ms,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .read_action_status(&caller, &request)
            .await
            .map(|mut status| {
                crate::links::action(&mut status);
                status
            }),
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultParams {
    wait_ms: Option<u64>,
    tenant_id: Option<String>,
    #[serde(default)]
    include_receipt: bool,
    #[serde(default)]
    include_terminal_events: bool,
}

async fn action_result(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(action_id): PathId,
    ReadQuery(p): ReadQuery<ResultParams>,
) -> Response {
    let request = ActionResultRequest {
        action_id: ActionId::new(action_id),
        tenant_id: p.tenant_id,
        wait_ms: p.wait_ms,
        include_receipt: p.include_receipt,
        include_terminal_events: p.include_terminal_events,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(runtime(&state).read_action_result(&caller, &request).await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventPageParams {
    cursor: Option<String>,
    limit: Option<u32>,
    wait_ms: Option<u64>,
    tenant_id: Option<String>,
    /// Comma-separated event kinds.
    kinds: Option<String>,
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
    PathId(action_id): PathId,
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
    PathId(action_id): PathId,
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
    let request = ActionEventsRequest {
        action_id: ActionId::new(action_id),
        tenant_id: p.tenant_id,
        cursor: p.cursor,
        limit: p.limit,
        kinds: split_kinds(p.kinds.as_deref()),
        include_chunks: p.include_chunks,
        follow: false,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .read_action_events(&caller, &request, p.wait_ms)
            .await,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedParams {
    cursor: Option<String>,
    limit: Option<u32>,
    wait_ms: Option<u64>,
    /// Comma-separated event kinds.
    kinds: Option<String>,
}

async fn events(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    ReadQuery(p): ReadQuery<FeedParams>,
) -> Response {
    if crate::sse::wants_sse(&headers) {
        return crate::sse::event_feed(runtime(&state), &caller, &headers, state.streaming);
    }
    let request = EventStreamRequest {
        cursor: p.cursor,
        limit: p.limit,
        kinds: split_kinds(p.kinds.as_deref()),
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .read_events(&caller, &request, p.wait_ms)
            .await,
    )
}

/// `kinds=a,b` as a list (empty entries dropped).
fn split_kinds(kinds: Option<&str>) -> Vec<String> {
    kinds
        .map(|k| {
            k.split(',')
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    state: Option<String>,
    capability_id: Option<String>,
    session_id: Option<String>,
    principal_id: Option<String>,
    approval_id: Option<String>,
    transaction_id: Option<String>,
    tenant_id: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
    #[serde(default)]
    include_results: bool,
    #[serde(default)]
    include_receipts: bool,
}

async fn list_actions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<ListParams>,
) -> Response {
    let state_filter = match p.state.as_deref().map(parse_wire::<ActionLifecycleState>) {
        Some(Err(err)) => return err.into_response(),
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let request = ActionListRequest {
        state: state_filter,
        capability_id: p.capability_id.map(CapabilityId::new),
        session_id: p.session_id.map(SessionId::new),
        principal_id: p.principal_id.map(PrincipalId::new),
        approval_id: p.approval_id.map(ApprovalId::new),
        transaction_id: p.transaction_id.map(TransactionId::new),
        tenant_id: p.tenant_id,
        cursor: p.cursor,
        limit: p.limit,
        include_results: p.include_results,
        include_receipts: p.include_receipts,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .read_action_list(&caller, &request)
            .await
            .map(|mut list| {
                list.actions.iter_mut().for_each(crate::links::action);
                list
            }),
    )
}

/// The semantic rules the envelope decoder applies to the same request (spec 6.4), so a read
/// refused on one path is refused with the same code on the other.
fn semantic<T: aip_core::Validate>(request: &T) -> Result<(), ApiError> {
    match aip_core::Checker::check(request).into_iter().next() {
        None => Ok(()),
        Some(v) => Err(ApiError::new(
            ErrorCode::Semantic(v.rule),
            format!("{} at `{}`: {}", v.rule, v.pointer, v.message),
        )),
    }
}

/// A wire enum value given as a query parameter.
fn parse_wire<T: DeserializeOwned>(value: &str) -> Result<T, ApiError> {
    serde_json::from_value(serde_json::Value::String(value.to_owned()))
        .map_err(|_| invalid_body(&format!("unknown value {value:?}")))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    reason: Option<String>,
}

async fn cancel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(action_id): PathId,
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
    PathId(chain_id): PathId,
) -> Response {
    let request = ReceiptQueryRequest {
        chain_id: Some(chain_id),
        receipt_id: None,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(runtime(&state).read_receipts(&caller, &request).await)
}

async fn receipt_by_id(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(receipt_id): PathId,
) -> Response {
    let request = ReceiptQueryRequest {
        chain_id: None,
        receipt_id: Some(ReceiptId::new(receipt_id)),
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(runtime(&state).read_receipts(&caller, &request).await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditParams {
    action_id: Option<String>,
    session_id: Option<String>,
    principal_id: Option<String>,
    transaction_id: Option<String>,
    tenant_id: Option<String>,
    from: Option<String>,
    to: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
    #[serde(default)]
    include_receipts: bool,
    #[serde(default)]
    export: bool,
    /// `node`: the node's security log (refusals before a tenant was known) instead of the
    /// caller's tenant's audit.
    log: Option<String>,
}

async fn audit(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<AuditParams>,
) -> Response {
    let time = |t: Option<String>| match t.as_deref().map(Timestamp::parse) {
        Some(Some(t)) => Ok(Some(t)),
        Some(None) => Err(invalid_body("from and to must be RFC 3339 timestamps")),
        None => Ok(None),
    };
    let (from, to) = match (time(p.from), time(p.to)) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(err), _) | (_, Err(err)) => return err.into_response(),
    };
    let request = AuditQueryRequest {
        action_id: p.action_id.map(ActionId::new),
        session_id: p.session_id.map(SessionId::new),
        principal_id: p.principal_id.map(PrincipalId::new),
        transaction_id: p.transaction_id.map(TransactionId::new),
        tenant_id: p.tenant_id,
        from,
        to,
        cursor: p.cursor,
        limit: p.limit,
        include_receipts: p.include_receipts,
        export: p.export,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    match p.log.as_deref() {
        None => read_response(runtime(&state).read_audit(&caller, &request).await),
        Some("node") => read_response(runtime(&state).read_node_audit(&caller, &request).await),
        Some(_) => invalid_body("log must be node").into_response(),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionListParams {
    status: Option<String>,
    principal_id: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
}

async fn sessions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<SessionListParams>,
) -> Response {
    let status = match p
        .status
        .as_deref()
        .map(parse_wire::<aip_core::SessionState>)
    {
        Some(Err(err)) => return err.into_response(),
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let request = SessionListRequest {
        principal_id: p.principal_id.map(PrincipalId::new),
        status,
        cursor: p.cursor,
        limit: p.limit,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .read_sessions(&caller, &request)
            .await
            .map(|mut list| {
                list.sessions.iter_mut().for_each(crate::links::session);
                list
            }),
    )
}

async fn session(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(session_id): PathId,
) -> Response {
    let request = SessionRequest {
        session_id: SessionId::new(session_id),
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .read_session(&caller, &request)
            .await
            .map(|mut view| {
                crate::links::session(&mut view);
                view
            }),
    )
}

async fn close_session(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(session_id): PathId,
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
    PathId(session_id): PathId,
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
    PathId(session_id): PathId,
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

/// A read that takes no query parameters (any given is refused, not ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

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
    ApiError::new(ErrorCode::InvalidQuery, message)
}
