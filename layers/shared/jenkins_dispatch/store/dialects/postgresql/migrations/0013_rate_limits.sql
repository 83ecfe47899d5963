-- Rate limits (issue 24; docs/operating.md, "Limits"): a job may have a rate, starts per minute, beside or instead of
-- its cap on jobs in flight. Runs inside the migration runner's transaction, under its advisory lock.
--
-- 1. A limits row holds a cap, a rate or both (never neither: removing the last of them deletes the row). The
--    claim's rules for caps are unchanged: any limits row sends the job through the capped claim, under its lock.
ALTER TABLE jenkins_job_limits ALTER COLUMN max_in_flight DROP NOT NULL;
ALTER TABLE jenkins_job_limits ADD COLUMN per_minute integer
    CONSTRAINT jenkins_job_limits_per_minute_check CHECK (per_minute >= 1);
ALTER TABLE jenkins_job_limits ADD CONSTRAINT jenkins_job_limits_cap_or_rate_check
    CHECK (max_in_flight IS NOT NULL OR per_minute IS NOT NULL);

-- 2. The starts of rated jobs, written by the capped claim that starts them (the same statement): a rate is
--    checked by counting its job's starts of the last minute on this index, a handful of entries. The history
--    (jenkins_job_events) records every claim too, but names no job: counting one job's starts there would read
--    every claim of the last minute, of every job, on each claim. Starts older than two minutes are dropped by
--    the claims themselves; nothing else reads them.
CREATE TABLE jenkins_job_starts (
    controller text NOT NULL,
    job_key    text NOT NULL,          -- lower(job_name), as the limits' unique index keys a job
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    job_id     bigint NOT NULL
);
CREATE INDEX jenkins_job_starts_window_idx ON jenkins_job_starts (controller, job_key, at);
