-- What an operator changes: pauses, cancels and retries of rows, caps and rates (with their history), the
-- bulk selection (pruning: pruning.sql). Run by the levers' store (store/levers.py).
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.

-- name: pause_job
-- decode: created bool
-- Counts the job's pending rows first (no lock), then takes the pause lock exclusively: it waits for every
-- claim that holds it shared (those that read the pauses before this one) to commit, and claims that come
-- later wait for this block to commit, then see the pause. Pauses are written only under this lock, so the
-- insert below cannot race another pause_job. A job already paused keeps its pause (created false).
-- :controller NULL: on every controller; else on that one only (a whole controller with '*').
SET @jd_pending = NULL, @jd_created = 0, @jd_key = UNHEX(SHA2(LOWER(:job_name), 256));
SELECT COUNT(*) INTO @jd_pending FROM jenkins_jobs_queue q
WHERE q.status = 'pending' AND ((q.job_name = :job_name AND {{t_job_key}} = @jd_key) OR :job_name = '*')
  AND (:controller IS NULL OR q.controller = :controller);
SELECT name FROM jenkins_dispatch_locks WHERE name = 'pauses' FOR UPDATE;
INSERT INTO jenkins_job_pauses (job_name, controller, paused_by, reason)
SELECT :job_name, :controller, :paused_by, :reason FROM DUAL
WHERE NOT EXISTS (SELECT 1 FROM jenkins_job_pauses
                  WHERE job_key = @jd_key AND controller_key = COALESCE(:controller, ''));
SET @jd_created = ROW_COUNT();
SELECT job_name, controller, paused_at, paused_by, reason, @jd_created > 0 AS created, @jd_pending AS pending
FROM jenkins_job_pauses WHERE job_key = @jd_key AND controller_key = COALESCE(:controller, '');

-- name: resume_job
-- Needs no lock: a claim that misses the resume only leaves the job for the next one (the dispatcher polls).
SET @jd_pending = NULL, @jd_resumed = 0, @jd_key = UNHEX(SHA2(LOWER(:job_name), 256));
SELECT COUNT(*) INTO @jd_pending FROM jenkins_jobs_queue q
WHERE q.status = 'pending' AND ((q.job_name = :job_name AND {{t_job_key}} = @jd_key) OR :job_name = '*')
  AND (:controller IS NULL OR q.controller = :controller);
-- Only the pause given for :controller (NULL: the pause of every controller); others stay.
DELETE FROM jenkins_job_pauses WHERE job_key = @jd_key AND controller_key = COALESCE(:controller, '');
SET @jd_resumed = ROW_COUNT();
SELECT @jd_resumed AS resumed, @jd_pending AS pending;

-- name: request_cancel
-- The operator cancels a row whose trigger is in flight: recorded, for whoever next learns where it is.
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET cancel_requested_at = COALESCE(cancel_requested_at, NOW(6)), updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing';
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT :id, 'cancel_requested', 'processing', 'processing', :dispatch_id, :actor, :reason
FROM DUAL WHERE @jd_changed > 0;
SELECT :id AS id FROM DUAL WHERE @jd_changed > 0;

-- name: cancel_pending
-- A row a claim is taking meanwhile is locked: this waits for that claim, then finds it processing.
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET status = 'cancelled', last_error = :reason, finished_at = NOW(6), updated_at = NOW(6)
WHERE id = :id AND status = 'pending';
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, 'cancelled', 'pending', 'cancelled', dispatch_id, :actor, :reason
FROM jenkins_jobs_queue WHERE id = :id AND @jd_changed > 0;
SELECT :id AS id FROM DUAL WHERE @jd_changed > 0;

-- name: retry_final
-- Operator retry: a final row goes back to pending with its attempts reset. Its final status is read with
-- the row locked (it goes into the history); :updated_at, the row's updated_at when a bulk retry selected
-- it (ISO text), must still be the row's.
SET @jd_from = NULL, @jd_iso = :updated_at;
SET @jd_unchanged_since = {{t_iso_utc}};
SELECT status INTO @jd_from FROM jenkins_jobs_queue
WHERE id = :id AND status IN ('completed', 'failed', 'cancelled')
  AND (@jd_iso IS NULL OR updated_at = CAST(@jd_unchanged_since AS DATETIME(6)))
FOR UPDATE;
UPDATE jenkins_jobs_queue
SET status = 'pending', attempts = 0, resends = 0, cancel_requested_at = NULL, scheduled_at = NOW(6),
    finished_at = NULL, lease_expires_at = NULL,
    jenkins_queue_id = NULL, build_number = NULL, build_url = NULL, jenkins_result = NULL,
    started_at = NULL, last_error = NULL, updated_at = NOW(6)
WHERE id = :id AND @jd_from IS NOT NULL;
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, 'retried', @jd_from, 'pending', dispatch_id, :actor, :reason
FROM jenkins_jobs_queue WHERE id = :id AND @jd_from IS NOT NULL;
SELECT :id AS id FROM DUAL WHERE @jd_from IS NOT NULL;

-- name: select_jobs_matching
-- Bulk retry (final rows) and cancel (unfinished ones): what the filters select, by id, bounded; `total`
-- counts every match (the window is computed before LIMIT). The pattern escapes its wildcards with '\'
-- (written '\\': a backslash escapes inside MySQL string literals). :final is a literal 1 or 0 once bound,
-- so the optimizer keeps one branch of the status test and reads the rows of those statuses only. The
-- parameter slots are list_jobs's (a key is quoted into a JSON path: callers allow only [A-Za-z0-9_.-]).
SELECT id, job_name, status, controller, updated_at, count(*) OVER () AS total
FROM jenkins_jobs_queue
WHERE ((:final AND status IN ('completed', 'failed', 'cancelled'))
       OR (NOT :final AND status IN ('pending', 'processing')))
  AND (:status IS NULL OR status = :status)
  AND (:job_name IS NULL OR job_name = :job_name)
  AND (:since IS NULL OR updated_at >= :since)
  AND (:error_pattern IS NULL OR lower(last_error) LIKE lower(:error_pattern) ESCAPE '\\')
  AND (:controller IS NULL OR controller = :controller)
  AND (:param_key_1 IS NULL
       OR JSON_UNQUOTE(JSON_EXTRACT(parameters, CONCAT('$."', :param_key_1, '"'))) = :param_value_1)
  AND (:param_key_2 IS NULL
       OR JSON_UNQUOTE(JSON_EXTRACT(parameters, CONCAT('$."', :param_key_2, '"'))) = :param_value_2)
  AND (:param_key_3 IS NULL
       OR JSON_UNQUOTE(JSON_EXTRACT(parameters, CONCAT('$."', :param_key_3, '"'))) = :param_value_3)
ORDER BY id
LIMIT :limit;

-- fragment: op_job_key
-- The unique key of a job name in jenkins_job_limits and jenkins_job_pauses (a hash: the names are longer
-- than an InnoDB key holds), for :job_name.
UNHEX(SHA2(LOWER(:job_name), 256))

-- name: set_limit
-- VALUES(col) rather than MySQL 8.0.20's row alias, which MariaDB does not know. No trigger wakes the
-- dispatcher on MySQL: it sees a raised cap at its next poll.
-- The cap's history is written in the same block, the cap as it was read under the row's lock first. A cap the
-- job already has is left as it is and recorded nowhere: no row comes back. The caps lock (a capped claim's) is
-- taken first: under READ COMMITTED a locking read of a job with no limits row yet locks nothing, and two
-- sessions setting its first cap would both see none and both record a change; so they take turns, the first
-- changes it, the others find it so.
SELECT name FROM jenkins_dispatch_locks WHERE name = 'caps' FOR UPDATE;
SET @jd_previous = NULL;
SELECT max_in_flight INTO @jd_previous FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller FOR UPDATE;
SET @jd_changed = NOT (@jd_previous <=> :max_in_flight);
INSERT INTO jenkins_job_limits (controller, job_name, max_in_flight)
SELECT :controller, :job_name, :max_in_flight FROM DUAL WHERE @jd_changed
ON DUPLICATE KEY UPDATE max_in_flight = VALUES(max_in_flight), updated_at = NOW(6);
INSERT INTO jenkins_job_limit_events (controller, job_name, previous, max_in_flight, changed_by)
SELECT controller, job_name, @jd_previous, max_in_flight, :changed_by FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller AND @jd_changed;
SELECT controller, job_name, max_in_flight, @jd_previous AS previous FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller AND @jd_changed;

-- name: remove_limit
-- Removes a job's cap; its rate, if it has one, stays (the limits row goes with the last of the two).
SET @jd_removed = 0, @jd_previous = NULL, @jd_name = NULL, @jd_rate = NULL;
SELECT job_name, max_in_flight, per_minute INTO @jd_name, @jd_previous, @jd_rate FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller AND max_in_flight IS NOT NULL FOR UPDATE;
DELETE FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller AND @jd_previous IS NOT NULL AND @jd_rate IS NULL;
UPDATE jenkins_job_limits SET max_in_flight = NULL, updated_at = NOW(6)
WHERE job_key = {{op_job_key}} AND controller = :controller AND @jd_previous IS NOT NULL AND @jd_rate IS NOT NULL;
SET @jd_removed = (@jd_previous IS NOT NULL);
INSERT INTO jenkins_job_limit_events (controller, job_name, previous, max_in_flight, changed_by)
SELECT :controller, @jd_name, @jd_previous, NULL, :changed_by FROM DUAL WHERE @jd_removed > 0;
SELECT :job_name AS job_name, @jd_previous AS previous FROM DUAL WHERE @jd_removed > 0;

-- name: set_key_limit
-- As set_limit, for a key: under the caps lock, the cap as it was read first; no row back when unchanged.
SELECT name FROM jenkins_dispatch_locks WHERE name = 'caps' FOR UPDATE;
SET @jd_previous = NULL, @jd_supersede = NULL, @jd_stop = NULL;
SELECT max_in_flight, supersede, stop_running INTO @jd_previous, @jd_supersede, @jd_stop FROM jenkins_key_limits
WHERE concurrency_key = :concurrency_key FOR UPDATE;
SET @jd_changed = NOT (@jd_previous <=> :max_in_flight AND @jd_supersede <=> :supersede
                       AND @jd_stop <=> :stop_running);
INSERT INTO jenkins_key_limits (concurrency_key, max_in_flight, supersede, stop_running)
SELECT :concurrency_key, :max_in_flight, :supersede, :stop_running FROM DUAL WHERE @jd_changed
ON DUPLICATE KEY UPDATE max_in_flight = VALUES(max_in_flight), supersede = VALUES(supersede),
                        stop_running = VALUES(stop_running), updated_at = NOW(6);
SELECT concurrency_key, max_in_flight, @jd_previous AS previous FROM jenkins_key_limits
WHERE concurrency_key = :concurrency_key AND @jd_changed;

-- name: remove_key_limit
SET @jd_previous = NULL;
SELECT max_in_flight INTO @jd_previous FROM jenkins_key_limits WHERE concurrency_key = :concurrency_key FOR UPDATE;
DELETE FROM jenkins_key_limits WHERE concurrency_key = :concurrency_key;
SELECT :concurrency_key AS concurrency_key, @jd_previous AS previous FROM DUAL WHERE @jd_previous IS NOT NULL;

-- name: set_rate
-- As set_limit, for the rate: VALUES(col) rather than a row alias (MariaDB); the rate it replaced, read under the
-- row's lock first, and recorded with the new one in the caps' history as a 'rate' event (0013_rate_history.sql).
-- A rate the job already has is left as it is, recorded nowhere, and no row comes back; the caps lock first, as
-- set_limit takes it and for its reason.
SELECT name FROM jenkins_dispatch_locks WHERE name = 'caps' FOR UPDATE;
SET @jd_previous = NULL;
SELECT per_minute INTO @jd_previous FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller FOR UPDATE;
SET @jd_changed = NOT (@jd_previous <=> :per_minute);
INSERT INTO jenkins_job_limits (controller, job_name, per_minute)
SELECT :controller, :job_name, :per_minute FROM DUAL WHERE @jd_changed
ON DUPLICATE KEY UPDATE per_minute = VALUES(per_minute), updated_at = NOW(6);
INSERT INTO jenkins_job_limit_events (controller, job_name, kind, previous_per_minute, per_minute, changed_by)
SELECT controller, job_name, 'rate', @jd_previous, per_minute, :changed_by FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller AND @jd_changed;
SELECT controller, job_name, per_minute, @jd_previous AS previous FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller AND @jd_changed;

-- name: remove_rate
-- As remove_limit, for the rate; its cap, if it has one, stays. Its recorded starts stay until the claims drop
-- them: a rate set again within the minute counts them. Recorded in the caps' history (as set_rate).
SET @jd_previous = NULL, @jd_cap = NULL, @jd_name = NULL;
SELECT job_name, per_minute, max_in_flight INTO @jd_name, @jd_previous, @jd_cap FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller AND per_minute IS NOT NULL FOR UPDATE;
DELETE FROM jenkins_job_limits
WHERE job_key = {{op_job_key}} AND controller = :controller AND @jd_previous IS NOT NULL AND @jd_cap IS NULL;
UPDATE jenkins_job_limits SET per_minute = NULL, updated_at = NOW(6)
WHERE job_key = {{op_job_key}} AND controller = :controller AND @jd_previous IS NOT NULL AND @jd_cap IS NOT NULL;
INSERT INTO jenkins_job_limit_events (controller, job_name, kind, previous_per_minute, per_minute, changed_by)
SELECT :controller, @jd_name, 'rate', @jd_previous, NULL, :changed_by FROM DUAL WHERE @jd_previous IS NOT NULL;
SELECT :job_name AS job_name, @jd_previous AS previous FROM DUAL WHERE @jd_previous IS NOT NULL;

-- name: limit_of
SELECT job_name, max_in_flight FROM jenkins_job_limits WHERE job_key = {{op_job_key}} AND controller = :controller;

-- name: pending_of
-- Counted as pause_job counts them.
SELECT COUNT(*) AS pending FROM jenkins_jobs_queue q
WHERE q.status = 'pending' AND ((q.job_name = :job_name AND {{t_job_key}} = UNHEX(SHA2(LOWER(:job_name), 256)))
                                OR :job_name = '*');

-- name: set_key_rule
-- As PostgreSQL's: the job's rule replaced whole, found by the hash of its lower-cased name (0021_key_rules.sql).
INSERT INTO jenkins_key_rules (job_name, concurrency_template, fairness_template, changed_by)
VALUES (:job_name, :concurrency_template, :fairness_template, :changed_by)
ON DUPLICATE KEY UPDATE job_name = VALUES(job_name), concurrency_template = VALUES(concurrency_template),
                        fairness_template = VALUES(fairness_template), changed_by = VALUES(changed_by),
                        updated_at = NOW(6);
SELECT :job_name AS job_name;

-- name: remove_key_rule
SET @jd_removed = NULL;
SELECT job_name INTO @jd_removed FROM jenkins_key_rules WHERE job_key = UNHEX(SHA2(LOWER(:job_name), 256)) FOR UPDATE;
DELETE FROM jenkins_key_rules WHERE job_key = UNHEX(SHA2(LOWER(:job_name), 256));
SELECT @jd_removed AS job_name FROM DUAL WHERE @jd_removed IS NOT NULL;
