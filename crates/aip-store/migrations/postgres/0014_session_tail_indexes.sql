-- Session-filtered listings (a session's actions, events and audit) are served by an index, and
-- rows without a session add nothing to it. The key is the session id's last 12 characters, a
-- generated column: server-made session ids end in random hex, so the tail is as selective as the
-- whole id at a fifth of its size, and every query that uses it also compares the full id. The
-- superseded indexes on the full id were never chosen by the listing queries and cost every
-- session-bound write three wide index entries. Adding a stored column rewrites the three tables
-- once, under their exclusive lock.
DROP INDEX aip_actions_by_session;
DROP INDEX aip_events_by_session;
DROP INDEX aip_audit_by_session;
ALTER TABLE aip_actions ADD COLUMN session_tail TEXT
    GENERATED ALWAYS AS (substr(session_id, length(session_id) - 11)) STORED;
ALTER TABLE aip_events ADD COLUMN session_tail TEXT
    GENERATED ALWAYS AS (substr(session_id, length(session_id) - 11)) STORED;
ALTER TABLE aip_audit ADD COLUMN session_tail TEXT
    GENERATED ALWAYS AS (substr(session_id, length(session_id) - 11)) STORED;
CREATE INDEX aip_actions_by_session_tail ON aip_actions (session_tail, seq) WHERE session_tail IS NOT NULL;
CREATE INDEX aip_events_by_session_tail ON aip_events (session_tail, pos) WHERE session_tail IS NOT NULL;
CREATE INDEX aip_audit_by_session_tail ON aip_audit (session_tail, pos) WHERE session_tail IS NOT NULL;
-- The audit guard lets only the sequencer's position write through, comparing every other column.
-- A BEFORE trigger sees a stored generated column not yet computed (NULL in NEW), so the tail is
-- left out of the comparison; it follows `session_id`, which is compared.
CREATE OR REPLACE FUNCTION aip_audit_position_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.pos IS NULL AND NEW.pos IS NOT NULL
       AND (to_jsonb(NEW) - 'pos' - 'session_tail') = (to_jsonb(OLD) - 'pos' - 'session_tail') THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM aip_meta WHERE name = 'purge_permit') THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$;
