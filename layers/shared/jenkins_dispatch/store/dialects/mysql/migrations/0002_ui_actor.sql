-- The web page (`jenkins-dispatch ui`) is an actor of its own in a job's history (PostgreSQL's 0006). The
-- wider check is added under a new name before the old one goes, each step only when information_schema
-- says it is still to do, so a run cut short is simply run again. MySQL drops a check with DROP CHECK,
-- MariaDB with DROP CONSTRAINT.
SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_events ADD CONSTRAINT jenkins_job_events_actor_known
               CHECK (actor IN (''dispatcher'', ''webhook'', ''reconciler'', ''operator'', ''ui''))',
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
