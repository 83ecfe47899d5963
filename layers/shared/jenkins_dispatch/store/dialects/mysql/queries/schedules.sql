-- Recurring rows: the reads and writes of jenkins_job_schedules. Run by the schedules' store
-- (store/schedules.py).
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.
--
-- Names compare ignoring case through the column's collation; times are UTC DATETIME(6), handed in as aware
-- datetimes (the session converts them).

-- name: database_now
SELECT NOW(6) AS now;

-- name: add_schedule
-- The name is the primary key: a second add of it inserts nothing (its row count says so). Not INSERT IGNORE,
-- which would also turn a broken CHECK into a warning.
SET @jd_changed = 0;
INSERT INTO jenkins_job_schedules (name, job_name, parameters, cron, timezone, priority, controller, next_tick,
                                   no_overlap, concurrency_key, fairness_key)
SELECT :name, :job_name, :parameters, :cron, :timezone, :priority, :controller, :next_tick, :no_overlap,
       :concurrency_key, :fairness_key FROM DUAL
WHERE NOT EXISTS (SELECT 1 FROM jenkins_job_schedules WHERE name = :name);
SET @jd_changed = ROW_COUNT();
SELECT name, next_tick FROM jenkins_job_schedules WHERE name = :name AND @jd_changed > 0;

-- name: remove_schedule
SET @jd_changed = 0;
DELETE FROM jenkins_job_schedules WHERE name = :name;
SET @jd_changed = ROW_COUNT();
SELECT :name AS name FROM DUAL WHERE @jd_changed > 0;

-- name: pause_schedule
SET @jd_changed = 0;
UPDATE jenkins_job_schedules
SET enabled = FALSE, paused_at = NOW(6), paused_by = :paused_by, updated_at = NOW(6)
WHERE name = :name AND enabled;
SET @jd_changed = ROW_COUNT();
SELECT name FROM jenkins_job_schedules WHERE name = :name AND @jd_changed > 0;

-- name: change_schedule
-- `schedule set`: in place, so its ticks, skips and last row stay; NULL leaves a field as it is. A new cron or zone
-- comes with its next tick (:next_tick, computed by the caller from database_now). A pass that read the old
-- next_tick and takes the tick after this commits finds it moved (take_tick's compare-and-set) and takes nothing.
SET @jd_changed = 0;
UPDATE jenkins_job_schedules
SET cron = COALESCE(:cron, cron), timezone = COALESCE(:timezone, timezone), next_tick = COALESCE(:next_tick, next_tick),
    priority = COALESCE(:priority, priority), no_overlap = COALESCE(:no_overlap, no_overlap), updated_at = NOW(6)
WHERE name = :name;
SET @jd_changed = ROW_COUNT();
SELECT name FROM jenkins_job_schedules WHERE name = :name AND @jd_changed > 0;

-- name: resume_schedule
SET @jd_changed = 0;
UPDATE jenkins_job_schedules
SET enabled = TRUE, next_tick = :next_tick, paused_at = NULL, paused_by = NULL, updated_at = NOW(6)
WHERE name = :name AND NOT enabled;
SET @jd_changed = ROW_COUNT();
SELECT name, next_tick FROM jenkins_job_schedules WHERE name = :name AND @jd_changed > 0;

-- name: list_schedules
-- decode: enabled bool, no_overlap bool
SELECT s.name, s.job_name, s.parameters, s.cron, s.timezone, s.priority, s.controller, s.enabled, s.next_tick,
       s.last_tick, s.last_job_id, q.status AS last_status, s.paused_at, s.paused_by, s.created_at, s.no_overlap,
       s.skipped_ticks, s.last_skipped_tick, s.concurrency_key, s.fairness_key
FROM jenkins_job_schedules s
LEFT JOIN jenkins_jobs_queue q ON q.id = s.last_job_id
WHERE :name IS NULL OR s.name = :name
ORDER BY s.name;

-- name: due_schedules
-- The (enabled, next_tick) index, from the oldest tick.
SELECT name, cron, timezone, next_tick, NOW(6) AS now
FROM jenkins_job_schedules
WHERE enabled AND next_tick <= NOW(6)
ORDER BY next_tick, name
LIMIT :limit;

-- name: take_tick
-- The compare-and-set is the UPDATE: InnoDB's UPDATE reads the latest committed row and waits for a taker
-- holding it, so of any number of concurrent takers of the same :seen one changes the row, and the others
-- then find next_tick moved on and match nothing (@jd_changed = 0): they enqueue nothing. The row, its
-- history and last_job_id follow in the same block (one round trip, one transaction).
-- With no_overlap, the previous run (last_job_id) still pending or processing consumes the tick without a row
-- (@jd_running: that run; the skip is counted). It is read after the UPDATE, under the schedule's row lock, so
-- last_job_id is the run this tick follows whatever the racing takers do.
SET @jd_changed = 0, @jd_id = NULL, @jd_running = NULL;
UPDATE jenkins_job_schedules
SET next_tick = :next_tick, updated_at = NOW(6)
WHERE name = :name AND enabled AND next_tick = :seen;
SET @jd_changed = ROW_COUNT();
SELECT MAX(q.id) INTO @jd_running
FROM jenkins_job_schedules s JOIN jenkins_jobs_queue q ON q.id = s.last_job_id
WHERE s.name = :name AND @jd_changed > 0 AND s.no_overlap AND q.status IN ('pending', 'processing');
UPDATE jenkins_job_schedules SET skipped_ticks = skipped_ticks + 1, last_skipped_tick = :tick
WHERE name = :name AND @jd_running IS NOT NULL;
-- The queue's columns, listed: the seam where a column the queue gains (controller) takes s.controller.
INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, controller, concurrency_key,
                                fairness_key)
SELECT s.job_name, s.parameters, s.priority, :tick, s.controller, s.concurrency_key, s.fairness_key
FROM jenkins_job_schedules s
WHERE s.name = :name AND @jd_changed > 0 AND @jd_running IS NULL;
SET @jd_id = IF(@jd_changed > 0 AND @jd_running IS NULL, LAST_INSERT_ID(), NULL);
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, actor, detail)
SELECT q.id, 'enqueued', NULL, 'pending', 'dispatcher',
       CONCAT('tick ', DATE_FORMAT(q.scheduled_at, '%Y-%m-%d %H:%i:%s'), ' UTC of schedule ', :name)
FROM jenkins_jobs_queue q WHERE q.id = @jd_id;
UPDATE jenkins_job_schedules SET last_tick = :tick, last_job_id = @jd_id WHERE name = :name AND @jd_id IS NOT NULL;
SELECT @jd_id AS job_id, @jd_running AS running_job_id FROM DUAL WHERE @jd_changed > 0;

-- name: scheduled_job_names
SELECT MIN(job_name) AS job_name, GROUP_CONCAT(name ORDER BY name SEPARATOR ', ') AS schedules
FROM jenkins_job_schedules GROUP BY LOWER(job_name) ORDER BY 1;
