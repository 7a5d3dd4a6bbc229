-- Evidence retention: receipts and audit events past a configured retention are archived, then
-- removed. They stay append-only for everything else: a delete is allowed only inside the purge's
-- own transaction, which holds the `purge_permit` row of aip_meta while it deletes and removes it
-- before commit (SQLite writes are serialized, so no other writer ever sees it).
DROP TRIGGER aip_receipts_no_delete;
CREATE TRIGGER aip_receipts_no_delete BEFORE DELETE ON aip_receipts
WHEN NOT EXISTS (SELECT 1 FROM aip_meta WHERE name = 'purge_permit')
BEGIN SELECT RAISE(ABORT, 'aip_receipts is append-only'); END;
DROP TRIGGER aip_audit_no_delete;
CREATE TRIGGER aip_audit_no_delete BEFORE DELETE ON aip_audit
WHEN NOT EXISTS (SELECT 1 FROM aip_meta WHERE name = 'purge_permit')
BEGIN SELECT RAISE(ABORT, 'aip_audit is append-only'); END;
-- What is left of a purged receipt chain: enough to say where it went, to keep its root hash
-- nameable, and to refuse restarting a chain under the same id.
CREATE TABLE aip_receipt_purges (
    tenant TEXT NOT NULL,
    chain_id TEXT NOT NULL,
    principal TEXT,
    receipts INTEGER NOT NULL,
    root_hash TEXT NOT NULL,
    archive TEXT,
    archive_sha256 TEXT,
    purged_at_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant, chain_id)
);
