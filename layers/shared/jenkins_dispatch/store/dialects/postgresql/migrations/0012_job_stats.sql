-- The time page's aggregates (issue 25): small tables the write path keeps, so that the page never counts the
-- finished history. Runs inside the migration runner's transaction, under its advisory lock.
--
-- Kept by a trigger rather than by each statement that finishes a row: six statements do (settle, settle_many,
-- retry_later, release, cancel_pending, fail_rows_of_unknown_controller), and the old worker's results during a
-- cutover too; one row-level trigger with a WHEN clause counts every one of them, in the same transaction, and
-- a statement added later cannot forget to. The WHEN clause is tested without calling the function, so claims
-- and progress updates pay next to nothing.
--
-- A finish is counted once, when it happens, and stays counted: an operator's retry of a final row (retry_final)
-- does not take back the outcome it had, and pruning never touches these tables, so past buckets never change.

-- Outcomes, starts and timing sums per five minutes. The shard (id % 4) spreads concurrent finishes over four
-- rows: each finish holds its row locked until its transaction commits, so one row per bucket would queue every
-- settle of the bucket behind the one before it. Readers sum the shards.
CREATE TABLE jenkins_job_stats (
    bucket_start  timestamptz NOT NULL,          -- a multiple of 300 s since 1970
    shard         smallint NOT NULL,
    completed     bigint NOT NULL DEFAULT 0,
    failed        bigint NOT NULL DEFAULT 0,
    cancelled     bigint NOT NULL DEFAULT 0,
    started       bigint NOT NULL DEFAULT 0,     -- builds that started in the bucket (counted when they finish)
    wait_n        bigint NOT NULL DEFAULT 0,     -- finished rows whose build started: created_at → started_at
    wait_seconds  double precision NOT NULL DEFAULT 0,
    build_seconds double precision NOT NULL DEFAULT 0,  -- started_at → finished_at, same rows
    PRIMARY KEY (bucket_start, shard)
);

-- Coarse histograms of queue wait and build duration per hour, for p50/p95: bin 0 is under a second, bin k ≥ 1
-- holds [2^((k-1)/2), 2^(k/2)) seconds (half an octave: a percentile read from it is within a factor √2), bin 47
-- everything from 2^23 s on. Sharded as above.
CREATE TABLE jenkins_job_stat_bins (
    metric       text NOT NULL CHECK (metric IN ('wait', 'build')),
    bucket_start timestamptz NOT NULL,           -- a multiple of 3600 s since 1970
    bin          smallint NOT NULL CHECK (bin BETWEEN 0 AND 47),
    shard        smallint NOT NULL,
    n            bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (metric, bucket_start, bin, shard)
);

-- Queue depth: the most pending and processing rows a dispatcher's gauges saw in each five minutes (pending is
-- not an event the write path sees; the dispatcher counts it after every pass anyway).
CREATE TABLE jenkins_queue_depth (
    bucket_start   timestamptz PRIMARY KEY,      -- a multiple of 300 s since 1970
    pending_max    bigint NOT NULL,
    processing_max bigint NOT NULL
);

CREATE FUNCTION jenkins_dispatch_bucket(at timestamptz, seconds integer) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_timestamp(floor(extract(epoch FROM at) / seconds) * seconds)
$$;

CREATE FUNCTION jenkins_dispatch_bin(seconds double precision) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CAST(CASE WHEN seconds < 1 THEN 0 ELSE least(47, 1 + floor(2 * ln(seconds) / ln(2.0))) END
                AS smallint)
$$;

CREATE FUNCTION jenkins_dispatch_count_finish() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    part smallint := NEW.id % 4;
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

CREATE TRIGGER jenkins_jobs_queue_finished
    AFTER UPDATE OF finished_at ON jenkins_jobs_queue
    FOR EACH ROW WHEN (OLD.finished_at IS NULL AND NEW.finished_at IS NOT NULL)
    EXECUTE FUNCTION jenkins_dispatch_count_finish();

-- Backfill: the rows finished in the last seven days (the page's longest window), through the finished_at index.
-- Older buckets stay empty: the page never shows them.
INSERT INTO jenkins_job_stats (bucket_start, shard, completed, failed, cancelled, wait_n, wait_seconds, build_seconds)
SELECT jenkins_dispatch_bucket(finished_at, 300), id % 4,
       count(*) FILTER (WHERE status = 'completed'), count(*) FILTER (WHERE status = 'failed'),
       count(*) FILTER (WHERE status = 'cancelled'), count(started_at),
       coalesce(sum(greatest(extract(epoch FROM started_at - created_at), 0)), 0),
       coalesce(sum(greatest(extract(epoch FROM finished_at - started_at), 0)), 0)
FROM jenkins_jobs_queue
WHERE finished_at >= now() - interval '7 days' AND status IN ('completed', 'failed', 'cancelled')
GROUP BY 1, 2;
INSERT INTO jenkins_job_stats AS s (bucket_start, shard, started)
SELECT jenkins_dispatch_bucket(started_at, 300), id % 4, count(*)
FROM jenkins_jobs_queue
WHERE finished_at >= now() - interval '7 days' AND status IN ('completed', 'failed', 'cancelled')
  AND started_at IS NOT NULL
GROUP BY 1, 2
ON CONFLICT (bucket_start, shard) DO UPDATE SET started = s.started + EXCLUDED.started;
INSERT INTO jenkins_job_stat_bins (metric, bucket_start, bin, shard, n)
SELECT m.metric, jenkins_dispatch_bucket(q.finished_at, 3600), jenkins_dispatch_bin(m.seconds), q.id % 4, count(*)
FROM jenkins_jobs_queue q
CROSS JOIN LATERAL (VALUES ('wait', greatest(extract(epoch FROM q.started_at - q.created_at), 0)),
                           ('build', greatest(extract(epoch FROM q.finished_at - q.started_at), 0))) AS m(metric, seconds)
WHERE q.finished_at >= now() - interval '7 days' AND q.status IN ('completed', 'failed', 'cancelled')
  AND q.started_at IS NOT NULL
GROUP BY 1, 2, 3, 4;
