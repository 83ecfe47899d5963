-- Adding rows: enqueue (with its dedupe key) and the re-read of a duplicate that committed meanwhile.
-- Run by the producers' store (store/producers.py).
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.

-- name: enqueue
-- decode: created bool
-- The open_dedupe_key index makes a second unfinished row with the same key a duplicate-key conflict;
-- ON DUPLICATE KEY turns it into a no-op that records the existing id (LAST_INSERT_ID(id)) and that no row
-- was created. A concurrent enqueue of the same key waits on the index entry of the first: once that one
-- commits, it finds the duplicate; if it rolls back, it inserts. Either way it never fails.
SET @jd_created = 1, @jd_id = NULL, @jd_iso = :scheduled_at;
INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, max_attempts, dedupe_key, controller,
                                concurrency_key, fairness_key)
VALUES (:job_name, :parameters, :priority, COALESCE({{t_iso_utc}}, NOW(6)), :max_attempts, :dedupe_key, :controller,
        :concurrency_key, :fairness_key)
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id) + 0 * (@jd_created := 0);
-- read before the history row's insert, which sets LAST_INSERT_ID() anew
SET @jd_id = LAST_INSERT_ID();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, actor, detail)
SELECT id, 'enqueued', NULL, 'pending', :actor,
       CASE WHEN scheduled_at > NOW(6) THEN CONCAT('not before ', DATE_FORMAT(scheduled_at, '%Y-%m-%d %H:%i:%s'), ' UTC') END
FROM jenkins_jobs_queue WHERE id = @jd_id AND @jd_created = 1;
SELECT @jd_id AS id, @jd_created AS created;

-- name: find_open_by_dedupe_key
-- not run on this engine: enqueue always answers with a row here (the duplicate-key update finds the open one)
-- Producers.enqueue looks again only when its statement answered nothing, as PostgreSQL's may after a concurrent
-- enqueue of the same key committed.
SELECT id FROM jenkins_jobs_queue WHERE open_dedupe_key = :dedupe_key;
