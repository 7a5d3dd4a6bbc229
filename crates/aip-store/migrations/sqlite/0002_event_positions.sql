-- Events are listed by `pos`, their commit-ordered position. SQLite writes are serialized, so an
-- event's position is assigned with its sequence in the writing transaction.
ALTER TABLE aip_events ADD COLUMN pos INTEGER;
UPDATE aip_events SET pos = seq;
CREATE UNIQUE INDEX aip_events_by_pos ON aip_events (pos);
CREATE INDEX aip_events_by_tenant_pos ON aip_events (tenant, pos);
CREATE INDEX aip_events_by_action_pos ON aip_events (action_id, pos);
