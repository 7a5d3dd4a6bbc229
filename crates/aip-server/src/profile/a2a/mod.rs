//! The A2A compatibility profile `aip.a2a.compat.v1` (spec 21.2), A2A protocol 1.0 over JSON-RPC at
//! `POST /a2a`, with the agent card at `/.well-known/agent-card.json`.
//!
//! A task is a native action (task id = action id) admitted through the same admission as every
//! transport, owned by the bearer's principal: another principal's task is "task not found". A
//! message's `messageId` is its idempotency: the action id is derived from (principal, messageId),
//! so a re-sent message answers the same task. Task states are projected from the native lifecycle
//! (a pending approval is `TASK_STATE_INPUT_REQUIRED`, never completed); artifacts from the result
//! and the stream chunks. No A2A type crosses into the runtime or the store. Push notification
//! configs are callback subscriptions (`push`); a `contextId` names a native session (`context`);
//! a policy refusal is `TASK_STATE_REJECTED`. Continuing a task (`taskId`) is refused: a task
//! waiting for input waits for an approval decision, which a message cannot give.

mod card;
mod context;
pub mod push;
pub mod remote;
mod rpc;
mod send;
mod task;

use std::sync::Arc;

use aip_runtime::Caller;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

pub use crate::config::a2a::A2aConfig;
use crate::http::AppState;
use rpc::{A2aError, Reply};

/// Profile id (spec 21.2).
pub const PROFILE: &str = "aip.a2a.compat.v1";
/// The A2A protocol version served.
pub const PROTOCOL_VERSION: &str = "1.0";

/// What the A2A routes share.
#[derive(Debug)]
pub struct A2aState {
    config: A2aConfig,
    /// The agent's name and description on the card.
    agent: (String, String),
    /// Bound of a blocking `SendMessage` wait and of a stream, ms.
    max_wait_ms: u64,
    /// Every admitted capability, by id (skills, and the modes a message may run in).
    capabilities: std::collections::BTreeMap<String, aip_core::Capability>,
    /// Push notification configs are accepted (callbacks are enabled on this node).
    push: bool,
}

impl A2aState {
    /// Checks `config` against the admitted `capabilities`.
    pub fn new<'a>(
        config: A2aConfig,
        agent: (String, String),
        max_wait_ms: u64,
        capabilities: impl Iterator<Item = &'a aip_core::Capability>,
    ) -> Result<Self, crate::config::ConfigError> {
        let capabilities: std::collections::BTreeMap<String, aip_core::Capability> = capabilities
            .map(|c| (c.id.as_str().to_owned(), c.clone()))
            .collect();
        let known = |id: &str| capabilities.contains_key(id);
        if let Some(base) = &config.public_base_url
            && !(base.starts_with("https://") || base.starts_with("http://"))
        {
            return Err(crate::config::malformed(
                "a2a.public_base_url",
                base,
                "an http(s) URL",
            ));
        }
        let named = config
            .default_capability
            .iter()
            .map(|id| ("a2a.default_capability", id))
            .chain(
                config
                    .public_skills
                    .iter()
                    .map(|id| ("a2a.public_skills", id)),
            );
        for (key, id) in named {
            if !known(id) {
                return Err(crate::config::ConfigError::Unknown {
                    key: key.into(),
                    kind: "capability",
                    name: id.clone(),
                });
            }
        }
        Ok(Self {
            config,
            agent,
            max_wait_ms,
            capabilities,
            push: false,
        })
    }

    /// Accepts push notification configs (when the node's callbacks are enabled).
    pub fn with_push(mut self, enabled: bool) -> Self {
        self.push = enabled;
        self
    }
}

/// The public card routes.
pub fn public_routes(state: Arc<A2aState>) -> Router<AppState> {
    let card = axum::routing::get(card::public);
    Router::new()
        .route("/.well-known/agent-card.json", card.clone())
        .route("/.well-known/agent.json", card.clone())
        .route("/a2a/agent-card", card)
        .layer(Extension(state))
}

/// The JSON-RPC routes (behind bearer authentication and the Host/Origin guard).
pub fn routes(state: Arc<A2aState>) -> Router<AppState> {
    let endpoint = axum::routing::post(post);
    Router::new()
        .route("/a2a", endpoint.clone())
        .route("/a2a/v1", endpoint.clone())
        .route("/aip/v1/a2a", endpoint)
        .layer(Extension(state))
}

/// One authenticated call.
struct Call<'a> {
    app: &'a AppState,
    a2a: &'a A2aState,
    caller: &'a Caller,
    headers: &'a HeaderMap,
}

/// `POST /a2a`: one JSON-RPC request.
async fn post(
    State(app): State<AppState>,
    Extension(a2a): Extension<Arc<A2aState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            return (
                rejection.status(),
                axum::Json(rpc::error_body(
                    &Value::Null,
                    &A2aError::invalid_request("the request body was refused"),
                )),
            )
                .into_response();
        }
    };
    let (id, method, params) = match rpc::decode(&body) {
        Ok(request) => request,
        Err((id, error)) => return Reply::Error(id, error).into_response(),
    };
    if let Err(error) = rpc::check_version(&headers) {
        return Reply::Error(id, error).into_response();
    }
    let call = Call {
        app: &app,
        a2a: &a2a,
        caller: &caller,
        headers: &headers,
    };
    dispatch(&call, id, &method, params).await.into_response()
}

async fn dispatch(call: &Call<'_>, id: Value, method: &str, params: Map<String, Value>) -> Reply {
    let done = |result: Result<Value, A2aError>| match result {
        Ok(value) => Reply::Result(id.clone(), value),
        Err(error) => Reply::Error(id.clone(), error),
    };
    // A request's tenant is a selector (spec 22.6): only the caller's own.
    if let Some(tenant) = params.get("tenant").and_then(Value::as_str)
        && !tenant.is_empty()
        && tenant != call.caller.tenant
    {
        return done(Err(A2aError::invalid_params(
            "tenant selects only the caller's own tenant",
        )));
    }
    match method {
        "SendMessage" => done(send::send(call, &params).await),
        "SendStreamingMessage" => send::send_streaming(call, id.clone(), &params).await,
        "SubscribeToTask" => send::subscribe(call, id.clone(), &params).await,
        "GetTask" => done(task::get(call, &params).await),
        "ListTasks" => done(task::list(call, &params).await),
        "CancelTask" => done(task::cancel(call, &params).await),
        "GetExtendedAgentCard" => done(Ok(card::extended(call))),
        "CreateTaskPushNotificationConfig" => done(push::create(call, &params).await),
        "GetTaskPushNotificationConfig" => done(push::get(call, &params).await),
        "ListTaskPushNotificationConfigs" => done(push::list(call, &params).await),
        "DeleteTaskPushNotificationConfig" => done(push::delete(call, &params).await),
        _ => done(Err(A2aError::method_not_found(method))),
    }
}
