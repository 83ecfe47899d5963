-- Reads for people: a row and its history, listings, counts and gauges of the queue, limits and pauses in
-- force, why rows wait, and the time page's aggregates. Run by the reports' store (store/reports.py).
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.
--
-- Reads of unfinished rows go through the status-led indexes ((status, ...) replace the partial indexes of
-- PostgreSQL) and the last hour of finished rows through (status, finished_at): none of them reads the
-- finished history, however long it grows.

-- name: list_pauses
-- The pauses of every controller (controller NULL) first, then each controller's; '*' first in each.
SELECT job_name, controller, paused_at, paused_by, reason FROM jenkins_job_pauses
ORDER BY controller IS NOT NULL, controller, job_name = '*' DESC, job_name;

-- name: get_job
SELECT id, job_name, parameters, status, priority, scheduled_at, attempts, max_attempts, resends, cancel_requested_at,
       dispatch_id, controller,
       jenkins_queue_id, build_number, build_url, jenkins_result, last_error, dedupe_key, lease_expires_at,
       concurrency_key, fairness_key, started_at, created_at, updated_at, finished_at
FROM jenkins_jobs_queue WHERE id = :id;

-- name: job_events
SELECT id, at, event, from_status, to_status, dispatch_id, actor, detail
FROM jenkins_job_events WHERE job_id = :id ORDER BY id;

-- name: list_jobs
-- A parameter's key is quoted into a JSON path (callers allow only letters, digits, '_', '-' and '.' in it).
-- Every column get_job reads (ls --json carries all that show does).
SELECT id, job_name, parameters, status, priority, scheduled_at, attempts, max_attempts, resends,
       cancel_requested_at, dispatch_id, controller, jenkins_queue_id, build_number, build_url, jenkins_result,
       last_error, dedupe_key, lease_expires_at, concurrency_key, fairness_key, started_at, created_at, updated_at,
       finished_at
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

-- name: limit_history
SELECT id, at, controller, job_name, kind, previous, max_in_flight, previous_per_minute, per_minute, changed_by
FROM jenkins_job_limit_events ORDER BY id DESC LIMIT :limit;

-- name: list_limits
-- In flight counted as the capped claim counts (claim_in_flight: every spelling of the job's name).
SELECT l.controller, l.job_name, l.max_in_flight, {{claim_in_flight}} AS in_flight,
       l.per_minute, {{claim_started}} AS started_last_minute
FROM jenkins_job_limits l ORDER BY l.job_name, l.controller;

-- name: key_holds
-- The first three rows in flight cut from their whole list (MariaDB has no derived table that refers outside it);
-- the keys asked for by JSON_CONTAINS, which compares as the binary collation of the column does.
SELECT k.concurrency_key, k.max_in_flight, {{claim_key_in_flight}} AS in_flight,
       (SELECT SUBSTRING_INDEX(GROUP_CONCAT(f.id ORDER BY f.id SEPARATOR ','), ',', 3) FROM jenkins_jobs_queue f
        WHERE f.status = 'processing' AND f.concurrency_key = k.concurrency_key) AS holders,
       CASE WHEN k.supersede THEN (SELECT MAX(n.id) FROM jenkins_jobs_queue n
                                   WHERE n.status = 'pending' AND n.concurrency_key = k.concurrency_key) END AS newest
FROM jenkins_key_limits k
WHERE JSON_CONTAINS(:keys, JSON_QUOTE(k.concurrency_key));

-- name: list_key_limits
-- decode: supersede bool, stop_running bool
SELECT k.concurrency_key, k.max_in_flight, k.supersede, k.stop_running, {{claim_key_in_flight}} AS in_flight,
       (SELECT COUNT(*) FROM jenkins_jobs_queue q
        WHERE q.status = 'pending' AND q.concurrency_key = k.concurrency_key) AS pending
FROM jenkins_key_limits k ORDER BY k.concurrency_key;

-- name: stats_per_controller
-- Per controller: pending, due and processing rows (the claim index and the status-led ones).
SELECT controller, count(CASE WHEN status = 'pending' THEN 1 END) AS pending,
       count(CASE WHEN status = 'pending' AND scheduled_at <= NOW(6) THEN 1 END) AS due,
       count(CASE WHEN status = 'processing' THEN 1 END) AS in_flight
FROM jenkins_jobs_queue WHERE status IN ('pending', 'processing')
GROUP BY controller ORDER BY controller;

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
-- and what the stores read back with datetime.fromisoformat into an aware datetime.
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

-- name: list_key_rules
SELECT job_name, concurrency_template, fairness_template, changed_by, updated_at
FROM jenkins_key_rules ORDER BY LOWER(job_name);
