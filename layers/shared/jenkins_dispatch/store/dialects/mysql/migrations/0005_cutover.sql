-- The cutover from the worker that ran before jenkins-dispatch, while it still runs (docs/cutover.md; PostgreSQL's
-- 0008_cutover.sql). That worker (the original question's: SELECT … FOR UPDATE SKIP LOCKED LIMIT 1, UPDATE … SET
-- status = 'processing', COMMIT, the Jenkins job, then UPDATE … SET status = 'completed' or 'failed') knows nothing
-- of dispatch ids or leases:
-- * the jobs it holds when this runs stay its own for a window, CUTOVER_WINDOW_SECONDS long (`migrate` sets
--   @jd_cutover_window_seconds; a file applied by hand opens none). Its 'completed' or 'failed' for them is kept and
--   written in their history; their lease ends with the window, so only then does the reconciler settle what is left;
-- * every other write of its kind (a claim; a result after the window, or for a job it does not hold) is refused
--   with a message that tells its owner what to do, instead of a constraint's name.
--
-- MySQL's DDL commits as it goes and the old worker may be running all along, so the order matters: the trigger
-- first (from then on no claim of the old worker lands, and its results are kept), then the window and the rows
-- it holds, then the two rules about processing and final rows (0001 leaves them to this file). Each step may run
-- again after a stop part-way, as in 0001; and after a rollback to the old worker (docs/cutover.md), deleting this
-- file's record and running `migrate` does the cutover again. Times are written with UTC_TIMESTAMP(6): the trigger runs in the old
-- worker's sessions, whose time zone is theirs.

SET SESSION group_concat_max_len = 1048576;

-- One row at most: when the table was upgraded while the old worker held jobs, and until when their results count.
CREATE TABLE IF NOT EXISTS jenkins_dispatch_cutover (
    id             INT NOT NULL PRIMARY KEY,
    upgraded_at    DATETIME(6) NOT NULL,
    window_seconds DOUBLE NOT NULL,
    window_ends_at DATETIME(6) NOT NULL,
    CONSTRAINT jenkins_dispatch_cutover_id_check CHECK (id = 1),
    CONSTRAINT jenkins_dispatch_cutover_window_seconds_check CHECK (window_seconds >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- ---- The old worker is an actor of its own in a job's history (before the trigger, which writes it): the wider
-- check under the name 0002 freed, then 0002's goes (MySQL drops a check with DROP CHECK, MariaDB with DROP CONSTRAINT).
SELECT IF(COUNT(*) = 0,
          'ALTER TABLE jenkins_job_events ADD CONSTRAINT jenkins_job_events_actor_check
               CHECK (actor IN (''dispatcher'', ''webhook'', ''reconciler'', ''operator'', ''ui'', ''old_worker''))',
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

-- ---- The trigger. Its body acts only on writes jenkins-dispatch never makes (every claim of ours draws a new
-- dispatch_id, every result of ours sets finished_at); for ours it is one test of a few columns. A row the old
-- worker claimed before the rows it holds are marked below (no lease yet: our claims always give one) is its own too.
-- MySQL keeps at most 128 characters of a SIGNAL's text (MariaDB more): what to do comes first.
DROP TRIGGER IF EXISTS jenkins_jobs_queue_old_worker;
CREATE TRIGGER jenkins_jobs_queue_old_worker BEFORE UPDATE ON jenkins_jobs_queue FOR EACH ROW
BEGIN
    DECLARE window_ends DATETIME(6);
    DECLARE shown VARCHAR(32);
    DECLARE told VARCHAR(128) DEFAULT 'rows are dispatched by jenkins-dispatch now: stop this worker (see docs/cutover.md)';
    DECLARE message TEXT;
    IF (NEW.status = 'processing' AND OLD.status <> 'processing' AND NEW.dispatch_id <=> OLD.dispatch_id)
       OR (NEW.status IN ('completed', 'failed', 'cancelled') AND NEW.status <> OLD.status
           AND NEW.finished_at <=> OLD.finished_at) THEN
        SELECT MAX(window_ends_at) INTO window_ends FROM jenkins_dispatch_cutover;
        SET shown = CONCAT(DATE_FORMAT(window_ends, '%Y-%m-%d %H:%i:%s'), ' UTC');
        IF NEW.status = 'processing' THEN
            SET message = CONCAT(told, '; row ', OLD.id, ' was not claimed: it stays ', OLD.status,
                                 ', for jenkins-dispatch');
        ELSEIF OLD.status = 'processing' AND NEW.status IN ('completed', 'failed')
               AND (OLD.lease_expires_at IS NULL OR (OLD.dispatch_id LIKE 'legacy-%' AND window_ends > UTC_TIMESTAMP(6))) THEN
            -- A result reported by the old worker for a job it held: kept, and written in the job's history.
            SET NEW.finished_at = UTC_TIMESTAMP(6), NEW.updated_at = UTC_TIMESTAMP(6), NEW.lease_expires_at = NULL,
                NEW.last_error = IF(NEW.status = 'failed',
                                    'failed by the worker that ran before jenkins-dispatch (it gives no reason)', NULL);
            INSERT INTO jenkins_job_events (job_id, at, event, from_status, to_status, dispatch_id, actor, detail)
            VALUES (OLD.id, UTC_TIMESTAMP(6), 'settled', 'processing', NEW.status, OLD.dispatch_id, 'old_worker',
                    CONCAT(NEW.status, ' by the worker that ran before jenkins-dispatch, which held it when `migrate` ',
                           'upgraded the table (its results count until ', COALESCE(shown, 'now'), ')'));
        ELSE
            SET message = CONCAT(told, '; row ', OLD.id, ' was not marked ', NEW.status, ': ', CASE
                WHEN OLD.status IN ('completed', 'failed', 'cancelled')
                    THEN CONCAT('it is already ', OLD.status, ' (since ',
                                DATE_FORMAT(OLD.finished_at, '%Y-%m-%d %H:%i:%s'), ' UTC) and a final row never changes')
                WHEN NEW.status = 'cancelled' THEN CONCAT('cancel it with `jenkins-dispatch cancel ', OLD.id, '`')
                WHEN OLD.dispatch_id LIKE 'legacy-%'
                    THEN CONCAT('the cutover window for the jobs this worker held closed at ', COALESCE(shown, 'the upgrade'),
                                '; jenkins-dispatch settles it')
                WHEN OLD.status = 'processing' THEN CONCAT('jenkins-dispatch runs it (dispatch ', OLD.dispatch_id, ')')
                ELSE CONCAT('it is ', OLD.status, ', for jenkins-dispatch to run')
            END);
        END IF;
        IF message IS NOT NULL THEN
            IF VERSION() NOT LIKE '%MariaDB%' THEN
                SET message = LEFT(message, 128);
            END IF;
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = message;
        END IF;
    END IF;
END;

-- ---- The window, opened when the old worker holds jobs: its rows in 'processing' without a lease of ours, or
-- those an earlier 0001 marked.
INSERT INTO jenkins_dispatch_cutover (id, upgraded_at, window_seconds, window_ends_at)
SELECT 1, UTC_TIMESTAMP(6), w.seconds, UTC_TIMESTAMP(6) + INTERVAL ROUND(w.seconds * 1000000) MICROSECOND
FROM (SELECT COALESCE(@jd_cutover_window_seconds, 0) AS seconds) w
WHERE EXISTS (SELECT 1 FROM jenkins_jobs_queue
              WHERE status = 'processing' AND (lease_expires_at IS NULL OR dispatch_id LIKE 'legacy-%'))
ON DUPLICATE KEY UPDATE upgraded_at = VALUES(upgraded_at), window_seconds = VALUES(window_seconds),
                        window_ends_at = GREATEST(window_ends_at, VALUES(window_ends_at));

-- Seed rows in 'processing' were claimed by the old worker, which sends no DISPATCH_ID: we cannot find their
-- build, and triggering them again might run them twice. They keep their status with no attempts left, and their
-- lease ends with the window: the old worker's result counts until then; after it the reconciler settles them
-- 'failed' with this reason unless Jenkins shows otherwise, and an operator re-runs them with
-- `jenkins-dispatch retry ID` if needed. (A row the old worker claimed after a rollback may keep the dispatch_id of
-- an earlier dispatch of ours: having no lease tells it apart.)
-- In primary-key order, as every UPDATE of the queue in these files (0001_queue.sql says why): the old worker may
-- be reporting one of these very rows done right now.
UPDATE jenkins_jobs_queue q FORCE INDEX (PRIMARY) JOIN jenkins_dispatch_cutover c
SET q.dispatch_id = CONCAT('legacy-', q.id),
    q.lease_expires_at = c.window_ends_at,
    q.attempts = q.max_attempts,
    q.last_error = CONCAT('was processing under the dispatcher that ran before jenkins-dispatch; its Jenkins build ',
                          'cannot be identified, so it is not triggered again (check Jenkins; retry it if it never ran)')
WHERE q.status = 'processing' AND q.lease_expires_at IS NULL;
-- Those an earlier 0001 marked, still held: theirs is the same window.
UPDATE jenkins_jobs_queue q FORCE INDEX (PRIMARY) JOIN jenkins_dispatch_cutover c
SET q.lease_expires_at = c.window_ends_at
WHERE q.status = 'processing' AND q.dispatch_id LIKE 'legacy-%' AND q.lease_expires_at < c.window_ends_at;

-- Seed rows that were already final (and any the old worker finished while 0001 ran, or after a rollback): they
-- finished at an unknown time, before this.
UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY) SET finished_at = UTC_TIMESTAMP(6)
WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at IS NULL;

-- ---- The rules about processing and final rows, with PostgreSQL's names (those missing).
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'jenkins_jobs_queue_processing_check' AS name,
        'ADD CONSTRAINT jenkins_jobs_queue_processing_check '
        'CHECK (status <> ''processing'' OR (dispatch_id IS NOT NULL AND lease_expires_at IS NOT NULL))' AS clause
    UNION ALL SELECT 2, 'jenkins_jobs_queue_final_check',
        'ADD CONSTRAINT jenkins_jobs_queue_final_check '
        'CHECK (status NOT IN (''completed'', ''failed'', ''cancelled'') OR finished_at IS NOT NULL)'
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
