-- Plain SQL that would make a row's bookkeeping lie: the seed's `UPDATE jenkins_jobs_queue SET status = 'pending'
-- WHERE id = …` on a processing row ("requeue a stuck job": two builds, once claimed again under a new dispatch_id)
-- is taken as a request to look again under the same dispatch, and on a final row ("retry a failed job") as the
-- operator's retry. PostgreSQL's 0019_plain_sql.sql says what each does and why; this file does the same with
-- MySQL's means. Written, like 0005, to be run again after a stop part-way: each step only when information_schema
-- says it is still to do, the trigger dropped and created again.
--
-- Told apart from ours by what they leave: every block of ours that makes a row pending clears its lease and its
-- finish time (tests/unit/test_statements.py); the hand-made UPDATE leaves them.

-- ---- plain_sql, an actor of its own in a job's history (before the trigger, which writes it): the wider check
-- under the name 0008 freed, then 0008's goes.
SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_events ADD CONSTRAINT jenkins_job_events_actor_check
               CHECK (actor IN (''dispatcher'', ''webhook'', ''reconciler'', ''operator'', ''ui'', ''old_worker'',
                                ''plain_sql'')
                      OR actor LIKE ''ui:_%'')',
          'DO 0')
INTO @jd_ddl
FROM information_schema.TABLE_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'jenkins_job_events'
  AND CONSTRAINT_NAME = 'jenkins_job_events_actor_check';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

SELECT IF(COUNT(*) = 0, 'DO 0',
          IF(VERSION() LIKE '%MariaDB%',
             'ALTER TABLE jenkins_job_events DROP CONSTRAINT jenkins_job_events_actor_known',
             'ALTER TABLE jenkins_job_events DROP CHECK jenkins_job_events_actor_known'))
INTO @jd_ddl
FROM information_schema.TABLE_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'jenkins_job_events'
  AND CONSTRAINT_NAME = 'jenkins_job_events_actor_known';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;

-- ---- The trigger: a second BEFORE UPDATE trigger beside jenkins_jobs_queue_old_worker (MySQL 8 and MariaDB 10.6 run
-- several, in the order they were created). Neither acts on what the other leaves, so that order, which a cutover run
-- again (docs/cutover.md) changes, does not matter. For a statement of ours its body is one test of a few columns.
-- Every column is named: MySQL cannot assign a whole row, so a column added to the queue later is added here too
-- (tests/integration/test_plain_sql.py fails until it is). Times are UTC_TIMESTAMP(6): the trigger runs in the
-- user's session, whose time zone is theirs.
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
            NEW.controller = OLD.controller, NEW.updated_at = UTC_TIMESTAMP(6);
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
