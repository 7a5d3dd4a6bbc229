-- Audit events no longer take the counter row lock in the writing transaction: admissions, approval
-- decisions and channel writes append their audit event in their own transaction, and the lock
-- serialized them all through commit (as events were before 0002). Writers take `seq` from a plain
-- sequence and leave `pos` NULL; the event sequencer also positions audit events after commit, in
-- commit order. Readers list by `pos` only. The table stays append-only: the one change allowed is
-- setting a NULL `pos`, nothing else.
DROP TRIGGER aip_audit_append_only ON aip_audit;
ALTER TABLE aip_audit ADD COLUMN pos BIGINT;
UPDATE aip_audit SET pos = seq;
CREATE SEQUENCE aip_audit_seq OWNED BY aip_audit.seq;
SELECT setval('aip_audit_seq', (SELECT value FROM aip_counters WHERE name = 'audit') + 1, false);
ALTER TABLE aip_audit ALTER COLUMN seq SET DEFAULT nextval('aip_audit_seq');
CREATE UNIQUE INDEX aip_audit_by_pos ON aip_audit (pos);
CREATE INDEX aip_audit_by_tenant_pos ON aip_audit (tenant, pos);
CREATE INDEX aip_audit_unsequenced ON aip_audit (seq) WHERE pos IS NULL;
CREATE FUNCTION aip_audit_position_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.pos IS NULL AND NEW.pos IS NOT NULL
       AND (to_jsonb(NEW) - 'pos') = (to_jsonb(OLD) - 'pos') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$;
CREATE TRIGGER aip_audit_append_only BEFORE UPDATE OR DELETE ON aip_audit
FOR EACH ROW EXECUTE FUNCTION aip_audit_position_only();
