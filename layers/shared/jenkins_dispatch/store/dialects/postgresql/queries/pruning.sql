-- Pruning the finished history: final rows and their history in bounded batches, and the time page's aggregates
-- past its window, for the operator's `prune` (store/levers.py) and the dispatchers' pruner duty
-- (store/dispatcher.py; dispatching/duties/pruner.py); and the duties' turns the pruner takes, one dispatcher at a
-- time: a row of jenkins_dispatch_duties (0020_duties.sql) taken with a compare-and-set. Run through
-- store/pruning.py and store/dispatcher.py.

-- name: prune_batch
-- Finished rows older than the cutoff, a bounded batch at a time; their events go with them. Returns how
-- many rows went (`deleted`), as the MySQL statement does.
WITH doomed AS (
    SELECT id FROM jenkins_jobs_queue
    WHERE finished_at IS NOT NULL AND finished_at < now() - make_interval(secs => CAST(:days AS float8) * 86400)
      AND status IN ('completed', 'failed', 'cancelled')
    ORDER BY finished_at
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
), history AS (
    DELETE FROM jenkins_job_events e USING doomed WHERE e.job_id = doomed.id
), gone AS (
    DELETE FROM jenkins_jobs_queue q USING doomed WHERE q.id = doomed.id RETURNING q.id
)
SELECT count(*) AS deleted FROM gone;

-- name: prune_aggregates
-- The time page's aggregates (0012_job_stats.sql) whose buckets started more than :seconds ago, which the page no
-- longer shows: each a range of its primary key (the histograms' per metric). Only past buckets go: the trigger
-- and the gauges write current ones, so nothing waits on these deletes. Returns the rows that went (`deleted`): a
-- few thousand a day at most (288 five-minute rows × 4 shards, 24 hours × 2 metrics × 48 bins × 4 shards).
WITH stats AS (
    DELETE FROM jenkins_job_stats
    WHERE bucket_start < now() - make_interval(secs => CAST(:seconds AS float8)) RETURNING 1
), bins AS (
    DELETE FROM jenkins_job_stat_bins
    WHERE metric IN ('wait', 'build') AND bucket_start < now() - make_interval(secs => CAST(:seconds AS float8))
    RETURNING 1
), depth AS (
    DELETE FROM jenkins_queue_depth
    WHERE bucket_start < now() - make_interval(secs => CAST(:seconds AS float8)) RETURNING 1
)
SELECT (SELECT count(*) FROM stats) + (SELECT count(*) FROM bins) + (SELECT count(*) FROM depth) AS deleted;

-- name: take_duty
-- Takes duty :duty's turn for :holder until :hold_seconds from now, if it is due (due_at passed) or :holder already
-- holds it (a batch after the first): the compare-and-set. Of several dispatchers racing, the first UPDATE wins; the
-- others wait for its row lock, find due_at moved on and update nothing. `taken`: whether this caller holds the turn;
-- `due_in_seconds`: for the others, how long until it is due (NULL: no such duty row).
WITH taken AS (
    UPDATE jenkins_dispatch_duties
    SET holder = CAST(:holder AS text), due_at = now() + make_interval(secs => CAST(:hold_seconds AS float8)),
        updated_at = now()
    WHERE name = CAST(:duty AS text) AND (due_at <= now() OR holder = CAST(:holder AS text))
    RETURNING due_at
)
SELECT EXISTS (SELECT 1 FROM taken) AS taken,
       coalesce((SELECT CAST(extract(epoch FROM due_at - now()) AS float8) FROM taken),
                (SELECT CAST(extract(epoch FROM d.due_at - now()) AS float8)
                 FROM jenkins_dispatch_duties d WHERE d.name = CAST(:duty AS text))) AS due_in_seconds;

-- name: duty_done
-- :holder hands duty :duty's turn back, due again :every_seconds from now. Nothing changes if the turn is no longer
-- its own (its hold ended and another dispatcher took it): no row back.
UPDATE jenkins_dispatch_duties
SET holder = NULL, due_at = now() + make_interval(secs => CAST(:every_seconds AS float8)), updated_at = now()
WHERE name = CAST(:duty AS text) AND holder = CAST(:holder AS text)
RETURNING name;
