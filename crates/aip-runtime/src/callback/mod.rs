//! Callback delivery (spec 17): an action may name a callback target; each transition of the
//! action into a covered state (terminal only, by default) queues a delivery in the same store
//! transaction, and leased, fenced workers deliver it with retries, dead-lettering and receipts.
//!
//! - admission (`admit`): the target is validated against deployment policy before anything is
//!   admitted (17.1): profile, scheme, exact host allowlist, the address policy (`ssrf`, 17.4) on
//!   every address the host resolves to, NATS subject prefixes;
//! - `deliver`: the `callbacks` job kind; `http`: the guarded HTTP sender (connects only to the
//!   checked address, redirects only by policy and re-checked, bounded request, time and answer);
//! - `read`: the delivery reads (16) and the operator's re-drive.
//!
//! Deliveries are signed (`sign`): the body is the envelope signed with the node's did:key (22.2),
//! and the headers carry a signature over the delivery id, a timestamp and the body's digest.

mod admit;
mod deliver;
mod http;
mod read;
pub mod sign;
pub mod ssrf;
pub mod subscribe;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use aip_store::CallbackSubscription;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) use admit::admit;
pub(crate) use deliver::CallbackDeliveries;
pub(crate) use http::client as http_client;

use crate::error::CallbackError;
use crate::runtime::Runtime;

/// The profile of HTTP callback targets.
pub const HTTP_PROFILE: &str = "aip.native.http.v1";
/// The profile of NATS callback targets (a subject).
pub const NATS_PROFILE: &str = "aip.native.nats.v1";
/// Longest target URI or subject.
pub const MAX_TARGET_LEN: usize = 2048;

/// Deployment policy for callbacks (spec 17.2, 17.4), from trusted configuration.
#[derive(Debug, Clone)]
pub struct CallbackPolicy {
    /// Callbacks are accepted at all.
    pub enabled: bool,
    /// Which hosts and addresses targets may reach.
    pub address: ssrf::AddressPolicy,
    /// Hosts that may be called over plain `http` (all others need `https`).
    pub allow_http_hosts: BTreeSet<String>,
    /// Attempts per delivery (and the most a callback's metadata may ask for).
    pub max_attempts: u32,
    /// Per-attempt timeout.
    pub timeout_ms: u64,
    /// Waits before the 2nd, 3rd, ... attempt; the last repeats.
    pub retry_backoff_ms: Vec<u64>,
    /// Redirects followed per attempt, each re-checked against this policy (0: none).
    pub max_redirects: u32,
    /// Largest delivered body; a larger message fails without an attempt.
    pub max_request_bytes: usize,
    /// Most of a target's answer that is read.
    pub max_response_bytes: usize,
    /// Subject prefixes NATS targets must start with (empty: NATS callbacks refused).
    pub nats_subject_prefixes: Vec<String>,
    /// Sign deliveries with the node key (spec 17.4 "SHOULD").
    pub sign_payload: bool,
}

impl Default for CallbackPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            address: ssrf::AddressPolicy::default(),
            allow_http_hosts: BTreeSet::new(),
            max_attempts: 8,
            timeout_ms: 10_000,
            retry_backoff_ms: vec![1_000, 5_000, 30_000, 120_000, 600_000],
            max_redirects: 0,
            max_request_bytes: 1024 * 1024,
            max_response_bytes: 64 * 1024,
            nats_subject_prefixes: Vec::new(),
            sign_payload: true,
        }
    }
}

/// Publishes a delivery to a NATS subject and waits for the receiver's reply (a binding provides
/// it: the runtime does not speak NATS). `Err` carries whether a retry may succeed.
#[async_trait]
pub trait CallbackPublisher: Send + Sync + 'static {
    /// Sends `body` with `headers` to `subject` as a request; `Ok` once a reply acknowledged it.
    async fn request(
        &self,
        subject: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<(), SendError>;
}

/// Why an attempt did not deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// A later attempt may succeed (timeout, connection failure, 408, 429, 5xx, no responder).
    Retry(String),
    /// The target refused for good (other 4xx, a denied address or redirect).
    Permanent(String),
}

/// The runtime-owned part of a stored subscription: the validated target and the delivery policy
/// in force when the action was admitted (spec 17.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeliverySpec {
    pub(crate) profile: String,
    pub(crate) target: String,
    pub(crate) terminal_only: bool,
    pub(crate) max_attempts: u32,
    pub(crate) timeout_ms: u64,
    pub(crate) retry_backoff_ms: Vec<u64>,
    pub(crate) sign_payload: bool,
    /// Profile metadata for a rendering profile (absent for native callbacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<Value>,
}

fn ensure_enabled(policy: &CallbackPolicy) -> Result<(), CallbackError> {
    match policy.enabled {
        true => Ok(()),
        false => Err(CallbackError::TargetDenied(
            "callbacks are disabled on this node".into(),
        )),
    }
}

/// Largest profile metadata of a callback, serialized.
const MAX_METADATA_BYTES: usize = 4096;

/// The deployment policy every callback target passes, admitted with its action or added later
/// (spec 17.1, 17.4): callbacks enabled, bounded target and metadata, the profile's target check
/// (HTTP and rendering profiles: scheme, hosts and the address policy; NATS: the subject); then
/// the subscription with the policy's delivery settings, `(terminal_only, max_attempts)`.
pub(crate) async fn checked(
    runtime: &Runtime,
    profile: &str,
    target: &str,
    (terminal_only, max_attempts): (bool, u32),
    metadata: Option<Value>,
) -> Result<CallbackSubscription, CallbackError> {
    let policy = &runtime.config().callbacks;
    ensure_enabled(policy)?;
    if metadata
        .as_ref()
        .is_some_and(|m| m.to_string().len() > MAX_METADATA_BYTES)
    {
        return Err(CallbackError::TargetInvalid(format!(
            "callback metadata is larger than {MAX_METADATA_BYTES} bytes"
        )));
    }
    if target.len() > MAX_TARGET_LEN {
        return Err(CallbackError::TargetInvalid(format!(
            "the target is longer than {MAX_TARGET_LEN} bytes"
        )));
    }
    match profile {
        NATS_PROFILE => check_subject(runtime, target)?,
        p if p == HTTP_PROFILE || runtime.delivery_renderer(p).is_some() => {
            let url = http::parse_target(policy, target)?;
            http::check_address(policy, &url).await?;
        }
        other => {
            return Err(CallbackError::TargetInvalid(format!(
                "callback profile {other} is not supported (use {HTTP_PROFILE} or {NATS_PROFILE})"
            )));
        }
    }
    let spec = DeliverySpec {
        profile: profile.to_owned(),
        target: target.to_owned(),
        terminal_only,
        max_attempts,
        timeout_ms: policy.timeout_ms,
        retry_backoff_ms: policy.retry_backoff_ms.clone(),
        sign_payload: policy.sign_payload,
        metadata,
    };
    Ok(CallbackSubscription {
        profile: spec.profile.clone(),
        target: spec.target.clone(),
        terminal_only,
        max_attempts,
        spec: serde_json::to_value(&spec).map_err(|_| {
            CallbackError::TargetInvalid("the callback metadata does not serialize".into())
        })?,
    })
}

/// What the manifest says about callbacks (spec 17): whether actions may carry one, the target
/// profiles this node delivers to, and how deliveries are signed, so a client can pin the signer.
pub(crate) fn manifest_entry(runtime: &Runtime) -> Value {
    let policy = &runtime.config().callbacks;
    let mut profiles = vec![HTTP_PROFILE];
    if runtime.callback_publisher().is_some() && !policy.nats_subject_prefixes.is_empty() {
        profiles.push(NATS_PROFILE);
    }
    let signer = runtime
        .node_key()
        .filter(|_| policy.sign_payload)
        .map(|k| aip_core::signing::did_key(&k.verifying_key()));
    serde_json::json!({
        "enabled": policy.enabled,
        "profiles": if policy.enabled { profiles } else { Vec::new() },
        "messages": ["aip.callback.v1.delivery_query_request", "aip.callback.v1.delivery_list_request"],
        "max_attempts": policy.max_attempts,
        "signature": signer.map(|did| serde_json::json!({ "scheme": "aip-callback-v1", "signer": did })),
    })
}

/// A NATS target: a publisher is configured, and the subject is a literal (no wildcards, no
/// whitespace, no empty tokens) under an allowed prefix.
fn check_subject(runtime: &Runtime, subject: &str) -> Result<(), CallbackError> {
    let policy = &runtime.config().callbacks;
    if runtime.callback_publisher().is_none() || policy.nats_subject_prefixes.is_empty() {
        return Err(CallbackError::TargetDenied(
            "NATS callbacks are not enabled on this node".into(),
        ));
    }
    let literal = !subject.is_empty()
        && subject.split('.').all(|token| {
            !token.is_empty()
                && token != "*"
                && token != ">"
                && !token.chars().any(|c| c.is_whitespace() || c.is_control())
        });
    if !literal {
        return Err(CallbackError::TargetInvalid(format!(
            "{subject:?} is not a literal NATS subject"
        )));
    }
    if !policy
        .nats_subject_prefixes
        .iter()
        .any(|p| subject.starts_with(p.as_str()))
    {
        return Err(CallbackError::TargetDenied(format!(
            "subject {subject} is not under an allowed callback prefix"
        )));
    }
    Ok(())
}

/// The publisher a binding installed, if any.
pub(crate) type Publisher = Arc<dyn CallbackPublisher>;
