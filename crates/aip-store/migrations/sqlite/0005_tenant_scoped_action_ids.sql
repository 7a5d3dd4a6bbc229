-- Action ids are unique per tenant, not per store (spec 22.6): another tenant's action with the same
-- id neither conflicts nor shows. Every table keyed by an action id is keyed by (tenant, id): the
-- actions themselves, their jobs, their chunks and their receipt chains (a chain id is its action's
-- id). SQLite cannot change a table's constraints, so each is rebuilt and renamed: the jobs (the only
-- table with a foreign key into the actions) are copied into a table that references the new actions
-- table, and the old jobs go before the old actions, so no foreign key ever points at a dropped
-- table. Audit records gain the action and session they are about, as filters.

CREATE TABLE aip_actions_v5 (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id TEXT NOT NULL,
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
    deadline_ms INTEGER,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    request TEXT NOT NULL,
    result TEXT,
    UNIQUE (tenant, action_id)
);
INSERT INTO aip_actions_v5 (seq, action_id, tenant, principal, session_id, capability, correlation_id, mode, state,
    idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, result)
SELECT seq, action_id, tenant, principal, session_id, capability, correlation_id, mode, state,
    idempotency_scope, idempotency_key, input_hash, deadline_ms, created_at_ms, updated_at_ms, version, request, result
FROM aip_actions;

CREATE TABLE aip_jobs_v5 (
    job_id TEXT PRIMARY KEY,
    queue TEXT NOT NULL,
    action_id TEXT,
    tenant TEXT NOT NULL,
    state TEXT NOT NULL,
    available_at_ms INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    lease_owner TEXT,
    lease_expires_at_ms INTEGER,
    fence INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    payload TEXT NOT NULL,
    FOREIGN KEY (tenant, action_id) REFERENCES aip_actions_v5 (tenant, action_id)
);
INSERT INTO aip_jobs_v5 (job_id, queue, action_id, tenant, state, available_at_ms, attempts, max_attempts, lease_owner,
    lease_expires_at_ms, fence, last_error, created_at_ms, updated_at_ms, payload)
SELECT job_id, queue, action_id, tenant, state, available_at_ms, attempts, max_attempts, lease_owner,
    lease_expires_at_ms, fence, last_error, created_at_ms, updated_at_ms, payload
FROM aip_jobs;

-- Chunks carry their action's tenant (ids were still store-unique here, so the join is exact).
CREATE TABLE aip_chunks_v5 (
    tenant TEXT NOT NULL,
    action_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant, action_id, seq)
);
INSERT INTO aip_chunks_v5 (tenant, action_id, seq, kind, data, created_at_ms)
SELECT a.tenant, c.action_id, c.seq, c.kind, c.data, c.created_at_ms
FROM aip_chunks c JOIN aip_actions a ON a.action_id = c.action_id;

DROP TABLE aip_jobs;
DROP TABLE aip_actions;
DROP TABLE aip_chunks;
ALTER TABLE aip_actions_v5 RENAME TO aip_actions;
ALTER TABLE aip_jobs_v5 RENAME TO aip_jobs;
ALTER TABLE aip_chunks_v5 RENAME TO aip_chunks;
CREATE INDEX aip_actions_by_reader ON aip_actions (tenant, principal, seq);
CREATE INDEX aip_actions_by_session ON aip_actions (session_id, seq);
CREATE INDEX aip_actions_by_state ON aip_actions (state, created_at_ms);
CREATE INDEX aip_jobs_ready ON aip_jobs (queue, state, available_at_ms);
CREATE INDEX aip_jobs_by_action ON aip_jobs (tenant, action_id);

-- Receipt chains are unique per tenant; the append-only triggers are lifted only while the table is
-- copied.
DROP TRIGGER aip_receipts_no_update;
DROP TRIGGER aip_receipts_no_delete;
CREATE TABLE aip_receipts_v5 (
    receipt_id TEXT PRIMARY KEY,
    chain_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    tenant TEXT NOT NULL,
    principal TEXT,
    action_id TEXT,
    receipt_type TEXT NOT NULL,
    hash TEXT NOT NULL,
    previous_hash TEXT,
    created_at_ms INTEGER NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (tenant, chain_id, position)
);
INSERT INTO aip_receipts_v5 (receipt_id, chain_id, position, tenant, principal, action_id, receipt_type, hash,
    previous_hash, created_at_ms, body)
SELECT receipt_id, chain_id, position, tenant, principal, action_id, receipt_type, hash,
    previous_hash, created_at_ms, body
FROM aip_receipts;
DROP TABLE aip_receipts;
ALTER TABLE aip_receipts_v5 RENAME TO aip_receipts;
CREATE TRIGGER aip_receipts_no_update BEFORE UPDATE ON aip_receipts
BEGIN SELECT RAISE(ABORT, 'aip_receipts is append-only'); END;
CREATE TRIGGER aip_receipts_no_delete BEFORE DELETE ON aip_receipts
BEGIN SELECT RAISE(ABORT, 'aip_receipts is append-only'); END;

-- Audit records name the action and session they are about (from their data, for older records).
ALTER TABLE aip_audit ADD COLUMN action_id TEXT;
ALTER TABLE aip_audit ADD COLUMN session_id TEXT;
DROP TRIGGER aip_audit_no_update;
UPDATE aip_audit SET action_id = json_extract(data, '$.action_id'), session_id = json_extract(data, '$.session_id');
CREATE TRIGGER aip_audit_no_update BEFORE UPDATE ON aip_audit
BEGIN SELECT RAISE(ABORT, 'aip_audit is append-only'); END;
CREATE INDEX aip_audit_by_action ON aip_audit (tenant, action_id, seq);
CREATE INDEX aip_audit_by_session ON aip_audit (tenant, session_id, seq);
