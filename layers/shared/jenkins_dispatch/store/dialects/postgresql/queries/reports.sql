-- Reads for people: a row and its history, listings, counts and gauges of the queue, limits and pauses in
-- force, why rows wait, and the time page's aggregates. Run by the reports' store (store/reports.py).

-- name: list_pauses
-- The pauses of every controller (controller NULL) first, then each controller's; '*' first in each.
SELECT job_name, controller, paused_at, paused_by, reason FROM jenkins_job_pauses
ORDER BY controller NULLS FIRST, job_name = '*' DESC, job_name;

-- name: get_job
-- parameters as text: its numbers are read as written (1.50 stays 1.50), not through the driver's floats.
SELECT id, job_name, parameters::text AS parameters, status, priority, scheduled_at, attempts, max_attempts, resends, cancel_requested_at,
       dispatch_id, controller,
       jenkins_queue_id, build_number, build_url, jenkins_result, last_error, dedupe_key, lease_expires_at,
       concurrency_key, fairness_key, started_at, created_at, updated_at, finished_at
FROM jenkins_jobs_queue WHERE id = :id;

-- name: job_events
SELECT id, at, event, from_status, to_status, dispatch_id, actor, detail
FROM jenkins_job_events WHERE job_id = :id ORDER BY id;

-- name: list_jobs
-- The job list (CLI `ls`, the web page's /jobs), every filter optional: status, job, time; last_error
-- contains :error_pattern (ILIKE, its wildcards escaped with '\'); up to three parameter values
-- (:param_key_N's value, as text, equals :param_value_N). Newest first, paged by id; a filter no index
-- serves walks the id index back until the page is full.
-- Every column get_job reads (ls --json carries all that show does).
SELECT id, job_name, parameters::text AS parameters, status, priority, scheduled_at, attempts, max_attempts, resends,
       cancel_requested_at, dispatch_id, controller, jenkins_queue_id, build_number, build_url, jenkins_result,
       last_error, dedupe_key, lease_expires_at, concurrency_key, fairness_key, started_at, created_at, updated_at,
       finished_at
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

-- name: limit_history
-- The latest cap and rate changes, newest first (the primary key's order).
SELECT id, at, controller, job_name, kind, previous, max_in_flight, previous_per_minute, per_minute, changed_by
FROM jenkins_job_limit_events ORDER BY id DESC LIMIT :limit;

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

-- name: key_holds
-- "Why waiting" for rows holding the concurrency keys :keys (a JSON array of text): each capped key's cap, its rows
-- in flight on every controller and the first three of them, and, where newest wins, its newest pending row.
SELECT k.concurrency_key, k.max_in_flight,
       (SELECT count(*) FROM jenkins_jobs_queue f
        WHERE f.status = 'processing' AND f.concurrency_key = k.concurrency_key) AS in_flight,
       (SELECT string_agg(CAST(h.id AS text), ',' ORDER BY h.id)
        FROM (SELECT f.id FROM jenkins_jobs_queue f
              WHERE f.status = 'processing' AND f.concurrency_key = k.concurrency_key ORDER BY f.id LIMIT 3) h)
           AS holders,
       CASE WHEN k.supersede THEN (SELECT max(n.id) FROM jenkins_jobs_queue n
                                   WHERE n.status = 'pending' AND n.concurrency_key = k.concurrency_key) END AS newest
FROM jenkins_key_limits k
WHERE k.concurrency_key IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)));

-- name: list_key_limits
-- Each key's cap with its rows in flight (counted as the capped claim counts them) and its rows waiting.
SELECT k.concurrency_key, k.max_in_flight, k.supersede, k.stop_running,
       (SELECT count(*) FROM jenkins_jobs_queue q
        WHERE q.status = 'processing' AND q.concurrency_key = k.concurrency_key) AS in_flight,
       (SELECT count(*) FROM jenkins_jobs_queue q
        WHERE q.status = 'pending' AND q.concurrency_key = k.concurrency_key) AS pending
FROM jenkins_key_limits k ORDER BY k.concurrency_key;

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

-- name: list_key_rules
-- Every job's rule for the keys its rows are given when their INSERT leaves them out, by job name.
SELECT job_name, concurrency_template, fairness_template, changed_by, updated_at
FROM jenkins_key_rules ORDER BY job_key;
