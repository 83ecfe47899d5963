-- Rate changes in the caps' history (PostgreSQL's 0016; docs/operating.md, "Limits"): `limits set JOB
-- --per-minute N` and `limits rm JOB --per-minute` are recorded as cap changes are, with who and from what to
-- what. Written, like 0010, to be run again after a stop part-way: each step only when information_schema says
-- it is still to do.
--
-- kind says which limit an event changed: 'cap' (previous, max_in_flight; every event before this migration)
-- or 'rate' (previous_per_minute, per_minute: starts per minute, NULL for none). The other kind's columns stay NULL.
SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_limit_events
               ADD COLUMN kind VARCHAR(4) CHARACTER SET ascii NOT NULL DEFAULT ''cap'',
               ADD COLUMN previous_per_minute INT NULL,
               ADD COLUMN per_minute INT NULL,
               ADD CONSTRAINT jenkins_job_limit_events_kind_check CHECK (kind IN (''cap'', ''rate''))',
          'DO 0')
INTO @jd_ddl
FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_limit_events' AND column_name = 'kind';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;
