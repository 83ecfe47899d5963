-- Pauses per controller (PostgreSQL's 0013; docs/controllers.md). Written, like 0001, to be run again after a
-- stop part-way: each step only when information_schema says it is still to do.
--
-- controller NULL means every controller: what a pause meant before, so each existing pause keeps holding its
-- job back on every controller. job_name '*' with a controller pauses that whole controller. The unique key is
-- (controller_key, job_key), controller_key '' standing for NULL (a unique key lets NULLs repeat).

SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_pauses
               ADD COLUMN controller VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
               ADD COLUMN controller_key VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin
                   AS (COALESCE(controller, '''')) STORED,
               ADD CONSTRAINT jenkins_job_pauses_controller_check CHECK (controller REGEXP ''^[a-z0-9][a-z0-9_-]*$'')',
          'DO 0')
INTO @jd_ddl
FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_pauses' AND column_name = 'controller';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_pauses ADD UNIQUE KEY jenkins_job_pauses_controller_job_key (controller_key, job_key)',
          'DO 0')
INTO @jd_ddl
FROM information_schema.statistics
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_pauses'
  AND index_name = 'jenkins_job_pauses_controller_job_key';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0, 'DO 0', 'ALTER TABLE jenkins_job_pauses DROP INDEX jenkins_job_pauses_job_name_key')
INTO @jd_ddl
FROM information_schema.statistics
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_pauses' AND index_name = 'jenkins_job_pauses_job_name_key';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;
