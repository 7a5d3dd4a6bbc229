-- Callback subscriptions added to an admitted action (A2A push notification configs): each later
-- transition into a covered state queues a delivery in the transition's transaction, as the
-- callback admitted with the action does. `subscribers` counts them, so a transition of an action
-- without any reads nothing more.
CREATE TABLE aip_action_subscriptions (
    tenant TEXT NOT NULL,
    action_id TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    subscription JSONB NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, action_id, subscription_id)
);
ALTER TABLE aip_actions ADD COLUMN subscribers BIGINT NOT NULL DEFAULT 0;
