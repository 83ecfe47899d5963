-- Rate changes in the caps' history (issue 24; docs/operating.md, "Limits"): `limits set JOB --per-minute N` and
-- `limits rm JOB --per-minute` are recorded as cap changes are, with who and from what to what. Runs inside the
-- migration runner's transaction, under its advisory lock.
--
-- kind says which limit an event changed: 'cap' (previous, max_in_flight; every event before this migration)
-- or 'rate' (previous_per_minute, per_minute: starts per minute, NULL for none). The other kind's columns stay NULL.
ALTER TABLE jenkins_job_limit_events
    ADD COLUMN kind text NOT NULL DEFAULT 'cap'
        CONSTRAINT jenkins_job_limit_events_kind_check CHECK (kind IN ('cap', 'rate')),
    ADD COLUMN previous_per_minute integer,
    ADD COLUMN per_minute integer;
