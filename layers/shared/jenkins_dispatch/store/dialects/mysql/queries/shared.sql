-- What every statement jenkins-dispatch runs on MySQL 8.0 and MariaDB 10.6+ shares: the fragments that
-- statements of several files include, and how they are written. The statements are in the other files of this
-- folder, one per concern, with the same names and parameters in the same files as dialects/postgresql/queries/,
-- whose comments say what each statement is for; the comments here say how each is done without PostgreSQL's
-- means. statements.py reads the folder as one text, and a name is defined once in it.
--
-- Each block starts with "-- name: NAME" and is run under that name by a store (store/runner.py; the migration
-- runner's by migrations.py); "-- fragment: NAME" blocks are shared text, included as {{NAME}} (statements.py). A block
-- may hold several statements: session.py sends the whole block in ONE round trip, inside one
-- transaction (its own, or the caller's db.transaction()), and returns the rows of its last result set
-- that has columns. A "-- decode: COLUMN TYPE, ..." line converts result columns MySQL cannot type
-- (booleans come back as 0/1).
--
-- What PostgreSQL does with one statement is done here with a few:
--   * no RETURNING, no data-modifying CTE: a transition is UPDATE, then `SET @jd_changed = ROW_COUNT()`
--     (the session counts rows matched, not only rows changed), then the history row and the answer, each
--     `WHERE @jd_changed > 0`; a transition of several rows first collects the ids it takes, locked, into a
--     JSON array (a user variable) that the later statements of the block join through JSON_TABLE;
--   * every user variable a block reads is set at the block's start: sessions are reused;
--   * no advisory locks: rows of jenkins_dispatch_locks. 'caps' (FOR UPDATE) serialises capped claims;
--     'pauses' is taken shared by every claim before it reads the pauses and exclusively by pause_job, so
--     once a pause has committed no claim takes a row of its job. Both are released at COMMIT/ROLLBACK;
--   * no partial indexes: status leads each index, and generated columns stand in for the expressions
--     (claim_priority = -priority, so that the claim walks one ascending index in the seed's order;
--     open_dedupe_key, the dedupe_key of an unfinished row, unique);
--   * times are DATETIME(6) in UTC (our sessions run with time_zone '+00:00'); timestamps handed in as
--     ISO 8601 text may carry an offset, converted by the t_iso_utc fragment;
--   * MySQL evaluates an UPDATE's SET assignments left to right, each seeing the columns assigned before
--     it: no assignment below reads a column an earlier one in the same UPDATE changed.
--
-- Rules every transition here follows (as on PostgreSQL):
--   * one round trip per transition; its job_events row is written in the same block, so history can
--     never disagree with the row;
--   * every transition out of 'processing' is fenced on (id, dispatch_id, status = 'processing');
--   * a final row (completed, failed, cancelled) is never touched again except by the operator's retry;
--   * a build URL is never downgraded: a relative one is kept only while no absolute one is known.
--
-- Only SQL both MySQL 8.0 and MariaDB 10.6+ accept: no RETURNING, no DESC index, no FULL JOIN, no FILTER.
-- Seconds are floats computed as TIMESTAMPDIFF(MICROSECOND, a, b) / 1e6.

-- fragment: t_iso_utc
-- @jd_iso (ISO 8601 text, as the stores hand timestamps over: 'T' or ' ' between date and time, an optional
-- 'Z' or +HH:MM offset; or a datetime the driver wrote out) as a UTC DATETIME(6). Text without an offset is
-- UTC already (our session's zone), and is left as text: written into a DATETIME column, a malformed value
-- is then an error (strict mode) rather than a silent NULL.
CASE
    WHEN @jd_iso IS NULL THEN NULL
    WHEN @jd_iso REGEXP '[+-][0-9][0-9]:[0-9][0-9]$'
        THEN CONVERT_TZ(CAST(REPLACE(LEFT(@jd_iso, CHAR_LENGTH(@jd_iso) - 6), 'T', ' ') AS DATETIME(6)),
                        RIGHT(@jd_iso, 6), '+00:00')
    WHEN @jd_iso LIKE '%Z' THEN REPLACE(LEFT(@jd_iso, CHAR_LENGTH(@jd_iso) - 1), 'T', ' ')
    ELSE REPLACE(@jd_iso, 'T', ' ')
END

-- fragment: t_lease_end
-- When a lease handed out now ends (:lease_seconds may be fractional).
NOW(6) + INTERVAL ROUND(:lease_seconds * 1000000) MICROSECOND

-- fragment: t_job_key
-- A job name as jenkins_job_pauses and jenkins_job_limits key it (their job_key column): item names compare
-- ignoring case, whatever the tables' collation.
UNHEX(SHA2(LOWER(q.job_name), 256))

-- fragment: claim_in_flight
-- Processing rows of the job of limit l on its controller: the collation's equality finds them through the
-- index, the key makes it exact.
(SELECT COUNT(*) FROM jenkins_jobs_queue f
 WHERE f.status = 'processing' AND f.job_name = l.job_name AND UNHEX(SHA2(LOWER(f.job_name), 256)) = l.job_key
   AND f.controller = l.controller)

-- fragment: claim_key_in_flight
-- Processing rows holding the key of key limit k, on every controller (the in-flight-by-key index, named: the
-- fair-share indexes lead with the status too).
(SELECT COUNT(*) FROM jenkins_jobs_queue f FORCE INDEX (jenkins_jobs_queue_in_flight_by_key_idx)
 WHERE f.status = 'processing' AND f.concurrency_key = k.concurrency_key)

-- fragment: claim_started
-- The starts of the last minute of the job of limit l on its controller (jenkins_job_starts, 0010_rate_limits.sql).
(SELECT COUNT(*) FROM jenkins_job_starts s
 WHERE s.controller = l.controller AND s.job_key = l.job_key AND s.at > NOW(6) - INTERVAL 1 MINUTE)

-- fragment: t_taken
-- The ids a many-row transition collected (locked) into @jd_taken.
JSON_TABLE(COALESCE(@jd_taken, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) t

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

-- fragment: op_live_dispatcher
-- A dispatcher is live while it passed within its own window and did not say it stopped.
(TIMESTAMPDIFF(MICROSECOND, last_pass_at, NOW(6)) < stale_after_seconds * 1e6 AND last_outcome <> 'stopped')

-- fragment: op_latest_word_on_jenkins
-- The latest word about Jenkins among live dispatchers: the one that asked Jenkins last.
SELECT id AS dispatcher_id, jenkins_unavailable_since AS since, jenkins_reason AS reason,
       jenkins_checked_at AS checked_at
FROM jenkins_dispatchers
WHERE jenkins_checked_at IS NOT NULL AND {{op_live_dispatcher}}
ORDER BY jenkins_checked_at DESC, id
LIMIT 1
