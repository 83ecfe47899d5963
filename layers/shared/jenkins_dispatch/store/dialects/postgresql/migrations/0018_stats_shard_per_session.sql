-- The aggregates' shard is the session's, no longer the row's (0012_job_stats.sql). With `NEW.id % 4`, one
-- statement settling rows of every shard (a dispatcher failing a batch: settle_many) locked the shards' rows in
-- its rows' order, and two such statements side by side could each hold a shard row the other wanted: PostgreSQL
-- waited deadlock_timeout (1 s) and failed one of them whole ('deadlock detected'), its rows left processing
-- until their leases ran out. A session's rows all count into one shard: statements of sessions in different
-- shards touch no common row, and two of the same shard queue on its five-minute row, taken first, without a
-- cycle. The shard still spreads concurrent finishes (the webhook's pool, several dispatchers) over four rows;
-- readers sum every shard, so rows counted before this migration stay where they are. Only the function changes
-- (its trigger calls it by name).
CREATE OR REPLACE FUNCTION jenkins_dispatch_count_finish() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    part smallint := pg_backend_pid() % 4;  -- the session's shard: see above
    at timestamptz := jenkins_dispatch_bucket(NEW.finished_at, 300);
    began timestamptz := jenkins_dispatch_bucket(NEW.started_at, 300);
    waited double precision := greatest(extract(epoch FROM NEW.started_at - NEW.created_at), 0);
    built double precision := greatest(extract(epoch FROM NEW.finished_at - NEW.started_at), 0);
BEGIN
    INSERT INTO jenkins_job_stats AS s (bucket_start, shard, completed, failed, cancelled, started,
                                        wait_n, wait_seconds, build_seconds)
    VALUES (at, part, CAST(NEW.status = 'completed' AS int), CAST(NEW.status = 'failed' AS int),
            CAST(NEW.status = 'cancelled' AS int), CAST(coalesce(began = at, false) AS int),
            CAST(NEW.started_at IS NOT NULL AS int), coalesce(waited, 0), coalesce(built, 0))
    ON CONFLICT (bucket_start, shard) DO UPDATE SET
        completed = s.completed + EXCLUDED.completed, failed = s.failed + EXCLUDED.failed,
        cancelled = s.cancelled + EXCLUDED.cancelled, started = s.started + EXCLUDED.started,
        wait_n = s.wait_n + EXCLUDED.wait_n, wait_seconds = s.wait_seconds + EXCLUDED.wait_seconds,
        build_seconds = s.build_seconds + EXCLUDED.build_seconds;
    IF NEW.started_at IS NULL THEN
        RETURN NULL;
    END IF;
    IF began <> at THEN
        INSERT INTO jenkins_job_stats AS s (bucket_start, shard, started) VALUES (began, part, 1)
        ON CONFLICT (bucket_start, shard) DO UPDATE SET started = s.started + 1;
    END IF;
    INSERT INTO jenkins_job_stat_bins AS b (metric, bucket_start, bin, shard, n)
    VALUES ('wait', jenkins_dispatch_bucket(NEW.finished_at, 3600), jenkins_dispatch_bin(waited), part, 1),
           ('build', jenkins_dispatch_bucket(NEW.finished_at, 3600), jenkins_dispatch_bin(built), part, 1)
    ON CONFLICT (metric, bucket_start, bin, shard) DO UPDATE SET n = b.n + 1;
    RETURN NULL;
END $$;
