-- Every statement jenkins-dispatch runs on PostgreSQL, in one place.
--
-- Each block starts with "-- name: NAME" and is run under that name by queue.py (the migration runner's by
-- migrations.py). "-- fragment: NAME" blocks are text several statements share, included as {{NAME}};
-- {{lock:NAME}} is the advisory-lock key declared below. statements.py documents the format.
--
-- Advisory-lock keys (transaction-scoped), written here only. 0004_pauses.sql, applied history, spells
-- the pauses key out in jenkins_dispatch_paused_jobs() (tests/unit/test_statements.py holds the two equal).
-- lock: caps = 4206101977
--   capped claims run one at a time (lock_caps)
-- lock: migrations = 4206101978
--   `migrate` runs one at a time (lock_migrations)
-- lock: pauses = 4206101979
--   taken exclusively by pause_job, shared by every claim (through jenkins_dispatch_paused_jobs())
--
-- Rules every statement here follows:
--   * one round trip per transition; the job_events row is written by the same statement
--     (a data-modifying CTE), so history can never disagree with the row;
--   * every transition out of 'processing' is fenced on (id, dispatch_id, status = 'processing'):
--     a stale worker, or a late callback from an earlier attempt, changes nothing;
--   * a final row (completed, failed, cancelled) is never touched again except by the operator's retry;
--   * a build URL is never downgraded: a relative one (Jenkins without a root URL, as notifications send
--     it) is kept only while no absolute one (from Jenkins's API) is known;
--   * job names compare as Jenkins finds items, whatever their case: caps, pauses and in-flight counts key on
--     lower(job_name) (the job key; 0007_job_name_case_and_schedule_bound.sql indexes it).

-- name: enqueue
-- A second enqueue with the same dedupe_key while one is unfinished returns the existing id.
WITH inserted AS (
    INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, max_attempts, dedupe_key, controller)
    VALUES (:job_name, CAST(:parameters AS jsonb), :priority,
            coalesce(CAST(:scheduled_at AS timestamptz), now()), :max_attempts, :dedupe_key, :controller)
    ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'processing')
    DO NOTHING
    RETURNING id, scheduled_at
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, actor, detail)
    SELECT id, 'enqueued', NULL, 'pending', :actor,
           CASE WHEN scheduled_at > now() THEN 'not before ' || to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC' END
    FROM inserted
)
SELECT id, true AS created FROM inserted
UNION ALL
SELECT id, false AS created FROM jenkins_jobs_queue
WHERE dedupe_key = :dedupe_key AND status IN ('pending', 'processing') AND NOT EXISTS (SELECT 1 FROM inserted);

-- name: find_open_by_dedupe_key
SELECT id FROM jenkins_jobs_queue
WHERE dedupe_key = :dedupe_key AND status IN ('pending', 'processing');

-- fragment: paused
-- Paused jobs are read through jenkins_dispatch_paused_jobs(controller) (0014_controller_pauses.sql), which
-- orders a claim against any pause: nothing of a paused job is claimed once its pause has committed. By job
-- key; the pauses of the claim's controller (:controller) and those of every controller ('*': everything).
paused AS MATERIALIZED (
    SELECT lower(job_name) AS job_key FROM jenkins_dispatch_paused_jobs(CAST(:controller AS text)) AS p(job_name)
)

-- fragment: not_paused
AND lower(q.job_name) NOT IN (SELECT p.job_key FROM paused p)
      AND NOT EXISTS (SELECT 1 FROM paused p WHERE p.job_key = '*')

-- fragment: claim_update
-- The start of every claim's "claimed" CTE: the rows it picked become processing; its WHERE follows.
UPDATE jenkins_jobs_queue q
    SET status = 'processing',
        attempts = q.attempts + 1,
        dispatch_id = 'jd-' || q.id || '-' || substr(md5(gen_random_uuid()::text), 1, 10),
        lease_expires_at = now() + make_interval(secs => :lease_seconds),
        jenkins_queue_id = NULL, build_number = NULL, build_url = NULL, jenkins_result = NULL,
        -- A new attempt starts clean; the earlier error stays in the history (released, retry_scheduled).
        last_error = NULL, started_at = NULL, updated_at = now()

-- fragment: claim_logged
-- After a claim's "claimed" CTE's WHERE: what it returns, and its history row in the same statement.
    RETURNING q.id, q.job_name, q.parameters, q.priority, q.scheduled_at, q.attempts, q.max_attempts,
              q.dispatch_id, q.lease_expires_at
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'claimed', 'pending', 'processing', dispatch_id, :actor,
           'attempt ' || attempts || ' of ' || max_attempts
    FROM claimed
)

-- fragment: claim_result
-- parameters as text: read through the driver's JSON decoding, numbers would become floats (1.10 → 1.1).
SELECT id, job_name, CAST(parameters AS text) AS parameters, attempts, max_attempts, dispatch_id
FROM claimed ORDER BY priority DESC, scheduled_at, id

-- fragment: claim_end
-- The end of every claim, after its "claimed" CTE's WHERE: what it returns, its history row in the same
-- statement, and the rows claimed in the seed's order.
{{claim_logged}}
{{claim_result}}

-- name: claim_batch
-- Eligible rows of one controller (:controller) in the seed's order, locked without waiting on rows other
-- workers hold, then marked processing with a fresh dispatch_id and a lease. Reads only the partial claim
-- index, and only the controller's part of it (0009_controllers.sql).
WITH {{paused}}, picked AS MATERIALIZED (
    SELECT id FROM jenkins_jobs_queue q
    WHERE status = 'pending' AND controller = :controller AND scheduled_at <= now()
      -- A cap set while this dispatcher's pass runs uncapped: leave that job to the capped claim.
      -- NOT IN (a hashed filter) rather than NOT EXISTS: an anti-join would read every pending row
      -- before the LIMIT instead of walking the claim index in order.
      AND lower(q.job_name) NOT IN (SELECT lower(l.job_name) FROM jenkins_job_limits l
                                    WHERE l.controller = :controller)
      {{not_paused}}
    ORDER BY priority DESC, scheduled_at, id
    LIMIT :batch_size
    FOR UPDATE SKIP LOCKED
), claimed AS (
    {{claim_update}}
    FROM picked
    WHERE q.id = picked.id
    {{claim_end}};

-- name: queue_fingerprint
-- Marks that move whenever something a pass would act on changes: the MySQL dispatcher's polling probe (see
-- dialects/mysql/queries.sql), kept here so that Queue.fingerprint answers on both engines (a PostgreSQL
-- dispatcher waits on LISTEN instead).
SELECT (SELECT max(id) FROM jenkins_jobs_queue) AS last_job_id,
       (SELECT max(id) FROM jenkins_job_events) AS last_event_id,
       (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS processing,
       (SELECT concat_ws('/', count(*), sum(max_in_flight), max(updated_at)) FROM jenkins_job_limits) AS limits,
       (SELECT concat_ws('/', count(*), max(paused_at)) FROM jenkins_job_pauses) AS pauses,
       (SELECT concat_ws('/', count(*), max(updated_at)) FROM jenkins_job_schedules) AS schedules;

-- name: lock_caps
-- Capped claims run one at a time (transaction-scoped lock), each seeing every earlier claim committed.
SELECT pg_advisory_xact_lock({{lock:caps}});

-- name: claim_batch_capped
-- As claim_batch, but never lets the processing rows of a job (every spelling of its name, on this controller)
-- exceed its jenkins_job_limits entry, nor the processing rows of the configured controllers (:controllers, their
-- names joined by ','; NULL: every controller; a controller removed from the configuration strands its rows in
-- flight, and they must not hold everyone else back) exceed :max_in_flight (NULL: no global cap), nor
-- the controller's processing rows exceed :controller_max_in_flight (NULL: no cap of its own), nor a rated job's
-- starts of the last minute exceed its rate (per_minute; 0013_rate_limits.sql). Run after lock_caps: each claim
-- counts the starts of every claim before it, so no set of dispatchers starts more than the rate in any minute.
WITH {{paused}}, job_room AS (
    -- Each capped job's rows in flight, counted on the in-flight index by job key: index entries of capped jobs
    -- only, and no lower() computed per row in flight (under a UTF-8 locale it costs microseconds a row).
    -- A rated job's starts since a minute before this transaction began (it may have waited on the lock: counting
    -- from earlier only counts more), on the starts' index. least() skips a NULL: a job with no cap, or no
    -- rate, is held by the other alone (a limits row has at least one).
    SELECT lower(l.job_name) AS job_key,
           least(
               CASE WHEN l.max_in_flight IS NOT NULL THEN
                   greatest(l.max_in_flight - (SELECT count(*) FROM jenkins_jobs_queue f
                                               WHERE f.status = 'processing' AND lower(f.job_name) = lower(l.job_name)
                                                 AND f.controller = l.controller), 0) END,
               CASE WHEN l.per_minute IS NOT NULL THEN
                   greatest(l.per_minute - (SELECT count(*) FROM jenkins_job_starts s
                                            WHERE s.controller = l.controller AND s.job_key = lower(l.job_name)
                                              AND s.at > now() - interval '1 minute'), 0) END
           ) AS room
    FROM jenkins_job_limits l WHERE l.controller = :controller
), global_room AS (
    -- (greatest() skips a NULL: each cap is tested for NULL first.)
    SELECT least(
        :batch_size,
        CASE WHEN CAST(:max_in_flight AS integer) IS NULL THEN :batch_size
             ELSE greatest(CAST(:max_in_flight AS integer)
                           - (SELECT count(*) FROM jenkins_jobs_queue
                              WHERE status = 'processing'
                                AND (CAST(:controllers AS text) IS NULL
                                     OR controller = ANY (string_to_array(CAST(:controllers AS text), ',')))), 0) END,
        CASE WHEN CAST(:controller_max_in_flight AS integer) IS NULL THEN :batch_size
             ELSE greatest(CAST(:controller_max_in_flight AS integer)
                           - (SELECT count(*) FROM jenkins_jobs_queue
                              WHERE status = 'processing' AND controller = :controller), 0) END
    ) AS room
), picked AS MATERIALIZED (
    SELECT q.id, lower(q.job_name) AS job_key, q.priority, q.scheduled_at FROM jenkins_jobs_queue q
    WHERE q.status = 'pending' AND q.controller = :controller AND q.scheduled_at <= now()
      AND NOT EXISTS (SELECT 1 FROM job_room r WHERE r.job_key = lower(q.job_name) AND r.room = 0)
      {{not_paused}}
    ORDER BY q.priority DESC, q.scheduled_at, q.id
    LIMIT (SELECT room FROM global_room)
    FOR UPDATE SKIP LOCKED
), chosen AS (
    SELECT p.id FROM (
        SELECT picked.*, row_number() OVER (PARTITION BY job_key ORDER BY priority DESC, scheduled_at, id) AS nth
        FROM picked
    ) p LEFT JOIN job_room r USING (job_key)
    WHERE r.room IS NULL OR p.nth <= r.room
), claimed AS (
    {{claim_update}}
    -- By primary key: the planner cannot size "chosen" (its LIMIT is a subquery) and would otherwise
    -- hash-join it against a scan of the whole table.
    WHERE q.id = ANY (ARRAY(SELECT id FROM chosen))
    {{claim_logged}}, started AS (
    -- The starts of rated jobs, counted by the claims after this one.
    INSERT INTO jenkins_job_starts (controller, job_key, job_id)
    SELECT CAST(:controller AS text), lower(c.job_name), c.id FROM claimed c
    WHERE lower(c.job_name) IN (SELECT lower(l.job_name) FROM jenkins_job_limits l
                                WHERE l.controller = :controller AND l.per_minute IS NOT NULL)
), forgotten AS (
    -- Starts no claim counts any more (two minutes: a claim that began earlier, waiting on the lock, still
    -- counts from a minute before its own start).
    DELETE FROM jenkins_job_starts WHERE controller = :controller AND at < now() - interval '2 minutes'
)
{{claim_result}};

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

-- name: list_pauses
-- The pauses of every controller (controller NULL) first, then each controller's; '*' first in each.
SELECT job_name, controller, paused_at, paused_by, reason FROM jenkins_job_pauses
ORDER BY controller NULLS FIRST, job_name = '*' DESC, job_name;

-- name: caps_in_force
SELECT EXISTS (SELECT 1 FROM jenkins_job_limits) AS any_job_limits;

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

-- name: take_expired_leases
-- Rows whose lease ran out, each handed to exactly one reconciler by renewing its lease in the
-- same statement that picks it.
WITH picked AS MATERIALIZED (
    SELECT id FROM jenkins_jobs_queue
    WHERE status = 'processing' AND lease_expires_at <= now() AND controller = :controller
    ORDER BY lease_expires_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE jenkins_jobs_queue q
SET lease_expires_at = now() + make_interval(secs => :lease_seconds), updated_at = now()
FROM picked
WHERE q.id = picked.id
RETURNING q.id, q.job_name, CAST(q.parameters AS text) AS parameters, q.attempts, q.max_attempts, q.dispatch_id,
          q.jenkins_queue_id, q.build_number, q.build_url, q.lease_expires_at, q.resends,
          q.cancel_requested_at IS NOT NULL AS cancel_requested,
          -- when this dispatch began: no build of it can be older, which bounds the search in Jenkins
          (SELECT e.at FROM jenkins_job_events e
            WHERE e.job_id = q.id AND e.dispatch_id = q.dispatch_id AND e.event = 'claimed'
            ORDER BY e.id LIMIT 1) AS claimed_at;

-- name: record_resend
-- The reconciler found no trace of the dispatch in Jenkins and is about to send it again with the
-- SAME dispatch_id. Jenkins never showed the earlier send, so it spends no attempt; re-sends are
-- bounded on their own (:max_resends).
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET resends = resends + 1,
        lease_expires_at = now() + make_interval(secs => :lease_seconds),
        updated_at = now()
    -- Fenced on the lease this reconciler was handed: if it expired and another reconciler took the row
    -- over (a new lease), only that one may send it again.
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND resends < :max_resends
      AND lease_expires_at = CAST(:lease AS timestamptz)
    RETURNING id, dispatch_id, resends
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'resent', 'processing', 'processing', dispatch_id, :actor,
           'no queue item or build has this DISPATCH_ID; sending it again (re-send ' || resends || ' of '
           || :max_resends || ', held ' || round(CAST(:quiet_seconds AS float8)) || ' s in Jenkins''s queue so that a late '
           || 'original merges with it)'
    FROM changed
)
SELECT id, resends FROM changed;

-- name: resend_not_taken
-- A re-send Jenkins did not take: never sent (a Jenkins-wide failure; :sent false gives the re-send back)
-- or refused for its job for now (a disabled job; :sent true, it counts). Either way the row keeps
-- processing under the SAME dispatch_id: released or backed off, its next claim would draw a new one, and
-- a late original under this one could then build beside it. The reconciler looks again when the lease
-- that record_resend gave it ends.
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET resends = CASE WHEN CAST(:sent AS boolean) THEN resends ELSE greatest(resends - 1, 0) END,
        last_error = CAST(:reason AS text), updated_at = now()
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND jenkins_queue_id IS NULL
    RETURNING id, dispatch_id
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, CASE WHEN CAST(:sent AS boolean) THEN 'resend_refused' ELSE 'resend_not_sent' END,
           'processing', 'processing', dispatch_id, :actor, :reason
    FROM changed
)
SELECT id FROM changed;

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

-- name: recently_finished_watched
-- Final rows of one controller (:controller, whose Jenkins the pass asks) a request of whose dispatch may still be
-- in Jenkins, settled within :window seconds: re-sent rows (a re-send whose answer was lost may land after the row
-- settled, then wait RESEND_QUIET_SECONDS in Jenkins's queue), and rows an operator cancelled while their trigger
-- was on its way that settled with nothing of them found in Jenkins (no queue id, no build), until a late arrival
-- of theirs was handled (a late_* event): cancelled_in_flight. Reads the finished_at index; such rows are rare, and
-- the history only for those.
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
    WHERE q.finished_at > now() - make_interval(secs => :window) AND q.controller = :controller
      AND (q.resends > 0 OR (q.status = 'cancelled' AND q.cancel_requested_at IS NOT NULL))
) w
WHERE w.resends > 0 OR w.cancelled_in_flight;

-- name: queue_ids_between
-- Jenkins queue ids our rows hold between :low and :high (both excluded): items of other dispatches, which the
-- reconciler's look back for a person's cancel need not read. The queue-id index, a short range.
SELECT jenkins_queue_id AS queue_id FROM jenkins_jobs_queue
WHERE jenkins_queue_id > CAST(:low AS bigint) AND jenkins_queue_id < CAST(:high AS bigint);

-- name: record_note
-- History only, the row unchanged: what the reconciler saw or did in Jenkins for this dispatch (a duplicate
-- cancelled, a search that could not tell), so `show` tells the operator.
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, :event, status, status, dispatch_id, 'reconciler', :detail
FROM jenkins_jobs_queue WHERE id = :id AND dispatch_id = :dispatch_id;

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

-- name: get_job
-- parameters as text: its numbers are read as written (1.50 stays 1.50), not through the driver's floats.
SELECT id, job_name, parameters::text AS parameters, status, priority, scheduled_at, attempts, max_attempts, resends, cancel_requested_at,
       dispatch_id, controller,
       jenkins_queue_id, build_number, build_url, jenkins_result, last_error, dedupe_key, lease_expires_at,
       started_at, created_at, updated_at, finished_at
FROM jenkins_jobs_queue WHERE id = :id;

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

-- name: job_events
SELECT id, at, event, from_status, to_status, dispatch_id, actor, detail
FROM jenkins_job_events WHERE job_id = :id ORDER BY id;

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

-- name: list_jobs
-- The job list (CLI `ls`, the web page's /jobs), every filter optional: status, job, time; last_error
-- contains :error_pattern (ILIKE, its wildcards escaped with '\'); up to three parameter values
-- (:param_key_N's value, as text, equals :param_value_N). Newest first, paged by id; a filter no index
-- serves walks the id index back until the page is full.
-- Every column get_job reads (ls --json carries all that show does).
SELECT id, job_name, parameters::text AS parameters, status, priority, scheduled_at, attempts, max_attempts, resends,
       cancel_requested_at, dispatch_id, controller, jenkins_queue_id, build_number, build_url, jenkins_result,
       last_error, dedupe_key, lease_expires_at, started_at, created_at, updated_at, finished_at
FROM jenkins_jobs_queue
WHERE (CAST(:status AS text) IS NULL OR status = CAST(:status AS text))
  AND (CAST(:job_name AS text) IS NULL OR lower(job_name) = lower(CAST(:job_name AS text)))
  AND (CAST(:controller AS text) IS NULL OR controller = CAST(:controller AS text))
  AND (CAST(:since AS timestamptz) IS NULL OR updated_at >= CAST(:since AS timestamptz))
  AND (CAST(:before_id AS bigint) IS NULL OR id < CAST(:before_id AS bigint))
  AND (CAST(:error_pattern AS text) IS NULL OR last_error ILIKE CAST(:error_pattern AS text) ESCAPE '\')
  AND (CAST(:param_key_1 AS text) IS NULL
       OR parameters ->> CAST(:param_key_1 AS text) = CAST(:param_value_1 AS text))
  AND (CAST(:param_key_2 AS text) IS NULL
       OR parameters ->> CAST(:param_key_2 AS text) = CAST(:param_value_2 AS text))
  AND (CAST(:param_key_3 AS text) IS NULL
       OR parameters ->> CAST(:param_key_3 AS text) = CAST(:param_value_3 AS text))
ORDER BY id DESC
LIMIT :limit;

-- name: oldest_pending_job
-- The overview's oldest pending row (the earliest scheduled_at): read from the partial index of pending rows.
SELECT id, job_name, status, priority, scheduled_at, attempts, max_attempts, last_error, created_at, controller
FROM jenkins_jobs_queue WHERE status = 'pending'
ORDER BY scheduled_at, id
LIMIT 1;

-- name: finished_per_hour
-- The overview's throughput: final rows per hour, by outcome, over the current hour and the :hours - 1
-- before it. Reads the finished_at index over the window only, never the older history.
SELECT date_trunc('hour', finished_at) AS hour,
       count(*) FILTER (WHERE status = 'completed') AS completed,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'cancelled') AS cancelled
FROM jenkins_jobs_queue
WHERE finished_at >= date_trunc('hour', now()) - make_interval(hours => CAST(:hours AS int) - 1)
GROUP BY 1
ORDER BY 1;

-- name: prune_batch
-- Finished rows older than the cutoff, a bounded batch at a time; their events go with them. Returns how
-- many rows went (`deleted`), as the MySQL statement does.
WITH doomed AS (
    SELECT id FROM jenkins_jobs_queue
    WHERE finished_at IS NOT NULL AND finished_at < now() - make_interval(secs => CAST(:days AS float8) * 86400)
      AND status IN ('completed', 'failed', 'cancelled')
    ORDER BY finished_at
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
), history AS (
    DELETE FROM jenkins_job_events e USING doomed WHERE e.job_id = doomed.id
), gone AS (
    DELETE FROM jenkins_jobs_queue q USING doomed WHERE q.id = doomed.id RETURNING q.id
)
SELECT count(*) AS deleted FROM gone;

-- name: prune_aggregates
-- The time page's aggregates (0012_job_stats.sql) whose buckets started more than :seconds ago, which the page no
-- longer shows: each a range of its primary key (the histograms' per metric). Only past buckets go: the trigger
-- and the gauges write current ones, so nothing waits on these deletes. Returns the rows that went (`deleted`): a
-- few thousand a day at most (288 five-minute rows × 4 shards, 24 hours × 2 metrics × 48 bins × 4 shards).
WITH stats AS (
    DELETE FROM jenkins_job_stats
    WHERE bucket_start < now() - make_interval(secs => CAST(:seconds AS float8)) RETURNING 1
), bins AS (
    DELETE FROM jenkins_job_stat_bins
    WHERE metric IN ('wait', 'build') AND bucket_start < now() - make_interval(secs => CAST(:seconds AS float8))
    RETURNING 1
), depth AS (
    DELETE FROM jenkins_queue_depth
    WHERE bucket_start < now() - make_interval(secs => CAST(:seconds AS float8)) RETURNING 1
)
SELECT (SELECT count(*) FROM stats) + (SELECT count(*) FROM bins) + (SELECT count(*) FROM depth) AS deleted;

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

-- name: limit_history
-- The latest cap and rate changes, newest first (the primary key's order).
SELECT id, at, controller, job_name, kind, previous, max_in_flight, previous_per_minute, per_minute, changed_by
FROM jenkins_job_limit_events ORDER BY id DESC LIMIT :limit;

-- name: limit_of
-- One job's cap on one controller (any spelling of its name), or no row.
SELECT job_name, max_in_flight FROM jenkins_job_limits
WHERE controller = :controller AND lower(job_name) = lower(CAST(:job_name AS text));

-- name: pending_of
-- Pending rows of one job (every spelling), or of every job for '*': what a pause would hold back.
SELECT count(*) AS pending FROM jenkins_jobs_queue
WHERE status = 'pending' AND (lower(job_name) = lower(CAST(:job_name AS text)) OR CAST(:job_name AS text) = '*');

-- name: list_limits
-- Each job's cap (NULL: none) with its rows in flight, and its rate (NULL: none) with its starts of the last
-- minute, counted as the capped claim counts them.
SELECT l.controller, l.job_name, l.max_in_flight,
       (SELECT count(*) FROM jenkins_jobs_queue q
        WHERE q.status = 'processing' AND lower(q.job_name) = lower(l.job_name) AND q.controller = l.controller)
           AS in_flight,
       l.per_minute,
       (SELECT count(*) FROM jenkins_job_starts s
        WHERE s.controller = l.controller AND s.job_key = lower(l.job_name) AND s.at > now() - interval '1 minute')
           AS started_last_minute
FROM jenkins_job_limits l ORDER BY l.job_name, l.controller;

-- name: pending_controllers
-- The controllers that have pending rows: a skip scan of the claim index (its controller leads it), one probe per
-- controller, however long the backlog: the pass asks this every time.
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
-- sent anywhere.
WITH failed AS (
    UPDATE jenkins_jobs_queue q
    SET status = 'failed', finished_at = now(), updated_at = now(),
        last_error = 'controller ' || quote_literal(q.controller) || ' is not configured (JENKINS_CONTROLLERS): '
                     || 'nothing was sent'
    WHERE q.status = 'pending' AND q.controller = CAST(:controller AS text)
    RETURNING q.id, q.controller, q.last_error
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, actor, detail)
    SELECT id, 'failed', 'pending', 'failed', :actor, last_error FROM failed
)
SELECT id, controller FROM failed;

-- name: stats_per_controller
-- Per controller: pending, due and processing rows. One status per branch, so each is read through its partial
-- index (the claim index, the lease index): `status IN (...)` matches neither, and the planner then scans the
-- whole table, history and all.
SELECT controller, CAST(sum(pending) AS bigint) AS pending, CAST(sum(due) AS bigint) AS due,
       CAST(sum(in_flight) AS bigint) AS in_flight
FROM (
    SELECT controller, count(*) AS pending, count(*) FILTER (WHERE scheduled_at <= now()) AS due, 0 AS in_flight
    FROM jenkins_jobs_queue WHERE status = 'pending' GROUP BY controller
    UNION ALL
    SELECT controller, 0, 0, count(*) FROM jenkins_jobs_queue WHERE status = 'processing' GROUP BY controller
) per_status
GROUP BY controller ORDER BY controller;

-- name: stats
-- Reads only the partial indexes of unfinished rows and the last hour of finished_at: it stays fast
-- however long the history is.
SELECT
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'pending') AS pending,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'pending' AND scheduled_at <= now()) AS due,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS processing,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing' AND lease_expires_at <= now()) AS leases_expired,
    (SELECT extract(epoch FROM now() - min(scheduled_at))::float8 FROM jenkins_jobs_queue
      WHERE status = 'pending' AND scheduled_at <= now()) AS oldest_pending_seconds,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE finished_at > now() - interval '1 hour' AND status = 'completed') AS completed_last_hour,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE finished_at > now() - interval '1 hour' AND status = 'failed') AS failed_last_hour,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE finished_at > now() - interval '1 hour' AND status = 'cancelled') AS cancelled_last_hour,
    -- The planner's estimate, never below a count of up to 1,000 rows (a table never analysed says -1, a young
    -- one too few): exact for a small table, a lower bound for a large one, at most 1,000 index entries read.
    (SELECT greatest(reltuples::bigint,
                     (SELECT count(*) FROM (SELECT 1 FROM jenkins_jobs_queue LIMIT 1000) AS first_rows))
     FROM pg_class WHERE oid = 'jenkins_jobs_queue'::regclass) AS rows_estimate,
    (SELECT extract(epoch FROM now() - min(xact_start))::float8 FROM pg_stat_activity
      WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid() AND datname = current_database()
        AND backend_type = 'client backend') AS oldest_transaction_seconds,
    EXISTS (SELECT 1 FROM jenkins_job_pauses WHERE job_name = '*' AND controller IS NULL) AS everything_paused,
    (SELECT count(*) FROM jenkins_job_pauses WHERE job_name <> '*') AS paused_jobs;

-- name: gauges
-- What the dispatcher reports after each pass, and when it must look again (the next pending row that
-- becomes due, the next lease that expires): partial-index reads only, and the database's oldest open
-- transaction. The oldest pending age leaves out
-- paused jobs (an operator's choice, not a stuck queue: no alarm for it); everything paused: none.
-- jenkins_jobs_queue is named before jenkins_job_pauses (no CTE of the pauses first): every statement locks the two in that
-- order (a claim reads the pauses last, through its function), so none deadlocks with another that
-- locks both, such as a TRUNCATE or an ALTER of both in that order.
-- The same statement keeps the queue-depth chart (jenkins_queue_depth, 0012_job_stats.sql): the most pending and
-- processing rows seen in the current five minutes, written only when a count is above the bucket's (most passes
-- write nothing), with no round trip of its own.
WITH seen AS (
    SELECT
        (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS processing,
        -- The same rows per controller (name → count; NULL: none in flight), for /metrics.
        (SELECT jsonb_object_agg(controller, n) FROM (
            SELECT controller, count(*) AS n FROM jenkins_jobs_queue WHERE status = 'processing' GROUP BY controller
         ) AS c) AS processing_per_controller,
        (SELECT extract(epoch FROM now() - min(scheduled_at))::float8 FROM jenkins_jobs_queue q
          WHERE status = 'pending' AND scheduled_at <= now()
            -- A pause holds its controller's rows (controller NULL: every controller's).
            AND NOT EXISTS (SELECT 1 FROM jenkins_job_pauses p
                            WHERE (p.job_name = '*' OR lower(p.job_name) = lower(q.job_name))
                              AND (p.controller IS NULL OR p.controller = q.controller))) AS oldest_pending_seconds,
        EXISTS (SELECT 1 FROM jenkins_job_pauses WHERE job_name = '*' AND controller IS NULL) AS everything_paused,
        (SELECT count(*) FROM jenkins_job_pauses WHERE job_name <> '*') AS paused_jobs,
        (SELECT extract(epoch FROM min(scheduled_at) - now())::float8 FROM jenkins_jobs_queue
          WHERE status = 'pending' AND scheduled_at > now()) AS next_due_seconds,
        (SELECT extract(epoch FROM min(lease_expires_at) - now())::float8 FROM jenkins_jobs_queue
          WHERE status = 'processing') AS next_lease_seconds,
        (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'pending') AS pending,
        -- The next tick of an enabled schedule: a row that does not exist yet, so next_due_seconds cannot see it.
        (SELECT extract(epoch FROM min(next_tick) - now())::float8 FROM jenkins_job_schedules WHERE enabled)
            AS next_tick_seconds,
        -- A long-open transaction holds back vacuum: dead rows pile up and claims slow down (sessions of other
        -- users are visible only with pg_read_all_stats).
        (SELECT extract(epoch FROM now() - min(xact_start))::float8 FROM pg_stat_activity
          WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid() AND datname = current_database()
            AND backend_type = 'client backend') AS oldest_transaction_seconds
), depth AS (
    INSERT INTO jenkins_queue_depth AS d (bucket_start, pending_max, processing_max)
    SELECT jenkins_dispatch_bucket(now(), 300), pending, processing FROM seen
    ON CONFLICT (bucket_start) DO UPDATE
        SET pending_max = greatest(d.pending_max, EXCLUDED.pending_max),
            processing_max = greatest(d.processing_max, EXCLUDED.processing_max)
        WHERE d.pending_max < EXCLUDED.pending_max OR d.processing_max < EXCLUDED.processing_max
)
SELECT * FROM seen;

-- name: stats_per_job
-- One row per job (every spelling of its name together, by job key), shown under the name its cap or pause was
-- given, else the first of the names its rows use. Each status is read on its own so that each read matches
-- its partial index (never the history).
WITH waiting AS (
    SELECT lower(job_name) AS job_key, min(job_name) AS job_name, count(*) AS pending,
           extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE scheduled_at <= now()))::float8
               AS oldest_pending_seconds
    FROM jenkins_jobs_queue WHERE status = 'pending' GROUP BY lower(job_name)
), running AS (
    SELECT lower(job_name) AS job_key, min(job_name) AS job_name, count(*) AS in_flight
    FROM jenkins_jobs_queue WHERE status = 'processing' GROUP BY lower(job_name)
), recent AS (
    SELECT lower(job_name) AS job_key, min(job_name) AS job_name,
           count(*) FILTER (WHERE status = 'completed') AS completed_last_hour,
           count(*) FILTER (WHERE status = 'failed') AS failed_last_hour
    FROM jenkins_jobs_queue WHERE finished_at > now() - interval '1 hour' GROUP BY lower(job_name)
), caps AS (
    SELECT lower(job_name) AS job_key, job_name, max_in_flight FROM jenkins_job_limits WHERE controller = 'default'
), paused AS (
    -- The default controller's view, as caps: a pause of every controller, else the default's own.
    SELECT DISTINCT ON (lower(job_name)) lower(job_name) AS job_key, job_name, paused_at, reason
    FROM jenkins_job_pauses WHERE job_name <> '*' AND (controller IS NULL OR controller = 'default')
    ORDER BY lower(job_name), controller NULLS FIRST
), paused_on AS (
    -- The other controllers the job has a pause of its own on (`pause JOB --controller C`).
    SELECT lower(job_name) AS job_key, min(job_name) AS job_name, jsonb_agg(controller ORDER BY controller) AS controllers
    FROM jenkins_job_pauses WHERE job_name <> '*' AND controller <> 'default' GROUP BY lower(job_name)
), keys AS (
    SELECT job_key FROM waiting UNION SELECT job_key FROM running UNION SELECT job_key FROM recent
    UNION SELECT job_key FROM caps UNION SELECT job_key FROM paused UNION SELECT job_key FROM paused_on
)
SELECT coalesce(c.job_name, p.job_name, least(w.job_name, f.job_name, r.job_name), o.job_name) AS job_name,
       coalesce(w.pending, 0) AS pending, coalesce(f.in_flight, 0) AS in_flight, c.max_in_flight AS cap,
       coalesce(r.completed_last_hour, 0) AS completed_last_hour, coalesce(r.failed_last_hour, 0) AS failed_last_hour,
       w.oldest_pending_seconds, p.job_key IS NOT NULL AS paused, p.paused_at, p.reason AS pause_reason,
       coalesce(o.controllers, '[]') AS paused_on
FROM keys k
LEFT JOIN waiting w USING (job_key) LEFT JOIN running f USING (job_key) LEFT JOIN recent r USING (job_key)
LEFT JOIN caps c USING (job_key) LEFT JOIN paused p USING (job_key) LEFT JOIN paused_on o USING (job_key)
ORDER BY 1;

-- name: waiting_context
-- What decides why pending rows wait, for a page of rows in one statement: for each job and controller of the
-- page's rows (:wanted, a JSON array of {job_name, controller}) that job's cap, rows in flight, rate, starts of
-- the last minute and when the rate next has room on that controller, as the capped claim counts them, and the
-- names its pauses were given (by job key, per controller); the rows in flight on each of those controllers;
-- every pause, all rows in flight, and Jenkins's state.
WITH wanted AS (
    SELECT DISTINCT w.job_name, w.controller
    FROM jsonb_to_recordset(CAST(:wanted AS jsonb)) AS w(job_name text, controller text)
)
SELECT
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS total_in_flight,
    -- Whether any dispatcher is live at all: "the next pass takes it" is true only then.
    (SELECT count(*) FROM jenkins_dispatchers WHERE {{live_dispatcher}}) AS live_dispatchers,
    -- Every controller's rows in flight: its own max_in_flight counts them, and MAX_IN_FLIGHT those of the
    -- configured controllers only (claim_batch_capped), which the caller knows.
    (SELECT coalesce(jsonb_object_agg(c.controller, c.n), '{}')
     FROM (SELECT controller, count(*) AS n FROM jenkins_jobs_queue WHERE status = 'processing'
           GROUP BY controller) AS c) AS controllers_in_flight,
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'job_name', w.job_name, 'controller', w.controller,
                'cap', l.max_in_flight,
                'in_flight', (SELECT count(*) FROM jenkins_jobs_queue q
                              WHERE q.status = 'processing' AND lower(q.job_name) = lower(w.job_name)
                                AND q.controller = w.controller),
                'rate', l.per_minute,
                'started', (SELECT count(*) FROM jenkins_job_starts s
                            WHERE l.per_minute IS NOT NULL AND s.controller = l.controller
                              AND s.job_key = lower(l.job_name)
                              AND s.at > now() - interval '1 minute'),
                -- When the rate next has room: the rate-th latest start leaves the minute.
                'next_start_seconds',
                (SELECT extract(epoch FROM s.at + interval '1 minute' - now())::float8
                 FROM jenkins_job_starts s
                 WHERE l.per_minute IS NOT NULL AND s.controller = l.controller
                   AND s.job_key = lower(l.job_name) AND s.at > now() - interval '1 minute'
                 ORDER BY s.at DESC OFFSET l.per_minute - 1 LIMIT 1),
                'paused_as', (SELECT p.job_name FROM jenkins_job_pauses p
                              WHERE lower(p.job_name) = lower(w.job_name) AND p.controller IS NULL),
                -- Controller → the name the job's pause on that controller was given.
                'paused_on', (SELECT jsonb_object_agg(p.controller, p.job_name)
                              FROM jenkins_job_pauses p
                              WHERE lower(p.job_name) = lower(w.job_name) AND p.controller IS NOT NULL))),
            '[]')
     FROM wanted w LEFT JOIN jenkins_job_limits l
       ON lower(l.job_name) = lower(w.job_name) AND l.controller = w.controller) AS jobs,
    -- Every pause, each with its controller (NULL: every controller's): each row is explained by its own
    -- controller's pauses and those of every controller (a small table: an operator's pauses).
    (SELECT coalesce(jsonb_agg(jsonb_build_object('job_name', job_name, 'paused_at', paused_at,
                                                  'paused_by', paused_by, 'reason', reason,
                                                  'controller', controller)), '[]')
     FROM jenkins_job_pauses) AS pauses,
    -- Jenkins as a whole, as the live dispatcher that asked it last found it.
    (SELECT jsonb_build_object('since', since, 'reason', reason) FROM ({{latest_word_on_jenkins}}) AS w) AS jenkins,
    -- Each controller as the live dispatchers recorded it (0015_dispatcher_controllers.sql), with the age of each
    -- one's last pass: the most recent word on a controller wins.
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'id', id, 'live', true, 'controllers', controllers,
                'last_pass_seconds', extract(epoch FROM now() - last_pass_at)::float8)), '[]')
     FROM jenkins_dispatchers WHERE controllers IS NOT NULL AND {{live_dispatcher}}) AS dispatchers;

-- name: in_flight_counts
-- Processing rows per job (by job key, under the first of its spellings): what the demo prints, and what the
-- concurrency and chaos tests sample to prove no cap is exceeded.
SELECT min(job_name) AS job_name, count(*) AS n FROM jenkins_jobs_queue WHERE status = 'processing'
GROUP BY lower(job_name);

-- name: server_identity
-- `doctor`: who we are on which server, proving the session works.
SELECT current_user AS user_name, current_database() AS dbname, current_setting('server_version') AS server_version;

-- name: applied_migrations
-- `doctor`: the schema versions `migrate` recorded (the table is missing before the first migrate).
SELECT version, name FROM jenkins_dispatch_migrations ORDER BY version;

-- name: oldest_transaction
-- `doctor`: the oldest transaction open in this database, besides ours (one row; its columns null when none),
-- and how many sessions hide their details from us (pg_stat_activity shows other users' transactions only to
-- superusers and members of pg_read_all_stats).
WITH sessions AS (
    SELECT pid, usename, application_name, state, xact_start, query = '<insufficient privilege>' AS hidden
    FROM pg_stat_activity
    WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
), oldest AS (
    SELECT * FROM sessions WHERE xact_start IS NOT NULL ORDER BY xact_start LIMIT 1
)
SELECT o.pid, o.usename AS user_name, o.application_name, o.state,
       extract(epoch FROM now() - o.xact_start)::float8 AS seconds,
       (SELECT count(*) FROM sessions WHERE hidden) AS hidden_sessions
FROM (SELECT 1) AS one LEFT JOIN oldest o ON true;

-- name: waiting_job_names
-- `doctor`: the distinct jobs of unfinished rows (by job key: names differing only in case are one), those with
-- the most rows first, each with its count and the first of its spellings, and how many there are in all (the
-- partial indexes of unfinished rows only).
SELECT min(job_name COLLATE "C") AS job_name, count(*) AS waiting, count(*) OVER () AS job_names
FROM jenkins_jobs_queue WHERE status IN ('pending', 'processing')
GROUP BY lower(job_name) ORDER BY count(*) DESC, 1 LIMIT :limit;

-- ============================================================================ dispatcher heartbeats
-- One row per dispatcher (migrations/0005_dispatchers.sql); a tiny table, read whole.

-- name: record_heartbeat
-- After each pass: upsert the dispatcher's row, and drop rows not seen for a day. The Jenkins state is
-- changed only by a pass that asked Jenkins (:jenkins_ok NULL: not asked, keep what is known); an outage
-- keeps its first "since" until Jenkins answers again. :controllers (JSON, 0015_dispatcher_controllers.sql): the
-- controllers it serves and each one's breaker; NULL keeps what is known.
WITH gone AS (
    DELETE FROM jenkins_dispatchers WHERE last_pass_at < now() - interval '1 day' AND id <> :id
)
INSERT INTO jenkins_dispatchers AS d (id, kind, host, pid, started_at, stale_after_seconds, last_pass_at,
                                      last_outcome, last_detail, passes, jenkins_checked_at,
                                      jenkins_unavailable_since, jenkins_reason, controllers)
VALUES (:id, :kind, :host, :pid, :started_at, :stale_after_seconds, now(), :outcome, :detail, :passes,
        CASE WHEN CAST(:jenkins_ok AS boolean) IS NOT NULL THEN now() END,
        CASE WHEN NOT CAST(:jenkins_ok AS boolean) THEN now() END,
        CASE WHEN NOT CAST(:jenkins_ok AS boolean) THEN CAST(:jenkins_reason AS text) END,
        CAST(:controllers AS jsonb))
ON CONFLICT (id) DO UPDATE SET
    kind = EXCLUDED.kind, host = EXCLUDED.host, pid = EXCLUDED.pid, started_at = EXCLUDED.started_at,
    controllers = coalesce(EXCLUDED.controllers, d.controllers),
    stale_after_seconds = EXCLUDED.stale_after_seconds, last_pass_at = now(),
    last_outcome = EXCLUDED.last_outcome, last_detail = EXCLUDED.last_detail, passes = EXCLUDED.passes,
    jenkins_checked_at = coalesce(EXCLUDED.jenkins_checked_at, d.jenkins_checked_at),
    jenkins_unavailable_since = CASE
        WHEN CAST(:jenkins_ok AS boolean) IS NULL THEN d.jenkins_unavailable_since
        WHEN CAST(:jenkins_ok AS boolean) THEN NULL
        ELSE coalesce(d.jenkins_unavailable_since, now()) END,
    jenkins_reason = CASE
        WHEN CAST(:jenkins_ok AS boolean) IS NULL THEN d.jenkins_reason
        WHEN CAST(:jenkins_ok AS boolean) THEN NULL
        ELSE CAST(:jenkins_reason AS text) END;

-- fragment: live_dispatcher
-- A dispatcher is live while it passed within its own window and did not say it stopped.
(last_pass_at > now() - make_interval(secs => stale_after_seconds) AND last_outcome <> 'stopped')

-- name: dispatchers
-- Every dispatcher seen in the last day, the most recent pass first. Live: it passed within its window and
-- did not say it stopped.
SELECT id, kind, host, pid, started_at, last_pass_at,
       extract(epoch FROM now() - last_pass_at)::float8 AS last_pass_seconds,
       {{live_dispatcher}} AS live,
       last_outcome, last_detail, passes, jenkins_unavailable_since, jenkins_reason, controllers
FROM jenkins_dispatchers
WHERE last_pass_at > now() - interval '1 day'
ORDER BY last_pass_at DESC, id;

-- fragment: latest_word_on_jenkins
-- The latest word about Jenkins among live dispatchers: the one that asked Jenkins last.
SELECT id AS dispatcher_id, jenkins_unavailable_since AS since, jenkins_reason AS reason,
       jenkins_checked_at AS checked_at
FROM jenkins_dispatchers
WHERE jenkins_checked_at IS NOT NULL AND {{live_dispatcher}}
ORDER BY jenkins_checked_at DESC, id
LIMIT 1

-- name: jenkins_outage
{{latest_word_on_jenkins}};

-- ============================================================================ the migration runner
-- Run by migrations.py, all in one transaction: the lock, the bookkeeping table, then each migration file
-- (dialects/postgresql/migrations/NNNN_*.sql) not yet recorded, each recorded as it is applied.

-- name: lock_migrations
-- Concurrent `migrate` runs queue up here; the next one then finds nothing left to do.
SELECT pg_advisory_xact_lock({{lock:migrations}});

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS jenkins_dispatch_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migration_versions
SELECT version FROM jenkins_dispatch_migrations;

-- name: record_migration
INSERT INTO jenkins_dispatch_migrations (version, name) VALUES (:version, :name);

-- ============================================================================ the cutover
-- From the worker that ran before jenkins-dispatch, while it still runs (migrations/0008_cutover.sql,
-- docs/cutover.md).

-- name: set_cutover_window
-- The migration runner, before the files: how long the old worker's results for the jobs it holds still count
-- (CUTOVER_WINDOW_SECONDS), read by 0008_cutover.sql. For this transaction only.
SELECT set_config('jenkins_dispatch.cutover_window_seconds', CAST(CAST(:seconds AS float8) AS text), true);

-- name: cutover_window
-- `doctor`: the window (no row: the table was never upgraded while the old worker held jobs) and the jobs the old
-- worker still holds (partial index of processing rows).
SELECT c.upgraded_at, c.window_seconds, c.window_ends_at,
       extract(epoch FROM c.window_ends_at - now())::float8 AS seconds_left,
       (SELECT count(*) FROM jenkins_jobs_queue q
         WHERE q.status = 'processing' AND q.dispatch_id LIKE 'legacy-%') AS held
FROM jenkins_dispatch_cutover c;

-- ============================================================================ schedules
-- Recurring rows (migrations/0010_schedules.sql, docs/schedules.md). When a schedule ticks is Python's
-- (dispatching/cron.py): these statements store and take the ticks it computed. Schedules are found by name
-- ignoring case (the lower(name) index), as on MySQL.

-- name: database_now
-- The database's clock: every dispatcher and command computes ticks from this one, not from its host's.
SELECT now() AS now;

-- name: add_schedule
-- A second schedule of the same name (any case) adds nothing: no row comes back.
INSERT INTO jenkins_job_schedules (name, job_name, parameters, cron, timezone, priority, controller, next_tick,
                                   no_overlap)
VALUES (:name, :job_name, CAST(:parameters AS jsonb), :cron, :timezone, :priority, :controller,
        CAST(:next_tick AS timestamptz), :no_overlap)
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
       s.paused_at, s.paused_by, s.created_at, s.no_overlap, s.skipped_ticks, s.last_skipped_tick
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
    SELECT s.name, s.job_name, s.parameters, s.priority, s.controller, s.no_overlap, s.last_job_id
    FROM jenkins_job_schedules s
    WHERE s.name = :name AND s.enabled AND s.next_tick = CAST(:seen AS timestamptz)
    FOR UPDATE SKIP LOCKED
), running AS MATERIALIZED (
    SELECT q.id FROM taken t JOIN jenkins_jobs_queue q ON q.id = t.last_job_id
    WHERE t.no_overlap AND q.status IN ('pending', 'processing')
), inserted AS (
    -- The queue's columns, listed: the seam where a column the queue gains (controller) takes taken.controller.
    INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, controller)
    SELECT t.job_name, t.parameters, t.priority, CAST(:tick AS timestamptz), t.controller FROM taken t
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

-- name: stats_per_bucket
-- The time page's charts: builds started, completed, failed and cancelled per bucket of :bucket seconds (a multiple
-- of 300) over the last :window seconds, from the five-minute aggregate a trigger keeps (0012_job_stats.sql): at
-- most window / 300 × 4 rows, whatever the history holds. bucket_epoch: the bucket's start, seconds since 1970.
-- The window's start is a subquery, computed once: the week reads most of the table, so the plan is a sequential
-- scan, which evaluates a plain expression of now() (stable, not constant) again for every row, in numeric
-- arithmetic. The bucket arithmetic is integer (date_part's float8, whole seconds, made bigint), not numeric.
-- Together they take the week's read from about 8 to 2 ms (bench_ui.py's aggregates).
SELECT CAST(date_part('epoch', bucket_start) AS bigint) / :bucket * :bucket AS bucket_epoch,
       sum(completed) AS completed, sum(failed) AS failed, sum(cancelled) AS cancelled, sum(started) AS started
FROM jenkins_job_stats
WHERE bucket_start >= (SELECT to_timestamp(floor(extract(epoch FROM now()) / :bucket) * :bucket - :window + :bucket))
GROUP BY 1
ORDER BY 1;

-- name: depth_per_bucket
-- The queue-depth chart: the most pending and processing rows the dispatchers' gauges saw per bucket (as above).
SELECT CAST(date_part('epoch', bucket_start) AS bigint) / :bucket * :bucket AS bucket_epoch,
       max(pending_max) AS pending, max(processing_max) AS processing
FROM jenkins_queue_depth
WHERE bucket_start >= (SELECT to_timestamp(floor(extract(epoch FROM now()) / :bucket) * :bucket - :window + :bucket))
GROUP BY 1
ORDER BY 1;

-- name: timing_bins
-- Queue wait and build duration of the rows finished in the last :window seconds (whole hours, the current one
-- included), as the counts of their histogram's bins (0012_job_stats.sql says the bins): the primary key's range
-- per metric, at most window / 3600 × 48 × 4 rows.
SELECT metric, bin, sum(n) AS n
FROM jenkins_job_stat_bins
WHERE metric IN ('wait', 'build')
  AND bucket_start >= to_timestamp(floor(extract(epoch FROM now()) / 3600) * 3600 - :window + 3600)
GROUP BY metric, bin
ORDER BY metric, bin;

-- name: recent_timings
-- The latest :limit finished rows through the finished_at index, one row per job: how many (`finished`) and how
-- long each waited (insert or retry to its build's start) and built (start to settle), in seconds, as JSON arrays
-- (null where the build never started). One row per job rather than per finished row: a thousand rows cost the
-- drivers (pure Python) more to read than the database to find; a few arrays are parsed in C.
SELECT job_name, count(*) AS finished,
       json_agg(wait_seconds) AS waits, json_agg(build_seconds) AS builds
FROM (
    SELECT job_name,
           CAST(extract(epoch FROM started_at - created_at) AS float8) AS wait_seconds,
           CAST(extract(epoch FROM finished_at - started_at) AS float8) AS build_seconds
    FROM jenkins_jobs_queue
    WHERE finished_at IS NOT NULL
    ORDER BY finished_at DESC
    LIMIT :limit
) recent
GROUP BY job_name;

-- Pruning (the pruner duty)
-- ---------------------------------------------------------------------------------------------------------------
-- dispatching/duties/pruner.py: one dispatcher at a time deletes the final rows older than PRUNE_FINISHED_AFTER, a
-- batch a pass (prune_batch), then the time page's aggregates past its window (prune_aggregates). The turn is a row
-- of jenkins_dispatch_duties (0020_duties.sql).

-- name: take_duty
-- Takes duty :duty's turn for :holder until :hold_seconds from now, if it is due (due_at passed) or :holder already
-- holds it (a batch after the first): the compare-and-set. Of several dispatchers racing, the first UPDATE wins; the
-- others wait for its row lock, find due_at moved on and update nothing. `taken`: whether this caller holds the turn;
-- `due_in_seconds`: for the others, how long until it is due (NULL: no such duty row).
WITH taken AS (
    UPDATE jenkins_dispatch_duties
    SET holder = CAST(:holder AS text), due_at = now() + make_interval(secs => CAST(:hold_seconds AS float8)),
        updated_at = now()
    WHERE name = CAST(:duty AS text) AND (due_at <= now() OR holder = CAST(:holder AS text))
    RETURNING due_at
)
SELECT EXISTS (SELECT 1 FROM taken) AS taken,
       coalesce((SELECT CAST(extract(epoch FROM due_at - now()) AS float8) FROM taken),
                (SELECT CAST(extract(epoch FROM d.due_at - now()) AS float8)
                 FROM jenkins_dispatch_duties d WHERE d.name = CAST(:duty AS text))) AS due_in_seconds;

-- name: duty_done
-- :holder hands duty :duty's turn back, due again :every_seconds from now. Nothing changes if the turn is no longer
-- its own (its hold ended and another dispatcher took it): no row back.
UPDATE jenkins_dispatch_duties
SET holder = NULL, due_at = now() + make_interval(secs => CAST(:every_seconds AS float8)), updated_at = now()
WHERE name = CAST(:duty AS text) AND holder = CAST(:holder AS text)
RETURNING name;
