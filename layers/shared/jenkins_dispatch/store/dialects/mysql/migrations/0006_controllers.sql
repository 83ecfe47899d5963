-- Several Jenkins controllers from one queue (PostgreSQL's 0009; docs/controllers.md). Written, like 0001, to be
-- run again after a stop part-way: each step only when information_schema says it is still to do.
--
-- Each row names the controller that runs it; a plain INSERT leaves it out and means `default` (JENKINS_URL),
-- as every existing row. ascii_bin: names are lower-case ASCII, compared exactly (the REGEXP too).
-- The claim index leads with the controller after the status: a claim walks only its own controller's pending
-- rows, whatever another's backlog. Caps are per controller: (controller, job_key) is the key.

SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'controller' AS name,
        'ADD COLUMN controller VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''default''' AS clause
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.columns c
    WHERE c.table_schema = DATABASE() AND c.table_name = 'jenkins_jobs_queue' AND c.column_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_jobs_queue ADD CONSTRAINT jenkins_jobs_queue_controller_check
               CHECK (controller REGEXP ''^[a-z0-9][a-z0-9_-]*$'')',
          'DO 0')
INTO @jd_ddl
FROM information_schema.TABLE_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'jenkins_jobs_queue'
  AND CONSTRAINT_NAME = 'jenkins_jobs_queue_controller_check';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_jobs_queue ADD INDEX jenkins_jobs_queue_claim_by_controller_idx
               (status, controller, claim_priority, scheduled_at, id)',
          'DO 0')
INTO @jd_ddl
FROM information_schema.statistics
WHERE table_schema = DATABASE() AND table_name = 'jenkins_jobs_queue'
  AND index_name = 'jenkins_jobs_queue_claim_by_controller_idx';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0, 'DO 0', 'ALTER TABLE jenkins_jobs_queue DROP INDEX jenkins_jobs_queue_claim_idx')
INTO @jd_ddl
FROM information_schema.statistics
WHERE table_schema = DATABASE() AND table_name = 'jenkins_jobs_queue' AND index_name = 'jenkins_jobs_queue_claim_idx';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- ---- Caps per controller.
SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_limits
               ADD COLUMN controller VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''default''',
          'DO 0')
INTO @jd_ddl
FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_limits' AND column_name = 'controller';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_limits ADD UNIQUE KEY jenkins_job_limits_controller_job_key (controller, job_key)',
          'DO 0')
INTO @jd_ddl
FROM information_schema.statistics
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_limits'
  AND index_name = 'jenkins_job_limits_controller_job_key';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0, 'DO 0', 'ALTER TABLE jenkins_job_limits DROP INDEX jenkins_job_limits_job_name_key')
INTO @jd_ddl
FROM information_schema.statistics
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_limits' AND index_name = 'jenkins_job_limits_job_name_key';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;
