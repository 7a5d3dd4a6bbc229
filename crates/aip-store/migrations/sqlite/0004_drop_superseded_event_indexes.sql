-- Events are listed by `pos` (migration 2), which equals `seq` on SQLite, so the `(tenant, seq)` and
-- `(action_id, seq)` indexes are superseded by their `pos` twins and only cost every event insert
-- two more B-tree writes.
DROP INDEX IF EXISTS aip_events_by_tenant;
DROP INDEX IF EXISTS aip_events_by_action;
