-- Events no longer take a counter row lock in the writing transaction (that serialized every
-- event-writing transaction through its commit and its WAL flush). Writers take `seq` from a plain
-- sequence and leave `pos` NULL; a sequencer (one at a time, under an advisory lock) assigns `pos`
-- to committed events in a short transaction of its own. Readers list by `pos` only, so an event
-- committed late always lands after every cursor already handed out.
ALTER TABLE aip_events ADD COLUMN pos BIGINT;
UPDATE aip_events SET pos = seq;
CREATE SEQUENCE aip_events_seq OWNED BY aip_events.seq;
SELECT setval('aip_events_seq', (SELECT value FROM aip_counters WHERE name = 'events') + 1, false);
ALTER TABLE aip_events ALTER COLUMN seq SET DEFAULT nextval('aip_events_seq');
CREATE UNIQUE INDEX aip_events_by_pos ON aip_events (pos);
CREATE INDEX aip_events_by_tenant_pos ON aip_events (tenant, pos);
CREATE INDEX aip_events_by_action_pos ON aip_events (action_id, pos);
CREATE INDEX aip_events_unsequenced ON aip_events (seq) WHERE pos IS NULL;
