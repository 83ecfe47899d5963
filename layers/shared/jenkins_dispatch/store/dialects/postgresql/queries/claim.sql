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

-- fragment: claim_order
-- The seed's order (priority DESC, scheduled_at, id), which the claim index walks; claim_order_q the same of the
-- queue's alias q. The *_fair variants of the claims take fair_order instead: the fair-share order, which the fair
-- claim index walks (0022_fair_share.sql), while any pending row has a fairness key (claim_plan asks).
priority DESC, scheduled_at, id

-- fragment: claim_order_q
q.priority DESC, q.scheduled_at, q.id

-- fragment: fair_order
priority DESC, fair_round, scheduled_at, id

-- fragment: fair_order_q
q.priority DESC, q.fair_round, q.scheduled_at, q.id

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
    RETURNING q.id, q.job_name, q.parameters, q.priority, q.fair_round, q.scheduled_at, q.attempts,
              q.max_attempts, q.dispatch_id, q.lease_expires_at
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'claimed', 'pending', 'processing', dispatch_id, :actor,
           'attempt ' || attempts || ' of ' || max_attempts
    FROM claimed
)

-- fragment: claim_result
-- parameters as text: read through the driver's JSON decoding, numbers would become floats (1.10 → 1.1).
SELECT id, job_name, CAST(parameters AS text) AS parameters, attempts, max_attempts, dispatch_id
FROM claimed ORDER BY {{claim_order}}

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
      -- The same for a capped key, whatever the job.
      AND (q.concurrency_key IS NULL OR q.concurrency_key NOT IN (SELECT k.concurrency_key FROM jenkins_key_limits k))
      {{not_paused}}
    ORDER BY {{claim_order}}
    LIMIT :batch_size
    FOR UPDATE SKIP LOCKED
), claimed AS (
    {{claim_update}}
    FROM picked
    WHERE q.id = picked.id
    {{claim_end}};

-- variant: claim_batch_fair = claim_batch with claim_order=fair_order

-- name: queue_fingerprint
-- Marks that move whenever something a pass would act on changes: the MySQL dispatcher's polling probe (see
-- dialects/mysql/queries/claim.sql), kept here so that DispatcherStore.fingerprint answers on both engines (a PostgreSQL
-- dispatcher waits on LISTEN instead).
SELECT (SELECT max(id) FROM jenkins_jobs_queue) AS last_job_id,
       (SELECT max(id) FROM jenkins_job_events) AS last_event_id,
       (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS processing,
       (SELECT concat_ws('/', count(*), sum(max_in_flight), max(updated_at)) FROM jenkins_job_limits) AS limits,
       (SELECT concat_ws('/', count(*), sum(max_in_flight), max(updated_at)) FROM jenkins_key_limits) AS key_limits,
       (SELECT concat_ws('/', count(*), max(paused_at)) FROM jenkins_job_pauses) AS pauses,
       (SELECT concat_ws('/', count(*), max(updated_at)) FROM jenkins_job_schedules) AS schedules;

-- name: lock_caps
-- Capped claims run one at a time (transaction-scoped lock), each seeing every earlier claim committed.
SELECT pg_advisory_xact_lock({{lock:caps}});

-- fragment: capped_rooms
-- The capped claims' rooms (claim_batch_capped and claim_batch_keyed): each capped job's, and what the global
-- and the controller's caps leave.
job_room AS (
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

-- fragment: capped_take
-- The capped claims' end: the chosen rows taken by primary key, logged, and their starts kept for the rates.
claimed AS (
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
{{claim_result}}

-- name: claim_batch_capped
-- As claim_batch, but never lets the processing rows of a job (every spelling of its name, on this controller)
-- exceed its jenkins_job_limits entry, nor the processing rows of the configured controllers (:controllers, their
-- names joined by ','; NULL: every controller; a controller removed from the configuration strands its rows in
-- flight, and they must not hold everyone else back) exceed :max_in_flight (NULL: no global cap), nor
-- the controller's processing rows exceed :controller_max_in_flight (NULL: no cap of its own), nor a rated job's
-- starts of the last minute exceed its rate (per_minute; 0013_rate_limits.sql). Run after lock_caps: each claim
-- counts the starts of every claim before it, so no set of dispatchers starts more than the rate in any minute.
WITH {{paused}}, {{capped_rooms}}
), picked AS MATERIALIZED (
    SELECT q.id, lower(q.job_name) AS job_key, q.priority, q.fair_round, q.scheduled_at FROM jenkins_jobs_queue q
    WHERE q.status = 'pending' AND q.controller = :controller AND q.scheduled_at <= now()
      AND NOT EXISTS (SELECT 1 FROM job_room r WHERE r.job_key = lower(q.job_name) AND r.room = 0)
      -- No key is capped as this pass began (claim_plan): a key capped since is left to the next pass's keyed
      -- claim (claim_batch_keyed), as claim_batch leaves a job capped meanwhile to this one.
      AND (q.concurrency_key IS NULL OR q.concurrency_key NOT IN (SELECT k.concurrency_key FROM jenkins_key_limits k))
      {{not_paused}}
    ORDER BY {{claim_order_q}}
    LIMIT (SELECT room FROM global_room)
    FOR UPDATE SKIP LOCKED
), chosen AS (
    SELECT p.id FROM (
        SELECT picked.*, row_number() OVER (PARTITION BY job_key ORDER BY {{claim_order}}) AS nth
        FROM picked
    ) p LEFT JOIN job_room r USING (job_key)
    WHERE r.room IS NULL OR p.nth <= r.room
), {{capped_take}};

-- variant: claim_batch_capped_fair = claim_batch_capped with claim_order=fair_order, claim_order_q=fair_order_q

-- name: claim_batch_keyed
-- claim_batch_capped when a concurrency key is capped (claim_plan says so as the pass begins): it also
-- never lets the processing rows holding a key exceed its jenkins_key_limits entry, on every controller and
-- whatever their job; where newest wins (supersede) it cancels the key's older pending rows first, and with
-- stop_running asks for the cancel of its older rows in flight. Apart from claim_batch_capped so that a
-- queue without key caps pays none of this.
WITH {{paused}}, {{capped_rooms}}
), key_room AS (
    -- Each capped key's room: its cap less its rows in flight on every controller (the in-flight-by-key index);
    -- and, for a key where newest wins, its newest pending row: the others, older, are superseded below.
    SELECT k.concurrency_key,
           greatest(k.max_in_flight - (SELECT count(*) FROM jenkins_jobs_queue f
                                       WHERE f.status = 'processing' AND f.concurrency_key = k.concurrency_key), 0)
               AS room,
           CASE WHEN k.supersede THEN (SELECT max(n.id) FROM jenkins_jobs_queue n
                                       WHERE n.status = 'pending' AND n.concurrency_key = k.concurrency_key) END
               AS newest,
           k.stop_running
    FROM jenkins_key_limits k
), key_held AS MATERIALIZED (
    SELECT coalesce(array_agg(concurrency_key) FILTER (WHERE room = 0), '{}') AS full_keys,
           coalesce(jsonb_object_agg(concurrency_key, newest) FILTER (WHERE newest IS NOT NULL), '{}') AS newest
    FROM key_room
), superseded AS (
    -- Newest wins: the older pending rows of such a key, on every controller, end cancelled, by this statement.
    -- Here, in the claim, rather than at the INSERT: a plain-SQL INSERT runs no code of ours, and the claim holds
    -- the caps lock, the only way a row of a capped key becomes processing, so a row is either claimed or
    -- superseded, never both. The claim below reads the same snapshot and leaves exactly these rows out.
    -- By primary key, the ids found key by key, each on the pending-by-key index (OFFSET 0 keeps the lateral a loop
    -- over the capped keys): a join may hash every keyed row instead.
    UPDATE jenkins_jobs_queue q
    SET status = 'cancelled', finished_at = now(), updated_at = now(),
        last_error = 'superseded by #' || (SELECT kr.newest FROM key_room kr WHERE kr.concurrency_key = q.concurrency_key)
    WHERE q.id = ANY (ARRAY(SELECT s.id FROM key_room kr
                            CROSS JOIN LATERAL (SELECT n.id FROM jenkins_jobs_queue n
                                                WHERE n.status = 'pending' AND n.concurrency_key = kr.concurrency_key
                                                  AND n.id < kr.newest OFFSET 0) s
                            WHERE kr.newest IS NOT NULL))
      AND q.status = 'pending'
    RETURNING q.id, q.dispatch_id, q.last_error
), superseded_logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'cancelled', 'pending', 'cancelled', dispatch_id, :actor, last_error FROM superseded
), stopping AS (
    -- `--supersede running`: the key's older rows in flight are asked to cancel, as an operator's `cancel` asks
    -- (request_cancel), and the reconciler carries it out on the row's own controller: a row whose trigger Jenkins
    -- answered has its lease ended now, so the next pass stops its queue item or build and settles it; one whose
    -- trigger is still on its way keeps its lease (whoever learns its queue id cancels it then).
    UPDATE jenkins_jobs_queue q
    SET cancel_requested_at = now(), updated_at = now(),
        lease_expires_at = CASE WHEN q.jenkins_queue_id IS NOT NULL OR q.build_number IS NOT NULL
                                THEN least(q.lease_expires_at, now()) ELSE q.lease_expires_at END
    WHERE q.id = ANY (ARRAY(SELECT s.id FROM key_room kr
                            CROSS JOIN LATERAL (SELECT f.id FROM jenkins_jobs_queue f
                                                WHERE f.status = 'processing' AND f.concurrency_key = kr.concurrency_key
                                                  AND f.id < kr.newest AND f.cancel_requested_at IS NULL OFFSET 0) s
                            WHERE kr.stop_running AND kr.newest IS NOT NULL))
      -- Checked again on the row as it is now (a settle may have ended it), as one row value: the planner would
      -- otherwise read the in-flight index, every row in flight, instead of the primary key.
      AND (q.status, q.cancel_requested_at IS NULL) = ('processing', true)
    RETURNING q.id, q.dispatch_id, q.concurrency_key
), stopping_logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT s.id, 'cancel_requested', 'processing', 'processing', s.dispatch_id, :actor,
           'superseded by #' || (SELECT kr.newest FROM key_room kr WHERE kr.concurrency_key = s.concurrency_key)
    FROM stopping s
), picked AS MATERIALIZED (
    SELECT q.id, lower(q.job_name) AS job_key, q.concurrency_key, q.priority, q.fair_round, q.scheduled_at
    FROM jenkins_jobs_queue q
    WHERE q.status = 'pending' AND q.controller = :controller AND q.scheduled_at <= now()
      AND NOT EXISTS (SELECT 1 FROM job_room r WHERE r.job_key = lower(q.job_name) AND r.room = 0)
      -- The keys' verdicts, read once (key_held): a key with no room, and each superseding key's newest pending row
      -- (an older row of it is superseded above, not claimed). A subquery here that reads the queue itself (key_room,
      -- or its counts) made every capped claim ~200 ms at 100,000 keyed rows on PostgreSQL 15 (measured).
      AND (q.concurrency_key IS NULL
           OR (q.concurrency_key <> ALL (CAST((SELECT full_keys FROM key_held) AS text[]))
               AND q.id >= coalesce(CAST((SELECT newest FROM key_held) ->> q.concurrency_key AS bigint), 0)))
      {{not_paused}}
    ORDER BY {{claim_order_q}}
    LIMIT (SELECT room FROM global_room)
    FOR UPDATE SKIP LOCKED
), chosen AS (
    -- A row within its job's room and its key's (a row left out by one still counts against the other: the claim
    -- may take fewer than it could, never more).
    SELECT p.id FROM (
        SELECT picked.*,
               row_number() OVER (PARTITION BY job_key ORDER BY {{claim_order}}) AS nth,
               row_number() OVER (PARTITION BY concurrency_key ORDER BY {{claim_order}}) AS nth_of_key
        FROM picked
    ) p LEFT JOIN job_room r USING (job_key) LEFT JOIN key_room kr USING (concurrency_key)
    WHERE (r.room IS NULL OR p.nth <= r.room) AND (kr.room IS NULL OR p.nth_of_key <= kr.room)
), {{capped_take}};

-- variant: claim_batch_keyed_fair = claim_batch_keyed with claim_order=fair_order, claim_order_q=fair_order_q

-- name: claim_plan
-- What a lane's claims take (DispatcherStore.claim_plan): any job capped, any key capped, and any pending row of
-- its controller with a fairness key (the fair claims then: one probe of the fair group index, where a controller's
-- keyed entries come before its NULL group's).
SELECT EXISTS (SELECT 1 FROM jenkins_job_limits) AS any_job_limits, EXISTS (SELECT 1 FROM jenkins_key_limits) AS any_keys,
       EXISTS (SELECT 1 FROM jenkins_jobs_queue
               WHERE status = 'pending' AND fair_round >= 0 AND controller = :controller
                 AND fairness_key IS NOT NULL) AS any_fair;

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
