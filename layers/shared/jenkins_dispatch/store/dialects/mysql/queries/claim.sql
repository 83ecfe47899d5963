-- Taking pending rows: the claims (uncapped, and capped under the caps lock), whether caps are in force, the
-- fingerprint a polling dispatcher compares between passes, and the sweep of rows naming an unknown controller.
-- Run by the dispatcher's store (store/dispatcher.py).
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.

-- fragment: claim_paused_lock
-- The pause lock, shared: a pause_job in progress (it holds the lock exclusively) commits first, and the
-- statements after this one, each reading the latest committed data (READ COMMITTED), see its pause.
SELECT name FROM jenkins_dispatch_locks WHERE name = 'pauses' LOCK IN SHARE MODE

-- fragment: claim_job_room
-- How many more rows of the job of limit l may be claimed now: the room under its cap and under its rate, the
-- smaller (a limits row has at least one of the two; the other counts as no bound, and is not counted).
LEAST(CASE WHEN l.max_in_flight IS NULL THEN 2147483647 ELSE l.max_in_flight - {{claim_in_flight}} END,
      CASE WHEN l.per_minute IS NULL THEN 2147483647 ELSE l.per_minute - {{claim_started}} END)

-- fragment: claim_not_paused
-- The pauses of the claim's controller (:controller) and those of every controller (controller NULL).
AND {{t_job_key}} NOT IN (SELECT p.job_key FROM jenkins_job_pauses p
                          WHERE p.controller IS NULL OR p.controller = :controller)
AND NOT EXISTS (SELECT 1 FROM jenkins_job_pauses p
                WHERE p.job_name = '*' AND (p.controller IS NULL OR p.controller = :controller))

-- fragment: claim_take
-- The rows collected in @jd_claimed become processing with a fresh dispatch_id and a lease; each gets its
-- history row; they are returned in the seed's order (parameters as the text they were written in).
-- The ids first, then each row by primary key (STRAIGHT_JOIN, FORCE INDEX): on a small table the optimizer would
-- rather scan the queue, and that scan's locks (for a moment, on every row) make the claims of other controllers
-- running beside it skip their rows (SKIP LOCKED). The same in every write below that joins collected ids.
UPDATE JSON_TABLE(COALESCE(@jd_claimed, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) c
STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = c.id
SET q.status = 'processing',
    q.attempts = q.attempts + 1,
    q.dispatch_id = CONCAT('jd-', q.id, '-', LEFT(MD5(UUID()), 10)),
    q.lease_expires_at = {{t_lease_end}},
    q.jenkins_queue_id = NULL, q.build_number = NULL, q.build_url = NULL, q.jenkins_result = NULL,
    -- A new attempt starts clean; the earlier error stays in the history (released, retry_scheduled).
    q.last_error = NULL, q.started_at = NULL, q.updated_at = NOW(6);
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT q.id, 'claimed', 'pending', 'processing', q.dispatch_id, :actor,
       CONCAT('attempt ', q.attempts, ' of ', q.max_attempts)
FROM JSON_TABLE(COALESCE(@jd_claimed, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) c
JOIN jenkins_jobs_queue q ON q.id = c.id;
SELECT q.id, q.job_name, q.parameters, q.attempts, q.max_attempts, q.dispatch_id
FROM JSON_TABLE(COALESCE(@jd_claimed, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) c
JOIN jenkins_jobs_queue q ON q.id = c.id
ORDER BY q.claim_priority, q.scheduled_at, q.id

-- name: claim_batch
-- Eligible rows in the seed's order (priority DESC, scheduled_at, id: the claim index's order, so InnoDB
-- walks it and stops at the LIMIT), locked without waiting on rows other workers hold. Only the rows it
-- returns are locked: READ COMMITTED takes no gap locks, so an application's INSERT never waits on a claim.
-- One controller's rows (:controller), which lead the claim index after the status (0006_controllers.sql).
SET @jd_claimed = NULL;
{{claim_paused_lock}};
SELECT JSON_ARRAYAGG(picked.id) INTO @jd_claimed FROM (
    -- Forced: on a small table the optimizer may prefer a scan, whose locking read locks (for a moment) the
    -- other controllers' rows too, and their claims, running beside this one, would skip them (SKIP LOCKED).
    SELECT q.id FROM jenkins_jobs_queue q FORCE INDEX (jenkins_jobs_queue_claim_by_controller_idx)
    WHERE q.status = 'pending' AND q.controller = :controller AND q.scheduled_at <= NOW(6)
      -- A cap set while this dispatcher's pass runs uncapped: leave that job to the capped claim.
      AND {{t_job_key}} NOT IN (SELECT l.job_key FROM jenkins_job_limits l WHERE l.controller = :controller)
      {{claim_not_paused}}
    ORDER BY q.claim_priority, q.scheduled_at, q.id
    LIMIT :batch_size
    FOR UPDATE SKIP LOCKED
) picked;
{{claim_take}};

-- name: queue_fingerprint
-- The polling dispatcher's "anything new?" between passes (dispatching/wakeup.PollingSignal): marks that move
-- whenever something a pass would act on changes, compared with the previous poll's. An application's INSERT
-- raises the last job id; every transition we make (claim, release, retry, reschedule, settle, cancel, an
-- operator's retry) writes a history row, raising the last event id; caps and pauses are counted and dated.
-- Primary-key ends, in-flight rows and two small tables: the cost does not grow with the queue, the
-- history or a paused or capped backlog. Not seen: a commit that lands after a later-numbered one was already
-- read (ids are handed out at INSERT, not at COMMIT) and hand-made UPDATEs; the periodic pass covers those.
SELECT (SELECT MAX(id) FROM jenkins_jobs_queue) AS last_job_id,
       (SELECT MAX(id) FROM jenkins_job_events) AS last_event_id,
       (SELECT COUNT(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS processing,
       (SELECT CONCAT_WS('/', COUNT(*), SUM(max_in_flight), MAX(updated_at)) FROM jenkins_job_limits) AS limits,
       (SELECT CONCAT_WS('/', COUNT(*), MAX(paused_at)) FROM jenkins_job_pauses) AS pauses,
       (SELECT CONCAT_WS('/', COUNT(*), MAX(updated_at)) FROM jenkins_job_schedules) AS schedules;

-- name: lock_caps
-- Capped claims run one at a time (until the caller's transaction ends), each seeing every earlier claim
-- committed: the in-flight counts it reads next are then exact.
SELECT name FROM jenkins_dispatch_locks WHERE name = 'caps' FOR UPDATE;

-- name: claim_batch_capped
-- As claim_batch, but never lets the processing rows of a job_name exceed its jenkins_job_limits entry, nor
-- the processing rows of the configured controllers (:controllers, their names joined by ','; NULL: every one; a
-- controller removed from the configuration strands its rows in flight, and they must not hold everyone else
-- back) exceed :max_in_flight (NULL: no global cap), nor a rated job's starts of the last minute exceed its rate (recorded at the block's end, counted by every claim after it). It takes the caps lock itself,
-- then reads (each statement sees what committed before it): run alone (Session.locking_blocks), it is one round
-- trip in its own transaction, as exact as after lock_caps.
-- A LIMIT must be a constant here: the locking read takes at most :batch_size rows of jobs with room left,
-- in order, and the first (global room) of them, each job's first (its room), are claimed, as on
-- PostgreSQL. The others stay locked only until this transaction commits.
-- Every statement costs a round of parsing and bookkeeping (a fifth of a millisecond): the block has no more of
-- them than it needs. @jd_claimed needs no reset: the aggregate below always assigns it (NULL: no rows).
SELECT name FROM jenkins_dispatch_locks WHERE name = 'caps' FOR UPDATE;
{{claim_paused_lock}};
SELECT JSON_ARRAYAGG(ranked.id) INTO @jd_claimed FROM (
    SELECT picked.id, picked.job_key,
           ROW_NUMBER() OVER (ORDER BY picked.claim_priority, picked.scheduled_at, picked.id) AS nth_of_all,
           ROW_NUMBER() OVER (PARTITION BY picked.job_key
                              ORDER BY picked.claim_priority, picked.scheduled_at, picked.id) AS nth_of_job
    FROM (
        SELECT q.id, {{t_job_key}} AS job_key, q.claim_priority, q.scheduled_at
        FROM jenkins_jobs_queue q FORCE INDEX (jenkins_jobs_queue_claim_by_controller_idx)  -- as in claim_batch
        WHERE q.status = 'pending' AND q.controller = :controller AND q.scheduled_at <= NOW(6)
          AND {{t_job_key}} NOT IN (
              SELECT l.job_key FROM jenkins_job_limits l
              WHERE l.controller = :controller AND {{claim_job_room}} <= 0)
          {{claim_not_paused}}
        ORDER BY q.claim_priority, q.scheduled_at, q.id
        LIMIT :batch_size
        FOR UPDATE SKIP LOCKED
    ) picked
) ranked
LEFT JOIN jenkins_job_limits l ON l.job_key = ranked.job_key AND l.controller = :controller
WHERE ranked.nth_of_all <= (
        -- The room left under the global cap and under the controller's own (:controller_max_in_flight; NULL:
        -- none), evaluated once. With neither cap the WHERE is false before any row is read (the parameters
        -- arrive as literals): the rows in flight, thousands of index entries, are counted only when a cap
        -- needs them, and the aggregate's one row (COUNT 0) leaves the room at :batch_size.
        SELECT LEAST(:batch_size,
                     COALESCE(GREATEST(:max_in_flight - COUNT(CASE WHEN :controllers IS NULL
                                                                   OR FIND_IN_SET(f.controller, :controllers) > 0
                                                                 THEN 1 END), 0), :batch_size),
                     COALESCE(GREATEST(:controller_max_in_flight
                                       - COUNT(CASE WHEN f.controller = :controller THEN 1 END), 0),
                              :batch_size))
        FROM jenkins_jobs_queue f
        WHERE f.status = 'processing' AND (:max_in_flight IS NOT NULL OR :controller_max_in_flight IS NOT NULL))
  AND (l.job_key IS NULL OR ranked.nth_of_job <= {{claim_job_room}});
{{claim_take}};
-- The starts of rated jobs; and starts no claim counts any more (two minutes: a claim waiting on the lock counts
-- from a minute before its own statement's start).
INSERT INTO jenkins_job_starts (controller, job_key, job_id)
SELECT :controller, l.job_key, q.id
FROM JSON_TABLE(COALESCE(@jd_claimed, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) c
JOIN jenkins_jobs_queue q ON q.id = c.id
JOIN jenkins_job_limits l ON l.controller = :controller AND l.job_key = {{t_job_key}} AND l.per_minute IS NOT NULL;
DELETE FROM jenkins_job_starts WHERE controller = :controller AND at < NOW(6) - INTERVAL 2 MINUTE;

-- name: caps_in_force
-- decode: any_job_limits bool
SELECT EXISTS (SELECT 1 FROM jenkins_job_limits) AS any_job_limits;

-- name: pending_controllers
-- The controllers that have pending rows: a skip scan of the claim index (status, then controller, lead it), one
-- probe per controller, however long the backlog -- the pass asks this every time. A plain read: no lock.
WITH RECURSIVE seen(controller) AS (
    (SELECT controller FROM jenkins_jobs_queue WHERE status = 'pending' ORDER BY controller LIMIT 1)
    UNION ALL
    SELECT (SELECT q.controller FROM jenkins_jobs_queue q
            WHERE q.status = 'pending' AND q.controller > s.controller ORDER BY q.controller LIMIT 1)
    FROM seen s WHERE s.controller IS NOT NULL
)
SELECT controller FROM seen WHERE controller IS NOT NULL;

-- name: fail_rows_of_unknown_controller
-- Pending rows naming :controller, which is not configured, end failed, their last_error naming it: nothing is
-- sent anywhere. Through the claim index only: a table scan would lock the other controllers' rows too, and their
-- claims, running beside it, would skip them meanwhile.
SET @jd_taken = NULL;
SELECT JSON_ARRAYAGG(picked.id) INTO @jd_taken FROM (
    SELECT id FROM jenkins_jobs_queue FORCE INDEX (jenkins_jobs_queue_claim_by_controller_idx)
    WHERE status = 'pending' AND controller = :controller
    FOR UPDATE SKIP LOCKED
) picked;
UPDATE {{t_taken}} STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = t.id
SET q.status = 'failed', q.finished_at = NOW(6), q.updated_at = NOW(6),
    q.last_error = CONCAT('controller ''', q.controller, ''' is not configured (JENKINS_CONTROLLERS): ',
                          'nothing was sent');
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, actor, detail)
SELECT q.id, 'failed', 'pending', 'failed', :actor, q.last_error FROM {{t_taken}} JOIN jenkins_jobs_queue q ON q.id = t.id;
SELECT q.id, q.controller FROM {{t_taken}} JOIN jenkins_jobs_queue q ON q.id = t.id;
