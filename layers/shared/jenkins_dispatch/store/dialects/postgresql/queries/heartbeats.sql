-- What each dispatcher records after a pass (its heartbeat; its gauges, which also feed the queue-depth
-- aggregate) and what others read of it: the dispatchers, and Jenkins seen failing as a whole.
-- Run by the dispatcher's store (the writes) and the reports' store (the reads).
--
-- One row per dispatcher (migrations/0005_dispatchers.sql); a tiny table, read whole.

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
        -- Each capped concurrency key: its cap and its rows in flight on every controller (the in-flight-by-key
        -- index; NULL: no key capped), for /metrics.
        (SELECT jsonb_object_agg(k.concurrency_key, jsonb_build_object(
                    'cap', k.max_in_flight,
                    'in_flight', (SELECT count(*) FROM jenkins_jobs_queue f
                                  WHERE f.status = 'processing' AND f.concurrency_key = k.concurrency_key)))
         FROM jenkins_key_limits k) AS capped_keys,
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

-- name: jenkins_outage
{{latest_word_on_jenkins}};
