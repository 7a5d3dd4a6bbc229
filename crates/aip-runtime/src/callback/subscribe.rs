//! Callback subscriptions added to an admitted action (spec 17 for targets named after admission:
//! an A2A push notification config, say). The target passes the same deployment policy as an
//! admitted callback (scheme, host allowlist, the address policy of 17.4) before anything is
//! stored; each later transition into a covered state queues a delivery in the durable outbox.
//!
//! A profile that is not native renders its own deliveries: the binding registers a
//! [`DeliveryRenderer`] for it (the runtime keeps the outbox, retries, receipts and the guarded
//! HTTP sender; no foreign type enters the runtime).

use std::sync::Arc;

use aip_core::ActionStatus;
use aip_store::{ActionSubscriptionRecord, CallbackSubscription, NewActionSubscription};
use async_trait::async_trait;
use serde_json::Value;

use super::DeliverySpec;
use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::{CallbackError, RuntimeError};
use crate::runtime::Runtime;

/// Subscriptions one action may hold.
pub const MAX_SUBSCRIPTIONS_PER_ACTION: u32 = 10;
/// Longest subscription id.
const MAX_SUBSCRIPTION_ID: usize = 128;

/// The body and headers of one delivery, as its profile shapes it.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The body.
    pub body: Vec<u8>,
    /// Its content type.
    pub content_type: String,
    /// Extra headers (credentials the subscriber asked to receive).
    pub headers: Vec<(String, String)>,
}

/// Renders the deliveries of one callback profile from the action's status as of the transition.
#[async_trait]
pub trait DeliveryRenderer: Send + Sync + 'static {
    /// The delivery of `status` (the action as it entered the delivered state) to a subscriber
    /// whose profile metadata is `metadata`.
    fn render(&self, status: &ActionStatus, metadata: Option<&Value>) -> Result<Rendered, String>;
}

/// A subscription to add.
#[derive(Debug, Clone)]
pub struct SubscriptionRequest {
    /// Its id, unique per action (an existing one is replaced).
    pub subscription_id: String,
    /// Callback profile: the native HTTP profile or one with a registered renderer.
    pub profile: String,
    /// The target URL.
    pub target: String,
    /// Profile metadata kept for the renderer (credentials to send, ...).
    pub metadata: Option<Value>,
    /// Deliver only terminal states.
    pub terminal_only: bool,
}

/// A stored subscription, as its owner reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionView {
    /// Its id.
    pub subscription_id: String,
    /// The action.
    pub action_id: String,
    /// Profile.
    pub profile: String,
    /// Target.
    pub target: String,
    /// Profile metadata.
    pub metadata: Option<Value>,
    /// Terminal states only.
    pub terminal_only: bool,
}

impl Runtime {
    /// Installs the renderer of a callback profile (a binding, at startup).
    pub fn register_delivery_renderer(&self, profile: &str, renderer: Arc<dyn DeliveryRenderer>) {
        let mut map = match self.renderers.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.insert(profile.to_owned(), renderer);
    }

    pub(crate) fn delivery_renderer(&self, profile: &str) -> Option<Arc<dyn DeliveryRenderer>> {
        match self.renderers.read() {
            Ok(m) => m.get(profile).cloned(),
            Err(poisoned) => poisoned.into_inner().get(profile).cloned(),
        }
    }

    /// Adds a subscription to an action `caller` may read; its target is checked against the
    /// callback policy first. An unknown or invisible action is [`RuntimeError::NotFound`], an
    /// ended one [`RuntimeError::Terminal`].
    pub async fn subscribe_action(
        &self,
        caller: &Caller,
        action_id: &str,
        request: SubscriptionRequest,
    ) -> Result<SubscriptionView, RuntimeError> {
        let action = self.visible_action(caller, action_id).await?;
        if request.subscription_id.is_empty() || request.subscription_id.len() > MAX_SUBSCRIPTION_ID
        {
            return Err(RuntimeError::InvalidInput(format!(
                "a subscription id has 1 to {MAX_SUBSCRIPTION_ID} characters"
            )));
        }
        let subscription = self.check_subscription(&request).await?;
        self.store()
            .add_action_subscription(
                NewActionSubscription {
                    tenant: action.tenant.clone(),
                    action_id: action.action_id.clone(),
                    subscription_id: request.subscription_id.clone(),
                    principal: caller.id.clone(),
                    subscription,
                    created_at_ms: now_ms(),
                },
                MAX_SUBSCRIPTIONS_PER_ACTION,
            )
            .await?;
        Ok(SubscriptionView {
            subscription_id: request.subscription_id,
            action_id: action.action_id,
            profile: request.profile,
            target: request.target,
            metadata: request.metadata,
            terminal_only: request.terminal_only,
        })
    }

    /// The subscriptions of an action `caller` may read.
    pub async fn action_subscriptions(
        &self,
        caller: &Caller,
        action_id: &str,
    ) -> Result<Vec<SubscriptionView>, RuntimeError> {
        let action = self.visible_action(caller, action_id).await?;
        self.store()
            .list_action_subscriptions(&action.tenant, &action.action_id)
            .await?
            .iter()
            .map(view)
            .collect()
    }

    /// Removes one subscription of an action `caller` may read ([`RuntimeError::NotFound`] if it
    /// has none by that id). Deliveries already queued are still made.
    pub async fn unsubscribe_action(
        &self,
        caller: &Caller,
        action_id: &str,
        subscription_id: &str,
    ) -> Result<(), RuntimeError> {
        let action = self.visible_action(caller, action_id).await?;
        match self
            .store()
            .remove_action_subscription(&action.tenant, &action.action_id, subscription_id)
            .await?
        {
            true => Ok(()),
            false => Err(RuntimeError::NotFound("subscription")),
        }
    }

    /// The policy checks of an admitted callback, for a target named later (NATS subjects are
    /// for callbacks admitted with their action only).
    async fn check_subscription(
        &self,
        request: &SubscriptionRequest,
    ) -> Result<CallbackSubscription, RuntimeError> {
        if request.profile == super::NATS_PROFILE {
            return Err(CallbackError::TargetInvalid(format!(
                "callback profile {} is not supported here",
                request.profile
            ))
            .into());
        }
        Ok(super::checked(
            self,
            &request.profile,
            &request.target,
            (request.terminal_only, self.config().callbacks.max_attempts),
            request.metadata.clone(),
        )
        .await?)
    }
}

fn view(r: &ActionSubscriptionRecord) -> Result<SubscriptionView, RuntimeError> {
    let spec: DeliverySpec = serde_json::from_value(r.subscription.spec.clone())
        .map_err(|e| crate::read::views::corrupt(format!("subscription spec: {e}")))?;
    Ok(SubscriptionView {
        subscription_id: r.subscription_id.clone(),
        action_id: r.action_id.clone(),
        profile: spec.profile,
        target: spec.target,
        metadata: spec.metadata,
        terminal_only: spec.terminal_only,
    })
}
