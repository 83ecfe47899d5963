-- Every statement jenkins-dispatch runs on MySQL 8.0 and MariaDB 10.6+, in one place: the same names and
-- parameters as sql/postgresql/queries.sql, whose comments say what each statement is for; the comments
-- here say how each is done without PostgreSQL's means.
--
-- Each block starts with "-- name: NAME" and is run under that name by queue.py (the migration runner's by
-- migrations.py); "-- fragment: NAME" blocks are shared text, included as {{NAME}} (statements.py). A block
-- may hold several statements: store/mysql.py sends the whole block in ONE round trip, inside one
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
INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, max_attempts, dedupe_key)
VALUES (:job_name, :parameters, :priority, COALESCE({{t_iso_utc}}, NOW(6)), :max_attempts, :dedupe_key)
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id) + 0 * (@jd_created := 0);
-- read before the history row's insert, which sets LAST_INSERT_ID() anew
SET @jd_id = LAST_INSERT_ID();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, actor, detail)
SELECT id, 'enqueued', NULL, 'pending', :actor,
       CASE WHEN scheduled_at > NOW(6) THEN CONCAT('not before ', DATE_FORMAT(scheduled_at, '%Y-%m-%d %H:%i:%s'), ' UTC') END
FROM jenkins_jobs_queue WHERE id = @jd_id AND @jd_created = 1;
SELECT @jd_id AS id, @jd_created AS created;

-- name: find_open_by_dedupe_key
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
-- Processing rows of the job of limit l: the collation's equality finds them through the index, the key
-- makes it exact.
(SELECT COUNT(*) FROM jenkins_jobs_queue f
 WHERE f.status = 'processing' AND f.job_name = l.job_name AND UNHEX(SHA2(LOWER(f.job_name), 256)) = l.job_key)

-- fragment: claim_not_paused
AND {{t_job_key}} NOT IN (SELECT p.job_key FROM jenkins_job_pauses p)
AND NOT EXISTS (SELECT 1 FROM jenkins_job_pauses p WHERE p.job_name = '*')

-- fragment: claim_take
-- The rows collected in @jd_claimed become processing with a fresh dispatch_id and a lease; each gets its
-- history row; they are returned in the seed's order (parameters as the text they were written in).
UPDATE jenkins_jobs_queue q
JOIN JSON_TABLE(COALESCE(@jd_claimed, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) c ON q.id = c.id
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
SET @jd_claimed = NULL;
{{claim_paused_lock}};
SELECT JSON_ARRAYAGG(picked.id) INTO @jd_claimed FROM (
    SELECT q.id FROM jenkins_jobs_queue q
    WHERE q.status = 'pending' AND q.scheduled_at <= NOW(6)
      -- A cap set while this dispatcher's pass runs uncapped: leave that job to the capped claim.
      AND {{t_job_key}} NOT IN (SELECT l.job_key FROM jenkins_job_limits l)
      {{claim_not_paused}}
    ORDER BY q.claim_priority, q.scheduled_at, q.id
    LIMIT :batch_size
    FOR UPDATE SKIP LOCKED
) picked;
{{claim_take}};

-- name: lock_caps
-- Capped claims run one at a time (until the caller's transaction ends), each seeing every earlier claim
-- committed: the in-flight counts it reads next are then exact.
SELECT name FROM jenkins_dispatch_locks WHERE name = 'caps' FOR UPDATE;

-- name: claim_batch_capped
-- As claim_batch, but never lets the processing rows of a job_name exceed its jenkins_job_limits entry, nor
-- all processing rows exceed :max_in_flight (NULL: no global cap). Run after lock_caps, in its transaction;
-- it takes the caps lock itself too (again: a no-op in that transaction), so that run alone it is one
-- round trip, and as exact.
-- A LIMIT must be a constant here: the locking read takes at most :batch_size rows of jobs with room left,
-- in order, and the first (global room) of them, each job's first (its room), are claimed, as on
-- PostgreSQL. The others stay locked only until this transaction commits.
SET @jd_claimed = NULL, @jd_room = NULL;
SELECT name FROM jenkins_dispatch_locks WHERE name = 'caps' FOR UPDATE;
{{claim_paused_lock}};
SELECT CASE WHEN :max_in_flight IS NULL THEN :batch_size
            ELSE LEAST(:batch_size, GREATEST(:max_in_flight - COUNT(*), 0)) END
INTO @jd_room
FROM jenkins_jobs_queue WHERE status = 'processing';
SELECT JSON_ARRAYAGG(ranked.id) INTO @jd_claimed FROM (
    SELECT picked.id, picked.job_key,
           ROW_NUMBER() OVER (ORDER BY picked.claim_priority, picked.scheduled_at, picked.id) AS nth_of_all,
           ROW_NUMBER() OVER (PARTITION BY picked.job_key
                              ORDER BY picked.claim_priority, picked.scheduled_at, picked.id) AS nth_of_job
    FROM (
        SELECT q.id, {{t_job_key}} AS job_key, q.claim_priority, q.scheduled_at FROM jenkins_jobs_queue q
        WHERE q.status = 'pending' AND q.scheduled_at <= NOW(6)
          AND {{t_job_key}} NOT IN (
              SELECT l.job_key FROM jenkins_job_limits l WHERE l.max_in_flight <= {{claim_in_flight}})
          {{claim_not_paused}}
        ORDER BY q.claim_priority, q.scheduled_at, q.id
        LIMIT :batch_size
        FOR UPDATE SKIP LOCKED
    ) picked
) ranked
LEFT JOIN jenkins_job_limits l ON l.job_key = ranked.job_key
WHERE ranked.nth_of_all <= @jd_room
  AND (l.job_key IS NULL OR ranked.nth_of_job <= l.max_in_flight - {{claim_in_flight}});
{{claim_take}};

-- name: pause_job
-- decode: created bool
-- Counts the job's pending rows first (no lock), then takes the pause lock exclusively: it waits for every
-- claim that holds it shared (those that read the pauses before this one) to commit, and claims that come
-- later wait for this block to commit, then see the pause. Pauses are written only under this lock, so the
-- insert below cannot race another pause_job. A job already paused keeps its pause (created false).
SET @jd_pending = NULL, @jd_created = 0, @jd_key = UNHEX(SHA2(LOWER(:job_name), 256));
SELECT COUNT(*) INTO @jd_pending FROM jenkins_jobs_queue q
WHERE q.status = 'pending' AND ((q.job_name = :job_name AND {{t_job_key}} = @jd_key) OR :job_name = '*');
SELECT name FROM jenkins_dispatch_locks WHERE name = 'pauses' FOR UPDATE;
INSERT INTO jenkins_job_pauses (job_name, paused_by, reason)
SELECT :job_name, :paused_by, :reason FROM DUAL
WHERE NOT EXISTS (SELECT 1 FROM jenkins_job_pauses WHERE job_key = @jd_key);
SET @jd_created = ROW_COUNT();
SELECT job_name, paused_at, paused_by, reason, @jd_created > 0 AS created, @jd_pending AS pending
FROM jenkins_job_pauses WHERE job_key = @jd_key;

-- name: resume_job
-- Needs no lock: a claim that misses the resume only leaves the job for the next one (the dispatcher polls).
SET @jd_pending = NULL, @jd_resumed = 0, @jd_key = UNHEX(SHA2(LOWER(:job_name), 256));
SELECT COUNT(*) INTO @jd_pending FROM jenkins_jobs_queue q
WHERE q.status = 'pending' AND ((q.job_name = :job_name AND {{t_job_key}} = @jd_key) OR :job_name = '*');
DELETE FROM jenkins_job_pauses WHERE job_key = @jd_key;
SET @jd_resumed = ROW_COUNT();
SELECT @jd_resumed AS resumed, @jd_pending AS pending;

-- name: list_pauses
SELECT job_name, paused_at, paused_by, reason FROM jenkins_job_pauses ORDER BY job_name = '*' DESC, job_name;

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
SELECT JSON_ARRAYAGG(q.id) INTO @jd_taken
FROM {{t_accepted}}
JOIN jenkins_jobs_queue q ON q.id = a.id AND q.dispatch_id = a.dispatch_id
WHERE q.status = 'processing'
FOR UPDATE;
UPDATE jenkins_jobs_queue q
JOIN {{t_taken}} ON q.id = t.id
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
SELECT :id AS id FROM DUAL WHERE @jd_changed > 0;

-- fragment: t_outcomes
JSON_TABLE(:outcomes, '$[*]' COLUMNS (
    id BIGINT PATH '$.id', dispatch_id VARCHAR(64) PATH '$.dispatch_id', status VARCHAR(16) PATH '$.status',
    result VARCHAR(16) PATH '$.result', error TEXT PATH '$.error')) o

-- name: settle_many
-- settle for several rows in one round trip, each fenced on its own (collected, locked, first).
SET @jd_taken = NULL;
SELECT JSON_ARRAYAGG(q.id) INTO @jd_taken
FROM {{t_outcomes}}
JOIN jenkins_jobs_queue q ON q.id = o.id AND q.dispatch_id = o.dispatch_id
WHERE q.status = 'processing' AND o.status IN ('completed', 'failed', 'cancelled')
FOR UPDATE;
UPDATE jenkins_jobs_queue q
JOIN {{t_taken}} ON q.id = t.id
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
    SELECT id FROM jenkins_jobs_queue
    WHERE status = 'processing' AND lease_expires_at <= NOW(6)
    ORDER BY lease_expires_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
) picked;
UPDATE jenkins_jobs_queue q JOIN {{t_taken}} ON q.id = t.id
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

-- name: recently_finished_resends
-- Rows that were re-sent and became final within :window seconds (reads the finished_at index).
SELECT id, job_name, dispatch_id FROM jenkins_jobs_queue
WHERE finished_at > NOW(6) - INTERVAL ROUND(:window * 1000000) MICROSECOND AND resends > 0;

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
