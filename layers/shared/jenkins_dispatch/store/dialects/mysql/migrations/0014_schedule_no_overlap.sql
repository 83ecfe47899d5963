-- `schedule add … --no-overlap` (PostgreSQL's 0017 says what it is). Numbered 0014: 0012 and 0013 are other
-- changes' (taken concurrently); the runner applies any missing number. Written, like 0001, to be run again after
-- a stop part-way: the step only when information_schema says it is still to do.
SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_schedules
               ADD COLUMN no_overlap BOOLEAN NOT NULL DEFAULT FALSE,
               ADD COLUMN skipped_ticks BIGINT NOT NULL DEFAULT 0,
               ADD COLUMN last_skipped_tick DATETIME(6) NULL',
          'DO 0')
INTO @jd_ddl
FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_schedules' AND column_name = 'no_overlap';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
