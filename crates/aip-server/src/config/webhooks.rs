//! The `[[webhooks]]` subscriptions (spec 21.3): each maps a signed sender's event types to the
//! capabilities they invoke; the webhook profile builds its ingress from them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// One `[[webhooks]]` subscription.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionConfig {
    /// The subscription id: the last segment of its URL, `[A-Za-z0-9._-]{1,64}`.
    pub id: String,
    /// Secrets (`whsec_…`), inline. Several for key rotation; any of them verifies.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Files each holding one secret (read once at start).
    #[serde(default)]
    pub secret_files: Vec<PathBuf>,
    /// Which string the sender signs: `id.timestamp.body` (Standard Webhooks, the default) or
    /// `timestamp.id.body`.
    #[serde(default)]
    pub signing_order: OrderConfig,
    /// Accepted distance between `webhook-timestamp` and this node's clock, in seconds (1-3600).
    #[serde(default = "default_tolerance")]
    pub tolerance_secs: u32,
    /// Largest accepted body; unset: `limits.max_body_bytes`, which it may not exceed.
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
    /// The top-level member of the event that names its type.
    #[serde(default = "default_type_field")]
    pub event_type_field: String,
    /// What the action's input is: the whole event (`payload`) or its `data` member (`data`).
    #[serde(default)]
    pub input: InputConfig,
    /// The principal events act as (kind `service`); unset: `svc:webhook:<id>`.
    #[serde(default)]
    pub principal: Option<String>,
    /// The tenant that principal belongs to.
    #[serde(default = "super::default_tenant")]
    pub tenant: String,
    /// Accepted event types, each mapped to the capability an event of that type invokes, or to
    /// `aip.channel.v1.message_created` / `aip.channel.v1.conversation_updated` (the event, or its
    /// `data`, is then that channel message or conversation update, recorded by the subscription's
    /// principal with the delivery id as its replay claim). Any other type is refused.
    pub events: BTreeMap<String, String>,
}

/// The signing order of a subscription, as configured.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub enum OrderConfig {
    /// `{id}.{timestamp}.{body}`.
    #[default]
    #[serde(rename = "id.timestamp.body")]
    IdTimestampBody,
    /// `{timestamp}.{id}.{body}`.
    #[serde(rename = "timestamp.id.body")]
    TimestampIdBody,
}

/// Which part of an event becomes the action's input.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum InputConfig {
    /// The whole event object.
    #[default]
    Payload,
    /// The event's `data` member (an event without one is refused).
    Data,
}

fn default_tolerance() -> u32 {
    300
}

fn default_type_field() -> String {
    "type".into()
}
