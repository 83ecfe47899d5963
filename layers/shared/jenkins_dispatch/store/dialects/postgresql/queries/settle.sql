-- A dispatch's transitions after its claim, each fenced on (id, dispatch_id, status = 'processing'): triggered,
-- progress, settled, backed off, released; and the rows a notification or a dispatch id names. Run by the
-- dispatcher's store, the webhook's (store/webhook.py) and what both share (store/outcomes.py).

-- name: mark_triggered
-- Jenkins accepted the trigger (or the reconciler adopted what it found): remember the queue item.
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET jenkins_queue_id = :queue_id,
        build_number = coalesce(CAST(:build_number AS integer), build_number),
        build_url = coalesce(CAST(:build_url AS text), build_url),
        lease_expires_at = now() + make_interval(secs => :lease_seconds),
        updated_at = now()
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing'
    RETURNING id, dispatch_id
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, :event, 'processing', 'processing', dispatch_id, :actor, :detail FROM changed
)
SELECT id FROM changed;

-- name: mark_triggered_many
-- mark_triggered for a whole batch in one statement: the dispatcher records every accepted trigger of
-- a batch at once. Each row is still fenced on its own (id, dispatch_id).
WITH accepted AS (
    SELECT * FROM jsonb_to_recordset(CAST(:accepted AS jsonb))
        AS a(id bigint, dispatch_id text, queue_id bigint, detail text)
), changed AS (
    UPDATE jenkins_jobs_queue q
    SET jenkins_queue_id = a.queue_id,
        lease_expires_at = now() + make_interval(secs => :lease_seconds),
        updated_at = now()
    FROM accepted a
    -- The status test is written so that no partial index matches it: the rows are then fetched by
    -- primary key, whatever the (often stale) statistics say about how many rows are processing.
    WHERE q.id = a.id AND q.dispatch_id = a.dispatch_id AND q.status || '' = 'processing'
    RETURNING q.id, q.dispatch_id, a.detail, q.cancel_requested_at IS NOT NULL AS cancel_requested
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'triggered', 'processing', 'processing', dispatch_id, :actor, detail FROM changed
)
SELECT id, cancel_requested FROM changed;

-- name: record_progress
-- A build was seen queued or started (webhook or reconciler). Changes (and logs) only what is new,
-- so duplicates and out-of-order phases leave no trace. The webhook also passes the job the notification
-- names (:job_path, folders included, or only its leaf :job_leaf; NULL: not checked): a downstream build
-- that inherited the DISPATCH_ID names another job and changes nothing. Item names compare as Jenkins
-- finds items, whatever their case (ASCII only, the same in notifications.names_job).
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET build_number = coalesce(CAST(:build_number AS integer), build_number),
        build_url = CASE WHEN build_url IS NULL OR CAST(:build_url AS text) LIKE 'http%'
                         THEN coalesce(CAST(:build_url AS text), build_url) ELSE build_url END,
        jenkins_queue_id = coalesce(jenkins_queue_id, CAST(:queue_id AS bigint)),
        started_at = CASE WHEN started_at IS NULL AND CAST(:started AS boolean) THEN now() ELSE started_at END,
        updated_at = now()
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing'
      AND ((CAST(:build_number AS integer) IS NOT NULL AND build_number IS DISTINCT FROM CAST(:build_number AS integer))
        OR (CAST(:build_url AS text) IS NOT NULL AND build_url IS DISTINCT FROM CAST(:build_url AS text)
            AND (build_url IS NULL OR CAST(:build_url AS text) LIKE 'http%'))
        OR (CAST(:queue_id AS bigint) IS NOT NULL AND jenkins_queue_id IS NULL)
        OR (started_at IS NULL AND CAST(:started AS boolean)))
      AND (CAST(:job_path AS text) IS NULL OR lower(job_name COLLATE "C") = lower(CAST(:job_path AS text) COLLATE "C"))
      AND (CAST(:job_leaf AS text) IS NULL
           OR lower(substring(job_name FROM '[^/]*$') COLLATE "C") = lower(CAST(:job_leaf AS text) COLLATE "C"))
      -- :only_build (the webhook): once the row knows its build, another build of the same dispatch (a late
      -- duplicate, stopped by the Pipeline guard) changes nothing.
      AND (CAST(:only_build AS integer) IS NULL OR build_number IS NULL OR build_number = CAST(:only_build AS integer))
    RETURNING id, dispatch_id, build_number
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, :event, 'processing', 'processing', dispatch_id, :actor,
           coalesce(:detail, 'build #' || build_number) FROM changed
)
SELECT id FROM changed;

-- name: settle
-- The row reaches a final state: completed / failed / cancelled, with Jenkins's result if known.
-- :job_path / :job_leaf as in record_progress (the webhook's check that the build is the dispatched job's).
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET status = :status,
        jenkins_result = coalesce(CAST(:result AS text), jenkins_result),
        build_number = coalesce(CAST(:build_number AS integer), build_number),
        build_url = CASE WHEN build_url IS NULL OR CAST(:build_url AS text) LIKE 'http%'
                         THEN coalesce(CAST(:build_url AS text), build_url) ELSE build_url END,
        last_error = CAST(:error AS text),
        lease_expires_at = NULL,
        finished_at = now(),
        updated_at = now()
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing'
      AND (CAST(:job_path AS text) IS NULL OR lower(job_name COLLATE "C") = lower(CAST(:job_path AS text) COLLATE "C"))
      AND (CAST(:job_leaf AS text) IS NULL
           OR lower(substring(job_name FROM '[^/]*$') COLLATE "C") = lower(CAST(:job_leaf AS text) COLLATE "C"))
      AND (CAST(:only_build AS integer) IS NULL OR build_number IS NULL OR build_number = CAST(:only_build AS integer))
    RETURNING id, dispatch_id, status, finished_at
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'settled', 'processing', status, dispatch_id, :actor,
           concat_ws(': ', CAST(:result AS text), CAST(:error AS text)) FROM changed
)
-- Besides the id, the row's queue wait (from the moment it last became pending, by an insert or an operator's retry,
-- to the first trigger Jenkins accepted after that: `triggered`, or `adopted` by the reconciler) and its build's
-- duration (from the settling dispatch's `started` to the settle), read from its history (jenkins_job_events_job_idx)
-- in the same round trip, for `serve`'s histograms; NULL where the history does not tell. The settle's own event is
-- not visible here (same statement), nor needed.
SELECT c.id,
       extract(epoch FROM (
           SELECT t.at FROM jenkins_job_events t
           WHERE t.job_id = c.id AND t.event IN ('triggered', 'adopted') AND t.id > p.id
           ORDER BY t.id LIMIT 1) - p.at) AS queue_wait_seconds,
       extract(epoch FROM c.finished_at - (
           SELECT s.at FROM jenkins_job_events s
           WHERE s.job_id = c.id AND s.event = 'started' AND s.dispatch_id = c.dispatch_id
             AND s.id > coalesce(p.id, 0)
           ORDER BY s.id LIMIT 1)) AS build_seconds
FROM changed c
LEFT JOIN LATERAL (
    SELECT b.id, b.at FROM jenkins_job_events b
    WHERE b.job_id = c.id AND b.event IN ('enqueued', 'retried')
    ORDER BY b.id DESC LIMIT 1
) p ON true;

-- name: settle_many
-- settle for several rows in one statement (a batch of outcomes), each fenced on its own.
WITH outcome AS (
    SELECT * FROM jsonb_to_recordset(CAST(:outcomes AS jsonb))
        AS o(id bigint, dispatch_id text, status text, result text, error text)
), changed AS (
    UPDATE jenkins_jobs_queue q
    SET status = o.status,
        jenkins_result = coalesce(o.result, q.jenkins_result),
        last_error = o.error,
        lease_expires_at = NULL,
        finished_at = now(),
        updated_at = now()
    FROM outcome o
    -- The status test is written so that no partial index matches it: the rows are then fetched by
    -- primary key, whatever the (often stale) statistics say about how many rows are processing.
    WHERE q.id = o.id AND q.dispatch_id = o.dispatch_id AND q.status || '' = 'processing'
      AND o.status IN ('completed', 'failed', 'cancelled')
    RETURNING q.id, q.dispatch_id, q.status, o.result, o.error
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'settled', 'processing', status, dispatch_id, :actor, concat_ws(': ', result, error) FROM changed
)
SELECT id FROM changed;

-- name: retry_later
-- A transient error about this one job: try again after a backoff, or fail once attempts are spent. A row
-- an operator asked to cancel while its trigger was in flight ends cancelled: Jenkins did not take it.
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
                      WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
        scheduled_at = CASE WHEN cancel_requested_at IS NOT NULL OR attempts >= max_attempts THEN scheduled_at
                            ELSE now() + make_interval(secs => :delay_seconds) END,
        finished_at = CASE WHEN cancel_requested_at IS NOT NULL OR attempts >= max_attempts THEN now() END,
        last_error = CASE WHEN cancel_requested_at IS NOT NULL
                          THEN 'cancelled by operator before Jenkins took its trigger (' || :error || ')'
                          WHEN attempts >= max_attempts
                          THEN 'gave up after ' || attempts || ' attempts: ' || :error ELSE :error END,
        lease_expires_at = NULL,
        jenkins_queue_id = NULL,
        updated_at = now()
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND lease_expires_at > now()
    RETURNING id, dispatch_id, status, scheduled_at
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, CASE WHEN status = 'pending' THEN 'retry_scheduled' ELSE 'settled' END, 'processing', status,
           dispatch_id, :actor,
           CASE WHEN status = 'failed' THEN 'attempts exhausted: ' || :error
                WHEN status = 'cancelled' THEN 'cancel requested; Jenkins did not take the trigger: ' || :error
                ELSE :error || '; next try not before '
                     || to_char(scheduled_at AT TIME ZONE 'UTC', 'HH24:MI:SS') || ' UTC' END
    FROM changed
)
SELECT id, status FROM changed;

-- name: release
-- Back to pending without spending an attempt: the trigger was never sent. The reason goes into the
-- history and last_error (why the row is pending again). A row an operator asked to cancel while its
-- trigger was on its way ends cancelled instead: nothing of it reached Jenkins.
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled' ELSE 'pending' END,
        attempts = greatest(attempts - 1, 0), lease_expires_at = NULL,
        finished_at = CASE WHEN cancel_requested_at IS NOT NULL THEN now() END,
        last_error = CASE WHEN cancel_requested_at IS NOT NULL
                          THEN 'cancelled by operator before its trigger was sent (' || CAST(:reason AS text) || ')'
                          ELSE CAST(:reason AS text) END,
        updated_at = now()
    -- Only while our lease lasts: once it has expired a reconciler may own the row and be sending it
    -- again under this dispatch_id; releasing it then would let a new claim send it a second time.
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND jenkins_queue_id IS NULL
      AND lease_expires_at > now()
    RETURNING id, dispatch_id, status
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, CASE WHEN status = 'cancelled' THEN 'settled' ELSE 'released' END, 'processing', status,
           dispatch_id, :actor,
           CASE WHEN status = 'cancelled' THEN 'cancel requested; its trigger was never sent: ' || :reason
                ELSE :reason END
    FROM changed
)
SELECT id FROM changed;

-- name: get_job_by_dispatch_id
SELECT id, job_name, status, dispatch_id, jenkins_queue_id, build_number, jenkins_result, controller
FROM jenkins_jobs_queue WHERE dispatch_id = :dispatch_id;

-- name: get_job_by_queue_id
-- The webhook's fallback: Jenkins queue ids are only unique per job and may be reused after a crash. Jenkins
-- names the job as it spells it, the row as it was enqueued: compared by job key.
SELECT id, job_name, status, dispatch_id, jenkins_queue_id, build_number, jenkins_result, controller
FROM jenkins_jobs_queue WHERE jenkins_queue_id = :queue_id AND lower(job_name) = lower(CAST(:job_name AS text))
ORDER BY (status = 'processing') DESC, id DESC LIMIT 1;

-- name: was_dispatched
-- Did this dispatch_id ever belong to a claim? Tells a stale notification from an unknown one.
SELECT job_id FROM jenkins_job_events WHERE event = 'claimed' AND dispatch_id = :dispatch_id LIMIT 1;
