-- scheduled_at a real time no later than 9999-12-31 00:00 UTC (PostgreSQL's 0007; its first half, the case rule
-- for job names, MySQL has had from 0001: caps and pauses key on LOWER(job_name)). Written, like 0001, to be run
-- again after a stop part-way.
--
-- DATETIME stops at 9999-12-31 23:59:59 anyway; the bound is the moment PostgreSQL's rows use for "never", the
-- same rule on both engines. A zero date ('0000-00-00', '2024-00-10') is no time at all: PyMySQL hands it over as
-- text, and `ls`, `show` and the page broke on it. Our sessions are strict and an INSERT passes through the UTC
-- trigger (strict too), but an application's UPDATE from a lax session (MariaDB's default sql_mode allows zero
-- dates) could still write one. Both rules carry PostgreSQL's names, the message a plain write gets.
--
-- MySQL checks every existing row when a CHECK is added: rows that break the rules are mended first. A zero or
-- year-0 date becomes the row's created_at (when it was enqueued: due at once, as 0001 made such dates due); a
-- time later on the last day becomes its first moment ("never"). Final rows too (MySQL has no NOT VALID): only
-- their scheduled_at, never their updated_at.

UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY) SET scheduled_at = created_at
WHERE scheduled_at < '0001-01-01 00:00:00' OR MONTH(scheduled_at) = 0 OR DAYOFMONTH(scheduled_at) = 0;
UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY) SET scheduled_at = '9999-12-31 00:00:00' WHERE scheduled_at > '9999-12-31 00:00:00';

SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'jenkins_jobs_queue_scheduled_at_check' AS name,
        'ADD CONSTRAINT jenkins_jobs_queue_scheduled_at_check '
        'CHECK (scheduled_at >= ''0001-01-01 00:00:00'' AND MONTH(scheduled_at) > 0 AND DAYOFMONTH(scheduled_at) > 0)'
        AS clause
    UNION ALL SELECT 2, 'jenkins_jobs_queue_scheduled_at_at_most_9999_12_31',
        'ADD CONSTRAINT jenkins_jobs_queue_scheduled_at_at_most_9999_12_31 CHECK (scheduled_at <= ''9999-12-31 00:00:00'')'
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.table_constraints tc
    WHERE tc.constraint_schema = DATABASE() AND tc.table_name = 'jenkins_jobs_queue'
      AND tc.constraint_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;
