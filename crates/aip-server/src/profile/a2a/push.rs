//! A2A push notification configs (notes 6.5: "push notification config → native callback"). A
//! config is a callback subscription of the task's action: its URL passes the node's callback
//! policy (scheme, host allowlist, the SSRF address policy of spec 17.4) before it is stored, and
//! every later transition is delivered by the durable callback outbox (retries, dead letters,
//! receipts). The body is what an A2A SDK sender posts: a `StreamResponse` carrying the task, with
//! `X-A2A-Notification-Token` and `Authorization` from the config.
//!
//! A config given with `SendMessage` is the action's admitted callback; it lasts as long as the
//! task (listed and read like the others, not deletable).

use aip_core::{ActionStatus, Callback, ProfileId};
use aip_runtime::callback::subscribe::{DeliveryRenderer, Rendered, SubscriptionRequest};
use serde_json::{Map, Value, json};

use super::Call;
use super::rpc::{self, A2aError};

/// The callback profile of A2A push notifications.
pub const PUSH_PROFILE: &str = "aip.a2a.push.v1";
/// Longest token or credentials.
const MAX_SECRET: usize = 1024;
/// Longest config id.
const MAX_ID: usize = 128;
/// Where a subscription keeps its task's `contextId` (the renderer reads no store).
pub(super) const CONTEXT_KEY: &str = "context_id";

/// Renders a delivery as an A2A push notification.
#[derive(Debug)]
pub struct PushRenderer;

impl DeliveryRenderer for PushRenderer {
    fn render(&self, status: &ActionStatus, metadata: Option<&Value>) -> Result<Rendered, String> {
        let context_id = metadata
            .and_then(|m| m.get(CONTEXT_KEY))
            .and_then(Value::as_str)
            .unwrap_or(status.action_id.as_str());
        let body = serde_json::to_vec(&json!({ "task": super::task::task(status, context_id) }))
            .map_err(|e| e.to_string())?;
        let text = |k: &str| {
            metadata
                .and_then(|m| m.pointer(k))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let mut headers = Vec::new();
        if let Some(token) = text("/token") {
            headers.push(("X-A2A-Notification-Token".to_owned(), token.to_owned()));
        }
        if let (Some(scheme), Some(credentials)) = (
            text("/authentication/scheme"),
            text("/authentication/credentials"),
        ) {
            headers.push((
                "Authorization".to_owned(),
                format!("{scheme} {credentials}"),
            ));
        }
        Ok(Rendered {
            body,
            content_type: "application/json".into(),
            headers,
        })
    }
}

/// A `TaskPushNotificationConfig` read from params: its id, URL and the metadata kept for the
/// renderer (id, token, authentication), every value checked so it can travel in a header.
pub(super) struct Config {
    /// Config id (defaults to the task id, as the SDK does).
    pub(super) id: String,
    /// Where to post.
    pub(super) url: String,
    /// Kept with the subscription.
    pub(super) metadata: Value,
}

/// Parses a config; `task_id` is the task it belongs to.
pub(super) fn parse(config: &Map<String, Value>, task_id: &str) -> Result<Config, A2aError> {
    const KNOWN: [&str; 6] = ["id", "taskId", "tenant", "url", "token", "authentication"];
    if let Some(unknown) = config.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(A2aError::invalid_params(format!(
            "unknown push notification config member {unknown}"
        )));
    }
    let text = |m: &Map<String, Value>, k: &str| -> Result<String, A2aError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s))
                if s.len() <= MAX_SECRET && s.bytes().all(|b| (0x20..0x7f).contains(&b)) =>
            {
                Ok(s.clone())
            }
            Some(_) => Err(A2aError::invalid_params(format!(
                "{k} must be printable ASCII of at most {MAX_SECRET} characters"
            ))),
        }
    };
    let url = text(config, "url")?;
    if url.is_empty() {
        return Err(A2aError::invalid_params("url is required"));
    }
    let id = match text(config, "id")? {
        id if id.is_empty() => task_id.to_owned(),
        id if id.len() <= MAX_ID => id,
        _ => {
            return Err(A2aError::invalid_params(format!(
                "id has at most {MAX_ID} characters"
            )));
        }
    };
    let mut metadata = json!({ "id": id, "token": text(config, "token")? });
    match config.get("authentication") {
        None | Some(Value::Null) => {}
        Some(Value::Object(auth)) => {
            if let Some(unknown) = auth.keys().find(|k| *k != "scheme" && *k != "credentials") {
                return Err(A2aError::invalid_params(format!(
                    "unknown authentication member {unknown}"
                )));
            }
            metadata["authentication"] = json!({
                "scheme": text(auth, "scheme")?, "credentials": text(auth, "credentials")?,
            });
        }
        Some(_) => return Err(A2aError::invalid_params("authentication must be an object")),
    }
    Ok(Config { id, url, metadata })
}

/// The native callback for a config given with `SendMessage`.
pub(super) fn callback(config: Config) -> Callback {
    Callback {
        profile: ProfileId::new(PUSH_PROFILE),
        target: config.url,
        metadata: Some(config.metadata),
    }
}

/// The wire config.
fn wire(task_id: &str, url: &str, metadata: Option<&Value>) -> Value {
    let m = metadata.cloned().unwrap_or(Value::Null);
    let mut config = json!({
        "id": m.get("id").and_then(Value::as_str).unwrap_or(task_id),
        "taskId": task_id,
        "url": url,
    });
    if let Some(token) = m
        .get("token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        config["token"] = json!(token);
    }
    if let Some(auth) = m.get("authentication").filter(|a| a.is_object()) {
        config["authentication"] = auth.clone();
    }
    config
}

fn task_id(params: &Map<String, Value>) -> Result<&str, A2aError> {
    match params.get("taskId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => Ok(id),
        _ => Err(A2aError::invalid_params("taskId is required")),
    }
}

/// The config given with the task's message (its admitted callback), if any; the task must be
/// readable by the caller.
async fn inline(call: &Call<'_>, task: &str) -> Result<Option<Value>, A2aError> {
    let action = call
        .app
        .runtime
        .visible_action(call.caller, task)
        .await
        .map_err(|e| rpc::native(&e))?;
    let admitted = aip_runtime::admitted_action(&action).map_err(|e| rpc::native(&e))?;
    Ok(admitted
        .callback
        .filter(|cb| cb.profile.as_str() == PUSH_PROFILE)
        .map(|cb| wire(task, &cb.target, cb.metadata.as_ref())))
}

/// Every config of a task the caller may read: the one given with its message, then the others.
async fn configs(call: &Call<'_>, task: &str) -> Result<Vec<Value>, A2aError> {
    let mut out: Vec<Value> = inline(call, task).await?.into_iter().collect();
    for s in call
        .app
        .runtime
        .action_subscriptions(call.caller, task)
        .await
        .map_err(|e| rpc::native(&e))?
        .iter()
        .filter(|s| s.profile == PUSH_PROFILE)
    {
        out.push(wire(task, &s.target, s.metadata.as_ref()));
    }
    Ok(out)
}

/// `CreateTaskPushNotificationConfig`: a config under a taken id replaces it.
pub(super) async fn create(
    call: &Call<'_>,
    params: &Map<String, Value>,
) -> Result<Value, A2aError> {
    let task = task_id(params)?;
    let mut config = parse(params, task)?;
    let context_id = super::context::of(call, &super::task::view(call, task).await?).await?;
    config.metadata[CONTEXT_KEY] = Value::String(context_id);
    if inline(call, task)
        .await?
        .is_some_and(|c| c["id"] == config.id.as_str())
    {
        return Err(A2aError::unsupported(
            "the config given with the message lasts as long as the task; use another id",
        ));
    }
    let view = call
        .app
        .runtime
        .subscribe_action(
            call.caller,
            task,
            SubscriptionRequest {
                subscription_id: config.id.clone(),
                profile: PUSH_PROFILE.into(),
                target: config.url,
                metadata: Some(config.metadata),
                terminal_only: false,
            },
        )
        .await
        .map_err(|e| rpc::native(&e))?;
    Ok(wire(task, &view.target, view.metadata.as_ref()))
}

/// `GetTaskPushNotificationConfig`: an unknown config is "task not found", as the SDK answers.
pub(super) async fn get(call: &Call<'_>, params: &Map<String, Value>) -> Result<Value, A2aError> {
    let task = task_id(params)?;
    let id = rpc::string(params, "id")?;
    configs(call, task)
        .await?
        .into_iter()
        .find(|c| c["id"] == id)
        .ok_or_else(A2aError::task_not_found)
}

/// `ListTaskPushNotificationConfigs` (at most 11 per task: one page).
pub(super) async fn list(call: &Call<'_>, params: &Map<String, Value>) -> Result<Value, A2aError> {
    let task = task_id(params)?;
    Ok(json!({ "configs": configs(call, task).await?, "nextPageToken": "" }))
}

/// `DeleteTaskPushNotificationConfig`.
pub(super) async fn delete(
    call: &Call<'_>,
    params: &Map<String, Value>,
) -> Result<Value, A2aError> {
    let task = task_id(params)?;
    let id = rpc::string(params, "id")?;
    match call
        .app
        .runtime
        .unsubscribe_action(call.caller, task, id)
        .await
    {
        Ok(()) => Ok(json!({})),
        Err(aip_runtime::RuntimeError::NotFound("subscription")) => {
            let given = inline(call, task).await?.is_some_and(|c| c["id"] == id);
            Err(match given {
                true => A2aError::unsupported(
                    "the config given with the message lasts as long as the task",
                ),
                false => A2aError::task_not_found(),
            })
        }
        Err(e) => Err(rpc::native(&e)),
    }
}
