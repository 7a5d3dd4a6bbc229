-- Concurrency quotas (spec 22.8) count a principal's and a tenant's unfinished actions at every
-- admission: a partial index holds only those rows, so the count costs the unfinished work, not
-- the principal's whole history.
CREATE INDEX aip_actions_unfinished ON aip_actions (tenant, principal)
    WHERE state IN ('accepted', 'queued', 'running', 'streaming', 'cancelling');
