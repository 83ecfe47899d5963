-- Who pulled a lever of the web page (PostgreSQL's 0009): behind a login proxy the page records its operator as
-- "ui:NAME". VARCHAR(63) keeps a one-byte length under utf8mb4, so widening the column changes no row. The wider
-- check goes in under the name 0005 freed, then 0005's goes, each step only when information_schema says it is
-- still to do, so a run cut short is simply run again.
ALTER TABLE jenkins_job_events MODIFY actor VARCHAR(63) NOT NULL;

SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_events ADD CONSTRAINT jenkins_job_events_actor_known
               CHECK (actor IN (''dispatcher'', ''webhook'', ''reconciler'', ''operator'', ''ui'', ''old_worker'')
                      OR actor LIKE ''ui:_%'')',
          'DO 0')
INTO @jd_ddl
FROM information_schema.TABLE_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'jenkins_job_events'
  AND CONSTRAINT_NAME = 'jenkins_job_events_actor_known';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0, 'DO 0',
          IF(VERSION() LIKE '%MariaDB%',
             'ALTER TABLE jenkins_job_events DROP CONSTRAINT jenkins_job_events_actor_check',
             'ALTER TABLE jenkins_job_events DROP CHECK jenkins_job_events_actor_check'))
INTO @jd_ddl
FROM information_schema.TABLE_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'jenkins_job_events'
  AND CONSTRAINT_NAME = 'jenkins_job_events_actor_check';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;

-- Every cap set or removed, by whom, written by the same block as the change.
CREATE TABLE IF NOT EXISTS jenkins_job_limit_events (
    id            BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at            DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    controller    VARCHAR(63) NOT NULL DEFAULT 'default',  -- caps are per controller (0006_controllers.sql)
    job_name      VARCHAR(1024) NOT NULL,
    previous      INT NULL,
    max_in_flight INT NULL,
    changed_by    VARCHAR(255) NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
