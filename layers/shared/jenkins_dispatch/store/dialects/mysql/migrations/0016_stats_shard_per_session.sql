-- The aggregates' shard is the session's, no longer the row's (0009_job_stats.sql): with `NEW.id % 4`, one
-- statement settling rows of every shard (a dispatcher failing a batch: settle_many) locked the shards' rows in
-- its rows' order, and two such statements side by side could each hold a shard row the other wanted: InnoDB
-- failed one of them whole (error 1213, deadlock), its rows left processing until their leases ran out. A
-- session's rows all count into one shard, so statements of sessions in different shards touch no common row,
-- and two of the same shard queue on its five-minute row, taken first, without a cycle (PostgreSQL's 0018 says
-- the same). Readers sum every shard: rows counted before stay where they are.
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
        SET part = CONNECTION_ID() % 4;  -- the session's shard: see above
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
