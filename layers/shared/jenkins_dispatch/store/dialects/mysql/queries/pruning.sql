-- Pruning the finished history: final rows and their history in bounded batches, and the time page's aggregates
-- past its window, for the operator's `prune` (store/levers.py) and the dispatchers' pruner duty
-- (store/dispatcher.py; dispatching/duties/pruner.py); and the duties' turns the pruner takes, one dispatcher at a
-- time: a row of jenkins_dispatch_duties (0018_duties.sql) taken with a compare-and-set. Run through
-- store/pruning.py and store/dispatcher.py.
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.

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
DELETE q FROM JSON_TABLE(COALESCE(@jd_pruned, '[]'), '$[*]' COLUMNS (id BIGINT PATH '$')) AS doomed
    STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = doomed.id;
SELECT ROW_COUNT() AS deleted;

-- name: prune_aggregates
-- PostgreSQL's prune_aggregates (0009_job_stats.sql's tables): a primary-key range of each, counted as it goes.
SET @jd_cutoff = NOW(6) - INTERVAL CAST(:seconds AS SIGNED) SECOND;
DELETE FROM jenkins_job_stats WHERE bucket_start < @jd_cutoff;
SET @jd_pruned = ROW_COUNT();
DELETE FROM jenkins_job_stat_bins WHERE metric IN ('wait', 'build') AND bucket_start < @jd_cutoff;
SET @jd_pruned = @jd_pruned + ROW_COUNT();
DELETE FROM jenkins_queue_depth WHERE bucket_start < @jd_cutoff;
SELECT @jd_pruned + ROW_COUNT() AS deleted;

-- name: take_duty
UPDATE jenkins_dispatch_duties
SET holder = :holder, due_at = NOW(6) + INTERVAL CAST(:hold_seconds * 1000000 AS SIGNED) MICROSECOND,
    updated_at = NOW(6)
WHERE name = :duty AND (due_at <= NOW(6) OR holder = :holder);
SET @jd_taken = ROW_COUNT();
SELECT @jd_taken > 0 AS taken,
       (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), d.due_at) / 1000000.0
        FROM jenkins_dispatch_duties d WHERE d.name = :duty) AS due_in_seconds;

-- name: duty_done
UPDATE jenkins_dispatch_duties
SET holder = NULL, due_at = NOW(6) + INTERVAL CAST(:every_seconds * 1000000 AS SIGNED) MICROSECOND,
    updated_at = NOW(6)
WHERE name = :duty AND holder = :holder;
SET @jd_changed = ROW_COUNT();
SELECT name FROM jenkins_dispatch_duties WHERE name = :duty AND @jd_changed > 0;
