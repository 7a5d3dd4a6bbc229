-- Job claims (spec 13.4) in constant time, however many jobs have finished: a claim picks from
-- two partial indexes that hold only the jobs it could take (ready ones by when they fall due,
-- leased ones by when their lease lapses), so finished and dead jobs are in neither and a poll
-- costs the claimable work, not the queue's history.
DROP INDEX aip_jobs_ready;
CREATE INDEX aip_jobs_claimable ON aip_jobs (queue, available_at_ms, job_id)
    WHERE state = 'ready' AND attempts < max_attempts;
CREATE INDEX aip_jobs_expiring ON aip_jobs (queue, lease_expires_at_ms, job_id)
    WHERE state = 'leased' AND attempts < max_attempts;
