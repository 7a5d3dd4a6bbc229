//! Node-wide overload protection of the HTTP binding (spec 22.8): a bound on the requests a node
//! handles at once, the excess refused at once (never queued, so a flood costs no memory), a
//! timeout on the native routes, whose every wait is bounded by `max_wait_ms` already, and a bound
//! on the streams open at once (SSE responses and WebSocket connections).
//!
//! Each answers typed and retryable: `aip.runtime.overloaded` (503, `Retry-After`),
//! `aip.runtime.request_timeout` (504) and `aip.transport.too_many_streams` (503, `Retry-After`). A
//! timed-out request never cancels its action: submission runs detached from the request
//! (`Runtime::submit`), so the action runs on and is read by id.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{BoxError, ServiceBuilder};

use crate::error::ApiError;
use crate::http::AppState;

/// `router` handling at most `max_in_flight` requests at once, all its routes together; the
/// excess gets `aip.runtime.overloaded` at once.
pub fn limit_in_flight(router: Router<AppState>, max_in_flight: usize) -> Router<AppState> {
    router.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(refuse))
            .load_shed()
            .layer(GlobalConcurrencyLimitLayer::new(max_in_flight)),
    )
}

/// `router` answering `aip.runtime.request_timeout` to a request it has not answered within
/// `timeout` (the response head: a stream that has started is bounded by its own heartbeats).
pub fn time_out(router: Router<AppState>, timeout: Duration) -> Router<AppState> {
    router.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(refuse))
            .timeout(timeout),
    )
}

/// `router` reading each request's whole body (at most `max_bytes`) within `within` before
/// serving it: a client that trickles its body is answered `aip.runtime.request_timeout` and its
/// request never runs, so it holds an in-flight slot no longer than that.
pub fn read_body_within(
    router: Router<AppState>,
    within: Duration,
    max_bytes: usize,
) -> Router<AppState> {
    router.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| async move {
            let declared = request
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<usize>().ok());
            if declared.is_some_and(|n| n > max_bytes) {
                // Refused unread by the handler's own body limit, typed as it answers it.
                return next.run(request).await;
            }
            let (parts, body) = request.into_parts();
            match tokio::time::timeout(within, axum::body::to_bytes(body, max_bytes)).await {
                Ok(Ok(bytes)) => {
                    next.run(Request::from_parts(parts, Body::from(bytes)))
                        .await
                }
                Ok(Err(_)) => {
                    let error = ApiError::with_status(
                        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                        aip_core::ErrorCode::BodyRejected,
                        format!("the body exceeds {max_bytes} bytes, or could not be read"),
                    );
                    shaped(error, &parts.method, parts.uri.path())
                }
                Err(_) => {
                    metrics::counter!("aip_http_body_timeouts_total").increment(1);
                    refusal(
                        aip_core::ErrorCode::RequestTimeout,
                        "the request body did not arrive within limits.body_read_timeout_ms; nothing was done",
                        &parts.method,
                        parts.uri.path(),
                    )
                }
            }
        },
    ))
}

/// The typed refusal of a request the layers above stopped, shaped as the endpoint answers its
/// other errors (an error envelope on the envelope endpoints, spec 19.1).
async fn refuse(method: Method, uri: Uri, error: BoxError) -> Response {
    let (code, message) = if error.is::<tower::load_shed::error::Overloaded>() {
        metrics::counter!("aip_http_overloaded_total").increment(1);
        (
            aip_core::ErrorCode::Overloaded,
            "the node is handling as many requests as it is configured to; nothing was done",
        )
    } else if error.is::<tower::timeout::error::Elapsed>() {
        metrics::counter!("aip_http_request_timeouts_total").increment(1);
        (
            aip_core::ErrorCode::RequestTimeout,
            "no answer within the request timeout; an action this request submitted runs on: read it by its id",
        )
    } else {
        tracing::error!(%error, "request layer failed");
        (
            aip_core::ErrorCode::Internal,
            "the request could not be handled",
        )
    };
    refusal(code, message, &method, uri.path())
}

/// A typed refusal shaped as the endpoint answers its other errors (an error envelope on the
/// envelope endpoints, spec 19.1). The router's `Retry-After` layer dates every 503.
fn refusal(code: aip_core::ErrorCode, message: &str, method: &Method, path: &str) -> Response {
    shaped(ApiError::new(code, message), method, path)
}

/// `error` as the endpoint at `path` answers its errors: an error envelope on the envelope
/// endpoints, the binding's JSON error elsewhere.
fn shaped(error: ApiError, method: &Method, path: &str) -> Response {
    if crate::http::is_envelope_endpoint(method, path) {
        error.into_envelope_response()
    } else {
        error.into_response()
    }
}

/// The streams open on this node, SSE responses and WebSocket connections together, and their
/// bound (`limits.max_open_streams`).
#[derive(Debug)]
pub struct OpenStreams {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// One open stream, counted until it is dropped with the stream.
#[derive(Debug)]
pub struct StreamSlot(Arc<AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        // Every slot incremented the count once, so it is at least 1 here.
        let open = self.0.fetch_sub(1, Ordering::AcqRel).saturating_sub(1);
        metrics::gauge!("aip_open_streams").set(open as f64);
    }
}

impl OpenStreams {
    /// No stream open yet; at most `max` at once.
    pub fn new(max: usize) -> Self {
        Self {
            open: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// A slot for a stream a client asks to open, if the node is below its bound.
    pub fn try_open(&self) -> Option<StreamSlot> {
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < self.max).then_some(open + 1)
            })
            .ok()?;
        metrics::gauge!("aip_open_streams").set((taken + 1) as f64);
        Some(StreamSlot(Arc::clone(&self.open)))
    }

    /// A slot for a stream that carries the reply of work already done (an MCP or A2A call
    /// answered as a stream): it counts, so later streams wait for it, but is never refused.
    fn open_anyway(&self) -> StreamSlot {
        let open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        metrics::gauge!("aip_open_streams").set(open as f64);
        StreamSlot(Arc::clone(&self.open))
    }

    /// The typed refusal of a stream past the bound.
    pub fn refusal(method: &Method, path: &str) -> Response {
        metrics::counter!("aip_streams_refused_total").increment(1);
        refusal(
            aip_core::ErrorCode::TooManyStreams,
            "the node has as many streams open as it is configured to; nothing was done",
            method,
            path,
        )
    }
}

/// Whether a request asks for nothing but an event stream (a JSON reply would not do): such a
/// request is refused before any work when the node's streams are at their bound.
fn asks_for_stream(headers: &HeaderMap) -> bool {
    crate::sse::wants_sse(headers)
        && !headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("json"))
}

/// Counts every SSE response while it is open; a request that asks only for a stream is refused
/// at once (`aip.transport.too_many_streams`) when `limits.max_open_streams` are open. WebSocket
/// connections take their slot in their own upgrade (`crate::ws`).
pub async fn bound_streams(
    State(streams): State<Arc<OpenStreams>>,
    request: Request,
    next: Next,
) -> Response {
    let slot = if asks_for_stream(request.headers()) {
        match streams.try_open() {
            Some(slot) => Some(slot),
            None => return OpenStreams::refusal(request.method(), request.uri().path()),
        }
    } else {
        None
    };
    let response = next.run(request).await;
    let is_stream = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_stream {
        return response;
    }
    let slot = slot.unwrap_or_else(|| streams.open_anyway());
    let (parts, body) = response.into_parts();
    // The slot lives as long as the body: the stream ends, or the client goes, and it frees.
    let body = futures_util::StreamExt::map(body.into_data_stream(), move |chunk| {
        let _slot = &slot;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Readiness probes share one store check per [`READY_REUSE`]: `/ready` needs no token and sits
/// outside the in-flight bound, so a flood of probes must not become a flood of store round trips.
/// One check runs at a time; callers arriving meanwhile wait for it (each under the route's own
/// timeout) and take its verdict.
pub struct SharedReady {
    inner: std::sync::Arc<dyn crate::http::ReadyCheck>,
    last: tokio::sync::Mutex<Option<(std::time::Instant, Result<(), String>)>>,
}

/// How long one store check's verdict answers probes.
pub const READY_REUSE: std::time::Duration = std::time::Duration::from_millis(500);

impl SharedReady {
    /// Shares `inner`'s checks.
    pub fn new(inner: std::sync::Arc<dyn crate::http::ReadyCheck>) -> Self {
        Self {
            inner,
            last: tokio::sync::Mutex::new(None),
        }
    }
}

#[async_trait::async_trait]
impl crate::http::ReadyCheck for SharedReady {
    async fn check(&self) -> Result<(), String> {
        let mut last = self.last.lock().await;
        if let Some((at, verdict)) = last.as_ref()
            && at.elapsed() < READY_REUSE
        {
            return verdict.clone();
        }
        let verdict = self.inner.check().await;
        *last = Some((std::time::Instant::now(), verdict.clone()));
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    #[async_trait::async_trait]
    impl crate::http::ReadyCheck for Counting {
        async fn check(&self) -> Result<(), String> {
            self.0.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_burst_of_readiness_probes_costs_one_store_check_per_reuse_period() {
        let counting = Arc::new(Counting(AtomicUsize::new(0)));
        let shared = Arc::new(SharedReady::new(
            Arc::clone(&counting) as Arc<dyn crate::http::ReadyCheck>
        ));
        let mut probes = tokio::task::JoinSet::new();
        for _ in 0..200 {
            let shared = Arc::clone(&shared);
            probes.spawn(async move { crate::http::ReadyCheck::check(&*shared).await });
        }
        while let Some(verdict) = probes.join_next().await {
            assert_eq!(verdict.ok(), Some(Ok(())));
        }
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        tokio::time::sleep(READY_REUSE).await;
        crate::http::ReadyCheck::check(&*shared).await.ok();
        assert_eq!(
            counting.0.load(Ordering::SeqCst),
            2,
            "a stale verdict is checked again"
        );
    }
}
