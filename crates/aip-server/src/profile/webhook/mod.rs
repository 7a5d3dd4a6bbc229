//! Signed webhook ingress, profile `aip.http.webhook.v1` (spec 21.3, 22.3): a sender POSTs an event
//! to `/aip/v1/webhooks/{subscription}`; the raw bytes' signature is verified before anything parses
//! them, and the event becomes a queued native action of the capability its type is mapped to,
//! acting as the subscription's own service principal.
//!
//! The delivery id (`webhook-id`) is claimed durably by the action itself: the action id is derived
//! from (subscription, delivery id), so a replay, also after a restart, is a re-delivery of the
//! same action and creates nothing (answered 200 `duplicate`). A 2xx is sent only once the action is
//! stored; a storage failure is a 5xx so the sender retries. Recording events as channel messages
//! (spec 15) is not built: a subscription can only admit actions.

mod verify;

use std::collections::HashMap;
use std::sync::Arc;

use aip_core::{Action, ActionId, ActionMode, ErrorCode, PrincipalKind};
use aip_runtime::channel::ChannelSource;
use aip_runtime::{ActionRequest, Caller, Runtime, RuntimeError, Submitted};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub use verify::{Delivery, Secret, SecretError, SigningOrder, WebhookError, verify};

pub use crate::config::webhooks::{InputConfig, OrderConfig, SubscriptionConfig};
use crate::config::{ConfigError, malformed, within, within_usize};

use crate::error::ApiError;
use crate::http::AppState;

/// Profile id (spec 21.3, 25.1).
pub const PROFILE: &str = "aip.http.webhook.v1";
/// Longest accepted `webhook-id`.
const MAX_DELIVERY_ID: usize = 200;
/// Longest subscription id (it is part of the URL and of the idempotency key).
const MAX_SUBSCRIPTION_ID: usize = 64;
/// Most secrets one subscription may hold (rotation needs two or three).
const MAX_SECRETS: usize = 8;
/// Longest wait for a delivery's whole body.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A subscription ready to serve.
#[derive(Debug)]
struct Subscription {
    id: String,
    secrets: Vec<Secret>,
    order: SigningOrder,
    tolerance_s: i64,
    max_body: usize,
    type_field: String,
    input: InputConfig,
    caller: Caller,
    /// Event type -> what an event of that type does.
    events: HashMap<String, Target>,
}

/// What an event type does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Admits an async action of the capability, with the delivery id as idempotency key when
    /// the capability takes keys.
    Action { capability: String, keyed: bool },
    /// Records a channel message (spec 15.3).
    ChannelMessage,
    /// Records a conversation update.
    ConversationUpdate,
}

/// The event mapping that records a channel message.
pub const CHANNEL_MESSAGE: &str = "aip.channel.v1.message_created";
/// The event mapping that records a conversation update.
pub const CONVERSATION_UPDATE: &str = "aip.channel.v1.conversation_updated";

/// Every subscription, by id.
#[derive(Debug, Default)]
pub struct Webhooks(HashMap<String, Subscription>);

impl Webhooks {
    /// Checks the configured subscriptions against the admitted capabilities (`capability`
    /// finds one by id) and the principals already configured.
    pub fn build<'a>(
        configs: &[SubscriptionConfig],
        max_body_bytes: usize,
        capability: impl Fn(&str) -> Option<&'a aip_core::Capability>,
        principal_taken: impl Fn(&str) -> bool,
    ) -> Result<Self, ConfigError> {
        let mut subscriptions = HashMap::new();
        for config in configs {
            let subscription = subscription(config, max_body_bytes, &capability, &principal_taken)?;
            if subscriptions
                .insert(config.id.clone(), subscription)
                .is_some()
            {
                return Err(ConfigError::Duplicate {
                    key: "webhooks[].id".into(),
                    id: config.id.clone(),
                });
            }
        }
        Ok(Self(subscriptions))
    }

    /// Whether any subscription is configured (the profile is then advertised).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The principals the subscriptions act as.
    pub fn callers(&self) -> impl Iterator<Item = &Caller> {
        self.0.values().map(|s| &s.caller)
    }
}

fn subscription<'a>(
    config: &SubscriptionConfig,
    max_body_bytes: usize,
    target: &impl Fn(&str) -> Option<&'a aip_core::Capability>,
    principal_taken: &impl Fn(&str) -> bool,
) -> Result<Subscription, ConfigError> {
    let id = &config.id;
    let key = |k: &str| format!("webhooks[{id}].{k}");
    if id.is_empty()
        || id.len() > MAX_SUBSCRIPTION_ID
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(malformed("webhooks[].id", id, "1..=64 of [A-Za-z0-9._-]"));
    }
    let mut texts = config.secrets.clone();
    for file in &config.secret_files {
        match std::fs::read_to_string(file) {
            Ok(text) => texts.push(text.trim().to_owned()),
            Err(source) => {
                return Err(ConfigError::Unreadable {
                    key: key("secret_files"),
                    path: file.clone(),
                    source,
                });
            }
        }
    }
    within_usize(key("secrets length"), texts.len(), 1..=MAX_SECRETS)?;
    let mut secrets = Vec::with_capacity(texts.len());
    for text in &texts {
        match Secret::parse(text) {
            Ok(secret) => secrets.push(secret),
            Err(e) => return Err(crate::config::rejected(key("secrets"), e)),
        }
    }
    within(key("tolerance_secs"), config.tolerance_secs, 1..=3600)?;
    let max_body = config.max_body_bytes.unwrap_or(max_body_bytes);
    within_usize(key("max_body_bytes"), max_body, 1..=usize::MAX)?;
    crate::config::ordered(
        key("max_body_bytes"),
        max_body as u64,
        crate::config::Order::AtMost,
        "limits.max_body_bytes",
        max_body_bytes as u64,
    )?;
    if config.event_type_field.is_empty() {
        return Err(malformed(key("event_type_field"), "", "a member name"));
    }
    within_usize(key("events length"), config.events.len(), 1..=usize::MAX)?;
    let mut events = HashMap::new();
    let mut scopes = Vec::new();
    for (event_type, capability) in &config.events {
        let channel = match capability.as_str() {
            CHANNEL_MESSAGE => Some(Target::ChannelMessage),
            CONVERSATION_UPDATE => Some(Target::ConversationUpdate),
            _ => None,
        };
        if let Some(channel) = channel {
            if target(capability).is_some() {
                return Err(ConfigError::Reserved {
                    key: "capabilities[].id".into(),
                    value: capability.clone(),
                    why: "webhook events name it as a channel record; rename the capability",
                });
            }
            events.insert(event_type.clone(), channel);
            let scope = aip_runtime::scope::SCOPE_CHANNEL_WRITE.to_owned();
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
            continue;
        }
        let Some(found) = target(capability) else {
            return Err(ConfigError::Unknown {
                key: key(&format!("events.{event_type}")),
                kind: "capability",
                name: capability.clone(),
            });
        };
        if !super::supports_async(found) {
            return Err(ConfigError::Needs {
                key: key(&format!("events.{event_type}")),
                needs: "a capability that supports async",
                why: "webhook events are admitted as async actions",
            });
        }
        events.insert(
            event_type.clone(),
            Target::Action {
                capability: capability.clone(),
                keyed: super::takes_keys(found),
            },
        );
        scopes.push(format!(
            "{}{capability}",
            aip_runtime::scope::SCOPE_INVOKE_PREFIX
        ));
    }
    let principal = config
        .principal
        .clone()
        .unwrap_or_else(|| format!("svc:webhook:{id}"));
    if principal_taken(&principal) {
        return Err(ConfigError::Reserved {
            key: key("principal"),
            value: principal,
            why: "it is a configured principal; a subscription's principal is its own",
        });
    }
    Ok(Subscription {
        id: id.clone(),
        secrets,
        order: match config.signing_order {
            OrderConfig::IdTimestampBody => SigningOrder::IdTimestampBody,
            OrderConfig::TimestampIdBody => SigningOrder::TimestampIdBody,
        },
        tolerance_s: i64::from(config.tolerance_secs),
        max_body,
        type_field: config.event_type_field.clone(),
        input: config.input,
        caller: Caller {
            id: principal,
            kind: PrincipalKind::Service,
            tenant: config.tenant.clone(),
            scopes,
            issuer: format!("webhook:{id}"),
            external_account: None,
            roles: Vec::new(),
            groups: Vec::new(),
            approval_policies: Vec::new(),
        },
        events,
    })
}

/// The public ingress route (a subscription's secret is its authentication, not a bearer token).
pub fn routes(webhooks: Arc<Webhooks>) -> Router<AppState> {
    Router::new().route(
        "/aip/v1/webhooks/{subscription}",
        axum::routing::post(
            move |state: State<AppState>,
                  path: crate::routes::PathId,
                  headers: HeaderMap,
                  body: Body| {
                ingest(Arc::clone(&webhooks), state, path, headers, body)
            },
        ),
    )
}

async fn ingest(
    webhooks: Arc<Webhooks>,
    State(app): State<AppState>,
    crate::routes::PathId(subscription): crate::routes::PathId,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(subscription) = webhooks.0.get(&subscription) else {
        return ApiError::new(ErrorCode::NotFound, "no such webhook subscription").into_response();
    };
    match admit(&app.runtime, subscription, &headers, body).await {
        Ok((status, reply)) => (status, axum::Json(reply)).into_response(),
        Err(error) => error.into_response(),
    }
}

/// Reads, verifies, parses and admits one delivery.
async fn admit(
    runtime: &Arc<Runtime>,
    subscription: &Subscription,
    headers: &HeaderMap,
    body: Body,
) -> Result<(StatusCode, Value), ApiError> {
    let too_large = || {
        ApiError::with_status(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::BodyRejected,
            format!("the body exceeds {} bytes", subscription.max_body),
        )
    };
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > subscription.max_body as u64) {
        return Err(too_large());
    }
    // Bounded while reading, in size and in time: no MAC is computed over an unbounded body, and a
    // sender trickling bytes does not hold the connection.
    let raw = match tokio::time::timeout(
        BODY_TIMEOUT,
        axum::body::to_bytes(body, subscription.max_body),
    )
    .await
    {
        Ok(Ok(raw)) => raw,
        Ok(Err(_)) => return Err(too_large()),
        Err(_) => {
            return Err(ApiError::with_status(
                StatusCode::REQUEST_TIMEOUT,
                ErrorCode::BodyRejected,
                "the body did not arrive in time",
            ));
        }
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let delivery = Delivery {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    match verify(
        &subscription.secrets,
        subscription.order,
        delivery,
        &raw,
        (now, subscription.tolerance_s),
    )
    .map_err(refusal)
    {
        Ok(()) => {}
        Err(refused) => {
            // Audited in the subscription's tenant, aggregated per subscription (spec 18.3), in
            // the background: an unverified sender is refused before any store access.
            runtime.note_refusal_detached(aip_runtime::Refusal {
                tenant: Some(subscription.caller.tenant.clone()),
                source: format!("webhook:{}", subscription.id),
                reason: aip_runtime::RefusalReason::BadWebhookSignature,
                label: aip_runtime::AUTH_REFUSED,
                data: serde_json::json!({ "code": refused.code.as_str() }),
            });
            return Err(refused);
        }
    }
    // Verified: `verify` refuses a delivery without an id.
    let delivery_id = delivery.id.unwrap_or_default();
    if delivery_id.len() > MAX_DELIVERY_ID || !delivery_id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!("webhook-id must be 1 to {MAX_DELIVERY_ID} visible ASCII characters"),
        ));
    }
    let event: Value = serde_json::from_slice(&raw).map_err(|e| {
        ApiError::new(
            ErrorCode::MalformedJson,
            format!("the event is not JSON: {e}"),
        )
    })?;
    let (target, input) = route(subscription, event)?;
    let (capability, keyed) = match target {
        Target::Action { capability, keyed } => (capability, keyed),
        channel => {
            // Verified: the timestamp is the sender's, in seconds, within the tolerance.
            let source = ChannelSource {
                delivery_id: Some(delivery_id),
                sent_at_ms: delivery
                    .timestamp
                    .and_then(|t| t.parse::<i64>().ok())
                    .map(|t| t.saturating_mul(1000)),
            };
            return record(runtime, subscription, source, &channel, input).await;
        }
    };
    let action_id = action_id(&subscription.id, delivery_id);
    let key = format!("{}:{delivery_id}", subscription.id);
    let request = ActionRequest::plain(Action {
        mode: Some(ActionMode::Async),
        idempotency_key: keyed.then(|| key.clone()),
        ..Action::plain(
            ActionId::new(action_id.clone()),
            aip_core::CapabilityId::new(capability),
            input,
        )
    });
    let submitted = runtime
        .submit_action(&subscription.caller, request)
        .await
        .map_err(runtime_error)?;
    let reply = |status: &str| json!({ "status": status, "action_id": action_id, "subscription": subscription.id, "delivery_id": delivery_id });
    Ok(match submitted {
        Submitted::AwaitingApproval { approval_id, .. } => {
            let mut body = reply("accepted");
            body["approval_id"] = json!(approval_id);
            (StatusCode::ACCEPTED, body)
        }
        Submitted::Ack(ack) | Submitted::Result { ack, .. }
            if ack.status == aip_core::AckStatus::Cached =>
        {
            (StatusCode::OK, reply("duplicate"))
        }
        _ => (StatusCode::ACCEPTED, reply("accepted")),
    })
}

/// Records a channel message or conversation update event (spec 15.3): the signature was verified
/// over the raw bytes and the delivery id is the replay claim, so a replay answers `duplicate`
/// and stores nothing, also after a restart.
async fn record(
    runtime: &Arc<Runtime>,
    subscription: &Subscription,
    source: ChannelSource<'_>,
    target: &Target,
    input: Value,
) -> Result<(StatusCode, Value), ApiError> {
    let delivery_id = source.delivery_id.unwrap_or_default();
    let invalid = |e: String| ApiError::new(ErrorCode::InvalidInput, e);
    let caller = &subscription.caller;
    let recorded = match target {
        Target::ChannelMessage => {
            let message: aip_core::ChannelMessage = decode(input).map_err(invalid)?;
            runtime
                .record_channel_message(caller, &message, source)
                .await
                .map(|r| (r.conversation.id, Some(r.message_id)))
        }
        _ => {
            let update: aip_core::ConversationUpdated = decode(input).map_err(invalid)?;
            runtime
                .update_conversation(caller, &update, source)
                .await
                .map(|c| (c.id, None))
        }
    };
    let reply = |status: &str| json!({ "status": status, "subscription": subscription.id, "delivery_id": delivery_id });
    match recorded {
        Ok((conversation_id, message_id)) => {
            let mut body = reply("recorded");
            body["conversation_id"] = json!(conversation_id);
            if let Some(id) = message_id {
                body["message_id"] = json!(id);
            }
            Ok((StatusCode::ACCEPTED, body))
        }
        Err(RuntimeError::Replay) => Ok((StatusCode::OK, reply("duplicate"))),
        Err(e) => Err(runtime_error(e)),
    }
}

/// A wire body from an event, closed and checked like an envelope's body.
fn decode<T: serde::de::DeserializeOwned + aip_core::Validate>(input: Value) -> Result<T, String> {
    let body: T =
        serde_json::from_value(input).map_err(|e| format!("the event is not that record: {e}"))?;
    match aip_core::Checker::check(&body).first() {
        Some(v) => Err(format!("{}: {}", v.pointer, v.message)),
        None => Ok(body),
    }
}

/// What an event does, and its input.
fn route(subscription: &Subscription, event: Value) -> Result<(Target, Value), ApiError> {
    let Value::Object(mut event) = event else {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            "the event must be a JSON object",
        ));
    };
    let Some(event_type) = event.get(&subscription.type_field).and_then(Value::as_str) else {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!(
                "the event has no string member {:?}",
                subscription.type_field
            ),
        ));
    };
    let Some(target) = subscription.events.get(event_type) else {
        return Err(ApiError::new(
            ErrorCode::WebhookEventTypeNotAllowed,
            format!(
                "subscription {} does not accept events of type {event_type:?}",
                subscription.id
            ),
        ));
    };
    let target = target.clone();
    let input = match subscription.input {
        InputConfig::Payload => Value::Object(event),
        InputConfig::Data => event.remove("data").ok_or_else(|| {
            ApiError::new(ErrorCode::InvalidInput, "the event has no data member")
        })?,
    };
    Ok((target, input))
}

/// The action a delivery becomes: the same for every replay of it, so the action is the durable
/// claim of the delivery id.
fn action_id(subscription: &str, delivery_id: &str) -> String {
    super::derived_id(
        "act_whk",
        b"aip.http.webhook.v1",
        &[subscription, delivery_id],
    )
}

/// A refused delivery: 401, nothing parsed or stored.
fn refusal(error: WebhookError) -> ApiError {
    let code = match error {
        WebhookError::MissingHeader(_) => ErrorCode::Unauthenticated,
        WebhookError::BadTimestamp | WebhookError::OutsideWindow => ErrorCode::ClockSkew,
        WebhookError::BadSignature => ErrorCode::SecuritySignatureInvalid,
    };
    ApiError::with_status(StatusCode::UNAUTHORIZED, code, error.to_string())
}

/// A runtime refusal with its binding status: a conflicting re-use of a delivery id is 409, a
/// storage failure 503 (the sender retries).
fn runtime_error(error: RuntimeError) -> ApiError {
    ApiError::from_protocol(error.to_protocol_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn config(toml: &str) -> Vec<SubscriptionConfig> {
        #[derive(serde::Deserialize)]
        struct File {
            webhooks: Vec<SubscriptionConfig>,
        }
        use figment::providers::Format;
        figment::Figment::from(figment::providers::Toml::string(toml))
            .extract::<File>()
            .unwrap()
            .webhooks
    }

    fn capability(id: &str, queued: bool) -> aip_core::Capability {
        serde_json::from_value(serde_json::json!({
            "id": id, "name": id, "kind": "tool", "input_schema": { "type": "object" },
            "contract": {
                "side_effects": ["read"],
                "idempotency": { "requirement": "optional", "collision_behavior": "return_original_result", "key_scope": "principal" },
                "execution": { "supports_sync": true, "supports_async": queued, "supports_streaming": false, "supports_cancel": false,
                               "supports_retry": true, "expected_completion": "any", "retry_safety": "safe" },
                "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
            }
        }))
        .unwrap()
    }

    fn build(toml: &str) -> Result<Webhooks, ConfigError> {
        let known = [
            capability("cap:queued", true),
            capability("cap:sync_only", false),
        ];
        let find = |id: &str| known.iter().find(|c| c.id.as_str() == id);
        Webhooks::build(&config(toml), 1024, find, |p| p == "svc:taken")
    }

    #[test]
    fn a_subscription_is_refused_unless_its_secrets_events_and_bounds_are_usable() {
        let ok = format!(
            "[[webhooks]]\nid = \"orders\"\nsecrets = [\"{SECRET}\"]\nevents = {{ \"order.created\" = \"cap:queued\" }}\n"
        );
        let built = build(&ok).unwrap();
        let orders = &built.0["orders"];
        assert_eq!(orders.caller.id, "svc:webhook:orders");
        assert_eq!(orders.caller.scopes, ["invoke:cap:queued"]);
        // Each refusal names the key it breaks, as the file spells it.
        let event = "webhooks[orders].events.order.created";
        let refused = [
            (ok.replace("\"orders\"", "\"a/b\""), "webhooks[].id"),
            (
                ok.replace(SECRET, "not-a-secret"),
                "webhooks[orders].secrets",
            ),
            (
                ok.replace(&format!("\"{SECRET}\""), ""),
                "webhooks[orders].secrets length",
            ),
            (ok.replace("cap:queued", "cap:nope"), event),
            (ok.replace("cap:queued", "cap:sync_only"), event),
            (
                format!("{ok}max_body_bytes = 2048\n"),
                "webhooks[orders].max_body_bytes",
            ),
            (
                format!("{ok}tolerance_secs = 0\n"),
                "webhooks[orders].tolerance_secs",
            ),
            (
                format!("{ok}principal = \"svc:taken\"\n"),
                "webhooks[orders].principal",
            ),
            (format!("{ok}{ok}"), "webhooks[].id"),
        ];
        for (toml, key) in refused {
            assert_eq!(build(&toml).unwrap_err().key(), Some(key), "{toml}");
        }
    }

    #[test]
    fn a_delivery_maps_to_one_action_per_subscription_and_id() {
        let a = action_id("orders", "msg_1");
        assert_eq!(a, action_id("orders", "msg_1"));
        assert_ne!(a, action_id("orders", "msg_2"));
        assert_ne!(a, action_id("billing", "msg_1"));
        // No ambiguity between the two parts.
        assert_ne!(action_id("a", "b\0c"), action_id("a\0b", "c"));
        assert!(a.starts_with("act_whk") && a.len() == 39);
    }
}
