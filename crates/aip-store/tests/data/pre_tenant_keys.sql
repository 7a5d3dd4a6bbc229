-- Rows as the schema before tenant-scoped action ids holds them (SQLite migration 4, PostgreSQL
-- migration 2): an action with its job, a chunk, a receipt and an audit record naming the action.
INSERT INTO aip_actions (action_id, tenant, principal, capability, mode, state, created_at_ms, updated_at_ms, request)
VALUES ('a1', 't1', 'alice', 'cap:demo:echo', 'async', 'queued', 1, 1, '{}');
INSERT INTO aip_jobs (job_id, queue, action_id, tenant, state, available_at_ms, max_attempts, created_at_ms, updated_at_ms, payload)
VALUES ('j1', 'actions', 'a1', 't1', 'ready', 1, 5, 1, 1, '{}');
INSERT INTO aip_chunks (action_id, seq, kind, data, created_at_ms) VALUES ('a1', 1, 'data', '{"i": 1}', 1);
INSERT INTO aip_receipts (receipt_id, chain_id, position, tenant, principal, action_id, receipt_type, hash, created_at_ms, body)
VALUES ('r1', 'a1', 0, 't1', 'alice', 'a1', 'request_received', 'h1', 1, '{}');
INSERT INTO aip_audit (seq, audit_id, tenant, actor, action_label, occurred_at_ms, data)
VALUES (1, 'au1', 't1', 'alice', 'action.cancel_requested', 1, '{"action_id": "a1"}');
