-- Evidence retention: receipts and audit events past a configured retention are archived, then
-- removed. They stay append-only for everything else: a delete is allowed only inside the purge's
-- own transaction, which holds the `purge_permit` row of aip_meta while it deletes and removes it
-- before commit (uncommitted, the row is visible to that transaction only).
CREATE FUNCTION aip_refuse_change_unless_purging() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM aip_meta WHERE name = 'purge_permit') THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$;
DROP TRIGGER aip_receipts_append_only ON aip_receipts;
CREATE TRIGGER aip_receipts_append_only BEFORE UPDATE OR DELETE ON aip_receipts
FOR EACH ROW EXECUTE FUNCTION aip_refuse_change_unless_purging();
CREATE OR REPLACE FUNCTION aip_audit_position_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.pos IS NULL AND NEW.pos IS NOT NULL
       AND (to_jsonb(NEW) - 'pos') = (to_jsonb(OLD) - 'pos') THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM aip_meta WHERE name = 'purge_permit') THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$;
CREATE TABLE aip_receipt_purges (
    tenant TEXT NOT NULL,
    chain_id TEXT NOT NULL,
    principal TEXT,
    receipts BIGINT NOT NULL,
    root_hash TEXT NOT NULL,
    archive TEXT,
    archive_sha256 TEXT,
    purged_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, chain_id)
);
