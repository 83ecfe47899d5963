-- The time page's aggregates (PostgreSQL's 0012_job_stats.sql, whose comments say what each table holds and why a
-- trigger keeps them). DDL commits as it goes: tables IF NOT EXISTS, the trigger dropped and created again, and a
-- backfill that SETS each bucket to what the history holds (run again, it writes the same numbers). A finish that
-- commits while the backfill reads may be missed once: a migration's moment, not the page's steady state.
--
-- Buckets are computed from the DATETIME itself (seconds since 1970-01-01 as TIMESTAMPDIFF counts them), not from
-- UNIX_TIMESTAMP(): the trigger runs in the writer's session, whose time zone need not be ours.

CREATE TABLE IF NOT EXISTS jenkins_job_stats (
    bucket_start  DATETIME(6) NOT NULL,
    shard         SMALLINT NOT NULL,
    completed     BIGINT NOT NULL DEFAULT 0,
    failed        BIGINT NOT NULL DEFAULT 0,
    cancelled     BIGINT NOT NULL DEFAULT 0,
    started       BIGINT NOT NULL DEFAULT 0,
    wait_n        BIGINT NOT NULL DEFAULT 0,
    wait_seconds  DOUBLE NOT NULL DEFAULT 0,
    build_seconds DOUBLE NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket_start, shard)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS jenkins_job_stat_bins (
    metric       VARCHAR(8) NOT NULL,
    bucket_start DATETIME(6) NOT NULL,
    bin          SMALLINT NOT NULL,
    shard        SMALLINT NOT NULL,
    n            BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (metric, bucket_start, bin, shard),
    CONSTRAINT jenkins_job_stat_bins_metric_check CHECK (metric IN ('wait', 'build')),
    CONSTRAINT jenkins_job_stat_bins_bin_check CHECK (bin BETWEEN 0 AND 47)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS jenkins_queue_depth (
    bucket_start   DATETIME(6) NOT NULL PRIMARY KEY,
    pending_max    BIGINT NOT NULL,
    processing_max BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

DROP TRIGGER IF EXISTS jenkins_jobs_queue_finished;
CREATE TRIGGER jenkins_jobs_queue_finished AFTER UPDATE ON jenkins_jobs_queue FOR EACH ROW
BEGIN
    DECLARE part SMALLINT;
    DECLARE at_bucket DATETIME(6);
    DECLARE began DATETIME(6);
    DECLARE hour_bucket DATETIME(6);
    DECLARE waited DOUBLE;
    DECLARE built DOUBLE;
    IF OLD.finished_at IS NULL AND NEW.finished_at IS NOT NULL THEN
        SET part = NEW.id % 4;
        SET at_bucket = '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', NEW.finished_at) DIV 300 * 300) SECOND;
        SET began = '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', NEW.started_at) DIV 300 * 300) SECOND;
        SET waited = GREATEST(TIMESTAMPDIFF(MICROSECOND, NEW.created_at, NEW.started_at) / 1e6, 0);
        SET built = GREATEST(TIMESTAMPDIFF(MICROSECOND, NEW.started_at, NEW.finished_at) / 1e6, 0);
        INSERT INTO jenkins_job_stats (bucket_start, shard, completed, failed, cancelled, started,
                                       wait_n, wait_seconds, build_seconds)
        VALUES (at_bucket, part, NEW.status = 'completed', NEW.status = 'failed', NEW.status = 'cancelled',
                COALESCE(began = at_bucket, 0), NEW.started_at IS NOT NULL, COALESCE(waited, 0), COALESCE(built, 0))
        ON DUPLICATE KEY UPDATE
            completed = completed + VALUES(completed), failed = failed + VALUES(failed),
            cancelled = cancelled + VALUES(cancelled), started = started + VALUES(started),
            wait_n = wait_n + VALUES(wait_n), wait_seconds = wait_seconds + VALUES(wait_seconds),
            build_seconds = build_seconds + VALUES(build_seconds);
        IF NEW.started_at IS NOT NULL THEN
            IF began <> at_bucket THEN
                INSERT INTO jenkins_job_stats (bucket_start, shard, started) VALUES (began, part, 1)
                ON DUPLICATE KEY UPDATE started = started + 1;
            END IF;
            SET hour_bucket = '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', NEW.finished_at) DIV 3600 * 3600) SECOND;
            INSERT INTO jenkins_job_stat_bins (metric, bucket_start, bin, shard, n)
            VALUES ('wait', hour_bucket, IF(waited < 1, 0, LEAST(47, 1 + FLOOR(2 * LOG2(waited)))), part, 1),
                   ('build', hour_bucket, IF(built < 1, 0, LEAST(47, 1 + FLOOR(2 * LOG2(built)))), part, 1)
            ON DUPLICATE KEY UPDATE n = n + 1;
        END IF;
    END IF;
END;

-- Backfill: the last seven days of finished rows. Each bucket gets outcomes and starts in one statement (the starts
-- come from the bucket their build started in), set rather than added.
INSERT INTO jenkins_job_stats (bucket_start, shard, completed, failed, cancelled, started, wait_n, wait_seconds,
                               build_seconds)
SELECT bucket_start, shard, SUM(completed), SUM(failed), SUM(cancelled), SUM(started), SUM(wait_n),
       SUM(wait_seconds), SUM(build_seconds)
FROM (
    SELECT '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', finished_at) DIV 300 * 300) SECOND AS bucket_start,
           id % 4 AS shard, status = 'completed' AS completed, status = 'failed' AS failed,
           status = 'cancelled' AS cancelled, 0 AS started, started_at IS NOT NULL AS wait_n,
           COALESCE(GREATEST(TIMESTAMPDIFF(MICROSECOND, created_at, started_at) / 1e6, 0), 0) AS wait_seconds,
           COALESCE(GREATEST(TIMESTAMPDIFF(MICROSECOND, started_at, finished_at) / 1e6, 0), 0) AS build_seconds
    FROM jenkins_jobs_queue
    WHERE finished_at >= UTC_TIMESTAMP(6) - INTERVAL 7 DAY AND status IN ('completed', 'failed', 'cancelled')
    UNION ALL
    SELECT '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', started_at) DIV 300 * 300) SECOND,
           id % 4, 0, 0, 0, 1, 0, 0, 0
    FROM jenkins_jobs_queue
    WHERE finished_at >= UTC_TIMESTAMP(6) - INTERVAL 7 DAY AND status IN ('completed', 'failed', 'cancelled')
      AND started_at IS NOT NULL
) contributions
GROUP BY bucket_start, shard
ON DUPLICATE KEY UPDATE completed = VALUES(completed), failed = VALUES(failed), cancelled = VALUES(cancelled),
    started = VALUES(started), wait_n = VALUES(wait_n), wait_seconds = VALUES(wait_seconds),
    build_seconds = VALUES(build_seconds);

INSERT INTO jenkins_job_stat_bins (metric, bucket_start, bin, shard, n)
SELECT metric, bucket_start, IF(seconds < 1, 0, LEAST(47, 1 + FLOOR(2 * LOG2(seconds)))) AS bin, shard, COUNT(*)
FROM (
    SELECT 'wait' AS metric,
           '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', finished_at) DIV 3600 * 3600) SECOND AS bucket_start,
           GREATEST(TIMESTAMPDIFF(MICROSECOND, created_at, started_at) / 1e6, 0) AS seconds, id % 4 AS shard
    FROM jenkins_jobs_queue
    WHERE finished_at >= UTC_TIMESTAMP(6) - INTERVAL 7 DAY AND status IN ('completed', 'failed', 'cancelled')
      AND started_at IS NOT NULL
    UNION ALL
    SELECT 'build', '1970-01-01' + INTERVAL (TIMESTAMPDIFF(SECOND, '1970-01-01', finished_at) DIV 3600 * 3600) SECOND,
           GREATEST(TIMESTAMPDIFF(MICROSECOND, started_at, finished_at) / 1e6, 0), id % 4
    FROM jenkins_jobs_queue
    WHERE finished_at >= UTC_TIMESTAMP(6) - INTERVAL 7 DAY AND status IN ('completed', 'failed', 'cancelled')
      AND started_at IS NOT NULL
) timings
GROUP BY metric, bucket_start, bin, shard
ON DUPLICATE KEY UPDATE n = VALUES(n);
