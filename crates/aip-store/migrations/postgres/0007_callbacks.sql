-- Callback deliveries (spec 17): an action's callback subscription (written at admission) and the
-- durable outbox. A delivery is queued in the transaction that moves its action into a covered
-- state; its lease is the lease of its job in aip_jobs (job_id = delivery_id, queue 'callbacks').
ALTER TABLE aip_actions ADD COLUMN callback JSONB;
CREATE TABLE aip_callback_deliveries (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    principal TEXT NOT NULL,
    action_id TEXT NOT NULL,
    session_id TEXT,
    correlation_id TEXT,
    message_id TEXT NOT NULL,
    action_state TEXT NOT NULL,
    action_version BIGINT NOT NULL,
    profile TEXT NOT NULL,
    target TEXT NOT NULL,
    spec JSONB NOT NULL,
    status TEXT NOT NULL,
    attempts JSONB NOT NULL,
    next_attempt_at_ms BIGINT,
    last_error TEXT,
    dead_letter_reason TEXT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    completed_at_ms BIGINT
);
CREATE INDEX aip_callback_deliveries_by_tenant ON aip_callback_deliveries (tenant, seq);
CREATE INDEX aip_callback_deliveries_by_action ON aip_callback_deliveries (tenant, action_id);
CREATE INDEX aip_callback_deliveries_open ON aip_callback_deliveries (status) WHERE status IN ('pending', 'running');
