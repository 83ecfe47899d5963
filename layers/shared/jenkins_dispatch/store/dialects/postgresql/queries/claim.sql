-- Taking pending rows: the claims (uncapped, and capped under the caps lock), whether caps are in force, the
-- fingerprint a polling dispatcher compares between passes, and the sweep of rows naming an unknown controller.
-- Run by the dispatcher's store (store/dispatcher.py).

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
-- dialects/mysql/queries/claim.sql), kept here so that DispatcherStore.fingerprint answers on both engines (a PostgreSQL
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

-- name: caps_in_force
SELECT EXISTS (SELECT 1 FROM jenkins_job_limits) AS any_job_limits;

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
