-- Every statement jenkins-dispatch runs on MySQL 8.0 and MariaDB 10.6+, in one place: the same names,
-- parameters and result columns as sql/postgresql/queries.sql, which documents what each one means.
--
-- Each block starts with "-- name: NAME" (run by that name by queue.py, the migration runner's by
-- migrations.py) or "-- fragment: NAME" (text several blocks share, included as {{NAME}}); statements.py
-- documents the format. How store/mysql.py runs a block:
--   * a block may hold several statements separated by ';': all go to the server in one round trip and,
--     outside db.transaction(), inside one transaction (an error rolls the whole block back); the rows
--     returned are those of the last result set that has columns;
--   * parameters are written :name and bound by the client (a list becomes (a, b, c), None NULL,
--     True/False 1/0, an aware datetime naive UTC); a block may ignore some of the parameters it is given;
--   * sessions run with time_zone '+00:00' (NOW(6) is UTC, as every DATETIME(6) column is) and READ
--     COMMITTED; DATETIME values come back as aware UTC datetimes;
--   * MySQL has no boolean type and returns JSON as text: a "-- decode: col bool, col2 json" line in a
--     block converts those result columns, so callers get what PostgreSQL gives them;
--   * a user variable (@jd_...) a block reads is set by that block first: sessions are reused.
--
-- Only SQL both MySQL 8.0 and MariaDB 10.6+ accept: no RETURNING, no DESC index, no FULL JOIN, no FILTER.
-- Seconds are floats computed as TIMESTAMPDIFF(MICROSECOND, a, b) / 1e6.

-- ============================================================================ operator
-- Reads for the operator (show, ls, stats, doctor, bulk selections), caps, pruning and dispatcher
-- heartbeats. Reads of unfinished rows go through the status-led indexes ((status, ...) replace the
-- partial indexes of PostgreSQL) and the last hour of finished rows through (status, finished_at):
-- none of them reads the finished history, however long it grows.

-- name: get_job
SELECT id, job_name, parameters, status, priority, scheduled_at, attempts, max_attempts, resends, cancel_requested_at,
       dispatch_id,
       jenkins_queue_id, build_number, build_url, jenkins_result, last_error, dedupe_key, lease_expires_at,
       started_at, created_at, updated_at, finished_at
FROM jenkins_jobs_queue WHERE id = :id;

-- name: get_job_by_dispatch_id
SELECT id, job_name, status, dispatch_id, jenkins_queue_id, build_number, jenkins_result
FROM jenkins_jobs_queue WHERE dispatch_id = :dispatch_id;

-- name: get_job_by_queue_id
-- The webhook's fallback: Jenkins queue ids are only unique per job and may be reused after a crash.
SELECT id, job_name, status, dispatch_id, jenkins_queue_id, build_number, jenkins_result
FROM jenkins_jobs_queue WHERE jenkins_queue_id = :queue_id AND job_name = :job_name
ORDER BY (status = 'processing') DESC, id DESC LIMIT 1;

-- name: was_dispatched
-- Did this dispatch_id ever belong to a claim? Tells a stale notification from an unknown one.
SELECT job_id FROM jenkins_job_events WHERE dispatch_id = :dispatch_id AND event = 'claimed' LIMIT 1;

-- name: job_events
SELECT id, at, event, from_status, to_status, dispatch_id, actor, detail
FROM jenkins_job_events WHERE job_id = :id ORDER BY id;

-- name: list_jobs
SELECT id, job_name, status, priority, scheduled_at, attempts, max_attempts, dispatch_id, jenkins_queue_id,
       build_number, build_url, jenkins_result, last_error, created_at, updated_at, finished_at
FROM jenkins_jobs_queue
WHERE (:status IS NULL OR status = :status)
  AND (:job_name IS NULL OR job_name = :job_name)
  AND (:since IS NULL OR updated_at >= :since)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC
LIMIT :limit;

-- name: select_jobs_matching
-- Bulk retry (final rows) and cancel (unfinished ones): what the filters select, by id, bounded; `total`
-- counts every match (the window is computed before LIMIT). The pattern escapes its wildcards with '\'
-- (written '\\': a backslash escapes inside MySQL string literals). :final is a literal 1 or 0 once bound,
-- so the optimizer keeps one branch of the status test and reads the rows of those statuses only.
SELECT id, job_name, status, updated_at, count(*) OVER () AS total
FROM jenkins_jobs_queue
WHERE ((:final AND status IN ('completed', 'failed', 'cancelled'))
       OR (NOT :final AND status IN ('pending', 'processing')))
  AND (:status IS NULL OR status = :status)
  AND (:job_name IS NULL OR job_name = :job_name)
  AND (:since IS NULL OR updated_at >= :since)
  AND (:error_pattern IS NULL OR lower(last_error) LIKE lower(:error_pattern) ESCAPE '\\')
ORDER BY id
LIMIT :limit;

-- name: prune_batch
-- Finished rows older than the cutoff, a bounded batch at a time, with their events; returns how many
-- rows went (`deleted`). MySQL allows no LIMIT on a multi-table DELETE: the batch is picked first (walking
-- the finished_at index in order, locking only the rows it takes and skipping rows others hold), then its
-- events and rows are deleted by id.
SET @jd_pruned = NULL;
SELECT JSON_ARRAYAGG(id) INTO @jd_pruned FROM (
    SELECT id FROM jenkins_jobs_queue
    WHERE finished_at < NOW(6) - INTERVAL CAST(:days * 86400000000 AS SIGNED) MICROSECOND
      AND status IN ('completed', 'failed', 'cancelled')
    ORDER BY finished_at
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
) AS doomed;
DELETE e FROM jenkins_job_events e
    JOIN JSON_TABLE(COALESCE(@jd_pruned, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) AS doomed ON e.job_id = doomed.id;
DELETE q FROM jenkins_jobs_queue q
    JOIN JSON_TABLE(COALESCE(@jd_pruned, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) AS doomed ON q.id = doomed.id;
SELECT ROW_COUNT() AS deleted;

-- fragment: op_job_key
-- The unique key of a job name in jenkins_job_limits and jenkins_job_pauses (a hash: the names are longer
-- than an InnoDB key holds), for :job_name.
UNHEX(SHA2(LOWER(:job_name), 256))

-- name: set_limit
-- VALUES(col) rather than MySQL 8.0.20's row alias, which MariaDB does not know. No trigger wakes the
-- dispatcher on MySQL: it sees a raised cap at its next poll.
INSERT INTO jenkins_job_limits (job_name, max_in_flight) VALUES (:job_name, :max_in_flight)
ON DUPLICATE KEY UPDATE max_in_flight = VALUES(max_in_flight), updated_at = NOW(6);
SELECT job_name, max_in_flight FROM jenkins_job_limits WHERE job_key = {{op_job_key}};

-- name: remove_limit
SET @jd_removed = 0;
DELETE FROM jenkins_job_limits WHERE job_key = {{op_job_key}};
SET @jd_removed = ROW_COUNT();
SELECT :job_name AS job_name FROM DUAL WHERE @jd_removed > 0;

-- name: list_limits
SELECT l.job_name, l.max_in_flight,
       (SELECT count(*) FROM jenkins_jobs_queue q WHERE q.status = 'processing' AND q.job_name = l.job_name) AS in_flight
FROM jenkins_job_limits l ORDER BY l.job_name;

-- fragment: op_may_see_transactions
-- Whether this account holds PROCESS, without which information_schema.innodb_trx refuses to be read at all
-- (an error, not an empty table) and processlist lists our own account's sessions only. Granted through a
-- role, it is not seen here: the reads then stay as without it.
EXISTS (SELECT 1 FROM information_schema.USER_PRIVILEGES
        WHERE PRIVILEGE_TYPE = 'PROCESS'
          AND GRANTEE = CONCAT('''', SUBSTRING(CURRENT_USER(), 1, CHAR_LENGTH(CURRENT_USER())
                                                - CHAR_LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)) - 1),
                               '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), ''''))

-- fragment: op_oldest_transaction
-- Sets @jd_trx_session, @jd_trx_state and @jd_trx_seconds to the oldest transaction open in another session
-- whose default database is ours (all NULL when there is none, or when innodb_trx is closed to us: then the
-- read is not even prepared). InnoDB's purge is held back by any old transaction on the server, but, as on
-- PostgreSQL, what the operator can act on is a client of this database. trx_started is shown in the
-- session's time zone, UTC in ours.
SET @jd_trx_session = NULL, @jd_trx_state = NULL, @jd_trx_seconds = NULL;
SET @jd_trx_read = IF({{op_may_see_transactions}},
    'SELECT t.trx_mysql_thread_id, t.trx_state, TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) / 1e6
     INTO @jd_trx_session, @jd_trx_state, @jd_trx_seconds
     FROM information_schema.innodb_trx t JOIN information_schema.processlist p ON p.ID = t.trx_mysql_thread_id
     WHERE t.trx_mysql_thread_id <> CONNECTION_ID() AND p.DB = DATABASE()
     ORDER BY t.trx_started, t.trx_mysql_thread_id LIMIT 1',
    'DO 0');
PREPARE jd_trx_read FROM @jd_trx_read;
EXECUTE jd_trx_read;
DEALLOCATE PREPARE jd_trx_read

-- name: stats
-- Reads only the status-led indexes of unfinished rows and the last hour of (status, finished_at): it stays
-- fast however long the history is. rows_estimate is InnoDB's estimate (information_schema.TABLES).
-- decode: everything_paused bool
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
    (SELECT TABLE_ROWS FROM information_schema.TABLES
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jenkins_jobs_queue') AS rows_estimate,
    @jd_trx_seconds AS oldest_transaction_seconds,
    EXISTS (SELECT 1 FROM jenkins_job_pauses WHERE job_name = '*') AS everything_paused,
    (SELECT count(*) FROM jenkins_job_pauses WHERE job_name <> '*') AS paused_jobs;

-- name: gauges
-- What the dispatcher reports after each pass, and when it must look again (the next pending row that
-- becomes due, the next lease that expires): status-led index reads only, and the database's oldest open
-- transaction (a long one holds back InnoDB's purge: old row versions pile up and reads slow down). The
-- oldest pending age leaves out paused jobs (an operator's choice, not a stuck queue: no alarm for it);
-- everything paused: none. Plain consistent reads: no row is locked.
-- decode: everything_paused bool
{{op_oldest_transaction}};
SELECT
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS processing,
    (SELECT TIMESTAMPDIFF(MICROSECOND, min(scheduled_at), NOW(6)) / 1e6 FROM jenkins_jobs_queue q
      WHERE status = 'pending' AND scheduled_at <= NOW(6)
        AND q.job_name NOT IN (SELECT p.job_name FROM jenkins_job_pauses p)
        AND NOT EXISTS (SELECT 1 FROM jenkins_job_pauses p WHERE p.job_name = '*')) AS oldest_pending_seconds,
    EXISTS (SELECT 1 FROM jenkins_job_pauses WHERE job_name = '*') AS everything_paused,
    (SELECT count(*) FROM jenkins_job_pauses WHERE job_name <> '*') AS paused_jobs,
    (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), min(scheduled_at)) / 1e6 FROM jenkins_jobs_queue
      WHERE status = 'pending' AND scheduled_at > NOW(6)) AS next_due_seconds,
    (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), min(lease_expires_at)) / 1e6 FROM jenkins_jobs_queue
      WHERE status = 'processing') AS next_lease_seconds,
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'pending') AS pending,
    @jd_trx_seconds AS oldest_transaction_seconds;

-- name: stats_per_job
-- Each status is read on its own so that each read keeps to its status-led index (never the history).
-- No FULL JOIN in MySQL: every name is gathered first, then each count joined to it.
-- decode: paused bool
WITH waiting AS (
    SELECT job_name, count(*) AS pending,
           TIMESTAMPDIFF(MICROSECOND, min(CASE WHEN scheduled_at <= NOW(6) THEN scheduled_at END), NOW(6)) / 1e6
               AS oldest_pending_seconds
    FROM jenkins_jobs_queue WHERE status = 'pending' GROUP BY job_name
), running AS (
    SELECT job_name, count(*) AS in_flight FROM jenkins_jobs_queue WHERE status = 'processing' GROUP BY job_name
), recent AS (
    SELECT job_name,
           count(CASE WHEN status = 'completed' THEN 1 END) AS completed_last_hour,
           count(CASE WHEN status = 'failed' THEN 1 END) AS failed_last_hour
    FROM jenkins_jobs_queue
    WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at > NOW(6) - INTERVAL 1 HOUR
    GROUP BY job_name
), names AS (
    SELECT job_name FROM waiting UNION SELECT job_name FROM running UNION SELECT job_name FROM recent
    UNION SELECT job_name FROM jenkins_job_limits
    UNION SELECT job_name FROM jenkins_job_pauses WHERE job_name <> '*'
)
SELECT n.job_name, coalesce(w.pending, 0) AS pending, coalesce(r.in_flight, 0) AS in_flight,
       l.max_in_flight AS cap, coalesce(h.completed_last_hour, 0) AS completed_last_hour,
       coalesce(h.failed_last_hour, 0) AS failed_last_hour, w.oldest_pending_seconds,
       p.job_name IS NOT NULL AS paused, p.paused_at, p.reason AS pause_reason
FROM names n
LEFT JOIN waiting w ON w.job_name = n.job_name
LEFT JOIN running r ON r.job_name = n.job_name
LEFT JOIN recent h ON h.job_name = n.job_name
LEFT JOIN jenkins_job_limits l ON l.job_name = n.job_name
LEFT JOIN jenkins_job_pauses p ON p.job_name = n.job_name
ORDER BY n.job_name;

-- fragment: op_utc_text
-- A DATETIME(6) of ours (UTC) as ISO 8601 text with its offset, inside JSON: what PostgreSQL's jsonb gives,
-- and what queue.py reads back with datetime.fromisoformat into an aware datetime.
'%Y-%m-%dT%H:%i:%s.%f+00:00'

-- name: waiting_context
-- What decides why pending rows wait, for a page of rows in one statement: the caps and in-flight counts of
-- the page's job names (:job_names, a JSON array), every pause, all rows in flight, and Jenkins's state.
-- decode: jobs json, pauses json, jenkins json
WITH wanted AS (
    SELECT DISTINCT j.job_name
    FROM JSON_TABLE(:job_names, '$[*]' COLUMNS (job_name VARCHAR(1024) PATH '$')) AS j
)
SELECT
    (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'processing') AS total_in_flight,
    (SELECT coalesce(JSON_OBJECTAGG(w.job_name,
                JSON_OBJECT('cap', l.max_in_flight,
                            'in_flight', (SELECT count(*) FROM jenkins_jobs_queue q
                                          WHERE q.status = 'processing' AND q.job_name = w.job_name))),
            JSON_OBJECT())
     FROM wanted w LEFT JOIN jenkins_job_limits l ON l.job_name = w.job_name) AS jobs,
    (SELECT coalesce(JSON_ARRAYAGG(JSON_OBJECT('job_name', job_name,
                                               'paused_at', DATE_FORMAT(paused_at, {{op_utc_text}}),
                                               'paused_by', paused_by, 'reason', reason)), JSON_ARRAY())
     FROM jenkins_job_pauses) AS pauses,
    -- Jenkins as a whole, as the live dispatcher that asked it last found it.
    (SELECT JSON_OBJECT('since', DATE_FORMAT(w.since, {{op_utc_text}}), 'reason', w.reason)
     FROM ({{op_latest_word_on_jenkins}}) AS w) AS jenkins;

-- name: in_flight_counts
-- Processing rows per job: what the demo prints, and what the concurrency and chaos tests sample to prove
-- no cap is exceeded.
SELECT job_name, count(*) AS n FROM jenkins_jobs_queue WHERE status = 'processing' GROUP BY job_name;

-- name: server_identity
-- `doctor`: who we are (the account, user@host) on which server, proving the session works.
SELECT CURRENT_USER() AS user_name, DATABASE() AS dbname, VERSION() AS server_version;

-- name: applied_migrations
-- `doctor`: the schema versions `migrate` recorded (the table is missing before the first migrate).
SELECT version, name FROM jenkins_dispatch_migrations ORDER BY version;

-- name: oldest_transaction
-- `doctor`: the oldest transaction open in another session of this database (one row; its columns null
-- when none): the session id (`KILL <pid>` ends it), its account, the program name it gave when connecting
-- (performance_schema, when enabled and readable for the session's account; else NULL), its state and age.
-- hidden_sessions: without PROCESS no transaction can be read at all; the other sessions we can list (our
-- own account's: other accounts' are not even listed) are counted as hidden then.
{{op_oldest_transaction}};
SELECT o.ID AS pid, o.USER AS user_name,
       (SELECT a.ATTR_VALUE FROM performance_schema.session_account_connect_attrs a
         WHERE a.PROCESSLIST_ID = o.ID AND a.ATTR_NAME = 'program_name') AS application_name,
       CASE WHEN o.ID IS NULL THEN NULL
            WHEN @jd_trx_state = 'LOCK WAIT' THEN 'waiting for a lock'
            WHEN o.COMMAND = 'Sleep' THEN 'idle in transaction'
            ELSE 'active' END AS state,
       CASE WHEN o.ID IS NOT NULL THEN @jd_trx_seconds END AS seconds,
       CASE WHEN {{op_may_see_transactions}} THEN 0
            ELSE (SELECT count(*) FROM information_schema.processlist
                  WHERE ID <> CONNECTION_ID() AND DB = DATABASE()) END AS hidden_sessions
FROM (SELECT 1 AS one) AS one
LEFT JOIN information_schema.processlist o ON o.ID = @jd_trx_session;

-- name: waiting_job_names
-- `doctor`: the distinct job names of unfinished rows, those with the most rows first, each with its count, and
-- how many names there are in all (the status-led indexes of unfinished rows only). Ties go by the names'
-- bytes, as PostgreSQL's C collation orders them, so that both dialects check the same names.
SELECT job_name, count(*) AS waiting, count(*) OVER () AS job_names
FROM jenkins_jobs_queue WHERE status IN ('pending', 'processing')
GROUP BY job_name ORDER BY count(*) DESC, job_name COLLATE utf8mb4_bin LIMIT :limit;

-- ---------------------------------------------------------------------------- dispatcher heartbeats
-- One row per dispatcher; a tiny table, read whole.

-- name: record_heartbeat
-- After each pass: upsert the dispatcher's row, and drop rows not seen for a day. The Jenkins state is
-- changed only by a pass that asked Jenkins (:jenkins_ok NULL: not asked, keep what is known); an outage
-- keeps its first "since" until Jenkins answers again. The update's assignments read the row's old values:
-- none of them reads a column an earlier one changed (MySQL applies them left to right).
DELETE FROM jenkins_dispatchers WHERE last_pass_at < NOW(6) - INTERVAL 1 DAY AND id <> :id;
INSERT INTO jenkins_dispatchers (id, kind, host, pid, started_at, stale_after_seconds, last_pass_at,
                                 last_outcome, last_detail, passes, jenkins_checked_at,
                                 jenkins_unavailable_since, jenkins_reason)
VALUES (:id, :kind, :host, :pid, :started_at, :stale_after_seconds, NOW(6), :outcome, :detail, :passes,
        CASE WHEN :jenkins_ok IS NOT NULL THEN NOW(6) END,
        CASE WHEN NOT :jenkins_ok THEN NOW(6) END,
        CASE WHEN NOT :jenkins_ok THEN :jenkins_reason END)
ON DUPLICATE KEY UPDATE
    kind = VALUES(kind), host = VALUES(host), pid = VALUES(pid), started_at = VALUES(started_at),
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

-- fragment: op_live_dispatcher
-- A dispatcher is live while it passed within its own window and did not say it stopped.
(TIMESTAMPDIFF(MICROSECOND, last_pass_at, NOW(6)) < stale_after_seconds * 1e6 AND last_outcome <> 'stopped')

-- name: dispatchers
-- Every dispatcher seen in the last day, the most recent pass first.
-- decode: live bool
SELECT id, kind, host, pid, started_at, last_pass_at,
       TIMESTAMPDIFF(MICROSECOND, last_pass_at, NOW(6)) / 1e6 AS last_pass_seconds,
       {{op_live_dispatcher}} AS live,
       last_outcome, last_detail, passes, jenkins_unavailable_since, jenkins_reason
FROM jenkins_dispatchers
WHERE last_pass_at > NOW(6) - INTERVAL 1 DAY
ORDER BY last_pass_at DESC, id;

-- fragment: op_latest_word_on_jenkins
-- The latest word about Jenkins among live dispatchers: the one that asked Jenkins last.
SELECT id AS dispatcher_id, jenkins_unavailable_since AS since, jenkins_reason AS reason,
       jenkins_checked_at AS checked_at
FROM jenkins_dispatchers
WHERE jenkins_checked_at IS NOT NULL AND {{op_live_dispatcher}}
ORDER BY jenkins_checked_at DESC, id
LIMIT 1

-- name: jenkins_outage
{{op_latest_word_on_jenkins}};

-- ==== the migration runner
-- DDL commits implicitly on MySQL: `migrate` runs without a wrapping transaction, each migration file being
-- safe to run again after a failure part-way through. Concurrent runs are serialised by a named lock of
-- the session (not of a transaction), taken before anything else; the runner ends the session in a finally,
-- which releases it (RELEASE_LOCK would be a MySQL-only statement, and could itself fail).

-- name: lock_migrations
-- 1 once this session holds the lock; 0 after waiting 60 s for another `migrate` (NULL on an error).
-- First, MariaDB's per-session statement time limit (store/mysql.py sets it) is lifted for the rest of the
-- session: it would cut the wait short, or stop an ALTER of a large seed table half-way. MySQL's
-- own limit covers SELECTs only and it has no such variable, so the SET is prepared from text on MariaDB only.
SET @jd_sql = IF(VERSION() LIKE '%MariaDB%',
                 'SET SESSION max_statement_time = 0', 'DO 0');
PREPARE jd_sql FROM @jd_sql;
EXECUTE jd_sql;
DEALLOCATE PREPARE jd_sql;
SELECT GET_LOCK('jenkins-dispatch-migrate', 60) AS locked;

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS jenkins_dispatch_migrations (
    version    INT NOT NULL PRIMARY KEY,
    name       VARCHAR(255) NOT NULL,
    applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- name: migration_versions
SELECT version FROM jenkins_dispatch_migrations;

-- name: record_migration
INSERT INTO jenkins_dispatch_migrations (version, name) VALUES (:version, :name);
