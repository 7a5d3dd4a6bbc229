-- aip-store schema v1 (PostgreSQL). Immutable once released: add a new migration instead.
CREATE FUNCTION aip_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$;

CREATE TABLE aip_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE aip_counters (
    name TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO aip_counters (name, value) VALUES ('events', 0), ('audit', 0);

CREATE TABLE aip_actions (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action_id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    principal TEXT NOT NULL,
    session_id TEXT,
    capability TEXT NOT NULL,
    correlation_id TEXT,
    mode TEXT NOT NULL,
    state TEXT NOT NULL,
    idempotency_scope TEXT,
    idempotency_key TEXT,
    input_hash TEXT,
    deadline_ms BIGINT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    version BIGINT NOT NULL DEFAULT 0,
    request JSONB NOT NULL,
    result JSONB
);
CREATE INDEX aip_actions_by_reader ON aip_actions (tenant, principal, seq);
CREATE INDEX aip_actions_by_session ON aip_actions (session_id, seq);
CREATE INDEX aip_actions_by_state ON aip_actions (state, created_at_ms);

CREATE TABLE aip_idempotency (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    reservation_id TEXT NOT NULL UNIQUE,
    input_hash TEXT NOT NULL,
    action_id TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX aip_idempotency_by_expiry ON aip_idempotency (expires_at_ms);

CREATE TABLE aip_jobs (
    job_id TEXT PRIMARY KEY,
    queue TEXT NOT NULL,
    action_id TEXT REFERENCES aip_actions (action_id),
    tenant TEXT NOT NULL,
    state TEXT NOT NULL,
    available_at_ms BIGINT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL,
    lease_owner TEXT,
    lease_expires_at_ms BIGINT,
    fence BIGINT NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    payload JSONB NOT NULL
);
CREATE INDEX aip_jobs_ready ON aip_jobs (queue, state, available_at_ms);
CREATE INDEX aip_jobs_by_action ON aip_jobs (action_id);

CREATE TABLE aip_events (
    seq BIGINT PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    tenant TEXT NOT NULL,
    principal TEXT,
    session_id TEXT,
    action_id TEXT,
    correlation_id TEXT,
    occurred_at_ms BIGINT NOT NULL,
    data JSONB NOT NULL
);
CREATE INDEX aip_events_by_tenant ON aip_events (tenant, seq);
CREATE INDEX aip_events_by_action ON aip_events (action_id, seq);
CREATE INDEX aip_events_by_session ON aip_events (session_id, seq);

CREATE TABLE aip_chunks (
    action_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    data JSONB NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (action_id, seq)
);

CREATE TABLE aip_sessions (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    principal TEXT NOT NULL,
    peer TEXT,
    state TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT,
    data JSONB NOT NULL
);
CREATE INDEX aip_sessions_by_reader ON aip_sessions (tenant, principal, seq);

CREATE TABLE aip_resume_tokens (
    token_hash TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES aip_sessions (session_id),
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    consumed_at_ms BIGINT
);

CREATE TABLE aip_replay_claims (
    scope TEXT NOT NULL,
    message_id TEXT NOT NULL,
    claimed_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    PRIMARY KEY (scope, message_id)
);
CREATE INDEX aip_replay_claims_by_expiry ON aip_replay_claims (expires_at_ms);

CREATE TABLE aip_receipts (
    receipt_id TEXT PRIMARY KEY,
    chain_id TEXT NOT NULL,
    position BIGINT NOT NULL,
    tenant TEXT NOT NULL,
    principal TEXT,
    action_id TEXT,
    receipt_type TEXT NOT NULL,
    hash TEXT NOT NULL,
    previous_hash TEXT,
    created_at_ms BIGINT NOT NULL,
    body JSONB NOT NULL,
    UNIQUE (chain_id, position)
);
CREATE TRIGGER aip_receipts_append_only BEFORE UPDATE OR DELETE ON aip_receipts
FOR EACH ROW EXECUTE FUNCTION aip_refuse_change();

CREATE TABLE aip_audit (
    seq BIGINT PRIMARY KEY,
    audit_id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    actor TEXT NOT NULL,
    action_label TEXT NOT NULL,
    occurred_at_ms BIGINT NOT NULL,
    data JSONB NOT NULL
);
CREATE INDEX aip_audit_by_reader ON aip_audit (tenant, actor, seq);
CREATE TRIGGER aip_audit_append_only BEFORE UPDATE OR DELETE ON aip_audit
FOR EACH ROW EXECUTE FUNCTION aip_refuse_change();

CREATE TABLE aip_records (
    collection TEXT NOT NULL,
    record_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    body JSONB NOT NULL,
    PRIMARY KEY (collection, record_id)
);
CREATE INDEX aip_records_by_tenant ON aip_records (collection, tenant, created_at_ms);
