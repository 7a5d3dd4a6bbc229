//! Node-wide overload protection of the HTTP binding (spec 22.8): a bound on the requests a node
//! handles at once, the excess refused at once (never queued, so a flood costs no memory), and a
//! timeout on the native routes, whose every wait is bounded by `max_wait_ms` already.
//!
//! Both answer typed and retryable: `aip.runtime.overloaded` (503, `Retry-After`) and
//! `aip.runtime.request_timeout` (504). A timed-out request never cancels its action: submission
//! runs detached from the request (`Runtime::submit`), so the action runs on and is read by id.

use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::http::{Method, Uri, header};
use axum::response::{IntoResponse, Response};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{BoxError, ServiceBuilder};

use crate::error::ApiError;
use crate::http::AppState;

/// Seconds an overloaded node asks a client to wait: a request slot frees within one request.
const OVERLOADED_RETRY_AFTER_S: u64 = 1;

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
    let error = ApiError::new(code, message);
    let mut response = if crate::http::is_envelope_endpoint(&method, uri.path()) {
        error.into_envelope_response()
    } else {
        error.into_response()
    };
    if code == aip_core::ErrorCode::Overloaded {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, OVERLOADED_RETRY_AFTER_S.into());
    }
    response
}
