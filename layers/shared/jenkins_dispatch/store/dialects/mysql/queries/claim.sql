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

-- fragment: claim_order_q
-- The seed's order (claim_priority is -priority: an ascending index walks priority DESC), of the alias q, of the
-- picked rows, and the index that walks it; the *_fair variants take the fair_* ones instead (PostgreSQL's
-- claim_order says when).
q.claim_priority, q.scheduled_at, q.id

-- fragment: claim_order_picked
picked.claim_priority, picked.scheduled_at, picked.id

-- fragment: claim_index
jenkins_jobs_queue_claim_by_controller_idx

-- fragment: fair_order_q
q.claim_priority, q.fair_round, q.scheduled_at, q.id

-- fragment: fair_order_picked
picked.claim_priority, picked.fair_round, picked.scheduled_at, picked.id

-- fragment: fair_claim_index
jenkins_jobs_queue_fair_claim_idx

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
ORDER BY {{claim_order_q}}

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
    SELECT q.id FROM jenkins_jobs_queue q FORCE INDEX ({{claim_index}})
    WHERE q.status = 'pending' AND q.controller = :controller AND q.scheduled_at <= NOW(6)
      -- A cap set while this dispatcher's pass runs uncapped: leave that job to the capped claim.
      AND {{t_job_key}} NOT IN (SELECT l.job_key FROM jenkins_job_limits l WHERE l.controller = :controller)
      -- The same for a capped key, whatever the job.
      AND (q.concurrency_key IS NULL OR q.concurrency_key NOT IN (SELECT k.concurrency_key FROM jenkins_key_limits k))
      {{claim_not_paused}}
    ORDER BY {{claim_order_q}}
    LIMIT :batch_size
    FOR UPDATE SKIP LOCKED
) picked;
{{claim_take}};

-- variant: claim_batch_fair = claim_batch with claim_order_q=fair_order_q, claim_index=fair_claim_index

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
       (SELECT CONCAT_WS('/', COUNT(*), SUM(max_in_flight), MAX(updated_at)) FROM jenkins_key_limits) AS key_limits,
       (SELECT CONCAT_WS('/', COUNT(*), MAX(paused_at)) FROM jenkins_job_pauses) AS pauses,
       (SELECT CONCAT_WS('/', COUNT(*), MAX(updated_at)) FROM jenkins_job_schedules) AS schedules;

-- name: lock_caps
-- Capped claims run one at a time (until the caller's transaction ends), each seeing every earlier claim
-- committed: the in-flight counts it reads next are then exact.
SELECT name FROM jenkins_dispatch_locks WHERE name = 'caps' FOR UPDATE;

-- fragment: t_superseded
-- The rows claim_batch_keyed collected into @jd_superseded: each with its key's newest row, and whether it was
-- pending (superseded) or in flight (asked to cancel).
JSON_TABLE(COALESCE(@jd_superseded, '[]'),
           '$[*]' COLUMNS (id BIGINT PATH '$.id', newest BIGINT PATH '$.newest', pending BOOLEAN PATH '$.pending')) s

-- fragment: capped_global_room
-- The capped claims' room under the global cap and the controller's own (claim_batch_capped and
-- claim_batch_keyed).
(
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

-- fragment: capped_starts
-- The starts of rated jobs; and starts no claim counts any more (two minutes: a claim waiting on the lock counts
-- from a minute before its own statement's start).
INSERT INTO jenkins_job_starts (controller, job_key, job_id)
SELECT :controller, l.job_key, q.id
FROM JSON_TABLE(COALESCE(@jd_claimed, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) c
JOIN jenkins_jobs_queue q ON q.id = c.id
JOIN jenkins_job_limits l ON l.controller = :controller AND l.job_key = {{t_job_key}} AND l.per_minute IS NOT NULL;
DELETE FROM jenkins_job_starts WHERE controller = :controller AND at < NOW(6) - INTERVAL 2 MINUTE

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
           ROW_NUMBER() OVER (ORDER BY {{claim_order_picked}}) AS nth_of_all,
           ROW_NUMBER() OVER (PARTITION BY picked.job_key
                              ORDER BY {{claim_order_picked}}) AS nth_of_job
    FROM (
        SELECT q.id, {{t_job_key}} AS job_key, q.claim_priority, q.fair_round, q.scheduled_at
        FROM jenkins_jobs_queue q FORCE INDEX ({{claim_index}})  -- as in claim_batch
        WHERE q.status = 'pending' AND q.controller = :controller AND q.scheduled_at <= NOW(6)
          AND {{t_job_key}} NOT IN (
              SELECT l.job_key FROM jenkins_job_limits l
              WHERE l.controller = :controller AND {{claim_job_room}} <= 0)
          -- No key capped as the pass began (PostgreSQL's claim_batch_capped): a key capped since waits for the
          -- next pass's claim_batch_keyed.
          AND (q.concurrency_key IS NULL OR q.concurrency_key NOT IN (SELECT k.concurrency_key FROM jenkins_key_limits k))
          {{claim_not_paused}}
        ORDER BY {{claim_order_q}}
        LIMIT :batch_size
        FOR UPDATE SKIP LOCKED
    ) picked
) ranked
LEFT JOIN jenkins_job_limits l ON l.job_key = ranked.job_key AND l.controller = :controller
WHERE ranked.nth_of_all <= {{capped_global_room}}
  AND (l.job_key IS NULL OR ranked.nth_of_job <= {{claim_job_room}});
{{claim_take}};
{{capped_starts}};

-- variant: claim_batch_capped_fair = claim_batch_capped with claim_order_q=fair_order_q, claim_order_picked=fair_order_picked, claim_index=fair_claim_index

-- name: claim_batch_keyed
-- claim_batch_capped when a concurrency key is capped (claim_plan says so as the pass begins): it also
-- never lets the processing rows holding a key exceed its jenkins_key_limits entry, on every controller and
-- whatever their job; where newest wins (supersede) it cancels the key's older pending rows first, and with
-- stop_running asks for the cancel of its older rows in flight. Apart from claim_batch_capped so that a
-- queue without key caps pays none of this.
-- As claim_batch_capped, a locking block that takes the caps lock itself (Session.locking_blocks).
SELECT name FROM jenkins_dispatch_locks WHERE name = 'caps' FOR UPDATE;
{{claim_paused_lock}};
-- Newest wins (PostgreSQL's claim_batch_capped says why in the claim): the older pending rows of a superseding key,
-- on every controller, end cancelled before the pick, which then no longer sees them pending; with stop_running,
-- its older rows in flight not yet asked to cancel are asked (PostgreSQL's "stopping" says how). Through the key's
-- index only, from its newest pending row down; one locking read collects both. It reads (and so locks) a key's rows
-- in flight only where newest wins over running ones too (the statuses joined in, w): a settle of a row in flight
-- locks the row, then its entry in this index, and a read that locked the entry first made the two wait on each
-- other (InnoDB's deadlock report, a CI run: the settle was the victim).
SELECT JSON_ARRAYAGG(JSON_OBJECT('id', s.id, 'newest', s.newest, 'pending', s.status = 'pending'))
INTO @jd_superseded FROM (
    SELECT q.id, q.status, n.newest
    FROM (SELECT k.concurrency_key, k.stop_running,
                 (SELECT MAX(p.id) FROM jenkins_jobs_queue p FORCE INDEX (jenkins_jobs_queue_in_flight_by_key_idx)
                  WHERE p.status = 'pending' AND p.concurrency_key = k.concurrency_key) AS newest
          FROM jenkins_key_limits k WHERE k.supersede) n
    STRAIGHT_JOIN (SELECT 'pending' AS status UNION ALL SELECT 'processing') w
        ON w.status = 'pending' OR n.stop_running
    STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (jenkins_jobs_queue_in_flight_by_key_idx)
        ON q.status = w.status AND q.concurrency_key = n.concurrency_key AND q.id < n.newest
    WHERE q.status = 'pending' OR q.cancel_requested_at IS NULL
    FOR UPDATE
) s;
UPDATE {{t_superseded}}
STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = s.id
SET q.status = IF(s.pending, 'cancelled', q.status), q.finished_at = IF(s.pending, NOW(6), q.finished_at),
    q.last_error = IF(s.pending, CONCAT('superseded by #', s.newest), q.last_error),
    q.cancel_requested_at = IF(s.pending, q.cancel_requested_at, NOW(6)),
    q.lease_expires_at = IF(NOT s.pending AND (q.jenkins_queue_id IS NOT NULL OR q.build_number IS NOT NULL),
                            LEAST(q.lease_expires_at, NOW(6)), q.lease_expires_at),
    q.updated_at = NOW(6);
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT q.id, IF(s.pending, 'cancelled', 'cancel_requested'), IF(s.pending, 'pending', 'processing'), q.status,
       q.dispatch_id, :actor, CONCAT('superseded by #', s.newest)
FROM {{t_superseded}}
JOIN jenkins_jobs_queue q ON q.id = s.id;
SELECT JSON_ARRAYAGG(ranked.id) INTO @jd_claimed FROM (
    SELECT picked.id, picked.job_key, picked.concurrency_key,
           ROW_NUMBER() OVER (ORDER BY {{claim_order_picked}}) AS nth_of_all,
           ROW_NUMBER() OVER (PARTITION BY picked.job_key
                              ORDER BY {{claim_order_picked}}) AS nth_of_job,
           ROW_NUMBER() OVER (PARTITION BY picked.concurrency_key
                              ORDER BY {{claim_order_picked}}) AS nth_of_key
    FROM (
        SELECT q.id, {{t_job_key}} AS job_key, q.concurrency_key, q.claim_priority, q.fair_round, q.scheduled_at
        FROM jenkins_jobs_queue q FORCE INDEX ({{claim_index}})  -- as in claim_batch
        WHERE q.status = 'pending' AND q.controller = :controller AND q.scheduled_at <= NOW(6)
          AND {{t_job_key}} NOT IN (
              SELECT l.job_key FROM jenkins_job_limits l
              WHERE l.controller = :controller AND {{claim_job_room}} <= 0)
          AND (q.concurrency_key IS NULL OR q.concurrency_key NOT IN (
              SELECT k.concurrency_key FROM jenkins_key_limits k WHERE k.max_in_flight - {{claim_key_in_flight}} <= 0))
          {{claim_not_paused}}
        ORDER BY {{claim_order_q}}
        LIMIT :batch_size
        FOR UPDATE SKIP LOCKED
    ) picked
) ranked
LEFT JOIN jenkins_job_limits l ON l.job_key = ranked.job_key AND l.controller = :controller
LEFT JOIN jenkins_key_limits k ON k.concurrency_key = ranked.concurrency_key
WHERE ranked.nth_of_all <= {{capped_global_room}}
  AND (l.job_key IS NULL OR ranked.nth_of_job <= {{claim_job_room}})
  -- A row within its key's room too, on every controller (one left out by its job's room still counts here: the
  -- claim may take fewer than it could, never more).
  AND (k.concurrency_key IS NULL OR ranked.nth_of_key <= k.max_in_flight - {{claim_key_in_flight}});
{{claim_take}};
{{capped_starts}};

-- variant: claim_batch_keyed_fair = claim_batch_keyed with claim_order_q=fair_order_q, claim_order_picked=fair_order_picked, claim_index=fair_claim_index

-- name: claim_plan
-- decode: any_job_limits bool, any_keys bool, any_fair bool
-- First the turns (fair share: 0020_fair_share.sql) of :controller's rows inserted or retried since its lane's last
-- pass, oldest first and at most 5,000 a pass, each one after its group's newest turn (a group's rows in this lot
-- one after another) and never before the turn being served (the latest in flight, or the earliest given one
-- waiting when that is later), all on :controller, as PostgreSQL's trigger gives them. Only the lane's own rows:
-- the UPDATE locks them until it commits, and another lane's claim, running beside it, would skip its new rows
-- meanwhile (seen: a pass that never sent its controller's one row). Each lookup on an index that answers it at
-- once (no turn is the largest value: given turns come before it); the UPDATE takes only rows still without one
-- (two passes at once: the second finds them given). A plain read first (no lock), so an INSERT never waits on it.
-- Then whether any job or key is capped, and whether a pending row of :controller has a fairness key (the fair
-- group index: its rows with a key come after those without, NULL first).
SELECT GREATEST(
           COALESCE((SELECT MAX(f.fair_round) FROM jenkins_jobs_queue f FORCE INDEX (jenkins_jobs_queue_fair_serving_idx)
                     WHERE f.status = 'processing' AND f.controller = :controller
                       AND f.fair_round < 9223372036854775807), 0),
           -- (the earliest waiting row may have no turn yet: then no waiting row has one)
           COALESCE(NULLIF((SELECT MIN(f.fair_round) FROM jenkins_jobs_queue f FORCE INDEX (jenkins_jobs_queue_fair_serving_idx)
                            WHERE f.status = 'pending' AND f.controller = :controller), 9223372036854775807), 0))
INTO @jd_serving;
SELECT JSON_ARRAYAGG(JSON_OBJECT('id', n.id, 'turn', n.turn)) INTO @jd_turns FROM (
    SELECT u.id,
           GREATEST(COALESCE(IF(u.fairness_key IS NULL,
                                (SELECT MAX(f.fair_round) FROM jenkins_jobs_queue f FORCE INDEX (jenkins_jobs_queue_fair_group_idx)
                                 WHERE f.status = 'pending' AND f.controller = :controller AND f.fairness_key IS NULL
                                   AND f.fair_round < 9223372036854775807),
                                (SELECT MAX(f.fair_round) FROM jenkins_jobs_queue f FORCE INDEX (jenkins_jobs_queue_fair_group_idx)
                                 WHERE f.status = 'pending' AND f.controller = :controller
                                   AND f.fairness_key = u.fairness_key AND f.fair_round < 9223372036854775807)) + 1, 0),
                    @jd_serving)
               + ROW_NUMBER() OVER (PARTITION BY u.fairness_key ORDER BY u.id) - 1 AS turn
    FROM (SELECT w.id, w.fairness_key FROM jenkins_jobs_queue w FORCE INDEX (jenkins_jobs_queue_fair_serving_idx)
          WHERE w.status = 'pending' AND w.controller = :controller AND w.fair_round = 9223372036854775807
          ORDER BY w.id LIMIT 5000) u
) n;
UPDATE JSON_TABLE(COALESCE(@jd_turns, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$.id', turn BIGINT PATH '$.turn')) t
STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = t.id
SET q.fair_round = t.turn
WHERE q.status = 'pending' AND q.fair_round = 9223372036854775807;
SELECT EXISTS (SELECT 1 FROM jenkins_job_limits) AS any_job_limits, EXISTS (SELECT 1 FROM jenkins_key_limits) AS any_keys,
       EXISTS (SELECT 1 FROM jenkins_jobs_queue FORCE INDEX (jenkins_jobs_queue_fair_group_idx)
               WHERE status = 'pending' AND controller = :controller AND fairness_key IS NOT NULL) AS any_fair;

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
    SELECT id FROM jenkins_jobs_queue FORCE INDEX ({{claim_index}})
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
