-- The whole schema on MySQL 8.0+ / MariaDB 10.6+, in its final shape (the PostgreSQL migrations 0001-0005
-- together; the rules about processing and final rows are 0005_cutover.sql's): the queue table created fresh or
-- upgraded in place from the seed's shape
--   jenkins_jobs_queue(id, job_name, parameters, status, priority, scheduled_at)
-- keeping every existing row, then the tables beside it.
--
-- DDL commits implicitly on MySQL, so the runner cannot wrap this file in a transaction: every step is
-- written to be run again after a failure part-way through (a crash, a lost connection). Tables are
-- created IF NOT EXISTS; columns, indexes and constraints are added only when information_schema lacks
-- them (the ALTER is built in @jd_ddl and run with PREPARE/EXECUTE; 'DO 0' when nothing is missing);
-- data fixes select only the rows still needing them. MySQL 8 has no ADD COLUMN/INDEX IF NOT EXISTS,
-- and stored procedures would need privileges and DELIMITER handling, hence the prepared statements.
-- No partial indexes either: generated columns stand in for their WHERE clauses.
--
-- Every UPDATE of the queue here (and in 0004, 0005) walks the primary key (FORCE INDEX (PRIMARY)): the seed's
-- worker may still be running, and its UPDATE of one row by id locks the row, then the row's index entries. A
-- data fix that found its rows through a secondary index (ours, or one the seed's owner added) locks them the
-- other way round, and the two can deadlock; InnoDB then fails the lighter statement, the old worker's, and the
-- result it was reporting is lost. In primary-key order a fix only ever waits for the old worker's row.
--
-- Timestamps are DATETIME(6) holding UTC (our sessions run with time_zone '+00:00'). parameters is JSON:
-- on MariaDB text checked by JSON_VALID, kept exactly as written; on MySQL 8 a binary form that normalises
-- what it stores ({"N": 1.10} reads back as {"N": 1.1}, keys reordered). Both hold the same JSON value.

-- The ALTERs below are GROUP_CONCATs of clauses: MySQL cuts them at 1024 bytes by default, silently.
SET SESSION group_concat_max_len = 1048576;

CREATE TABLE IF NOT EXISTS jenkins_jobs_queue (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_name     VARCHAR(1024) NOT NULL,
    parameters   JSON NOT NULL DEFAULT (JSON_OBJECT()),
    status       VARCHAR(16) NOT NULL DEFAULT 'pending',
    priority     INT NOT NULL DEFAULT 0,
    scheduled_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- ---- A seed table: its values first, while its columns still accept them.

-- A seed's DATETIME (no fractional seconds) was written by the seed's sessions in the server's zone, as
-- PostgreSQL reads a seed's timestamp without time zone in the server's zone: bring it to UTC, once, before
-- the column becomes DATETIME(6), which is what marks it done. (A seed's TIMESTAMP is stored in UTC and
-- reads as UTC in our sessions: nothing to do.) First of the fixes, so that the NOW(6) (UTC) given to a
-- missing time below is not shifted.
SELECT IF(COUNT(*) = 0, 'DO 0',
          'UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY)
           SET scheduled_at = COALESCE(CONVERT_TZ(scheduled_at, @@global.time_zone, ''+00:00''), scheduled_at)')
INTO @jd_ddl
FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'jenkins_jobs_queue' AND column_name = 'scheduled_at'
  AND data_type = 'datetime' AND datetime_precision = 0;
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- Parameters, by the same rules as on PostgreSQL: missing, blank or JSON null is {}; an object is kept;
-- anything else (unreadable text, an array, a scalar) is kept, not dropped, under _unparsed_parameters.
-- IF(JSON_VALID(..)) guards JSON_TYPE, which fails on text that is not JSON.
UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY)
SET parameters = CASE
    WHEN parameters IS NULL OR TRIM(parameters) = '' THEN JSON_OBJECT()
    WHEN IF(JSON_VALID(parameters), JSON_TYPE(parameters), NULL) = 'NULL' THEN JSON_OBJECT()
    -- As text: from MySQL's JSON type, an array would otherwise go in as an array, not as what was written.
    ELSE JSON_OBJECT('_unparsed_parameters', CAST(parameters AS CHAR))
END
WHERE parameters IS NULL OR IF(JSON_VALID(parameters), JSON_TYPE(parameters), NULL) IS NULL
   OR IF(JSON_VALID(parameters), JSON_TYPE(parameters), NULL) <> 'OBJECT';
UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY) SET status = 'pending' WHERE status IS NULL;
UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY) SET priority = 0 WHERE priority IS NULL;
-- Missing and zero dates (MySQL's '0000-00-00', '2024-00-10' from a server without strict mode): due now.
UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY) SET scheduled_at = NOW(6)
WHERE scheduled_at IS NULL OR MONTH(scheduled_at) = 0 OR DAYOFMONTH(scheduled_at) = 0;

-- A row without a job name cannot be dispatched, and there is no name to give it: it is kept, under '?'
-- (a character Jenkins forbids in item names, so it never names a real job), and settled below.
UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY) SET job_name = '?' WHERE job_name IS NULL OR TRIM(job_name) = '';

-- ---- The seed's columns in their final types (only those that differ), in one ALTER.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM information_schema.columns c
JOIN (
    SELECT 1 AS n, 'id' AS name, 'MODIFY id BIGINT NOT NULL AUTO_INCREMENT' AS clause
    UNION ALL SELECT 2, 'job_name', 'MODIFY job_name VARCHAR(1024) NOT NULL'
    UNION ALL SELECT 3, 'parameters', 'MODIFY parameters JSON NOT NULL DEFAULT (JSON_OBJECT())'
    UNION ALL SELECT 4, 'status', 'MODIFY status VARCHAR(16) NOT NULL DEFAULT ''pending'''
    UNION ALL SELECT 5, 'priority', 'MODIFY priority INT NOT NULL DEFAULT 0'
    UNION ALL SELECT 6, 'scheduled_at', 'MODIFY scheduled_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)'
) wanted ON wanted.name = c.column_name
WHERE c.table_schema = DATABASE() AND c.table_name = 'jenkins_jobs_queue'
  AND (c.is_nullable = 'YES'
       OR (c.column_name = 'id' AND c.data_type <> 'bigint')
       OR (c.column_name = 'job_name' AND (c.data_type <> 'varchar' OR c.character_maximum_length <> 1024))
       -- MariaDB's JSON is LONGTEXT with a JSON_VALID check; MySQL's is its own type.
       OR (c.column_name = 'parameters' AND (c.data_type NOT IN ('json', 'longtext') OR c.column_default IS NULL))
       OR (c.column_name = 'status' AND (c.data_type <> 'varchar' OR c.character_maximum_length <> 16
                                         OR c.column_default IS NULL))
       OR (c.column_name = 'priority' AND (c.data_type <> 'int' OR c.column_default IS NULL))
       OR (c.column_name = 'scheduled_at' AND (c.data_type <> 'datetime' OR c.datetime_precision <> 6
                                               OR c.column_default IS NULL)));
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- ---- Every other column (those missing), in one ALTER.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'attempts' AS name, 'ADD COLUMN attempts INT NOT NULL DEFAULT 0' AS clause
    UNION ALL SELECT 2, 'max_attempts', 'ADD COLUMN max_attempts INT NOT NULL DEFAULT 3'
    UNION ALL SELECT 3, 'dispatch_id', 'ADD COLUMN dispatch_id VARCHAR(64)'
    UNION ALL SELECT 4, 'jenkins_queue_id', 'ADD COLUMN jenkins_queue_id BIGINT'
    UNION ALL SELECT 5, 'build_number', 'ADD COLUMN build_number INT'
    UNION ALL SELECT 6, 'build_url', 'ADD COLUMN build_url TEXT'
    UNION ALL SELECT 7, 'jenkins_result', 'ADD COLUMN jenkins_result VARCHAR(16)'
    UNION ALL SELECT 8, 'last_error', 'ADD COLUMN last_error TEXT'
    UNION ALL SELECT 9, 'dedupe_key', 'ADD COLUMN dedupe_key VARCHAR(255)'
    UNION ALL SELECT 10, 'lease_expires_at', 'ADD COLUMN lease_expires_at DATETIME(6)'
    UNION ALL SELECT 11, 'started_at', 'ADD COLUMN started_at DATETIME(6)'
    UNION ALL SELECT 12, 'created_at', 'ADD COLUMN created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)'
    UNION ALL SELECT 13, 'updated_at', 'ADD COLUMN updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)'
    UNION ALL SELECT 14, 'finished_at', 'ADD COLUMN finished_at DATETIME(6)'
    -- Re-sends are counted apart from attempts (PostgreSQL 0003).
    UNION ALL SELECT 15, 'resends', 'ADD COLUMN resends INT NOT NULL DEFAULT 0'
    UNION ALL SELECT 16, 'cancel_requested_at', 'ADD COLUMN cancel_requested_at DATETIME(6)'
    -- The claim order (priority DESC, scheduled_at, id) as an ascending key: an index gives it to a
    -- locking read, which then stops at LIMIT instead of sorting (and locking) every pending row.
    UNION ALL SELECT 17, 'claim_priority', 'ADD COLUMN claim_priority INT AS (-priority) VIRTUAL'
    -- The dedupe key of an unfinished row only: a UNIQUE index over it is PostgreSQL's partial one.
    UNION ALL SELECT 18, 'open_dedupe_key',
        'ADD COLUMN open_dedupe_key VARCHAR(255) AS '
        '(CASE WHEN status IN (''pending'', ''processing'') THEN dedupe_key END) VIRTUAL'
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.columns c
    WHERE c.table_schema = DATABASE() AND c.table_name = 'jenkins_jobs_queue' AND c.column_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- Seed rows without a job name (above): nothing can run them, so they are settled, not dispatched.
UPDATE jenkins_jobs_queue FORCE INDEX (PRIMARY)
SET status = 'failed', finished_at = COALESCE(finished_at, NOW(6)),
    last_error = 'had no job name in the table before jenkins-dispatch; kept for the record, never dispatched'
WHERE job_name = '?' AND status IN ('pending', 'processing') AND dispatch_id IS NULL;

-- Seed rows that were already final, and those in 'processing' (claimed by the old worker, which may still be
-- running and finish them while this runs: MySQL's DDL commits as it goes) are 0005_cutover.sql's, as are the
-- two rules about them (processing_check, final_check): it first installs the trigger that keeps the old worker's
-- results and refuses its claims, so that no write of that worker meets them unannounced.

-- ---- Constraints: PostgreSQL's names, so the readable messages for a broken rule apply to both.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'jenkins_jobs_queue_status_check' AS name,
        'ADD CONSTRAINT jenkins_jobs_queue_status_check '
        'CHECK (status IN (''pending'', ''processing'', ''completed'', ''failed'', ''cancelled''))' AS clause
    UNION ALL SELECT 2, 'jenkins_jobs_queue_job_name_check',
        'ADD CONSTRAINT jenkins_jobs_queue_job_name_check CHECK (TRIM(job_name) <> '''' AND CHAR_LENGTH(job_name) <= 1024)'
    UNION ALL SELECT 3, 'jenkins_jobs_queue_parameters_check',
        'ADD CONSTRAINT jenkins_jobs_queue_parameters_check CHECK (JSON_TYPE(parameters) = ''OBJECT'')'
    UNION ALL SELECT 4, 'jenkins_jobs_queue_attempts_check',
        'ADD CONSTRAINT jenkins_jobs_queue_attempts_check CHECK (attempts >= 0)'
    UNION ALL SELECT 5, 'jenkins_jobs_queue_max_attempts_check',
        'ADD CONSTRAINT jenkins_jobs_queue_max_attempts_check CHECK (max_attempts >= 1)'
    UNION ALL SELECT 6, 'jenkins_jobs_queue_result_check',
        'ADD CONSTRAINT jenkins_jobs_queue_result_check CHECK (jenkins_result IS NULL OR jenkins_result IN '
        '(''SUCCESS'', ''UNSTABLE'', ''FAILURE'', ''ABORTED'', ''NOT_BUILT''))'
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.table_constraints tc
    WHERE tc.constraint_schema = DATABASE() AND tc.table_name = 'jenkins_jobs_queue'
      AND tc.constraint_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- ---- Indexes (those missing), in one ALTER. 0003 adds those a claim changes and the per-job one.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'jenkins_jobs_queue_dispatch_id_key' AS name,
        'ADD UNIQUE INDEX jenkins_jobs_queue_dispatch_id_key (dispatch_id)' AS clause
    -- The claim walks this index in claim order (status = 'pending' first) and stops at its LIMIT.
    UNION ALL SELECT 2, 'jenkins_jobs_queue_claim_idx',
        'ADD INDEX jenkins_jobs_queue_claim_idx (status, claim_priority, scheduled_at, id)'
    -- At most one unfinished row per dedupe key (NULLs never collide).
    UNION ALL SELECT 5, 'jenkins_jobs_queue_dedupe_key',
        'ADD UNIQUE INDEX jenkins_jobs_queue_dedupe_key (open_dedupe_key)'
    -- Pruning, and recent outcomes (stats), without scanning the history.
    UNION ALL SELECT 6, 'jenkins_jobs_queue_finished_idx',
        'ADD INDEX jenkins_jobs_queue_finished_idx (finished_at)'
    -- The webhook's fallback when a notification carries no DISPATCH_ID.
    UNION ALL SELECT 8, 'jenkins_jobs_queue_jenkins_queue_id_idx',
        'ADD INDEX jenkins_jobs_queue_jenkins_queue_id_idx (jenkins_queue_id)'
    -- When the next not-yet-due job becomes due: the dispatcher sleeps until then.
    UNION ALL SELECT 9, 'jenkins_jobs_queue_due_idx',
        'ADD INDEX jenkins_jobs_queue_due_idx (status, scheduled_at)'
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.statistics s
    WHERE s.table_schema = DATABASE() AND s.table_name = 'jenkins_jobs_queue' AND s.index_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;

-- An application's own INSERT from a session whose time zone is not UTC (the server's SYSTEM zone, say)
-- would store NOW() and the column defaults as local wall-clock time: convert them from the inserting
-- session's zone to UTC. CONVERT_TZ gives NULL for a named zone without the zone tables: then the
-- session's current offset is used. Our own sessions are '+00:00', where this changes nothing.
DROP TRIGGER IF EXISTS jenkins_jobs_queue_utc;
CREATE TRIGGER jenkins_jobs_queue_utc BEFORE INSERT ON jenkins_jobs_queue FOR EACH ROW
SET NEW.scheduled_at = COALESCE(CONVERT_TZ(NEW.scheduled_at, @@session.time_zone, '+00:00'),
                                NEW.scheduled_at - INTERVAL TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), NOW(6)) SECOND),
    NEW.created_at = COALESCE(CONVERT_TZ(NEW.created_at, @@session.time_zone, '+00:00'),
                              NEW.created_at - INTERVAL TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), NOW(6)) SECOND),
    NEW.updated_at = COALESCE(CONVERT_TZ(NEW.updated_at, @@session.time_zone, '+00:00'),
                              NEW.updated_at - INTERVAL TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), NOW(6)) SECOND);

-- ---- The tables beside the queue.

-- Per-job caps are data: the dispatcher never claims more processing rows for a job_name than this.
-- A job name is up to 1024 characters, more than InnoDB's 3072-byte key holds in utf8mb4, and a generated
-- column cannot be a primary key: the unique key is on a hash of the name, lower-cased as item names
-- are compared; the id only gives the table a primary key.
CREATE TABLE IF NOT EXISTS jenkins_job_limits (
    id            BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_name      VARCHAR(1024) NOT NULL,
    job_key       BINARY(32) AS (UNHEX(SHA2(LOWER(job_name), 256))) STORED,
    max_in_flight INT NOT NULL,
    updated_at    DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    UNIQUE KEY jenkins_job_limits_job_name_key (job_key),
    CONSTRAINT jenkins_job_limits_job_name_check CHECK (TRIM(job_name) <> ''),
    CONSTRAINT jenkins_job_limits_max_in_flight_check CHECK (max_in_flight >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Every state change, written by the same statement (block) as the change itself. No foreign key on
-- purpose, as on PostgreSQL: prune deletes a job's events with the job.
CREATE TABLE IF NOT EXISTS jenkins_job_events (
    id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id      BIGINT NOT NULL,
    at          DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    event       VARCHAR(64) NOT NULL,
    from_status VARCHAR(16),
    to_status   VARCHAR(16),
    dispatch_id VARCHAR(64),
    actor       VARCHAR(16) NOT NULL,
    detail      TEXT,
    INDEX jenkins_job_events_job_idx (job_id, id),
    -- Tells a stale notification (an earlier attempt's DISPATCH_ID) from an unknown one.
    INDEX jenkins_job_events_dispatch_id_idx (dispatch_id, event),
    CONSTRAINT jenkins_job_events_actor_check CHECK (actor IN ('dispatcher', 'webhook', 'reconciler', 'operator'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Pause and resume (PostgreSQL 0004): claims skip the pending rows of a paused job; '*' is every job.
-- Keyed like jenkins_job_limits.
CREATE TABLE IF NOT EXISTS jenkins_job_pauses (
    id        BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_name  VARCHAR(1024) NOT NULL,
    job_key   BINARY(32) AS (UNHEX(SHA2(LOWER(job_name), 256))) STORED,
    paused_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    paused_by TEXT,
    reason    TEXT,
    UNIQUE KEY jenkins_job_pauses_job_name_key (job_key),
    CONSTRAINT jenkins_job_pauses_job_name_check CHECK (TRIM(job_name) <> '')
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Dispatcher heartbeats (PostgreSQL 0005): one row per dispatcher, upserted after each of its passes.
-- The id (up to 1024 characters) is hashed into the key for the same reason as a job name; row_id only
-- gives the table a primary key (the contract's column "id" is the dispatcher's own text).
CREATE TABLE IF NOT EXISTS jenkins_dispatchers (
    row_id                    BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    id                        VARCHAR(1024) NOT NULL,
    id_key                    BINARY(32) AS (UNHEX(SHA2(id, 256))) STORED,
    kind                      VARCHAR(16) NOT NULL,
    host                      TEXT NOT NULL,
    pid                       INT NOT NULL,
    started_at                DATETIME(6) NOT NULL,
    -- Live while its last pass is more recent than this (it knows how often it passes).
    stale_after_seconds       DOUBLE NOT NULL,
    last_pass_at              DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    last_outcome              VARCHAR(64) NOT NULL,  -- ok, jenkins_unavailable, database_busy, failed, crashed, stopped
    last_detail               TEXT,                  -- why the pass stopped, or what failed
    passes                    BIGINT NOT NULL DEFAULT 0,
    jenkins_checked_at        DATETIME(6),           -- when this dispatcher last learned how Jenkins stands
    jenkins_unavailable_since DATETIME(6),           -- NULL while Jenkins answers
    jenkins_reason            TEXT,
    UNIQUE KEY jenkins_dispatchers_id_key (id_key),
    INDEX jenkins_dispatchers_last_pass_idx (last_pass_at),
    CONSTRAINT jenkins_dispatchers_id_check CHECK (CHAR_LENGTH(id) BETWEEN 1 AND 1024),
    CONSTRAINT jenkins_dispatchers_kind_check CHECK (kind IN ('serve', 'lambda', 'cli')),
    CONSTRAINT jenkins_dispatchers_stale_after_seconds_check CHECK (stale_after_seconds > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Row locks standing in for PostgreSQL's transaction-scoped advisory locks (released at COMMIT or
-- ROLLBACK, on every path): 'caps' serialises capped claims; a claim takes 'pauses' shared and a pause
-- takes it exclusively, so once a pause has committed no claim takes a row of that job.
CREATE TABLE IF NOT EXISTS jenkins_dispatch_locks (
    name VARCHAR(64) NOT NULL PRIMARY KEY
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
INSERT IGNORE INTO jenkins_dispatch_locks (name) VALUES ('caps'), ('pauses');
