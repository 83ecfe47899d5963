-- Rate limits (PostgreSQL's 0013; docs/operating.md, "Limits"): a job may have a rate, starts per minute, beside or
-- instead of its cap on jobs in flight. Written, like 0006, to be run again after a stop part-way: each step is
-- idempotent or done only when information_schema says it is still to do.
--
-- A limits row holds a cap, a rate or both (never neither: removing the last of them deletes the row).
ALTER TABLE jenkins_job_limits MODIFY max_in_flight INT NULL;

SELECT IF(COUNT(*) = 0, 'ALTER TABLE jenkins_job_limits ADD COLUMN per_minute INT NULL', 'DO 0')
INTO @jd_ddl
FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_limits' AND column_name = 'per_minute';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_limits ADD CONSTRAINT jenkins_job_limits_per_minute_check CHECK (per_minute >= 1)',
          'DO 0')
INTO @jd_ddl
FROM information_schema.TABLE_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'jenkins_job_limits'
  AND CONSTRAINT_NAME = 'jenkins_job_limits_per_minute_check';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_limits ADD CONSTRAINT jenkins_job_limits_cap_or_rate_check
               CHECK (max_in_flight IS NOT NULL OR per_minute IS NOT NULL)',
          'DO 0')
INTO @jd_ddl
FROM information_schema.TABLE_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'jenkins_job_limits'
  AND CONSTRAINT_NAME = 'jenkins_job_limits_cap_or_rate_check';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;

-- The starts of rated jobs, written by the capped claim that starts them (the same block): a rate is checked by
-- counting its job's starts of the last minute on this index, a handful of entries. The history names no job:
-- counting one job's starts there would read every claim of the last minute, of every job, on each claim.
-- Starts older than two minutes are dropped by the claims themselves.
CREATE TABLE IF NOT EXISTS jenkins_job_starts (
    id         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    controller VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    job_key    BINARY(32) NOT NULL,  -- as jenkins_job_limits.job_key
    at         DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    job_id     BIGINT NOT NULL,
    INDEX jenkins_job_starts_window_idx (controller, job_key, at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
