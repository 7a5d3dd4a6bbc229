//! The callback's part of admission (spec 17.1): the subscription an action's callback asks for,
//! checked against the deployment's policy before anything is written, and stored with the action.

use aip_core::Callback;
use aip_store::CallbackSubscription;
use serde::Deserialize;
use serde_json::Value;

use crate::callback::{checked, ensure_enabled};
use crate::error::CallbackError;
use crate::runtime::Runtime;

/// Metadata a native callback may carry; anything else is refused, never ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    terminal_only: Option<bool>,
    max_attempts: Option<u32>,
}

/// Step 6 for an action's callback (spec 17.1): the subscription to admit with it, or the refusal.
pub(crate) async fn admit(
    runtime: &Runtime,
    callback: &Callback,
) -> Result<CallbackSubscription, CallbackError> {
    let policy = &runtime.config().callbacks;
    ensure_enabled(policy)?;
    let profile = callback.profile.as_str();
    // A rendering profile's metadata is its own (credentials to send back, ...): kept for its
    // renderer, bounded; every transition is delivered.
    if runtime.delivery_renderer(profile).is_some() {
        let metadata = callback.metadata.clone().filter(|m| !m.is_null());
        let every_state = (false, policy.max_attempts);
        return checked(runtime, profile, &callback.target, every_state, metadata).await;
    }
    let metadata: Metadata = match &callback.metadata {
        None | Some(Value::Null) => Metadata::default(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            CallbackError::TargetInvalid(format!(
                "callback metadata may carry only terminal_only and max_attempts: {e}"
            ))
        })?,
    };
    let max_attempts = match metadata.max_attempts {
        None => policy.max_attempts,
        Some(n) if (1..=policy.max_attempts).contains(&n) => n,
        Some(_) => {
            return Err(CallbackError::TargetInvalid(format!(
                "max_attempts must be within 1..={}",
                policy.max_attempts
            )));
        }
    };
    let terminal_only = metadata.terminal_only.unwrap_or(true);
    checked(
        runtime,
        profile,
        &callback.target,
        (terminal_only, max_attempts),
        None,
    )
    .await
}
