-- Recurring rows: the reads and writes of jenkins_job_schedules. Run by the schedules' store
-- (store/schedules.py).
--
-- migrations/0010_schedules.sql, docs/schedules.md. When a schedule ticks is Python's (dispatching/cron.py):
-- these statements store and take the ticks it computed. Schedules are found by name ignoring case (the
-- lower(name) index), as on MySQL.

-- name: database_now
-- The database's clock: every dispatcher and command computes ticks from this one, not from its host's.
SELECT now() AS now;

-- name: add_schedule
-- A second schedule of the same name (any case) adds nothing: no row comes back.
INSERT INTO jenkins_job_schedules (name, job_name, parameters, cron, timezone, priority, controller, next_tick,
                                   no_overlap, concurrency_key, fairness_key)
VALUES (:name, :job_name, CAST(:parameters AS jsonb), :cron, :timezone, :priority, :controller,
        CAST(:next_tick AS timestamptz), :no_overlap, :concurrency_key, :fairness_key)
ON CONFLICT ((lower(name))) DO NOTHING
RETURNING name, next_tick;

-- name: remove_schedule
-- Its rows already enqueued stay in the queue, ordinary rows.
DELETE FROM jenkins_job_schedules WHERE lower(name) = lower(CAST(:name AS text)) RETURNING name;

-- name: pause_schedule
-- Only an enabled schedule changes (no row back otherwise). A pass that took the tick before this commits
-- has enqueued it; none after.
UPDATE jenkins_job_schedules
SET enabled = false, paused_at = now(), paused_by = CAST(:paused_by AS text), updated_at = now()
WHERE lower(name) = lower(CAST(:name AS text)) AND enabled
RETURNING name;

-- name: change_schedule
-- `schedule set`: in place, so its ticks, skips and last row stay; NULL leaves a field as it is. A new cron or zone
-- comes with its next tick (:next_tick, computed by the caller from database_now). A pass that read the old
-- next_tick and takes the tick after this commits finds it moved (take_tick's compare-and-set) and takes nothing.
UPDATE jenkins_job_schedules
SET cron = coalesce(CAST(:cron AS text), cron), timezone = coalesce(CAST(:timezone AS text), timezone),
    next_tick = coalesce(CAST(:next_tick AS timestamptz), next_tick),
    priority = coalesce(CAST(:priority AS integer), priority),
    no_overlap = coalesce(CAST(:no_overlap AS boolean), no_overlap), updated_at = now()
WHERE lower(name) = lower(CAST(:name AS text))
RETURNING name;

-- name: resume_schedule
-- Its next tick is the first after now (computed by the caller from database_now): the ticks it missed while
-- paused are not enqueued. Only a paused schedule changes (no row back otherwise).
UPDATE jenkins_job_schedules
SET enabled = true, next_tick = CAST(:next_tick AS timestamptz), paused_at = NULL, paused_by = NULL,
    updated_at = now()
WHERE lower(name) = lower(CAST(:name AS text)) AND NOT enabled
RETURNING name, next_tick;

-- name: list_schedules
-- Every schedule (or the one named; NULL: all) with the state of its last tick's row (NULL once pruned).
SELECT s.name, s.job_name, CAST(s.parameters AS text) AS parameters, s.cron, s.timezone, s.priority,
       s.controller, s.enabled, s.next_tick, s.last_tick, s.last_job_id, q.status AS last_status,
       s.paused_at, s.paused_by, s.created_at, s.no_overlap, s.skipped_ticks, s.last_skipped_tick,
       s.concurrency_key, s.fairness_key
FROM jenkins_job_schedules s
LEFT JOIN jenkins_jobs_queue q ON q.id = s.last_job_id
WHERE CAST(:name AS text) IS NULL OR lower(s.name) = lower(CAST(:name AS text))
ORDER BY s.name;

-- name: due_schedules
-- The passes' first question: which enabled schedules have a tick due, oldest first, with the database's
-- clock (ticks are computed from it). Reads the partial due index only.
SELECT name, cron, timezone, next_tick, now() AS now
FROM jenkins_job_schedules
WHERE enabled AND next_tick <= now()
ORDER BY next_tick, name
LIMIT :limit;

-- name: take_tick
-- Takes the tick :tick of schedule :name, seen due at :seen, and enqueues its ONE row, in one statement:
-- the schedule is locked only if it is still enabled and its next_tick is still :seen (the compare-and-set),
-- and a pass of another dispatcher holding that lock is skipped rather than waited for, so whoever locked
-- it first enqueues the tick, and everyone else finds next_tick moved on (or the row locked) and enqueues
-- nothing. The row is an ordinary row: scheduled_at is the tick, so caps, pauses and priorities apply.
-- A schedule with no_overlap whose previous run (last_job_id) is still pending or processing consumes the tick
-- without a row: next_tick moves on all the same, the skip is counted, and running_job_id names that run. Its
-- last_job_id is read from the locked row, so it is the run this tick follows whatever the racing takers do.
-- No row back: the tick was not this caller's; job_id NULL: it was, and was skipped.
WITH taken AS MATERIALIZED (
    SELECT s.name, s.job_name, s.parameters, s.priority, s.controller, s.no_overlap, s.last_job_id,
           s.concurrency_key, s.fairness_key
    FROM jenkins_job_schedules s
    WHERE s.name = :name AND s.enabled AND s.next_tick = CAST(:seen AS timestamptz)
    FOR UPDATE SKIP LOCKED
), running AS MATERIALIZED (
    SELECT q.id FROM taken t JOIN jenkins_jobs_queue q ON q.id = t.last_job_id
    WHERE t.no_overlap AND q.status IN ('pending', 'processing')
), inserted AS (
    -- The queue's columns, listed: the seam where a column the queue gains (controller) takes taken.controller.
    INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, controller, concurrency_key,
                                    fairness_key)
    SELECT t.job_name, t.parameters, t.priority, CAST(:tick AS timestamptz), t.controller, t.concurrency_key,
           t.fairness_key FROM taken t
    WHERE NOT EXISTS (SELECT 1 FROM running)
    RETURNING id, scheduled_at
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, actor, detail)
    SELECT id, 'enqueued', NULL, 'pending', 'dispatcher',
           'tick ' || to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC of schedule '
           || CAST(:name AS text)
    FROM inserted
), moved AS (
    UPDATE jenkins_job_schedules s
    SET next_tick = CAST(:next_tick AS timestamptz),
        last_tick = CASE WHEN EXISTS (SELECT 1 FROM inserted) THEN CAST(:tick AS timestamptz) ELSE s.last_tick END,
        last_job_id = coalesce((SELECT id FROM inserted), s.last_job_id),
        skipped_ticks = s.skipped_ticks + (SELECT count(*) FROM running),
        last_skipped_tick = CASE WHEN EXISTS (SELECT 1 FROM running) THEN CAST(:tick AS timestamptz)
                                 ELSE s.last_skipped_tick END,
        updated_at = now()
    FROM taken WHERE s.name = taken.name
)
SELECT (SELECT id FROM inserted) AS job_id, (SELECT id FROM running) AS running_job_id FROM taken;

-- name: scheduled_job_names
-- `doctor`: the jobs schedules enqueue, each once (any case), with the schedules naming it.
SELECT min(job_name) AS job_name, string_agg(name, ', ' ORDER BY name) AS schedules
FROM jenkins_job_schedules GROUP BY lower(job_name) ORDER BY 1;
