-- Concurrency keys and fairness keys on rows (PostgreSQL's 0021_concurrency_keys.sql says what they are). Written,
-- like 0001, to be run again after a stop part-way: each step only when information_schema says it is still to do.
-- utf8mb4_bin: keys are compared exactly, case and all, as on PostgreSQL.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'concurrency_key' AS name,
        'ADD COLUMN concurrency_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL' AS clause
    UNION ALL SELECT 2, 'fairness_key',
        'ADD COLUMN fairness_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL'
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.columns c
    WHERE c.table_schema = DATABASE() AND c.table_name = 'jenkins_jobs_queue' AND c.column_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- A schedule's rows carry its keys.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_job_schedules ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'concurrency_key' AS name,
        'ADD COLUMN concurrency_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL' AS clause
    UNION ALL SELECT 2, 'fairness_key',
        'ADD COLUMN fairness_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL'
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.columns c
    WHERE c.table_schema = DATABASE() AND c.table_name = 'jenkins_job_schedules' AND c.column_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- An empty key is no key: refused, as the CLI refuses it (VARCHAR(255) already bounds the length).
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'jenkins_jobs_queue_concurrency_key_check' AS name,
        'ADD CONSTRAINT jenkins_jobs_queue_concurrency_key_check CHECK (concurrency_key <> '''')' AS clause
    UNION ALL SELECT 2, 'jenkins_jobs_queue_fairness_key_check',
        'ADD CONSTRAINT jenkins_jobs_queue_fairness_key_check CHECK (fairness_key <> '''')'
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.TABLE_CONSTRAINTS t
    WHERE t.CONSTRAINT_SCHEMA = DATABASE() AND t.TABLE_NAME = 'jenkins_jobs_queue' AND t.CONSTRAINT_NAME = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- ---- The plain-SQL trigger of 0017_plain_sql.sql again, naming the two new columns: a plain UPDATE that sets a
-- processing row back to pending keeps its keys too (MySQL cannot assign a whole row: every column is named). The
-- rest is 0017's, whose comments say why.
DROP TRIGGER IF EXISTS jenkins_jobs_queue_plain_sql;
CREATE TRIGGER jenkins_jobs_queue_plain_sql BEFORE UPDATE ON jenkins_jobs_queue FOR EACH ROW
BEGIN
    DECLARE detail TEXT;
    IF NEW.status = 'pending' AND OLD.status = 'processing' AND NEW.lease_expires_at IS NOT NULL THEN
        SET NEW.id = OLD.id, NEW.job_name = OLD.job_name, NEW.parameters = OLD.parameters, NEW.status = OLD.status,
            NEW.priority = OLD.priority, NEW.scheduled_at = OLD.scheduled_at, NEW.attempts = OLD.attempts,
            NEW.max_attempts = OLD.max_attempts, NEW.dispatch_id = OLD.dispatch_id,
            NEW.jenkins_queue_id = OLD.jenkins_queue_id, NEW.build_number = OLD.build_number,
            NEW.build_url = OLD.build_url, NEW.jenkins_result = OLD.jenkins_result, NEW.last_error = OLD.last_error,
            NEW.dedupe_key = OLD.dedupe_key, NEW.lease_expires_at = OLD.lease_expires_at,
            NEW.started_at = OLD.started_at, NEW.created_at = OLD.created_at, NEW.finished_at = OLD.finished_at,
            NEW.resends = OLD.resends, NEW.cancel_requested_at = OLD.cancel_requested_at,
            NEW.controller = OLD.controller, NEW.concurrency_key = OLD.concurrency_key,
            NEW.fairness_key = OLD.fairness_key, NEW.updated_at = UTC_TIMESTAMP(6);
        IF OLD.dispatch_id LIKE 'legacy-%' THEN
            SET detail = CONCAT('the worker that ran before jenkins-dispatch holds it (docs/cutover.md): ',
                                'jenkins-dispatch never sends it, and settles it if that worker has not when the ',
                                'cutover window closes');
        ELSEIF OLD.jenkins_queue_id IS NOT NULL OR OLD.build_number IS NOT NULL THEN
            SET NEW.lease_expires_at = LEAST(OLD.lease_expires_at, UTC_TIMESTAMP(6));
            SET detail = CONCAT('Jenkins has it (', CONCAT_WS(', ', CONCAT('queue item ', OLD.jenkins_queue_id),
                                                              CONCAT('build #', OLD.build_number)),
                                '): looked at there now and settled from what Jenkins says; it is not sent again');
        ELSE
            SET detail = CONCAT('its trigger''s answer is not known: ',
                                IF(OLD.lease_expires_at > UTC_TIMESTAMP(6),
                                   CONCAT('once its lease ends (', DATE_FORMAT(OLD.lease_expires_at, '%H:%i:%s'),
                                          ' UTC; the trigger may still be on its way), '),
                                   'at the next pass, '),
                                'Jenkins is searched for its DISPATCH_ID, and it is sent again, with the same ',
                                'DISPATCH_ID, only if nothing is found there');
        END IF;
        INSERT INTO jenkins_job_events (job_id, at, event, from_status, to_status, dispatch_id, actor, detail)
        VALUES (OLD.id, UTC_TIMESTAMP(6), 'requeue_kept', 'processing', 'processing', OLD.dispatch_id, 'plain_sql',
                CONCAT('set back to pending by plain SQL while processing: kept processing under dispatch ', OLD.dispatch_id,
                       ', the rest of the UPDATE undone; ', detail, ' (`jenkins-dispatch cancel ', OLD.id,
                       '` stops it)'));
    ELSEIF NEW.status = 'pending' AND OLD.status IN ('completed', 'failed', 'cancelled')
           AND NEW.finished_at IS NOT NULL THEN
        SET NEW.dispatch_id = OLD.dispatch_id, NEW.attempts = 0, NEW.resends = 0, NEW.cancel_requested_at = NULL,
            NEW.finished_at = NULL, NEW.lease_expires_at = NULL, NEW.jenkins_queue_id = NULL, NEW.build_number = NULL,
            NEW.build_url = NULL, NEW.jenkins_result = NULL, NEW.started_at = NULL, NEW.last_error = NULL,
            NEW.updated_at = UTC_TIMESTAMP(6),
            NEW.scheduled_at = IF(NEW.scheduled_at <=> OLD.scheduled_at, UTC_TIMESTAMP(6), NEW.scheduled_at);
        INSERT INTO jenkins_job_events (job_id, at, event, from_status, to_status, dispatch_id, actor, detail)
        VALUES (OLD.id, UTC_TIMESTAMP(6), 'retried', OLD.status, 'pending', OLD.dispatch_id, 'plain_sql',
                CONCAT('set back to pending by plain SQL while ', OLD.status, ': retried as `jenkins-dispatch retry ',
                       OLD.id, '` retries it (attempts counted afresh)'));
    END IF;
END;

-- ---- Key caps (PostgreSQL's 0021 says what they are), and the index the capped claim counts a key's rows in
-- flight on (status first: the processing rows of one key; InnoDB appends the id, so a superseding key's newest
-- pending row is found on it too).
CREATE TABLE IF NOT EXISTS jenkins_key_limits (
    concurrency_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    max_in_flight   INT NOT NULL,
    supersede       BOOLEAN NOT NULL DEFAULT FALSE,
    stop_running    BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at      DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    CONSTRAINT jenkins_key_limits_key_check CHECK (concurrency_key <> ''),
    CONSTRAINT jenkins_key_limits_cap_check CHECK (max_in_flight >= 0),
    CONSTRAINT jenkins_key_limits_stop_check CHECK (supersede OR NOT stop_running)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_jobs_queue ADD INDEX jenkins_jobs_queue_in_flight_by_key_idx (status, concurrency_key)',
          'DO 0')
INTO @jd_ddl
FROM information_schema.statistics
WHERE table_schema = DATABASE() AND table_name = 'jenkins_jobs_queue'
  AND index_name = 'jenkins_jobs_queue_in_flight_by_key_idx';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
