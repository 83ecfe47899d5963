-- A dispatch's transitions after its claim, each fenced on (id, dispatch_id, status = 'processing'): triggered,
-- progress, settled, backed off, released; and the rows a notification or a dispatch id names. Run by the
-- dispatcher's store, the webhook's (store/webhook.py) and what both share (store/outcomes.py).
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.

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
