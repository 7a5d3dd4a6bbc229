//! Callback subscriptions added to admitted actions (A2A push notification configs): stored per
//! action, counted on the action row, and queued as deliveries by the action's transitions.

use super::action::tx_get_action;
use super::callback::tx_queue_delivery;
use super::{Dialect, SqlStore};
use crate::db::{Json, Row, Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::{
    ActionRecord, ActionSubscriptionRecord, CallbackSubscription, NewActionSubscription,
};

pub(super) async fn add<D: Dialect>(
    store: &SqlStore<D>,
    s: NewActionSubscription,
    max: u32,
) -> StoreResult<()> {
    store
        .write(false, move |tx| {
            Box::pin(async move {
                // The action row is locked: its transitions and other subscriptions wait.
                let action = tx_get_action::<D>(&mut *tx, &s.tenant, &s.action_id)
                    .await?
                    .ok_or(StoreError::NotFound { kind: "action" })?;
                if action.state.is_terminal() {
                    return Err(StoreError::Terminal {
                        state: action.state.as_str().to_owned(),
                    });
                }
                let subscription = serde_json::to_value(&s.subscription).map_err(|_| {
                    StoreError::InvalidInput("unserializable callback subscription")
                })?;
                query(
                    "INSERT INTO aip_action_subscriptions (tenant, action_id, subscription_id, principal, subscription, created_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, action_id, subscription_id) DO UPDATE SET \
                     principal = excluded.principal, subscription = excluded.subscription, created_at_ms = excluded.created_at_ms",
                )
                .bind(&s.tenant)
                .bind(&s.action_id)
                .bind(&s.subscription_id)
                .bind(&s.principal)
                .bind(Json(&subscription))
                .bind(s.created_at_ms)
                .execute(&mut *tx)
                .await?;
                let count = recount(&mut *tx, &s.tenant, &s.action_id).await?;
                if count > i64::from(max) {
                    return Err(StoreError::InvalidInput("too many subscriptions on one action"));
                }
                Ok(())
            })
        })
        .await
}

pub(super) async fn list<D: Dialect>(
    store: &SqlStore<D>,
    tenant: &str,
    action_id: &str,
) -> StoreResult<Vec<ActionSubscriptionRecord>> {
    query(
        "SELECT tenant, action_id, subscription_id, principal, subscription, created_at_ms FROM aip_action_subscriptions \
         WHERE tenant = $1 AND action_id = $2 ORDER BY created_at_ms, subscription_id LIMIT 1000",
    )
    .bind(tenant)
    .bind(action_id)
    .fetch_all(store.reader())
    .await?
    .iter()
    .map(record_of)
    .collect()
}

pub(super) async fn remove<D: Dialect>(
    store: &SqlStore<D>,
    tenant: &str,
    action_id: &str,
    subscription_id: &str,
) -> StoreResult<bool> {
    let (tenant, action_id, subscription_id) = (
        tenant.to_owned(),
        action_id.to_owned(),
        subscription_id.to_owned(),
    );
    store
        .write(false, move |tx| {
            Box::pin(async move {
                tx_get_action::<D>(&mut *tx, &tenant, &action_id).await?;
                let removed = query(
                    "DELETE FROM aip_action_subscriptions WHERE tenant = $1 AND action_id = $2 AND subscription_id = $3",
                )
                .bind(&tenant)
                .bind(&action_id)
                .bind(&subscription_id)
                .execute(&mut *tx)
                .await?;
                recount(&mut *tx, &tenant, &action_id).await?;
                Ok(removed > 0)
            })
        })
        .await
}

/// Sets the action's `subscribers` to its number of subscriptions; returns it.
async fn recount(tx: &mut dyn Tx, tenant: &str, action_id: &str) -> StoreResult<i64> {
    let count: i64 = query(
        "SELECT COUNT(*) AS n FROM aip_action_subscriptions WHERE tenant = $1 AND action_id = $2",
    )
    .bind(tenant)
    .bind(action_id)
    .fetch_one(&mut *tx)
    .await?
    .try_get("n")?;
    query("UPDATE aip_actions SET subscribers = $3 WHERE tenant = $1 AND action_id = $2")
        .bind(tenant)
        .bind(action_id)
        .bind(count)
        .execute(&mut *tx)
        .await?;
    Ok(count)
}

/// Queues a delivery for each subscription of `record` that covers the state it just entered.
pub(super) async fn tx_queue_subscribed(
    tx: &mut dyn Tx,
    record: &ActionRecord,
    now_ms: i64,
) -> StoreResult<()> {
    let rows = query(
        "SELECT tenant, action_id, subscription_id, principal, subscription, created_at_ms FROM aip_action_subscriptions \
         WHERE tenant = $1 AND action_id = $2 ORDER BY created_at_ms, subscription_id",
    )
    .bind(&record.tenant)
    .bind(&record.action_id)
    .fetch_all(&mut *tx)
    .await?;
    for row in &rows {
        let s = record_of(row)?;
        if record.state.is_terminal() || !s.subscription.terminal_only {
            tx_queue_delivery(&mut *tx, record, &s.subscription, now_ms).await?;
        }
    }
    Ok(())
}

fn record_of(r: &Row) -> StoreResult<ActionSubscriptionRecord> {
    let subscription: CallbackSubscription = serde_json::from_value(r.json("subscription")?)
        .map_err(|e| StoreError::Corrupt(format!("action subscription: {e}")))?;
    Ok(NewActionSubscription {
        tenant: r.try_get("tenant")?,
        action_id: r.try_get("action_id")?,
        subscription_id: r.try_get("subscription_id")?,
        principal: r.try_get("principal")?,
        subscription,
        created_at_ms: r.try_get("created_at_ms")?,
    })
}
