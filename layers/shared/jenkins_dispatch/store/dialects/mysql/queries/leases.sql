-- The reconciler's: rows whose lease expired, re-sends, final rows still watched in Jenkins, the queue ids our
-- rows hold, and notes in a row's history. Run by the dispatcher's store (store/dispatcher.py).
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.

-- name: take_expired_leases
-- decode: cancel_requested bool
-- Rows whose lease ran out, each handed to exactly one reconciler: picked without waiting on rows others
-- hold, their leases renewed in the same block.
SET @jd_taken = NULL;
SELECT JSON_ARRAYAGG(picked.id) INTO @jd_taken FROM (
    -- Forced, as the claims are: a scan would lock (for a moment) pending rows that a claim beside it skips.
    SELECT id FROM jenkins_jobs_queue FORCE INDEX (jenkins_jobs_queue_lease_idx)
    WHERE status = 'processing' AND lease_expires_at <= NOW(6) AND controller = :controller
    ORDER BY lease_expires_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
) picked;
UPDATE {{t_taken}} STRAIGHT_JOIN jenkins_jobs_queue q FORCE INDEX (PRIMARY) ON q.id = t.id
SET q.lease_expires_at = {{t_lease_end}}, q.updated_at = NOW(6);
SELECT q.id, q.job_name, q.parameters, q.attempts, q.max_attempts, q.dispatch_id,
       q.jenkins_queue_id, q.build_number, q.build_url, q.lease_expires_at, q.resends,
       q.cancel_requested_at IS NOT NULL AS cancel_requested,
       -- when this dispatch began: no build of it can be older, which bounds the search in Jenkins
       (SELECT e.at FROM jenkins_job_events e
         WHERE e.job_id = q.id AND e.dispatch_id = q.dispatch_id AND e.event = 'claimed'
         ORDER BY e.id LIMIT 1) AS claimed_at
FROM {{t_taken}} JOIN jenkins_jobs_queue q ON q.id = t.id;

-- name: record_resend
-- The reconciler sends the dispatch again under the SAME dispatch_id, fenced on the lease it was handed
-- (:lease, which the driver hands over as UTC, compared to the microsecond); no attempt is spent.
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET resends = resends + 1,
    lease_expires_at = {{t_lease_end}},
    updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND resends < :max_resends
  AND lease_expires_at = :lease;
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, 'resent', 'processing', 'processing', dispatch_id, :actor,
       CONCAT('no queue item or build has this DISPATCH_ID; sending it again (re-send ', resends, ' of ',
              :max_resends, ', held ', CAST(ROUND(:quiet_seconds) AS SIGNED),
              ' s in Jenkins''s queue so that a late original merges with it)')
FROM jenkins_jobs_queue WHERE id = :id AND @jd_changed > 0;
SELECT id, resends FROM jenkins_jobs_queue WHERE id = :id AND @jd_changed > 0;

-- name: resend_not_taken
-- A re-send Jenkins did not take keeps its row processing under the SAME dispatch_id (see PostgreSQL's);
-- :sent false gives the re-send back.
SET @jd_changed = 0;
UPDATE jenkins_jobs_queue
SET resends = CASE WHEN :sent THEN resends ELSE GREATEST(resends - 1, 0) END,
    last_error = :reason, updated_at = NOW(6)
WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND jenkins_queue_id IS NULL;
SET @jd_changed = ROW_COUNT();
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT :id, CASE WHEN :sent THEN 'resend_refused' ELSE 'resend_not_sent' END,
       'processing', 'processing', :dispatch_id, :actor, :reason
FROM DUAL WHERE @jd_changed > 0;
SELECT :id AS id FROM DUAL WHERE @jd_changed > 0;

-- name: recently_finished_watched
-- Re-sent rows of one controller (:controller), and its rows cancelled while their trigger was on its way with
-- nothing of them found in Jenkins whose late arrival was not handled yet (cancelled_in_flight), settled within
-- :window seconds (see PostgreSQL's).
-- decode: cancelled_in_flight bool
SELECT w.id, w.job_name, w.dispatch_id, w.cancelled_in_flight,
       CASE WHEN w.cancelled_in_flight THEN
           (SELECT e.at FROM jenkins_job_events e
             WHERE e.job_id = w.id AND e.dispatch_id = w.dispatch_id AND e.event = 'claimed'
             ORDER BY e.id LIMIT 1) END AS claimed_at
FROM (
    SELECT q.id, q.job_name, q.dispatch_id, q.resends,
           q.status = 'cancelled' AND q.cancel_requested_at IS NOT NULL AND q.jenkins_queue_id IS NULL
               AND q.build_number IS NULL
               AND NOT EXISTS (SELECT 1 FROM jenkins_job_events e
                               WHERE e.job_id = q.id AND e.dispatch_id = q.dispatch_id
                                 AND e.event IN ('late_trigger_cancelled', 'late_build_stopped', 'late_build_seen'))
               AS cancelled_in_flight
    FROM jenkins_jobs_queue q
    WHERE q.finished_at > NOW(6) - INTERVAL ROUND(:window * 1000000) MICROSECOND AND q.controller = :controller
      AND (q.resends > 0 OR (q.status = 'cancelled' AND q.cancel_requested_at IS NOT NULL))
) w
WHERE w.resends > 0 OR w.cancelled_in_flight;

-- name: queue_ids_between
-- Jenkins queue ids our rows hold between :low and :high (both excluded): see PostgreSQL's.
SELECT jenkins_queue_id AS queue_id FROM jenkins_jobs_queue
WHERE jenkins_queue_id > :low AND jenkins_queue_id < :high;

-- name: record_note
-- History only, the row unchanged: what the reconciler saw or did in Jenkins for this dispatch.
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, :event, status, status, dispatch_id, 'reconciler', :detail
FROM jenkins_jobs_queue WHERE id = :id AND dispatch_id = :dispatch_id;
