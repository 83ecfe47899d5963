-- What an operator changes: pauses, cancels and retries of rows, caps and rates (with their history), the
-- bulk selection (pruning: pruning.sql). Run by the levers' store (store/levers.py).

-- name: pause_job
-- Takes the pause lock exclusively (see jenkins_dispatch_paused_jobs in 0004_pauses.sql), so it commits only
-- after every claim that read the pauses without it. A job already paused keeps its pause (created false).
-- :job_name '*' pauses everything; :controller NULL: on every controller, else on that one only (a whole
-- controller with '*'). Also counts the pending rows it holds back, first: the queue is locked before the
-- pauses, as everywhere (see gauges). A pause under another spelling of the job's name is the job's pause
-- (the job key is unique per controller).
WITH pending AS MATERIALIZED (
    SELECT count(*) AS n FROM jenkins_jobs_queue
    WHERE status = 'pending' AND (lower(job_name) = lower(CAST(:job_name AS text)) OR CAST(:job_name AS text) = '*')
      AND (CAST(:controller AS text) IS NULL OR controller = CAST(:controller AS text))
), locked AS MATERIALIZED (
    SELECT pg_advisory_xact_lock({{lock:pauses}})
), added AS (
    INSERT INTO jenkins_job_pauses (job_name, controller, paused_by, reason)
    SELECT CAST(:job_name AS text), CAST(:controller AS text), CAST(:paused_by AS text), CAST(:reason AS text)
    FROM locked
    ON CONFLICT ((coalesce(controller, '')), (lower(job_name))) DO NOTHING
    RETURNING job_name, controller, paused_at, paused_by, reason
), pause AS (
    SELECT job_name, controller, paused_at, paused_by, reason, true AS created FROM added
    UNION ALL
    SELECT job_name, controller, paused_at, paused_by, reason, false FROM jenkins_job_pauses
    WHERE lower(job_name) = lower(CAST(:job_name AS text))
      AND coalesce(controller, '') = coalesce(CAST(:controller AS text), '') AND NOT EXISTS (SELECT 1 FROM added)
)
SELECT pause.*, pending.n AS pending FROM pause, pending;

-- name: resume_job
-- Needs no lock: a claim that misses the resume only leaves the job for the next one, which the
-- trigger on jenkins_job_pauses wakes.
-- Lifts only the pause given for :controller (NULL: the pause of every controller); others stay.
WITH pending AS MATERIALIZED (
    SELECT count(*) AS n FROM jenkins_jobs_queue
    WHERE status = 'pending' AND (lower(job_name) = lower(CAST(:job_name AS text)) OR CAST(:job_name AS text) = '*')
      AND (CAST(:controller AS text) IS NULL OR controller = CAST(:controller AS text))
), lifted AS (
    DELETE FROM jenkins_job_pauses WHERE lower(job_name) = lower(CAST(:job_name AS text))
                                     AND coalesce(controller, '') = coalesce(CAST(:controller AS text), '')
    RETURNING job_name
)
SELECT (SELECT count(*) FROM lifted) AS resumed, pending.n AS pending FROM pending;

-- name: request_cancel
-- The operator cancels a row whose trigger is in flight: nothing to cancel in Jenkins yet. Recorded, so
-- whoever next learns where it is in Jenkins cancels it there before settling the row.
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing'
    RETURNING id, dispatch_id
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'cancel_requested', 'processing', 'processing', dispatch_id, :actor, :reason FROM changed
)
SELECT id FROM changed;

-- name: cancel_pending
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET status = 'cancelled', last_error = :reason, finished_at = now(), updated_at = now()
    WHERE id = :id AND status = 'pending'
    RETURNING id, dispatch_id
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'cancelled', 'pending', 'cancelled', dispatch_id, :actor, :reason FROM changed
)
SELECT id FROM changed;

-- name: retry_final
-- Operator retry: a final row goes back to pending with its attempts reset.
WITH old AS (
    SELECT id, status FROM jenkins_jobs_queue
    WHERE id = :id AND status IN ('completed', 'failed', 'cancelled')
      -- a bulk retry names the row it selected: one changed since then is not the same row any more
      AND (CAST(:updated_at AS timestamptz) IS NULL OR updated_at = CAST(:updated_at AS timestamptz))
    FOR UPDATE
), changed AS (
    UPDATE jenkins_jobs_queue q
    SET status = 'pending', attempts = 0, resends = 0, cancel_requested_at = NULL, scheduled_at = now(), finished_at = NULL, lease_expires_at = NULL,
        jenkins_queue_id = NULL, build_number = NULL, build_url = NULL, jenkins_result = NULL,
        started_at = NULL, last_error = NULL, updated_at = now()
    FROM old
    WHERE q.id = old.id
    RETURNING q.id, q.dispatch_id, old.status AS from_status
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'retried', from_status, 'pending', dispatch_id, :actor, :reason FROM changed
)
SELECT id FROM changed;

-- name: select_jobs_matching
-- Bulk retry (final rows) and cancel (unfinished ones): what the filters select, by id, bounded; `total`
-- counts every match (the window is computed before LIMIT). The pattern escapes its wildcards with '\'; the
-- parameter slots are list_jobs's.
SELECT id, job_name, status, controller, updated_at, count(*) OVER () AS total
FROM jenkins_jobs_queue
WHERE (status IN ('completed', 'failed', 'cancelled')) = CAST(:final AS boolean)
  AND (CAST(:status AS text) IS NULL OR status = CAST(:status AS text))
  AND (CAST(:job_name AS text) IS NULL OR lower(job_name) = lower(CAST(:job_name AS text)))
  AND (CAST(:since AS timestamptz) IS NULL OR updated_at >= CAST(:since AS timestamptz))
  AND (CAST(:error_pattern AS text) IS NULL OR last_error ILIKE CAST(:error_pattern AS text) ESCAPE '\')
  AND (CAST(:controller AS text) IS NULL OR controller = CAST(:controller AS text))
  AND (CAST(:param_key_1 AS text) IS NULL
       OR parameters ->> CAST(:param_key_1 AS text) = CAST(:param_value_1 AS text))
  AND (CAST(:param_key_2 AS text) IS NULL
       OR parameters ->> CAST(:param_key_2 AS text) = CAST(:param_value_2 AS text))
  AND (CAST(:param_key_3 AS text) IS NULL
       OR parameters ->> CAST(:param_key_3 AS text) = CAST(:param_value_3 AS text))
ORDER BY id
LIMIT :limit;

-- name: set_limit
-- One cap per job and controller: set under another spelling of its name, it changes that cap (which keeps
-- its first spelling, as on MySQL). The cap's history is written by the same statement (``before`` reads the
-- snapshot the statement started from: the cap as it was). A cap the job already has is left as it is and
-- recorded nowhere: no row comes back. The WHERE is judged on the row as the conflict locked it, so of several
-- sessions setting the same cap at once, one changes it and the others find it so.
WITH before AS (
    SELECT max_in_flight FROM jenkins_job_limits
    WHERE controller = :controller AND lower(job_name) = lower(CAST(:job_name AS text))
), changed AS (
    INSERT INTO jenkins_job_limits (controller, job_name, max_in_flight) VALUES (:controller, :job_name, :max_in_flight)
    ON CONFLICT (controller, (lower(job_name))) DO UPDATE SET max_in_flight = EXCLUDED.max_in_flight, updated_at = now()
    WHERE jenkins_job_limits.max_in_flight IS DISTINCT FROM EXCLUDED.max_in_flight
    RETURNING controller, job_name, max_in_flight
), logged AS (
    INSERT INTO jenkins_job_limit_events (controller, job_name, previous, max_in_flight, changed_by)
    SELECT c.controller, c.job_name, (SELECT max_in_flight FROM before), c.max_in_flight, :changed_by FROM changed c
)
SELECT controller, job_name, max_in_flight, (SELECT max_in_flight FROM before) AS previous FROM changed;

-- name: remove_limit
-- Removes a job's cap on one controller; its rate, if it has one, stays (the limits row goes with the last of the
-- two). The cap's history is written by the same statement.
WITH target AS (
    SELECT controller, job_name, max_in_flight, per_minute FROM jenkins_job_limits
    WHERE controller = :controller AND lower(job_name) = lower(CAST(:job_name AS text)) AND max_in_flight IS NOT NULL
    FOR UPDATE
), gone AS (
    DELETE FROM jenkins_job_limits l USING target t
    WHERE l.controller = t.controller AND l.job_name = t.job_name AND t.per_minute IS NULL
), kept AS (
    UPDATE jenkins_job_limits l SET max_in_flight = NULL, updated_at = now() FROM target t
    WHERE l.controller = t.controller AND l.job_name = t.job_name AND t.per_minute IS NOT NULL
), logged AS (
    INSERT INTO jenkins_job_limit_events (controller, job_name, previous, max_in_flight, changed_by)
    SELECT controller, job_name, max_in_flight, NULL, :changed_by FROM target
)
SELECT job_name, max_in_flight AS previous FROM target;

-- name: set_rate
-- One rate per job and controller, beside its cap if it has one (set under another spelling of its name, it
-- changes that job's limits row). Returns the rate it replaced (``previous``, NULL: none). Recorded in the caps'
-- history as a 'rate' event (0016_rate_history.sql), by the same statement, as set_limit records a cap; a rate
-- the job already has, as set_limit's cap, is left as it is, recorded nowhere, and no row comes back.
WITH before AS (
    SELECT per_minute FROM jenkins_job_limits
    WHERE controller = :controller AND lower(job_name) = lower(CAST(:job_name AS text))
), changed AS (
    INSERT INTO jenkins_job_limits (controller, job_name, per_minute) VALUES (:controller, :job_name, :per_minute)
    ON CONFLICT (controller, (lower(job_name))) DO UPDATE SET per_minute = EXCLUDED.per_minute, updated_at = now()
    WHERE jenkins_job_limits.per_minute IS DISTINCT FROM EXCLUDED.per_minute
    RETURNING controller, job_name, per_minute
), logged AS (
    INSERT INTO jenkins_job_limit_events (controller, job_name, kind, previous_per_minute, per_minute, changed_by)
    SELECT c.controller, c.job_name, 'rate', (SELECT per_minute FROM before), c.per_minute, :changed_by FROM changed c
)
SELECT controller, job_name, per_minute, (SELECT per_minute FROM before) AS previous FROM changed;

-- name: remove_rate
-- Removes a job's rate on one controller; its cap, if it has one, stays. Its recorded starts stay until the
-- claims drop them: a rate set again within the minute counts them. Recorded in the caps' history (as set_rate).
WITH target AS (
    SELECT controller, job_name, max_in_flight, per_minute FROM jenkins_job_limits
    WHERE controller = :controller AND lower(job_name) = lower(CAST(:job_name AS text)) AND per_minute IS NOT NULL
    FOR UPDATE
), gone AS (
    DELETE FROM jenkins_job_limits l USING target t
    WHERE l.controller = t.controller AND l.job_name = t.job_name AND t.max_in_flight IS NULL
), kept AS (
    UPDATE jenkins_job_limits l SET per_minute = NULL, updated_at = now() FROM target t
    WHERE l.controller = t.controller AND l.job_name = t.job_name AND t.max_in_flight IS NOT NULL
), logged AS (
    INSERT INTO jenkins_job_limit_events (controller, job_name, kind, previous_per_minute, per_minute, changed_by)
    SELECT controller, job_name, 'rate', per_minute, NULL, :changed_by FROM target
)
SELECT job_name, per_minute AS previous FROM target;

-- name: set_key_limit
-- One cap per concurrency key, whatever the job or controller, with whether newest wins (:supersede) and whether
-- that stops older rows in flight too (:stop_running). Returns the
-- cap it replaced (``previous``, NULL: none); a key already so is left as it is and no row comes back (as
-- set_limit).
WITH before AS (
    SELECT max_in_flight FROM jenkins_key_limits WHERE concurrency_key = CAST(:concurrency_key AS text)
), changed AS (
    INSERT INTO jenkins_key_limits (concurrency_key, max_in_flight, supersede, stop_running)
    VALUES (:concurrency_key, :max_in_flight, :supersede, :stop_running)
    ON CONFLICT (concurrency_key) DO UPDATE
    SET max_in_flight = EXCLUDED.max_in_flight, supersede = EXCLUDED.supersede, stop_running = EXCLUDED.stop_running,
        updated_at = now()
    WHERE (jenkins_key_limits.max_in_flight, jenkins_key_limits.supersede, jenkins_key_limits.stop_running)
          IS DISTINCT FROM (EXCLUDED.max_in_flight, EXCLUDED.supersede, EXCLUDED.stop_running)
    RETURNING concurrency_key, max_in_flight
)
SELECT concurrency_key, max_in_flight, (SELECT max_in_flight FROM before) AS previous FROM changed;

-- name: remove_key_limit
DELETE FROM jenkins_key_limits WHERE concurrency_key = CAST(:concurrency_key AS text)
RETURNING concurrency_key, max_in_flight AS previous;

-- name: limit_of
-- One job's cap on one controller (any spelling of its name), or no row.
SELECT job_name, max_in_flight FROM jenkins_job_limits
WHERE controller = :controller AND lower(job_name) = lower(CAST(:job_name AS text));

-- name: pending_of
-- Pending rows of one job (every spelling), or of every job for '*': what a pause would hold back.
SELECT count(*) AS pending FROM jenkins_jobs_queue
WHERE status = 'pending' AND (lower(job_name) = lower(CAST(:job_name AS text)) OR CAST(:job_name AS text) = '*');

-- name: set_key_rule
-- The keys a job's rows are given when their INSERT leaves them out (0023_key_rules.sql): one rule per job, on
-- every controller, found by its lower-cased name. Replaces the job's rule whole (a template not given: none).
INSERT INTO jenkins_key_rules (job_key, job_name, concurrency_template, fairness_template, changed_by)
VALUES (lower(CAST(:job_name AS text)), :job_name, :concurrency_template, :fairness_template, :changed_by)
ON CONFLICT (job_key) DO UPDATE
SET job_name = EXCLUDED.job_name, concurrency_template = EXCLUDED.concurrency_template,
    fairness_template = EXCLUDED.fairness_template, changed_by = EXCLUDED.changed_by, updated_at = now()
RETURNING job_name;

-- name: remove_key_rule
DELETE FROM jenkins_key_rules WHERE job_key = lower(CAST(:job_name AS text)) RETURNING job_name;
