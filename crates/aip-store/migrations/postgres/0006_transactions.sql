-- Transactions (spec 13): one row per transaction, written only in the admission transaction of an
-- action that creates, plans, claims (commit, compensation, reconciliation) or dry-runs it,
-- compare-and-set on version. Which actions play which role is kept in aip_transaction_actions.
CREATE TABLE aip_transactions (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    capability TEXT NOT NULL,
    principal TEXT NOT NULL,
    plan_id TEXT,
    plan JSONB,
    plan_expires_at_ms BIGINT,
    operation JSONB,
    dry_run_action_id TEXT,
    plan_action_id TEXT,
    commit_action_id TEXT,
    reconcile_action_id TEXT,
    compensation_action_id TEXT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    version BIGINT NOT NULL DEFAULT 0,
    UNIQUE (tenant, transaction_id)
);
CREATE UNIQUE INDEX aip_transactions_by_plan ON aip_transactions (tenant, plan_id) WHERE plan_id IS NOT NULL;
CREATE TABLE aip_transaction_actions (
    tenant TEXT NOT NULL,
    action_id TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    role TEXT NOT NULL,
    PRIMARY KEY (tenant, action_id)
);
