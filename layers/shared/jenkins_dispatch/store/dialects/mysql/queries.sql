-- Every statement jenkins-dispatch runs on MySQL 8.0 and MariaDB 10.6+, in one place: the same names and
-- parameters as dialects/postgresql/queries.sql, whose comments say what each statement is for; the comments
-- here say how each is done without PostgreSQL's means.
--
-- Each block starts with "-- name: NAME" and is run under that name by queue.py (the migration runner's by
-- migrations.py); "-- fragment: NAME" blocks are shared text, included as {{NAME}} (statements.py). A block
-- may hold several statements: session.py sends the whole block in ONE round trip, inside one
-- transaction (its own, or the caller's db.transaction()), and returns the rows of its last result set
-- that has columns. A "-- decode: COLUMN TYPE, ..." line converts result columns MySQL cannot type
-- (booleans come back as 0/1).
--
-- What PostgreSQL does with one statement is done here with a few:
--   * no RETURNING, no data-modifying CTE: a transition is UPDATE, then `SET @jd_changed = ROW_COUNT()`
--     (the session counts rows matched, not only rows changed), then the history row and the answer, each
--     `WHERE @jd_changed > 0`; a transition of several rows first collects the ids it takes, locked, into a
--     JSON array (a user variable) that the later statements of the block join through JSON_TABLE;
--   * every user variable a block reads is set at the block's start: sessions are reused;
--   * no advisory locks: rows of jenkins_dispatch_locks. 'caps' (FOR UPDATE) serialises capped claims;
--     'pauses' is taken shared by every claim before it reads the pauses and exclusively by pause_job, so
--     once a pause has committed no claim takes a row of its job. Both are released at COMMIT/ROLLBACK;
--   * no partial indexes: status leads each index, and generated columns stand in for the expressions
--     (claim_priority = -priority, so that the claim walks one ascending index in the seed's order;
--     open_dedupe_key, the dedupe_key of an unfinished row, unique);
--   * times are DATETIME(6) in UTC (our sessions run with time_zone '+00:00'); timestamps handed in as
--     ISO 8601 text may carry an offset, converted by the t_iso_utc fragment;
--   * MySQL evaluates an UPDATE's SET assignments left to right, each seeing the columns assigned before
--     it: no assignment below reads a column an earlier one in the same UPDATE changed.
--
-- Rules every transition here follows (as on PostgreSQL):
--   * one round trip per transition; its job_events row is written in the same block, so history can
--     never disagree with the row;
--   * every transition out of 'processing' is fenced on (id, dispatch_id, status = 'processing');
--   * a final row (completed, failed, cancelled) is never touched again except by the operator's retry;
--   * a build URL is never downgraded: a relative one is kept only while no absolute one is known.
--
-- Only SQL both MySQL 8.0 and MariaDB 10.6+ accept: no RETURNING, no DESC index, no FULL JOIN, no FILTER.
-- Seconds are floats computed as TIMESTAMPDIFF(MICROSECOND, a, b) / 1e6.

-- ============================================================================ transitions

-- fragment: t_iso_utc
-- @jd_iso (ISO 8601 text, as queue.py hands timestamps over: 'T' or ' ' between date and time, an optional
-- 'Z' or +HH:MM offset; or a datetime the driver wrote out) as a UTC DATETIME(6). Text without an offset is
-- UTC already (our session's zone), and is left as text: written into a DATETIME column, a malformed value
-- is then an error (strict mode) rather than a silent NULL.
CASE
    WHEN @jd_iso IS NULL THEN NULL
    WHEN @jd_iso REGEXP '[+-][0-9][0-9]:[0-9][0-9]$'
        THEN CONVERT_TZ(CAST(REPLACE(LEFT(@jd_iso, CHAR_LENGTH(@jd_iso) - 6), 'T', ' ') AS DATETIME(6)),
                        RIGHT(@jd_iso, 6), '+00:00')
    WHEN @jd_iso LIKE '%Z' THEN REPLACE(LEFT(@jd_iso, CHAR_LENGTH(@jd_iso) - 1), 'T', ' ')
    ELSE REPLACE(@jd_iso, 'T', ' ')
END

-- fragment: t_lease_end
-- When a lease handed out now ends (:lease_seconds may be fractional).
NOW(6) + INTERVAL ROUND(:lease_seconds * 1000000) MICROSECOND

-- name: enqueue
-- decode: created bool
-- The open_dedupe_key index makes a second unfinished row with the same key a duplicate-key conflict;
-- ON DUPLICATE KEY turns it into a no-op that records the existing id (LAST_INSERT_ID(id)) and that no row
-- was created. A concurrent enqueue of the same key waits on the index entry of the first: once that one
-- commits, it finds the duplicate; if it rolls back, it inserts. Either way it never fails.
SET @jd_created = 1, @jd_id = NULL, @jd_iso = :scheduled_at;
INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, max_attempts, dedupe_key, controller)
VALUES (:job_name, :parameters, :priority, COALESCE({{t_iso_utc}}, NOW(6)), :max_attempts, :dedupe_key, :controller)
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id) + 0 * (@jd_created := 0);
-- read before the history row's insert, which sets LAST_INSERT_ID() anew
SET @jd_id = LAST_INSERT_ID();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, actor, detail)
SELECT id, 'enqueued', NULL, 'pending', :actor,
       CASE WHEN scheduled_at > NOW(6) THEN CONCAT('not before ', DATE_FORMAT(scheduled_at, '%Y-%m-%d %H:%i:%s'), ' UTC') END
FROM jenkins_jobs_queue WHERE id = @jd_id AND @jd_created = 1;
SELECT @jd_id AS id, @jd_created AS created;

-- name: find_open_by_dedupe_key
-- not run on this engine: enqueue always answers with a row here (the duplicate-key update finds the open one)
-- Queue.enqueue looks again only when its statement answered nothing, as PostgreSQL's may after a concurrent
-- enqueue of the same key committed.
SELECT id FROM jenkins_jobs_queue WHERE open_dedupe_key = :dedupe_key;

-- fragment: claim_paused_lock
-- The pause lock, shared: a pause_job in progress (it holds the lock exclusively) commits first, and the
-- statements after this one, each reading the latest committed data (READ COMMITTED), see its pause.
SELECT name FROM jenkins_dispatch_locks WHERE name = 'pauses' LOCK IN SHARE MODE

-- fragment: t_job_key
-- A job name as jenkins_job_pauses and jenkins_job_limits key it (their job_key column): item names compare
-- ignoring case, whatever the tables' collation.
UNHEX(SHA2(LOWER(q.job_name), 256))

-- fragment: claim_in_flight
-- Processing rows of the job of limit l on its controller: the collation's equality finds them through the
-- index, the key makes it exact.
(SELECT COUNT(*) FROM jenkins_jobs_queue f
 WHERE f.status = 'processing' AND f.job_name = l.job_name AND UNHEX(SHA2(LOWER(f.job_name), 256)) = l.job_key
   AND f.controller = l.controller)

-- fragment: claim_started
-- The starts of the last minute of the job of limit l on its controller (jenkins_job_starts, 0010_rate_limits.sql).
(SELECT COUNT(*) FROM jenkins_job_starts s
 WHERE s.controller = l.controller AND s.job_key = l.job_key AND s.at > NOW(6) - INTERVAL 1 MINUTE)

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

-- name: list_pauses
-- The pauses of every controller (controller NULL) first, then each controller's; '*' first in each.
SELECT job_name, controller, paused_at, paused_by, reason FROM jenkins_job_pauses
ORDER BY controller IS NOT NULL, controller, job_name = '*' DESC, job_name;

-- name: caps_in_force
-- decode: any_job_limits bool
SELECT EXISTS (SELECT 1 FROM jenkins_job_limits) AS any_job_limits;

-- name: mark_triggered
-- Jenkins accepted the trigger (or the reconciler adopted what it found): remember the queue item. A
-- relative build URL never replaces an absolute one (as record_progress).
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET jenkins_queue_id = :queue_id,
    build_number = COALESCE(:build_number, build_number),
    build_url = CASE WHEN build_url IS NULL OR :build_url LIKE 'http%'
                     THEN COALESCE(:build_url, build_url) ELSE build_url END,
    lease_expires_at = {{t_lease_end}},
    updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing';
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT :id, :event, 'processing', 'processing', :dispatch_id, :actor, :detail FROM DUAL WHERE @jd_changed > 0;
SELECT :id AS id FROM DUAL WHERE @jd_changed > 0;

-- fragment: t_accepted
JSON_TABLE(:accepted, '$[*]' COLUMNS (
    id BIGINT PATH '$.id', dispatch_id VARCHAR(64) PATH '$.dispatch_id',
    queue_id BIGINT PATH '$.queue_id', detail TEXT PATH '$.detail')) a

-- fragment: t_taken
-- The ids a many-row transition collected (locked) into @jd_taken.
JSON_TABLE(COALESCE(@jd_taken, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) t

-- name: mark_triggered_many
-- decode: cancel_requested bool
-- mark_triggered for a whole batch in one round trip, each row fenced on its own: the rows still ours are
-- locked and collected first, then changed, logged and returned.
SET @jd_taken = NULL;
SELECT STRAIGHT_JOIN JSON_ARRAYAGG(q.id) INTO @jd_taken
FROM {{t_accepted}}
JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = a.id AND q.dispatch_id = a.dispatch_id
WHERE q.status = 'processing'
FOR UPDATE;
UPDATE {{t_taken}}
STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = t.id
JOIN {{t_accepted}} ON a.id = q.id
SET q.jenkins_queue_id = a.queue_id,
    q.lease_expires_at = {{t_lease_end}},
    q.updated_at = NOW(6);
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT q.id, 'triggered', 'processing', 'processing', q.dispatch_id, :actor, a.detail
FROM {{t_taken}}
JOIN jenkins_jobs_queue q ON q.id = t.id
JOIN {{t_accepted}} ON a.id = q.id;
SELECT q.id, q.cancel_requested_at IS NOT NULL AS cancel_requested
FROM {{t_taken}} JOIN jenkins_jobs_queue q ON q.id = t.id;

-- fragment: t_names_job
-- The webhook's check that the build is the dispatched job's (see record_progress on PostgreSQL). Compared
-- as bytes after LOWER(): MySQL folds non-ASCII letters too, where PostgreSQL's (and names_job's) folding
-- is ASCII only; names that differ only in the case of a non-ASCII letter compare equal here.
AND (:job_path IS NULL OR CAST(LOWER(job_name) AS BINARY) = CAST(LOWER(:job_path) AS BINARY))
AND (:job_leaf IS NULL
     OR CAST(LOWER(SUBSTRING_INDEX(job_name, '/', -1)) AS BINARY) = CAST(LOWER(:job_leaf) AS BINARY))
-- once the row knows its build, another build of the same dispatch changes nothing
AND (:only_build IS NULL OR build_number IS NULL OR build_number = :only_build)

-- name: record_progress
-- A build was seen queued or started (webhook or reconciler). Changes (and logs) only what is new, so
-- duplicates and out-of-order phases leave no trace.
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET build_number = COALESCE(:build_number, build_number),
    build_url = CASE WHEN build_url IS NULL OR :build_url LIKE 'http%'
                     THEN COALESCE(:build_url, build_url) ELSE build_url END,
    jenkins_queue_id = COALESCE(jenkins_queue_id, :queue_id),
    started_at = CASE WHEN started_at IS NULL AND :started THEN NOW(6) ELSE started_at END,
    updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing'
  AND ((:build_number IS NOT NULL AND NOT (build_number <=> :build_number))
    OR (:build_url IS NOT NULL AND NOT (build_url <=> :build_url)
        AND (build_url IS NULL OR :build_url LIKE 'http%'))
    OR (:queue_id IS NOT NULL AND jenkins_queue_id IS NULL)
    OR (started_at IS NULL AND :started))
  {{t_names_job}};
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, :event, 'processing', 'processing', dispatch_id, :actor, COALESCE(:detail, CONCAT('build #', build_number))
FROM jenkins_jobs_queue WHERE id = :id AND @jd_changed > 0;
SELECT :id AS id FROM DUAL WHERE @jd_changed > 0;

-- name: settle
-- The row reaches a final state: completed / failed / cancelled, with Jenkins's result if known.
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET status = :status,
    jenkins_result = COALESCE(:result, jenkins_result),
    build_number = COALESCE(:build_number, build_number),
    build_url = CASE WHEN build_url IS NULL OR :build_url LIKE 'http%'
                     THEN COALESCE(:build_url, build_url) ELSE build_url END,
    last_error = :error,
    lease_expires_at = NULL,
    finished_at = NOW(6),
    updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing'
  {{t_names_job}};
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT :id, 'settled', 'processing', :status, :dispatch_id, :actor, CONCAT_WS(': ', :result, :error)
FROM DUAL WHERE @jd_changed > 0;
-- Besides the id, the row's queue wait and its build's duration from its history, in the same round trip, for
-- `serve`'s histograms (PostgreSQL's settle says what each is); NULL where the history does not tell.
SELECT q.id,
       TIMESTAMPDIFF(MICROSECOND, p.at, (
           SELECT t.at FROM jenkins_job_events t
           WHERE t.job_id = q.id AND t.event IN ('triggered', 'adopted') AND t.id > p.id
           ORDER BY t.id LIMIT 1)) / 1e6 AS queue_wait_seconds,
       TIMESTAMPDIFF(MICROSECOND, (
           SELECT s.at FROM jenkins_job_events s
           WHERE s.job_id = q.id AND s.event = 'started' AND s.dispatch_id = q.dispatch_id
             AND s.id > COALESCE(p.id, 0)
           ORDER BY s.id LIMIT 1), q.finished_at) / 1e6 AS build_seconds
FROM jenkins_jobs_queue q
LEFT JOIN (
    SELECT b.job_id, b.id, b.at FROM jenkins_job_events b
    WHERE b.job_id = :id AND b.event IN ('enqueued', 'retried')
    ORDER BY b.id DESC LIMIT 1
) p ON p.job_id = q.id
WHERE q.id = :id AND @jd_changed > 0;

-- fragment: t_outcomes
JSON_TABLE(:outcomes, '$[*]' COLUMNS (
    id BIGINT PATH '$.id', dispatch_id VARCHAR(64) PATH '$.dispatch_id', status VARCHAR(16) PATH '$.status',
    result VARCHAR(16) PATH '$.result', error TEXT PATH '$.error')) o

-- name: settle_many
-- settle for several rows in one round trip, each fenced on its own (collected, locked, first).
SET @jd_taken = NULL;
SELECT STRAIGHT_JOIN JSON_ARRAYAGG(q.id) INTO @jd_taken
FROM {{t_outcomes}}
JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = o.id AND q.dispatch_id = o.dispatch_id
WHERE q.status = 'processing' AND o.status IN ('completed', 'failed', 'cancelled')
FOR UPDATE;
UPDATE {{t_taken}}
STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = t.id
JOIN {{t_outcomes}} ON o.id = q.id
SET q.status = o.status,
    q.jenkins_result = COALESCE(o.result, q.jenkins_result),
    q.last_error = o.error,
    q.lease_expires_at = NULL,
    q.finished_at = NOW(6),
    q.updated_at = NOW(6);
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT q.id, 'settled', 'processing', q.status, q.dispatch_id, :actor, CONCAT_WS(': ', o.result, o.error)
FROM {{t_taken}}
JOIN jenkins_jobs_queue q ON q.id = t.id
JOIN {{t_outcomes}} ON o.id = q.id;
SELECT t.id FROM {{t_taken}};

-- name: retry_later
-- A transient error about this one job: try again after a backoff, or fail once attempts are spent; a row
-- an operator asked to cancel while its trigger was in flight ends cancelled.
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
                  WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
    scheduled_at = CASE WHEN cancel_requested_at IS NOT NULL OR attempts >= max_attempts THEN scheduled_at
                        ELSE NOW(6) + INTERVAL ROUND(:delay_seconds * 1000000) MICROSECOND END,
    finished_at = CASE WHEN cancel_requested_at IS NOT NULL OR attempts >= max_attempts THEN NOW(6) END,
    last_error = CASE WHEN cancel_requested_at IS NOT NULL
                      THEN CONCAT('cancelled by operator before Jenkins took its trigger (', :error, ')')
                      WHEN attempts >= max_attempts
                      THEN CONCAT('gave up after ', attempts, ' attempts: ', :error) ELSE :error END,
    lease_expires_at = NULL,
    jenkins_queue_id = NULL,
    updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND lease_expires_at > NOW(6);
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, CASE WHEN status = 'pending' THEN 'retry_scheduled' ELSE 'settled' END, 'processing', status,
       dispatch_id, :actor,
       CASE WHEN status = 'failed' THEN CONCAT('attempts exhausted: ', :error)
            WHEN status = 'cancelled' THEN CONCAT('cancel requested; Jenkins did not take the trigger: ', :error)
            ELSE CONCAT(:error, '; next try not before ', DATE_FORMAT(scheduled_at, '%H:%i:%s'), ' UTC') END
FROM jenkins_jobs_queue WHERE id = :id AND @jd_changed > 0;
SELECT id, status FROM jenkins_jobs_queue WHERE id = :id AND @jd_changed > 0;

-- name: release
-- Back to pending without spending an attempt: the trigger was never sent; cancelled instead when an
-- operator asked while it was in flight. Only while our lease lasts (see PostgreSQL's).
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled' ELSE 'pending' END,
    attempts = GREATEST(attempts - 1, 0), lease_expires_at = NULL,
    finished_at = CASE WHEN cancel_requested_at IS NOT NULL THEN NOW(6) END,
    last_error = CASE WHEN cancel_requested_at IS NOT NULL
                      THEN CONCAT('cancelled by operator before its trigger was sent (', :reason, ')')
                      ELSE :reason END,
    updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND jenkins_queue_id IS NULL
  AND lease_expires_at > NOW(6);
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, CASE WHEN status = 'cancelled' THEN 'settled' ELSE 'released' END, 'processing', status,
       dispatch_id, :actor,
       CASE WHEN status = 'cancelled' THEN CONCAT('cancel requested; its trigger was never sent: ', :reason)
            ELSE :reason END
FROM jenkins_jobs_queue WHERE id = :id AND @jd_changed > 0;
SELECT :id AS id FROM DUAL WHERE @jd_changed > 0;

-- name: take_expired_leases
-- decode: cancel_requested bool
-- Rows whose lease ran out, each handed to exactly one reconciler: picked without waiting on rows others
-- hold, their leases renewed in the same block.
SET @jd_taken = NULL;
SELECT JSON_ARRAYAGG(picked.id) INTO @jd_taken FROM (
    -- Forced, as the claims are: a scan would lock (for a moment) pending rows that a claim beside it skips.
    SELECT id FROM jenkins_jobs_queue FORCE INDEX (jenkins_jobs_queue_lease_idx)
    WHERE status = 'processing' AND lease_expires_at <= NOW(6) AND controller = :controller
    ORDER BY lease_expires_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
) picked;
UPDATE {{t_taken}} STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = t.id
SET q.lease_expires_at = {{t_lease_end}}, q.updated_at = NOW(6);
SELECT q.id, q.job_name, q.parameters, q.attempts, q.max_attempts, q.dispatch_id,
       q.jenkins_queue_id, q.build_number, q.build_url, q.lease_expires_at, q.resends,
       q.cancel_requested_at IS NOT NULL AS cancel_requested,
       -- when this dispatch began: no build of it can be older, which bounds the search in Jenkins
       (SELECT e.at FROM jenkins_job_events e
         WHERE e.job_id = q.id AND e.dispatch_id = q.dispatch_id AND e.event = 'claimed'
         ORDER BY e.id LIMIT 1) AS claimed_at
FROM {{t_taken}} JOIN jenkins_jobs_queue q ON q.id = t.id;

-- name: record_resend
-- The reconciler sends the dispatch again under the SAME dispatch_id, fenced on the lease it was handed
-- (:lease, which the driver hands over as UTC, compared to the microsecond); no attempt is spent.
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET resends = resends + 1,
    lease_expires_at = {{t_lease_end}},
    updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND resends < :max_resends
  AND lease_expires_at = :lease;
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, 'resent', 'processing', 'processing', dispatch_id, :actor,
       CONCAT('no queue item or build has this DISPATCH_ID; sending it again (re-send ', resends, ' of ',
              :max_resends, ', held ', CAST(ROUND(:quiet_seconds) AS SIGNED),
              ' s in Jenkins''s queue so that a late original merges with it)')
FROM jenkins_jobs_queue WHERE id = :id AND @jd_changed > 0;
SELECT id, resends FROM jenkins_jobs_queue WHERE id = :id AND @jd_changed > 0;

-- name: resend_not_taken
-- A re-send Jenkins did not take keeps its row processing under the SAME dispatch_id (see PostgreSQL's);
-- :sent false gives the re-send back.
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET resends = CASE WHEN :sent THEN resends ELSE GREATEST(resends - 1, 0) END,
    last_error = :reason, updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND jenkins_queue_id IS NULL;
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT :id, CASE WHEN :sent THEN 'resend_refused' ELSE 'resend_not_sent' END,
       'processing', 'processing', :dispatch_id, :actor, :reason
FROM DUAL WHERE @jd_changed > 0;
SELECT :id AS id FROM DUAL WHERE @jd_changed > 0;

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

-- name: recently_finished_watched
-- Re-sent rows of one controller (:controller), and its rows cancelled while their trigger was on its way with
-- nothing of them found in Jenkins whose late arrival was not handled yet (cancelled_in_flight), settled within
-- :window seconds (see PostgreSQL's).
-- decode: cancelled_in_flight bool
SELECT w.id, w.job_name, w.dispatch_id, w.cancelled_in_flight,
       CASE WHEN w.cancelled_in_flight THEN
           (SELECT e.at FROM jenkins_job_events e
             WHERE e.job_id = w.id AND e.dispatch_id = w.dispatch_id AND e.event = 'claimed'
             ORDER BY e.id LIMIT 1) END AS claimed_at
FROM (
    SELECT q.id, q.job_name, q.dispatch_id, q.resends,
           q.status = 'cancelled' AND q.cancel_requested_at IS NOT NULL AND q.jenkins_queue_id IS NULL
               AND q.build_number IS NULL
               AND NOT EXISTS (SELECT 1 FROM jenkins_job_events e
                               WHERE e.job_id = q.id AND e.dispatch_id = q.dispatch_id
                                 AND e.event IN ('late_trigger_cancelled', 'late_build_stopped', 'late_build_seen'))
               AS cancelled_in_flight
    FROM jenkins_jobs_queue q
    WHERE q.finished_at > NOW(6) - INTERVAL ROUND(:window * 1000000) MICROSECOND AND q.controller = :controller
      AND (q.resends > 0 OR (q.status = 'cancelled' AND q.cancel_requested_at IS NOT NULL))
) w
WHERE w.resends > 0 OR w.cancelled_in_flight;

-- name: queue_ids_between
-- Jenkins queue ids our rows hold between :low and :high (both excluded): see PostgreSQL's.
SELECT jenkins_queue_id AS queue_id FROM jenkins_jobs_queue
WHERE jenkins_queue_id > :low AND jenkins_queue_id < :high;

-- name: record_note
-- History only, the row unchanged: what the reconciler saw or did in Jenkins for this dispatch.
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, :event, status, status, dispatch_id, 'reconciler', :detail
FROM jenkins_jobs_queue WHERE id = :id AND dispatch_id = :dispatch_id;

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

-- ============================================================================ operator
-- Reads for the operator (show, ls, stats, doctor, bulk selections), caps, pruning and dispatcher
-- heartbeats. Reads of unfinished rows go through the status-led indexes ((status, ...) replace the
-- partial indexes of PostgreSQL) and the last hour of finished rows through (status, finished_at):
-- none of them reads the finished history, however long it grows.

-- name: get_job
SELECT id, job_name, parameters, status, priority, scheduled_at, attempts, max_attempts, resends, cancel_requested_at,
       dispatch_id, controller,
       jenkins_queue_id, build_number, build_url, jenkins_result, last_error, dedupe_key, lease_expires_at,
       started_at, created_at, updated_at, finished_at
FROM jenkins_jobs_queue WHERE id = :id;

-- name: get_job_by_dispatch_id
SELECT id, job_name, status, dispatch_id, jenkins_queue_id, build_number, jenkins_result, controller
FROM jenkins_jobs_queue WHERE dispatch_id = :dispatch_id;

-- name: get_job_by_queue_id
-- The webhook's fallback: Jenkins queue ids are only unique per job and may be reused after a crash.
SELECT id, job_name, status, dispatch_id, jenkins_queue_id, build_number, jenkins_result, controller
FROM jenkins_jobs_queue WHERE jenkins_queue_id = :queue_id AND job_name = :job_name
ORDER BY (status = 'processing') DESC, id DESC LIMIT 1;

-- name: was_dispatched
-- Did this dispatch_id ever belong to a claim? Tells a stale notification from an unknown one.
SELECT job_id FROM jenkins_job_events WHERE dispatch_id = :dispatch_id AND event = 'claimed' LIMIT 1;

-- name: job_events
SELECT id, at, event, from_status, to_status, dispatch_id, actor, detail
FROM jenkins_job_events WHERE job_id = :id ORDER BY id;

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

-- name: list_jobs
-- A parameter's key is quoted into a JSON path (callers allow only letters, digits, '_', '-' and '.' in it).
-- Every column get_job reads (ls --json carries all that show does).
SELECT id, job_name, parameters, status, priority, scheduled_at, attempts, max_attempts, resends,
       cancel_requested_at, dispatch_id, controller, jenkins_queue_id, build_number, build_url, jenkins_result,
       last_error, dedupe_key, lease_expires_at, started_at, created_at, updated_at, finished_at
FROM jenkins_jobs_queue
WHERE (:status IS NULL OR status = :status)
  AND (:job_name IS NULL OR job_name = :job_name)
  AND (:controller IS NULL OR controller = :controller)
  AND (:since IS NULL OR updated_at >= :since)
  AND (:before_id IS NULL OR id < :before_id)
  AND (:error_pattern IS NULL OR lower(last_error) LIKE lower(:error_pattern) ESCAPE '\\')
  AND (:param_key_1 IS NULL
       OR JSON_UNQUOTE(JSON_EXTRACT(parameters, CONCAT('$."', :param_key_1, '"'))) = :param_value_1)
  AND (:param_key_2 IS NULL
       OR JSON_UNQUOTE(JSON_EXTRACT(parameters, CONCAT('$."', :param_key_2, '"'))) = :param_value_2)
  AND (:param_key_3 IS NULL
       OR JSON_UNQUOTE(JSON_EXTRACT(parameters, CONCAT('$."', :param_key_3, '"'))) = :param_value_3)
ORDER BY id DESC
LIMIT :limit;

-- name: oldest_pending_job
SELECT id, job_name, status, priority, scheduled_at, attempts, max_attempts, last_error, created_at, controller
FROM jenkins_jobs_queue WHERE status = 'pending'
ORDER BY scheduled_at, id
LIMIT 1;

-- name: finished_per_hour
-- The hour as a DATETIME (decoded as UTC like every time here); the finished_at index bounds the read.
SELECT CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:00:00') AS DATETIME(6)) AS hour,
       SUM(status = 'completed') AS completed, SUM(status = 'failed') AS failed,
       SUM(status = 'cancelled') AS cancelled
FROM jenkins_jobs_queue
WHERE finished_at >= CAST(DATE_FORMAT(NOW(6), '%Y-%m-%d %H:00:00') AS DATETIME(6)) - INTERVAL (:hours - 1) HOUR
GROUP BY 1
ORDER BY 1;

-- name: prune_batch
-- Finished rows older than the cutoff, a bounded batch at a time, with their events; returns how many
-- rows went (`deleted`). MySQL allows no LIMIT on a multi-table DELETE: the batch is picked first (walking
-- the finished_at index in order, locking only the rows it takes and skipping rows others hold), then its
-- events and rows are deleted by id.
SET @jd_pruned = NULL;
SELECT JSON_ARRAYAGG(id) INTO @jd_pruned FROM (
    SELECT id FROM jenkins_jobs_queue
    WHERE finished_at < NOW(6) - INTERVAL CAST(:days * 86400000000 AS SIGNED) MICROSECOND
      AND status IN ('completed', 'failed', 'cancelled')
    ORDER BY finished_at
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
) AS doomed;
DELETE e FROM jenkins_job_events e
    JOIN JSON_TABLE(COALESCE(@jd_pruned, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) AS doomed ON e.job_id = doomed.id;
DELETE q FROM JSON_TABLE(COALESCE(@jd_pruned, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) AS doomed
    STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = doomed.id;
SELECT ROW_COUNT() AS deleted;

-- name: prune_aggregates
-- PostgreSQL's prune_aggregates (0009_job_stats.sql's tables): a primary-key range of each, counted as it goes.
SET @jd_cutoff = NOW(6) - INTERVAL CAST(:seconds AS SIGNED) SECOND;
DELETE FROM jenkins_job_stats WHERE bucket_start < @jd_cutoff;
SET @jd_pruned = ROW_COUNT();
DELETE FROM jenkins_job_stat_bins WHERE metric IN ('wait', 'build') AND bucket_start < @jd_cutoff;
SET @jd_pruned = @jd_pruned + ROW_COUNT();
DELETE FROM jenkins_queue_depth WHERE bucket_start < @jd_cutoff;
SELECT @jd_pruned + ROW_COUNT() AS deleted;

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

-- name: limit_history
SELECT id, at, controller, job_name, kind, previous, max_in_flight, previous_per_minute, per_minute, changed_by
FROM jenkins_job_limit_events ORDER BY id DESC LIMIT :limit;

-- name: limit_of
SELECT job_name, max_in_flight FROM jenkins_job_limits WHERE job_key = {{op_job_key}} AND controller = :controller;

-- name: pending_of
-- Counted as pause_job counts them.
SELECT COUNT(*) AS pending FROM jenkins_jobs_queue q
WHERE q.status = 'pending' AND ((q.job_name = :job_name AND {{t_job_key}} = UNHEX(SHA2(LOWER(:job_name), 256)))
                                OR :job_name = '*');

-- name: list_limits
-- In flight counted as the capped claim counts (claim_in_flight: every spelling of the job's name).
SELECT l.controller, l.job_name, l.max_in_flight, {{claim_in_flight}} AS in_flight,
       l.per_minute, {{claim_started}} AS started_last_minute
FROM jenkins_job_limits l ORDER BY l.job_name, l.controller;

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

-- name: stats_per_controller
-- Per controller: pending, due and processing rows (the claim index and the status-led ones).
SELECT controller, count(CASE WHEN status = 'pending' THEN 1 END) AS pending,
       count(CASE WHEN status = 'pending' AND scheduled_at <= NOW(6) THEN 1 END) AS due,
       count(CASE WHEN status = 'processing' THEN 1 END) AS in_flight
FROM jenkins_jobs_queue WHERE status IN ('pending', 'processing')
GROUP BY controller ORDER BY controller;

-- fragment: op_may_see_transactions
-- Whether this account holds PROCESS, without which information_schema.innodb_trx refuses to be read at all
-- (an error, not an empty table) and processlist lists our own account's sessions only. Granted through a
-- role, it is not seen here: the reads then stay as without it.
EXISTS (SELECT 1 FROM information_schema.USER_PRIVILEGES
        WHERE PRIVILEGE_TYPE = 'PROCESS'
          AND GRANTEE = CONCAT('''', SUBSTRING(CURRENT_USER(), 1, CHAR_LENGTH(CURRENT_USER())
                                                - CHAR_LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)) - 1),
                               '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), ''''))

-- fragment: op_oldest_transaction
-- Sets @jd_trx_session, @jd_trx_state and @jd_trx_seconds to the oldest transaction open in another session
-- whose default database is ours (all NULL when there is none, or when innodb_trx is closed to us: then the
-- read is not even prepared). InnoDB's purge is held back by any old transaction on the server, but, as on
-- PostgreSQL, what the operator can act on is a client of this database. trx_started is shown in the
-- session's time zone, UTC in ours.
SET @jd_trx_session = NULL, @jd_trx_state = NULL, @jd_trx_seconds = NULL;
SET @jd_trx_read = IF({{op_may_see_transactions}},
    'SELECT t.trx_mysql_thread_id, t.trx_state, TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) / 1e6
     INTO @jd_trx_session, @jd_trx_state, @jd_trx_seconds
     FROM information_schema.innodb_trx t JOIN information_schema.processlist p ON p.ID = t.trx_mysql_thread_id
     WHERE t.trx_mysql_thread_id <> CONNECTION_ID() AND p.DB = DATABASE()
     ORDER BY t.trx_started, t.trx_mysql_thread_id LIMIT 1',
    'DO 0');
PREPARE jd_trx_read FROM @jd_trx_read;
EXECUTE jd_trx_read;
DEALLOCATE PREPARE jd_trx_read

-- name: stats
-- Reads only the status-led indexes of unfinished rows and the last hour of (status, finished_at): it stays
-- fast however long the history is. rows_estimate is InnoDB's estimate (information_schema.TABLES).
-- decode: everything_paused bool, processing_per_controller json
{{op_oldest_transaction}};
SELECT
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'pending') AS pending,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'pending' AND scheduled_at <= NOW(6)) AS due,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS processing,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing' AND lease_expires_at <= NOW(6)) AS leases_expired,
    (SELECT TIMESTAMPDIFF(MICROSECOND, min(scheduled_at), NOW(6)) / 1e6 FROM jenkins_jobs_queue
      WHERE status = 'pending' AND scheduled_at <= NOW(6)) AS oldest_pending_seconds,
    (SELECT count(*) FROM jenkins_jobs_queue
      WHERE status = 'completed' AND finished_at > NOW(6) - INTERVAL 1 HOUR) AS completed_last_hour,
    (SELECT count(*) FROM jenkins_jobs_queue
      WHERE status = 'failed' AND finished_at > NOW(6) - INTERVAL 1 HOUR) AS failed_last_hour,
    (SELECT count(*) FROM jenkins_jobs_queue
      WHERE status = 'cancelled' AND finished_at > NOW(6) - INTERVAL 1 HOUR) AS cancelled_last_hour,
    -- InnoDB's estimate, never below a count of up to 1,000 rows (a young table's statistics may say 0): exact
    -- for a small table, a lower bound for a large one, at most 1,000 index entries read.
    (SELECT GREATEST(COALESCE(TABLE_ROWS, 0),
                     (SELECT count(*) FROM (SELECT 1 FROM jenkins_jobs_queue LIMIT 1000) AS first_rows))
     FROM information_schema.TABLES
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jenkins_jobs_queue') AS rows_estimate,
    @jd_trx_seconds AS oldest_transaction_seconds,
    EXISTS (SELECT 1 FROM jenkins_job_pauses WHERE job_name = '*' AND controller IS NULL) AS everything_paused,
    (SELECT count(*) FROM jenkins_job_pauses WHERE job_name <> '*') AS paused_jobs;

-- name: gauges
-- What the dispatcher reports after each pass, and when it must look again (the next pending row that
-- becomes due, the next lease that expires): status-led index reads only, and the database's oldest open
-- transaction (a long one holds back InnoDB's purge: old row versions pile up and reads slow down). The
-- oldest pending age leaves out paused jobs (an operator's choice, not a stuck queue: no alarm for it);
-- everything paused: none. Plain consistent reads: no queue row is locked. The counts go through variables into
-- the queue-depth chart (jenkins_queue_depth, 0009_job_stats.sql) in the same round trip: the most pending and
-- processing rows seen in the current five minutes (MySQL writes the row only when a count rose).
-- decode: everything_paused bool, processing_per_controller json
{{op_oldest_transaction}};
SET @jd_processing = (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing'),
    @jd_pending = (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'pending');
INSERT INTO jenkins_queue_depth (bucket_start, pending_max, processing_max)
VALUES ('1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', NOW(6)) DIV 300 * 300) SECOND,
        @jd_pending, @jd_processing)
ON DUPLICATE KEY UPDATE pending_max = GREATEST(pending_max, VALUES(pending_max)),
                        processing_max = GREATEST(processing_max, VALUES(processing_max));
SELECT
    @jd_processing AS processing,
    -- The same rows per controller (name → count; NULL: none in flight), for /metrics: the claim index, status
    -- and controller leading, alone.
    (SELECT JSON_OBJECTAGG(c.controller, c.n) FROM (
        SELECT controller, count(*) AS n FROM jenkins_jobs_queue WHERE status = 'processing' GROUP BY controller
     ) AS c) AS processing_per_controller,
    -- The oldest due row of a job not paused (keyed as the claim skips them). ORDER BY … LIMIT 1 walks the
    -- (status, scheduled_at) index from the oldest and stops at the first such row; MIN() with this filter
    -- would look up every due row (seconds at a million).
    TIMESTAMPDIFF(MICROSECOND, (
        SELECT q.scheduled_at FROM jenkins_jobs_queue q
        WHERE q.status = 'pending' AND q.scheduled_at <= NOW(6)
          -- A pause holds its controller's rows (controller NULL: every controller's).
          AND NOT EXISTS (SELECT 1 FROM jenkins_job_pauses p
                          WHERE (p.job_name = '*' OR p.job_key = q.open_job_key)
                            AND (p.controller IS NULL OR p.controller = q.controller))
        ORDER BY q.scheduled_at LIMIT 1), NOW(6)) / 1e6 AS oldest_pending_seconds,
    EXISTS (SELECT 1 FROM jenkins_job_pauses WHERE job_name = '*' AND controller IS NULL) AS everything_paused,
    (SELECT count(*) FROM jenkins_job_pauses WHERE job_name <> '*') AS paused_jobs,
    (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), min(scheduled_at)) / 1e6 FROM jenkins_jobs_queue
      WHERE status = 'pending' AND scheduled_at > NOW(6)) AS next_due_seconds,
    (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), min(lease_expires_at)) / 1e6 FROM jenkins_jobs_queue
      WHERE status = 'processing') AS next_lease_seconds,
    @jd_pending AS pending,
    (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), min(next_tick)) / 1e6 FROM jenkins_job_schedules WHERE enabled)
        AS next_tick_seconds,
    @jd_trx_seconds AS oldest_transaction_seconds;

-- name: stats_per_job
-- One row per job as MySQL keys caps and pauses (open_job_key = job_key: the name ignoring case), shown under
-- the name its cap or pause was given, else its oldest row's. Unfinished rows are counted per job from the
-- open-job index alone (no row is looked up however many wait), processing ones through a status-led index
-- (as many lookups as rows in flight); pending is the difference, read in the same statement's snapshot. The
-- oldest due pending row of a job: its open-job entries in scheduled order, skipping its rows in flight.
-- Finished rows: the last hour only. Each branch gives a key at most one row, so MAX picks its figure.
-- No FULL JOIN in MySQL, and MariaDB materialises a CTE once for each reference to it (a count joined to a
-- list of names would read its rows twice): one UNION ALL instead, grouped once.
-- decode: paused bool, paused_on json
WITH counts AS (
    SELECT open_job_key AS job_key, count(*) AS unfinished, 0 AS in_flight, 0 AS completed_last_hour,
           0 AS failed_last_hour, min(id) AS named_by
    FROM jenkins_jobs_queue WHERE open_job_key IS NOT NULL GROUP BY open_job_key
    UNION ALL
    SELECT open_job_key, 0, count(*), 0, 0, min(id)
    FROM jenkins_jobs_queue WHERE status = 'processing' GROUP BY open_job_key
    UNION ALL
    SELECT UNHEX(SHA2(LOWER(job_name), 256)), 0, 0, count(CASE WHEN status = 'completed' THEN 1 END),
           count(CASE WHEN status = 'failed' THEN 1 END), min(id)
    FROM jenkins_jobs_queue
    WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at > NOW(6) - INTERVAL 1 HOUR
    GROUP BY UNHEX(SHA2(LOWER(job_name), 256))
    UNION ALL SELECT job_key, 0, 0, 0, 0, NULL FROM jenkins_job_limits WHERE controller = 'default'
    UNION ALL SELECT job_key, 0, 0, 0, 0, NULL FROM jenkins_job_pauses WHERE job_name <> '*'
), per_job AS (
    SELECT job_key, max(unfinished) - max(in_flight) AS pending, max(in_flight) AS in_flight,
           max(completed_last_hour) AS completed_last_hour, max(failed_last_hour) AS failed_last_hour,
           min(named_by) AS named_by
    FROM counts GROUP BY job_key
)
SELECT coalesce(l.job_name, p.job_name, q.job_name,
                (SELECT min(p3.job_name) FROM jenkins_job_pauses p3 WHERE p3.job_key = j.job_key)) AS job_name,
       j.pending, j.in_flight, l.max_in_flight AS cap,
       j.completed_last_hour, j.failed_last_hour,
       TIMESTAMPDIFF(MICROSECOND, (
           SELECT w.scheduled_at FROM jenkins_jobs_queue w
           WHERE w.open_job_key = j.job_key AND w.scheduled_at <= NOW(6) AND w.status = 'pending'
           ORDER BY w.scheduled_at LIMIT 1), NOW(6)) / 1e6 AS oldest_pending_seconds,
       p.job_name IS NOT NULL AS paused, p.paused_at, p.reason AS pause_reason,
       -- The other controllers the job has a pause of its own on (`pause JOB --controller C`).
       coalesce((SELECT JSON_ARRAYAGG(p2.controller) FROM jenkins_job_pauses p2
                 WHERE p2.job_key = j.job_key AND p2.controller <> 'default'), JSON_ARRAY()) AS paused_on
FROM per_job j
LEFT JOIN jenkins_jobs_queue q ON q.id = j.named_by
LEFT JOIN jenkins_job_limits l ON l.job_key = j.job_key AND l.controller = 'default'
-- The default controller's view, as caps: a pause of every controller, else the default's own.
LEFT JOIN jenkins_job_pauses p ON p.id = (SELECT p1.id FROM jenkins_job_pauses p1
                                          WHERE p1.job_key = j.job_key
                                            AND (p1.controller IS NULL OR p1.controller = 'default')
                                          ORDER BY p1.controller IS NOT NULL LIMIT 1)
ORDER BY 1;

-- fragment: op_utc_text
-- A DATETIME(6) of ours (UTC) as ISO 8601 text with its offset, inside JSON: what PostgreSQL's jsonb gives,
-- and what queue.py reads back with datetime.fromisoformat into an aware datetime.
'%Y-%m-%dT%H:%i:%s.%f+00:00'

-- name: waiting_context
-- What decides why pending rows wait, for a page of rows in one statement: for each job and controller of the
-- page's rows (:wanted, a JSON array of distinct {job_name, controller}: not DISTINCT here, which the collation
-- would fold by case) that job's cap, rows in flight, rate, starts of the last minute and when the rate next
-- has room on that controller, as the capped claim counts them, and the names its pauses were given (by job
-- key, per controller); the rows in flight on each of those controllers; every pause, all rows in flight, and
-- Jenkins's state.
-- decode: jobs json, controllers_in_flight json, pauses json, jenkins json, dispatchers json
WITH wanted AS (
    SELECT j.job_name, j.controller, UNHEX(SHA2(LOWER(j.job_name), 256)) AS job_key
    FROM JSON_TABLE(:wanted, '$[*]' COLUMNS (job_name VARCHAR(1024) PATH '$.job_name',
                                             controller VARCHAR(64) PATH '$.controller')) AS j
)
SELECT
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS total_in_flight,
    -- Whether any dispatcher is live at all: "the next pass takes it" is true only then.
    (SELECT count(*) FROM jenkins_dispatchers WHERE {{op_live_dispatcher}}) AS live_dispatchers,
    -- Every controller's rows in flight: its own max_in_flight counts them, and MAX_IN_FLIGHT those of the
    -- configured controllers only (claim_batch_capped), which the caller knows.
    (SELECT coalesce(JSON_OBJECTAGG(c.controller, c.n), JSON_OBJECT())
     FROM (SELECT controller, count(*) AS n FROM jenkins_jobs_queue WHERE status = 'processing'
           GROUP BY controller) AS c) AS controllers_in_flight,
    (SELECT coalesce(JSON_ARRAYAGG(JSON_OBJECT(
                'job_name', w.job_name, 'controller', w.controller,
                'cap', l.max_in_flight,
                'in_flight', (SELECT count(*) FROM jenkins_jobs_queue q
                              WHERE q.status = 'processing' AND q.job_name = w.job_name
                                AND UNHEX(SHA2(LOWER(q.job_name), 256)) = w.job_key AND q.controller = w.controller),
                'rate', l.per_minute,
                'started', (SELECT COUNT(*) FROM jenkins_job_starts s
                            WHERE l.per_minute IS NOT NULL AND s.controller = l.controller
                              AND s.job_key = l.job_key AND s.at > NOW(6) - INTERVAL 1 MINUTE),
                -- When the rate next has room: the rate-th latest start leaves the minute. (No OFFSET from a
                -- column here: the rate-th latest is the one with rate-1 later ones.)
                'next_start_seconds',
                (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), s.at + INTERVAL 1 MINUTE) / 1e6
                 FROM jenkins_job_starts s
                 WHERE l.per_minute IS NOT NULL AND s.controller = l.controller AND s.job_key = l.job_key
                   AND s.at > NOW(6) - INTERVAL 1 MINUTE
                   AND (SELECT COUNT(*) FROM jenkins_job_starts t
                        WHERE t.controller = s.controller AND t.job_key = s.job_key
                          AND (t.at > s.at OR (t.at = s.at AND t.id > s.id))) = l.per_minute - 1),
                'paused_as', (SELECT p.job_name FROM jenkins_job_pauses p
                              WHERE p.job_key = w.job_key AND p.controller IS NULL),
                -- Controller → the name the job's pause on that controller was given.
                'paused_on', (SELECT JSON_OBJECTAGG(p.controller, p.job_name)
                              FROM jenkins_job_pauses p
                              WHERE p.job_key = w.job_key AND p.controller IS NOT NULL))),
            JSON_ARRAY())
     FROM wanted w LEFT JOIN jenkins_job_limits l ON l.job_key = w.job_key AND l.controller = w.controller) AS jobs,
    -- Every pause, each with its controller (NULL: every controller's): each row is explained by its own
    -- controller's pauses and those of every controller (a small table: an operator's pauses).
    (SELECT coalesce(JSON_ARRAYAGG(JSON_OBJECT('job_name', job_name,
                                               'paused_at', DATE_FORMAT(paused_at, {{op_utc_text}}),
                                               'paused_by', paused_by, 'reason', reason,
                                               'controller', controller)), JSON_ARRAY())
     FROM jenkins_job_pauses) AS pauses,
    -- Jenkins as a whole, as the live dispatcher that asked it last found it.
    (SELECT JSON_OBJECT('since', DATE_FORMAT(w.since, {{op_utc_text}}), 'reason', w.reason)
     FROM ({{op_latest_word_on_jenkins}}) AS w) AS jenkins,
    -- Each controller as the live dispatchers recorded it (0012_dispatcher_controllers.sql), with the age of each
    -- one's last pass: the most recent word on a controller wins.
    (SELECT coalesce(JSON_ARRAYAGG(JSON_OBJECT(
                'id', id, 'live', true, 'controllers', JSON_EXTRACT(controllers, '$'),
                'last_pass_seconds', TIMESTAMPDIFF(MICROSECOND, last_pass_at, NOW(6)) / 1e6)), JSON_ARRAY())
     FROM jenkins_dispatchers WHERE controllers IS NOT NULL AND {{op_live_dispatcher}}) AS dispatchers;

-- name: in_flight_counts
-- Processing rows per job (by job key, under the first of its spellings): what the demo prints, and what the
-- concurrency and chaos tests sample to prove no cap is exceeded.
SELECT MIN(job_name) AS job_name, count(*) AS n FROM jenkins_jobs_queue WHERE status = 'processing'
GROUP BY open_job_key;

-- name: server_identity
-- `doctor`: who we are (the account, user@host) on which server, proving the session works.
SELECT CURRENT_USER() AS user_name, DATABASE() AS dbname, VERSION() AS server_version;

-- name: applied_migrations
-- `doctor`: the schema versions `migrate` recorded (the table is missing before the first migrate).
SELECT version, name FROM jenkins_dispatch_migrations ORDER BY version;

-- name: oldest_transaction
-- `doctor`: the oldest transaction open in another session of this database (one row; its columns null
-- when none): the session id (`KILL <pid>` ends it), its account, the program name it gave when connecting
-- (performance_schema, when enabled and readable for the session's account; else NULL), its state and age.
-- hidden_sessions: without PROCESS no transaction can be read at all; the other sessions we can list (our
-- own account's: other accounts' are not even listed) are counted as hidden then.
{{op_oldest_transaction}};
SELECT o.ID AS pid, o.USER AS user_name,
       (SELECT a.ATTR_VALUE FROM performance_schema.session_account_connect_attrs a
         WHERE a.PROCESSLIST_ID = o.ID AND a.ATTR_NAME = 'program_name') AS application_name,
       CASE WHEN o.ID IS NULL THEN NULL
            WHEN @jd_trx_state = 'LOCK WAIT' THEN 'waiting for a lock'
            WHEN o.COMMAND = 'Sleep' THEN 'idle in transaction'
            ELSE 'active' END AS state,
       CASE WHEN o.ID IS NOT NULL THEN @jd_trx_seconds END AS seconds,
       CASE WHEN {{op_may_see_transactions}} THEN 0
            ELSE (SELECT count(*) FROM information_schema.processlist
                  WHERE ID <> CONNECTION_ID() AND DB = DATABASE()) END AS hidden_sessions
FROM (SELECT 1 AS one) AS one
LEFT JOIN information_schema.processlist o ON o.ID = @jd_trx_session;

-- name: waiting_job_names
-- `doctor`: the distinct jobs of unfinished rows (by key, as the caps count them: names differing only in case
-- are one), those with the most rows first, each with its count, and how many there are in all. Counted from
-- the open-job index alone, then each job named by its oldest row. Ties go by the names' bytes, as
-- PostgreSQL's C collation orders them, so that both dialects check the same names.
SELECT q.job_name, k.waiting, k.job_names
FROM (SELECT open_job_key, count(*) AS waiting, min(id) AS named_by, count(*) OVER () AS job_names
      FROM jenkins_jobs_queue WHERE open_job_key IS NOT NULL GROUP BY open_job_key) k
JOIN jenkins_jobs_queue q ON q.id = k.named_by
ORDER BY k.waiting DESC, q.job_name COLLATE utf8mb4_bin LIMIT :limit;

-- ---------------------------------------------------------------------------- dispatcher heartbeats
-- One row per dispatcher; a tiny table, read whole.

-- name: record_heartbeat
-- After each pass: upsert the dispatcher's row, and drop rows not seen for a day. The Jenkins state is
-- changed only by a pass that asked Jenkins (:jenkins_ok NULL: not asked, keep what is known); an outage
-- keeps its first "since" until Jenkins answers again. The update's assignments read the row's old values:
-- none of them reads a column an earlier one changed (MySQL applies them left to right). :controllers (JSON,
-- 0012_dispatcher_controllers.sql): the controllers it serves and each one's breaker; NULL keeps what is known.
DELETE FROM jenkins_dispatchers WHERE last_pass_at < NOW(6) - INTERVAL 1 DAY AND id <> :id;
INSERT INTO jenkins_dispatchers (id, kind, host, pid, started_at, stale_after_seconds, last_pass_at,
                                 last_outcome, last_detail, passes, jenkins_checked_at,
                                 jenkins_unavailable_since, jenkins_reason, controllers)
VALUES (:id, :kind, :host, :pid, :started_at, :stale_after_seconds, NOW(6), :outcome, :detail, :passes,
        CASE WHEN :jenkins_ok IS NOT NULL THEN NOW(6) END,
        CASE WHEN NOT :jenkins_ok THEN NOW(6) END,
        CASE WHEN NOT :jenkins_ok THEN :jenkins_reason END,
        :controllers)
ON DUPLICATE KEY UPDATE
    kind = VALUES(kind), host = VALUES(host), pid = VALUES(pid), started_at = VALUES(started_at),
    controllers = coalesce(VALUES(controllers), controllers),
    stale_after_seconds = VALUES(stale_after_seconds), last_pass_at = NOW(6),
    last_outcome = VALUES(last_outcome), last_detail = VALUES(last_detail), passes = VALUES(passes),
    jenkins_checked_at = coalesce(VALUES(jenkins_checked_at), jenkins_checked_at),
    jenkins_unavailable_since = CASE
        WHEN :jenkins_ok IS NULL THEN jenkins_unavailable_since
        WHEN :jenkins_ok THEN NULL
        ELSE coalesce(jenkins_unavailable_since, NOW(6)) END,
    jenkins_reason = CASE
        WHEN :jenkins_ok IS NULL THEN jenkins_reason
        WHEN :jenkins_ok THEN NULL
        ELSE :jenkins_reason END;

-- fragment: op_live_dispatcher
-- A dispatcher is live while it passed within its own window and did not say it stopped.
(TIMESTAMPDIFF(MICROSECOND, last_pass_at, NOW(6)) < stale_after_seconds * 1e6 AND last_outcome <> 'stopped')

-- name: dispatchers
-- Every dispatcher seen in the last day, the most recent pass first.
-- decode: live bool, controllers json
SELECT id, kind, host, pid, started_at, last_pass_at,
       TIMESTAMPDIFF(MICROSECOND, last_pass_at, NOW(6)) / 1e6 AS last_pass_seconds,
       {{op_live_dispatcher}} AS live,
       last_outcome, last_detail, passes, jenkins_unavailable_since, jenkins_reason, controllers
FROM jenkins_dispatchers
WHERE last_pass_at > NOW(6) - INTERVAL 1 DAY
ORDER BY last_pass_at DESC, id;

-- fragment: op_latest_word_on_jenkins
-- The latest word about Jenkins among live dispatchers: the one that asked Jenkins last.
SELECT id AS dispatcher_id, jenkins_unavailable_since AS since, jenkins_reason AS reason,
       jenkins_checked_at AS checked_at
FROM jenkins_dispatchers
WHERE jenkins_checked_at IS NOT NULL AND {{op_live_dispatcher}}
ORDER BY jenkins_checked_at DESC, id
LIMIT 1

-- name: jenkins_outage
{{op_latest_word_on_jenkins}};

-- ============================================================================ the migration runner
-- DDL commits implicitly on MySQL: `migrate` runs without a wrapping transaction, each migration file being
-- safe to run again after a failure part-way through. Concurrent runs are serialised by a named lock of
-- the session (not of a transaction), taken before anything else; the runner ends the session in a finally,
-- which releases it (RELEASE_LOCK would be a MySQL-only statement, and could itself fail).

-- name: lock_migrations
-- 1 once this session holds the lock; 0 after waiting 60 s for another `migrate` (NULL on an error).
-- First, MariaDB's per-session statement time limit (session.py sets it) is lifted for the rest of the
-- session: it would cut the wait short, or stop an ALTER of a large seed table half-way. MySQL's
-- own limit covers SELECTs only and it has no such variable, so the SET is prepared from text on MariaDB only.
SET @jd_sql = IF(VERSION() LIKE '%MariaDB%',
                 'SET SESSION max_statement_time = 0', 'DO 0');
PREPARE jd_sql FROM @jd_sql;
EXECUTE jd_sql;
DEALLOCATE PREPARE jd_sql;
-- The lock is named after the database (GET_LOCK names are server-wide, at most 64 characters): migrations of
-- other databases on the same server do not wait for this one.
SELECT GET_LOCK(CONCAT('jenkins-dispatch-migrate:', LEFT(DATABASE(), 38)), 60) AS locked;

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS jenkins_dispatch_migrations (
    version    INT NOT NULL PRIMARY KEY,
    name       VARCHAR(255) NOT NULL,
    applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- name: migration_versions
SELECT version FROM jenkins_dispatch_migrations;

-- name: record_migration
INSERT INTO jenkins_dispatch_migrations (version, name) VALUES (:version, :name);

-- ============================================================================ the cutover
-- From the worker that ran before jenkins-dispatch, while it still runs (migrations/0005_cutover.sql,
-- docs/cutover.md).

-- name: set_cutover_window
-- The migration runner, before the files: how long the old worker's results for the jobs it holds still count
-- (CUTOVER_WINDOW_SECONDS), read by 0005_cutover.sql. A variable of the runner's session, which it ends.
SET @jd_cutover_window_seconds = :seconds;

-- name: cutover_window
-- `doctor`: the window (no row: the table was never upgraded while the old worker held jobs) and the jobs the old
-- worker still holds.
SELECT c.upgraded_at, c.window_seconds, c.window_ends_at,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), c.window_ends_at) / 1e6 AS seconds_left,
       (SELECT COUNT(*) FROM jenkins_jobs_queue q
         WHERE q.status = 'processing' AND q.dispatch_id LIKE 'legacy-%') AS held
FROM jenkins_dispatch_cutover c;

-- ============================================================================ schedules
-- PostgreSQL's comments say what each statement is for. Names compare ignoring case through the column's
-- collation; times are UTC DATETIME(6), handed in as aware datetimes (the session converts them).

-- name: database_now
SELECT NOW(6) AS now;

-- name: add_schedule
-- The name is the primary key: a second add of it inserts nothing (its row count says so). Not INSERT IGNORE,
-- which would also turn a broken CHECK into a warning.
SET @jd_changed = 0;
INSERT INTO jenkins_job_schedules (name, job_name, parameters, cron, timezone, priority, controller, next_tick,
                                   no_overlap)
SELECT :name, :job_name, :parameters, :cron, :timezone, :priority, :controller, :next_tick, :no_overlap FROM DUAL
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
       s.skipped_ticks, s.last_skipped_tick
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
INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, controller)
SELECT s.job_name, s.parameters, s.priority, :tick, s.controller FROM jenkins_job_schedules s
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

-- name: stats_per_bucket
-- Bucket starts as seconds since 1970 counted from the DATETIME itself (as 0009_job_stats.sql buckets them). Per row
-- (the week reads about 8,000): TO_SECONDS, plain integer arithmetic, rather than TIMESTAMPDIFF from a date given
-- as text (62167219200 is TO_SECONDS('1970-01-01')); sums as DOUBLE (exact to 2^53) rather than MariaDB's DECIMAL
-- sums of BIGINTs. Together they take a week's read from about 4.8 to 2.6 ms (1M finished rows, bench_ui.py's
-- aggregates, MariaDB 10.11).
SELECT (TO_SECONDS(bucket_start) - 62167219200) DIV :bucket * :bucket AS bucket_epoch,
       SUM(CAST(completed AS DOUBLE)) AS completed, SUM(CAST(failed AS DOUBLE)) AS failed,
       SUM(CAST(cancelled AS DOUBLE)) AS cancelled, SUM(CAST(started AS DOUBLE)) AS started
FROM jenkins_job_stats
WHERE bucket_start >= '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', NOW(6)) DIV :bucket * :bucket - :window + :bucket) SECOND
GROUP BY 1
ORDER BY 1;

-- name: depth_per_bucket
-- Bucket starts as in stats_per_bucket.
SELECT (TO_SECONDS(bucket_start) - 62167219200) DIV :bucket * :bucket AS bucket_epoch,
       MAX(pending_max) AS pending, MAX(processing_max) AS processing
FROM jenkins_queue_depth
WHERE bucket_start >= '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', NOW(6)) DIV :bucket * :bucket - :window + :bucket) SECOND
GROUP BY 1
ORDER BY 1;

-- name: timing_bins
-- DOUBLE sums, as in stats_per_bucket.
SELECT metric, bin, SUM(CAST(n AS DOUBLE)) AS n
FROM jenkins_job_stat_bins
WHERE metric IN ('wait', 'build')
  AND bucket_start >= '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', NOW(6)) DIV 3600 * 3600 - :window + 3600) SECOND
GROUP BY metric, bin
ORDER BY metric, bin;

-- name: recent_timings
-- As PostgreSQL's. Grouped by the name's bytes (the column's collation ignores case; the page shows each spelling
-- as its own job, as PostgreSQL does); durations as DOUBLE (/ 1e6) so JSON_ARRAYAGG writes plain numbers.
-- decode: waits json, builds json
SELECT MIN(job_name) AS job_name, COUNT(*) AS finished,
       JSON_ARRAYAGG(wait_seconds) AS waits, JSON_ARRAYAGG(build_seconds) AS builds
FROM (
    SELECT job_name,
           TIMESTAMPDIFF(MICROSECOND, created_at, started_at) / 1e6 AS wait_seconds,
           TIMESTAMPDIFF(MICROSECOND, started_at, finished_at) / 1e6 AS build_seconds
    FROM jenkins_jobs_queue
    WHERE finished_at IS NOT NULL
    ORDER BY finished_at DESC
    LIMIT :limit
) recent
GROUP BY CAST(job_name AS BINARY);

-- Pruning (the pruner duty)
-- ---------------------------------------------------------------------------------------------------------------
-- PostgreSQL's take_duty and duty_done (dispatching/duties/pruner.py; 0018_duties.sql). The UPDATE is the
-- compare-and-set: of several dispatchers racing, the first wins; the others wait for its row lock, find due_at
-- moved on and update nothing.

-- name: take_duty
UPDATE jenkins_dispatch_duties
SET holder = :holder, due_at = NOW(6) + INTERVAL CAST(:hold_seconds * 1000000 AS SIGNED) MICROSECOND,
    updated_at = NOW(6)
WHERE name = :duty AND (due_at <= NOW(6) OR holder = :holder);
SET @jd_taken = ROW_COUNT();
SELECT @jd_taken > 0 AS taken,
       (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), d.due_at) / 1000000.0
        FROM jenkins_dispatch_duties d WHERE d.name = :duty) AS due_in_seconds;

-- name: duty_done
UPDATE jenkins_dispatch_duties
SET holder = NULL, due_at = NOW(6) + INTERVAL CAST(:every_seconds * 1000000 AS SIGNED) MICROSECOND,
    updated_at = NOW(6)
WHERE name = :duty AND holder = :holder;
SET @jd_changed = ROW_COUNT();
SELECT name FROM jenkins_dispatch_duties WHERE name = :duty AND @jd_changed > 0;
