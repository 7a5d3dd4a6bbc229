-- Action ids are unique per tenant, not per store (spec 22.6): another tenant's action with the same
-- id neither conflicts nor shows. Every table keyed by an action id is keyed by (tenant, id): the
-- actions, their jobs (the foreign key), their chunks and their receipt chains (a chain id is its
-- action's id). Audit records gain the action and session they are about, as filters.

-- Chunks carry their action's tenant (ids are still store-unique here, so the join is exact; a chunk
-- without its action cannot be read by anyone and goes).
ALTER TABLE aip_chunks ADD COLUMN tenant TEXT;
UPDATE aip_chunks c SET tenant = a.tenant FROM aip_actions a WHERE a.action_id = c.action_id;
DELETE FROM aip_chunks WHERE tenant IS NULL;
ALTER TABLE aip_chunks ALTER COLUMN tenant SET NOT NULL;
ALTER TABLE aip_chunks DROP CONSTRAINT aip_chunks_pkey;
ALTER TABLE aip_chunks ADD PRIMARY KEY (tenant, action_id, seq);

ALTER TABLE aip_jobs DROP CONSTRAINT aip_jobs_action_id_fkey;
ALTER TABLE aip_actions DROP CONSTRAINT aip_actions_action_id_key;
ALTER TABLE aip_actions ADD CONSTRAINT aip_actions_tenant_action_id_key UNIQUE (tenant, action_id);
ALTER TABLE aip_jobs ADD CONSTRAINT aip_jobs_tenant_action_id_fkey
    FOREIGN KEY (tenant, action_id) REFERENCES aip_actions (tenant, action_id);
DROP INDEX aip_jobs_by_action;
CREATE INDEX aip_jobs_by_action ON aip_jobs (tenant, action_id);

ALTER TABLE aip_receipts DROP CONSTRAINT aip_receipts_chain_id_position_key;
ALTER TABLE aip_receipts ADD CONSTRAINT aip_receipts_tenant_chain_id_position_key
    UNIQUE (tenant, chain_id, position);

ALTER TABLE aip_audit ADD COLUMN action_id TEXT;
ALTER TABLE aip_audit ADD COLUMN session_id TEXT;
ALTER TABLE aip_audit DISABLE TRIGGER aip_audit_append_only;
UPDATE aip_audit SET action_id = data->>'action_id', session_id = data->>'session_id';
ALTER TABLE aip_audit ENABLE TRIGGER aip_audit_append_only;
CREATE INDEX aip_audit_by_action ON aip_audit (tenant, action_id, seq);
CREATE INDEX aip_audit_by_session ON aip_audit (tenant, session_id, seq);
