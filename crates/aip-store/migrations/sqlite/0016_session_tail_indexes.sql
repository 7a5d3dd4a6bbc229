-- Session-filtered listings (a session's actions, events and audit) are served by an index, and
-- rows without a session add nothing to it. The key is the session id's last 12 characters, a
-- generated column: server-made session ids end in random hex, so the tail is as selective as the
-- whole id at a fifth of its size, and every query that uses it also compares the full id. The
-- superseded indexes on the full id were never chosen by the listing queries and cost every
-- session-bound write three wide index entries.
DROP INDEX aip_actions_by_session;
DROP INDEX aip_events_by_session;
DROP INDEX aip_audit_by_session;
ALTER TABLE aip_actions ADD COLUMN session_tail TEXT
    GENERATED ALWAYS AS (substr(session_id, length(session_id) - 11)) VIRTUAL;
ALTER TABLE aip_events ADD COLUMN session_tail TEXT
    GENERATED ALWAYS AS (substr(session_id, length(session_id) - 11)) VIRTUAL;
ALTER TABLE aip_audit ADD COLUMN session_tail TEXT
    GENERATED ALWAYS AS (substr(session_id, length(session_id) - 11)) VIRTUAL;
CREATE INDEX aip_actions_by_session_tail ON aip_actions (session_tail, seq) WHERE session_tail IS NOT NULL;
CREATE INDEX aip_events_by_session_tail ON aip_events (session_tail, pos) WHERE session_tail IS NOT NULL;
CREATE INDEX aip_audit_by_session_tail ON aip_audit (session_tail, pos) WHERE session_tail IS NOT NULL;
