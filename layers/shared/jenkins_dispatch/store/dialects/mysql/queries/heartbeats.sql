-- What each dispatcher records after a pass (its heartbeat; its gauges, which also feed the queue-depth
-- aggregate) and what others read of it: the dispatchers, and Jenkins seen failing as a whole.
-- Run by the dispatcher's store (the writes) and the reports' store (the reads).
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.
--
-- One row per dispatcher; a tiny table, read whole.

-- name: gauges
-- What the dispatcher reports after each pass, and when it must look again (the next pending row that
-- becomes due, the next lease that expires): status-led index reads only, and the database's oldest open
-- transaction (a long one holds back InnoDB's purge: old row versions pile up and reads slow down). The
-- oldest pending age leaves out paused jobs (an operator's choice, not a stuck queue: no alarm for it);
-- everything paused: none. Plain consistent reads: no queue row is locked. The counts go through variables into
-- the queue-depth chart (jenkins_queue_depth, 0009_job_stats.sql) in the same round trip: the most pending and
-- processing rows seen in the current five minutes (MySQL writes the row only when a count rose).
-- decode: everything_paused bool, processing_per_controller json, capped_keys json
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
    -- Each capped concurrency key: its cap and its rows in flight on every controller (NULL: no key capped).
    (SELECT JSON_OBJECTAGG(k.concurrency_key, JSON_OBJECT('cap', k.max_in_flight, 'in_flight', {{claim_key_in_flight}}))
     FROM jenkins_key_limits k) AS capped_keys,
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

-- name: jenkins_outage
{{op_latest_word_on_jenkins}};
