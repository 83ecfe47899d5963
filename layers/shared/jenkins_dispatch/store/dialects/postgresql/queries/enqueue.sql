-- Adding rows: enqueue (with its dedupe key) and the re-read of a duplicate that committed meanwhile.
-- Run by the producers' store (store/producers.py).

-- name: enqueue
-- A second enqueue with the same dedupe_key while one is unfinished returns the existing id.
WITH inserted AS (
    INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, max_attempts, dedupe_key, controller,
                                    concurrency_key, fairness_key)
    VALUES (:job_name, CAST(:parameters AS jsonb), :priority,
            coalesce(CAST(:scheduled_at AS timestamptz), now()), :max_attempts, :dedupe_key, :controller,
            :concurrency_key, :fairness_key)
    ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'processing')
    DO NOTHING
    RETURNING id, scheduled_at
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, actor, detail)
    SELECT id, 'enqueued', NULL, 'pending', :actor,
           CASE WHEN scheduled_at > now() THEN 'not before ' || to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC' END
    FROM inserted
)
SELECT id, true AS created FROM inserted
UNION ALL
SELECT id, false AS created FROM jenkins_jobs_queue
WHERE dedupe_key = :dedupe_key AND status IN ('pending', 'processing') AND NOT EXISTS (SELECT 1 FROM inserted);

-- name: find_open_by_dedupe_key
SELECT id FROM jenkins_jobs_queue
WHERE dedupe_key = :dedupe_key AND status IN ('pending', 'processing');
