-- `schedule add … --no-overlap` (issue 24; docs/schedules.md, "No overlap"): a tick that comes while the
-- schedule's previous run (its last_job_id) is still pending or processing is consumed without a row, and counted
-- here. Numbered 0017: 0015 and 0016 are other changes' (taken concurrently); the runner applies any missing
-- number. Runs inside the migration runner's transaction, under its advisory lock. Adding columns with constant
-- defaults rewrites nothing on PostgreSQL 11+.
ALTER TABLE jenkins_job_schedules
    ADD COLUMN no_overlap boolean NOT NULL DEFAULT false,
    -- Ticks consumed without a row because the previous run was in flight, and the latest of them.
    ADD COLUMN skipped_ticks bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_skipped_tick timestamptz;
