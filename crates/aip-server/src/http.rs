//! The native HTTP binding (spec 20.1): routes, transport authentication, Host/Origin guards, limits.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::json;

use crate::auth::AuthIndex;
use crate::config::Config;
use crate::error::ApiError;
use aip_runtime::RefusalReason;

/// Profile id of the native HTTP binding (spec 20.1).
pub const PROFILE: &str = "aip.native.http.v1";
/// The profiles the HTTP server serves: native HTTP, SSE streams and WebSocket connections.
pub const PROFILES: &[&str] = &[PROFILE, crate::sse::PROFILE, crate::ws::PROFILE];

/// Everything a request handler may touch. Durable state lives in the runtime's store, never here.
#[derive(Clone)]
pub struct AppState {
    /// Bearer token index.
    pub auth: Arc<AuthIndex>,
    /// Host/Origin policy.
    pub guard: Arc<RequestGuard>,
    /// Storage readiness probe.
    pub ready: Arc<dyn ReadyCheck>,
    /// Prometheus exposition handle.
    pub metrics: PrometheusHandle,
    /// The runtime every route converges on.
    pub runtime: Arc<aip_runtime::Runtime>,
    /// Per-connection bounds of SSE and WebSocket streams.
    pub streaming: crate::sse::StreamLimits,
    /// The streams open on the node and their bound (spec 22.8).
    pub open_streams: Arc<crate::overload::OpenStreams>,
    /// The MCP endpoint's OAuth resource-server mode, when configured.
    pub oauth: Option<Arc<crate::profile::mcp::oauth::OAuth>>,
    /// The principal of MCP requests without credentials (loopback development mode), if set.
    pub mcp_dev_principal: Option<aip_runtime::Caller>,
}

/// Reports whether durable storage is usable (reachable, its writer answering, its migrations
/// exactly this build's); `/ready` uses it.
#[async_trait::async_trait]
pub trait ReadyCheck: Send + Sync {
    /// `Err(reason)` when storage is not usable; the reason goes to the node log only.
    async fn check(&self) -> Result<(), String>;
}

/// Accepted `Host` names and `Origin` values (DNS-rebinding and cross-site guards).
#[derive(Debug, Clone)]
pub struct RequestGuard {
    hosts: Option<Vec<String>>,
    origins: Vec<String>,
}

impl RequestGuard {
    /// Derive the policy: explicit hosts, else loopback names when listening on loopback, else any.
    pub fn from_config(config: &Config) -> Self {
        let hosts = if !config.allowed_hosts.is_empty() {
            Some(
                config
                    .allowed_hosts
                    .iter()
                    .map(|h| h.to_ascii_lowercase())
                    .collect(),
            )
        } else if config.listen.ip().is_loopback() {
            Some(vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()])
        } else {
            None
        };
        Self {
            hosts,
            origins: config.allowed_origins.clone(),
        }
    }

    fn host_allowed(&self, host: Option<&str>) -> bool {
        let Some(allowed) = &self.hosts else {
            return true;
        };
        let Some(host) = host else { return false };
        let host = host.to_ascii_lowercase();
        let name = match host.rsplit_once(':') {
            Some((name, port))
                if !name.is_empty()
                    && !port.contains(']')
                    && port.bytes().all(|b| b.is_ascii_digit()) =>
            {
                name
            }
            _ => host.as_str(),
        };
        allowed.iter().any(|a| a == name || *a == host)
    }

    /// A configured origin, or the server's own (`http(s)://<Host>`, the console's requests) when
    /// the Host itself was checked against a list: with any Host accepted, a rebound name would make
    /// any page "same-origin".
    fn origin_allowed(&self, origin: Option<&str>, host: Option<&str>) -> bool {
        match origin {
            None => true,
            Some(origin) => {
                self.origins.iter().any(|o| o == origin)
                    || (self.hosts.is_some()
                        && host.is_some_and(|h| {
                            origin == format!("http://{h}") || origin == format!("https://{h}")
                        }))
            }
        }
    }
}

/// How often histogram samples are folded into their summaries. A recorder built without the
/// exporter's own listener keeps every sample until upkeep runs, so without this a node that is
/// never scraped grows by two samples (about 33 bytes) per request for as long as it serves.
const METRICS_UPKEEP: std::time::Duration = std::time::Duration::from_secs(5);

/// The process-wide Prometheus recorder, installed once, with its upkeep thread.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be global (an embedding application); ours then stays local.
            let _ = metrics::set_global_recorder(recorder);
            let upkeep = handle.clone();
            let started = std::thread::Builder::new()
                .name("aip-metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(METRICS_UPKEEP);
                        upkeep.run_upkeep();
                    }
                });
            if let Err(e) = started {
                // Scrapes still drain the samples; only an unscraped node grows.
                tracing::warn!(error = %e, "metrics upkeep thread did not start");
            }
            handle
        })
        .clone()
}

/// The routes every deployment serves, with authentication and guards applied.
/// Every route but the probes counts against `max_in_flight` requests (spec 22.8): a saturated node
/// still answers `/health` and `/ready`.
pub fn router(
    state: AppState,
    (protected, public_extra): (Router<AppState>, Router<AppState>),
    (max_body_bytes, max_in_flight): (usize, usize),
    console: bool,
) -> Router {
    let protected = protected
        .route("/metrics", get(metrics_route))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), authenticate));
    let public = if console {
        public_extra.merge(crate::console::routes())
    } else {
        public_extra
    };
    let streams = middleware::from_fn_with_state(
        Arc::clone(&state.open_streams),
        crate::overload::bound_streams,
    );
    let bounded =
        crate::overload::limit_in_flight(public.merge(protected).layer(streams), max_in_flight);
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .merge(bounded)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(middleware::from_fn_with_state(state.clone(), retry_after))
        .layer(middleware::from_fn(record_metrics))
        .with_state(state)
}

/// Whether a request goes to an envelope endpoint, which answers every rejection with an error
/// envelope (spec 19.1).
pub fn is_envelope_endpoint(method: &axum::http::Method, path: &str) -> bool {
    method == axum::http::Method::POST && matches!(path, "/aip/v1/messages" | "/aip/v1/actions")
}

/// Seconds a client refused while the node drains waits before sending again.
const DRAINING_RETRY_AFTER_S: u64 = 5;

/// Seconds a rate-limited client (or one refused by a full queue or node) waits: every bucket
/// refills at least one token a second.
const RATE_LIMITED_RETRY_AFTER_S: u64 = 1;

/// A refusal that a later request may get past says when (`Retry-After`): a 503 while the node
/// drains (by then its successor, or another node behind the same address, takes the work), any
/// other 503 and a 429 of a rate limit or quota (spec 22.8).
async fn retry_after(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let after = match response.status() {
        StatusCode::SERVICE_UNAVAILABLE if state.runtime.is_draining() => DRAINING_RETRY_AFTER_S,
        // A full queue, an overloaded node, a store that did not answer: a second is enough for
        // a slot to free.
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS => {
            RATE_LIMITED_RETRY_AFTER_S
        }
        _ => return response,
    };
    if !response.headers().contains_key(header::RETRY_AFTER) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, after.into());
    }
    response
}

/// Serve until SIGINT/SIGTERM; admitted work stays durable across the shutdown (spec 20.1). The
/// first signal drains `runtime` (new work refused, reads served, running handlers given `grace`
/// to finish and commit), then the listener closes, open streams end with a resumable frame and
/// connections close ([`crate::listener`]); a second signal exits at once.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    runtime: Arc<aip_runtime::Runtime>,
    grace: Grace,
    (limits, open_streams): (
        crate::listener::ConnectionLimits,
        Arc<crate::overload::OpenStreams>,
    ),
) -> std::io::Result<()> {
    crate::listener::serve(
        listener,
        app,
        limits,
        open_streams,
        drain_on_signal(runtime, grace),
    )
    .await
}

/// How long a drain waits for running handlers (`[shutdown]`).
#[derive(Debug, Clone, Copy)]
pub struct Grace {
    /// For every handler.
    pub all: std::time::Duration,
    /// For a mutation that would settle uncertain if released (at least `all`).
    pub mutations: std::time::Duration,
}

async fn drain_on_signal(runtime: Arc<aip_runtime::Runtime>, grace: Grace) {
    shutdown_signal().await;
    runtime.begin_drain();
    tracing::warn!(
        grace_ms = grace.all.as_millis(),
        mutation_grace_ms = grace.mutations.as_millis(),
        "draining: new work is refused, running handlers may finish; a second signal exits at once"
    );
    println!("aip serve: draining (a second signal exits at once)");
    tokio::spawn(async {
        shutdown_signal().await;
        println!("aip serve: second signal: exiting at once");
        std::process::exit(130);
    });
    let started = std::time::Instant::now();
    let drain = runtime.drained(grace.all, grace.mutations).await;
    let took = started.elapsed().as_millis();
    if drain.released.is_empty() {
        println!(
            "aip serve: drained in {took} ms: all {} running handler(s) finished",
            drain.finished
        );
    } else {
        let ids: Vec<&str> = drain.released.iter().map(|(_, id)| id.as_str()).collect();
        println!(
            "aip serve: drained in {took} ms: {} handler(s) finished; {} still running at the grace of {} ms ({} ms for mutations) were interrupted and their leases released for re-dispatch (by retry safety: a mutation is settled uncertain, never re-run): {}",
            drain.finished,
            drain.released.len(),
            grace.all.as_millis(),
            grace.mutations.as_millis(),
            ids.join(", ")
        );
    }
    SHUTDOWN.send_replace(true);
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { () = ctrl_c => {}, () = term => {} }
}

/// Set once a shutdown signal arrived: streams that would otherwise stay open forever (an MCP legacy
/// SSE stream) end on it, so graceful shutdown is not held up by them.
static SHUTDOWN: std::sync::LazyLock<tokio::sync::watch::Sender<bool>> =
    std::sync::LazyLock::new(|| tokio::sync::watch::channel(false).0);

/// Whether the server is shutting down (the drain is over).
pub fn is_shutting_down() -> bool {
    *SHUTDOWN.borrow()
}

/// What an SSE stream sends last when it ends: nothing, or, when the server shuts down, an SSE
/// `retry` hint (1 s) with a comment naming why, so the client reconnects to the restarted node
/// or another (spec 20.1).
pub(crate) fn sse_end<E>() -> impl futures_util::Stream<Item = Result<axum::response::sse::Event, E>>
{
    futures_util::StreamExt::filter_map(
        futures_util::stream::once(async { is_shutting_down() }),
        |down| async move {
            down.then(|| {
                Ok(axum::response::sse::Event::default()
                    .retry(std::time::Duration::from_millis(1000))
                    .comment(aip_core::ErrorCode::Draining.as_str()))
            })
        },
    )
}

/// Resolves once the server is shutting down.
pub async fn shutting_down() {
    let mut rx = SHUTDOWN.subscribe();
    // The sender lives in a static: `wait_for` ends only when the flag is set.
    let _ = rx.wait_for(|down| *down).await;
}

/// Liveness: the process answers HTTP. Needs no token and says nothing else.
async fn health() -> impl IntoResponse {
    axum::Json(json!({ "status": "ok" }))
}

/// The longest a readiness probe waits for storage: a writer that does not answer in this time is
/// stalled, as far as routing traffic here goes.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether the last probe found the node ready, so the log records changes, not every probe.
static LAST_READY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Readiness: not draining, storage reachable through its readers and its writer within
/// [`READY_TIMEOUT`], migrations exactly this build's. Needs no token (a Kubernetes probe has
/// none), so it answers only `ready`, `not_ready` or `draining`; why it is not ready goes to the
/// node log.
async fn ready(State(state): State<AppState>) -> Response {
    let verdict = if state.runtime.is_draining() {
        Err(("draining", "the node is draining".to_owned()))
    } else {
        match tokio::time::timeout(READY_TIMEOUT, state.ready.check()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(("not_ready", reason)),
            Err(_) => Err((
                "not_ready",
                format!(
                    "storage did not answer within {} ms (writer stalled or database unreachable)",
                    READY_TIMEOUT.as_millis()
                ),
            )),
        }
    };
    let was = LAST_READY.swap(verdict.is_ok(), std::sync::atomic::Ordering::Relaxed);
    match verdict {
        Ok(()) => {
            if !was {
                tracing::info!("ready again");
            }
            axum::Json(json!({ "status": "ready" })).into_response()
        }
        Err((status, reason)) => {
            if was {
                tracing::warn!(%reason, "not ready");
            }
            (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(json!({ "status": status })),
            )
                .into_response()
        }
    }
}

async fn metrics_route(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

async fn not_found() -> Response {
    ApiError::new(aip_core::ErrorCode::NotFound, "no such route").into_response()
}

/// Bearer authentication on every protected route; the resolved caller rides in request extensions.
async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let mut caller = authorization
        .and_then(|v| state.auth.authenticate(v))
        .cloned();
    let is_mcp = crate::profile::mcp::is_mcp_path(request.uri().path());
    if caller.is_none() && authorization.is_none() && is_mcp {
        caller = state.mcp_dev_principal.clone();
    }
    // The MCP endpoint also takes OAuth access tokens (spec 21.1), and names its metadata on refusal.
    if let Some(oauth) = state.oauth.as_ref().filter(|_| is_mcp)
        && caller.is_none()
    {
        let token = authorization.and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
        match token.map(|t| oauth.authenticate(t.trim())) {
            Some(Ok(found)) => caller = Some(found),
            refused => {
                let reason = match &refused {
                    Some(_) => RefusalReason::BadOAuthToken,
                    None => RefusalReason::MissingCredentials,
                };
                note_refusal(&state, &request, reason);
                return crate::profile::mcp::challenge(oauth, refused.and_then(Result::err));
            }
        }
    }
    match caller {
        Some(caller) => {
            // A REST read is charged to the caller's read buckets here; envelopes (reads among
            // them) are charged by the runtime's dispatch, actions at their admission.
            if request.method() == axum::http::Method::GET
                && let Err(refused) = state.runtime.check_read_rate(&caller).await
            {
                return ApiError::from_protocol(refused.to_protocol_error()).into_response();
            }
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        // A peer's request carries no bearer token, only its signature (spec 14.2): the envelope
        // endpoint resolves and the runtime verifies it.
        None if request.method() == axum::http::Method::POST
            && request.uri().path() == "/aip/v1/messages"
            && !request.headers().contains_key(header::AUTHORIZATION)
            && !state.auth.has_no_peers() =>
        {
            next.run(request).await
        }
        None => {
            let reason = match authorization {
                Some(_) => RefusalReason::BadBearer,
                None => RefusalReason::MissingCredentials,
            };
            note_refusal(&state, &request, reason);
            // The envelope endpoints answer every rejection with an error envelope (spec 19.1).
            if is_envelope_endpoint(request.method(), request.uri().path()) {
                ApiError::unauthenticated().into_envelope_response()
            } else {
                ApiError::unauthenticated().into_response()
            }
        }
    }
}

/// The remote address a request came from (its IP: ports change per connection), or `unknown`
/// where the server runs without connection info (embedded in tests).
pub(crate) fn source_of(request: &Request) -> String {
    request
        .extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map_or_else(|| "unknown".to_owned(), |c| c.0.ip().to_string())
}

/// Audits a refusal before a tenant is known in the node's security log, aggregated per source
/// and reason (spec 18.3). The request is refused at once: the refusal is counted here and its
/// window's event written in the background; a log write that fails is logged by the runtime.
pub(crate) fn note_refusal(state: &AppState, request: &Request, reason: RefusalReason) {
    let facts = json!({ "method": request.method().as_str(), "path": request.uri().path() });
    note_refusal_from(state, source_of(request), reason, facts);
}

/// [`note_refusal`] for a handler that has only the source and the request's facts.
pub(crate) fn note_refusal_from(
    state: &AppState,
    source: String,
    reason: RefusalReason,
    facts: serde_json::Value,
) {
    let refusal = aip_runtime::Refusal {
        tenant: None,
        source,
        reason,
        label: aip_runtime::AUTH_REFUSED,
        data: facts,
    };
    // Counted at once; the window's audit event is written in the background, so an
    // unauthenticated request is refused before any store access (spec 22.8).
    state.runtime.note_refusal_detached(refusal);
}

async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // The probes disclose nothing but a status, and a kubelet or load balancer calls them by the
    // pod's address, which `allowed_hosts` does not name.
    if matches!(request.uri().path(), "/health" | "/ready") {
        return next.run(request).await;
    }
    let headers: &HeaderMap = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if !state.guard.host_allowed(host) {
        note_refusal(&state, &request, RefusalReason::HostNotAllowed);
        return ApiError::new(
            aip_core::ErrorCode::HostNotAllowed,
            "Host header not allowed",
        )
        .into_response();
    }
    let origin = headers
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if !state.guard.origin_allowed(origin, host) {
        note_refusal(&state, &request, RefusalReason::OriginNotAllowed);
        return ApiError::new(aip_core::ErrorCode::OriginNotAllowed, "Origin not allowed")
            .into_response();
    }
    next.run(request).await
}

async fn record_metrics(request: Request<Body>, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_owned();
    let method = request.method().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("aip_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("aip_http_request_duration_seconds", "method" => method, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_listener_accepts_only_loopback_host_names() {
        let guard = RequestGuard::from_config(&Config::default());
        assert!(guard.host_allowed(Some("127.0.0.1:7700")));
        assert!(guard.host_allowed(Some("localhost")));
        assert!(guard.host_allowed(Some("[::1]:7700")));
        assert!(!guard.host_allowed(Some("evil.example:7700")));
        assert!(!guard.host_allowed(None));
    }

    #[test]
    fn any_origin_outside_the_list_or_the_servers_own_is_refused() {
        let guard = RequestGuard::from_config(&Config::default());
        let host = Some("127.0.0.1:7700");
        assert!(guard.origin_allowed(None, host));
        assert!(!guard.origin_allowed(Some("https://evil.example"), host));
        // The console's own requests: same origin as the checked Host.
        assert!(guard.origin_allowed(Some("http://127.0.0.1:7700"), host));
        assert!(!guard.origin_allowed(Some("http://127.0.0.1:7701"), host));
        // With any Host accepted, a rebound name is no proof of origin.
        let open = RequestGuard::from_config(&Config {
            listen: "0.0.0.0:7700".parse().unwrap(),
            ..Config::default()
        });
        assert!(!open.origin_allowed(Some("http://evil.example"), Some("evil.example")));
    }
}
