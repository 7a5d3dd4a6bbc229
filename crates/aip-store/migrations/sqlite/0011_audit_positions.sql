-- Audit events are listed by `pos`, their commit-ordered position (as events, 0002). SQLite writes
-- are serialized, so an audit event's position is its sequence, assigned in the writing transaction.
DROP TRIGGER aip_audit_no_update;
ALTER TABLE aip_audit ADD COLUMN pos INTEGER;
UPDATE aip_audit SET pos = seq;
CREATE TRIGGER aip_audit_no_update BEFORE UPDATE ON aip_audit
BEGIN SELECT RAISE(ABORT, 'aip_audit is append-only'); END;
CREATE UNIQUE INDEX aip_audit_by_pos ON aip_audit (pos);
CREATE INDEX aip_audit_by_tenant_pos ON aip_audit (tenant, pos);
