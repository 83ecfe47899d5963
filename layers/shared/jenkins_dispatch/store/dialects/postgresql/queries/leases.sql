-- The reconciler's: rows whose lease expired, re-sends, final rows still watched in Jenkins, the queue ids our
-- rows hold, and notes in a row's history. Run by the dispatcher's store (store/dispatcher.py).

-- name: take_expired_leases
-- Rows whose lease ran out, each handed to exactly one reconciler by renewing its lease in the
-- same statement that picks it.
WITH picked AS MATERIALIZED (
    SELECT id FROM jenkins_jobs_queue
    WHERE status = 'processing' AND lease_expires_at <= now() AND controller = :controller
    ORDER BY lease_expires_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE jenkins_jobs_queue q
SET lease_expires_at = now() + make_interval(secs => :lease_seconds), updated_at = now()
FROM picked
WHERE q.id = picked.id
RETURNING q.id, q.job_name, CAST(q.parameters AS text) AS parameters, q.attempts, q.max_attempts, q.dispatch_id,
          q.jenkins_queue_id, q.build_number, q.build_url, q.lease_expires_at, q.resends,
          q.cancel_requested_at IS NOT NULL AS cancel_requested,
          -- when this dispatch began: no build of it can be older, which bounds the search in Jenkins
          (SELECT e.at FROM jenkins_job_events e
            WHERE e.job_id = q.id AND e.dispatch_id = q.dispatch_id AND e.event = 'claimed'
            ORDER BY e.id LIMIT 1) AS claimed_at;

-- name: record_resend
-- The reconciler found no trace of the dispatch in Jenkins and is about to send it again with the
-- SAME dispatch_id. Jenkins never showed the earlier send, so it spends no attempt; re-sends are
-- bounded on their own (:max_resends).
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET resends = resends + 1,
        lease_expires_at = now() + make_interval(secs => :lease_seconds),
        updated_at = now()
    -- Fenced on the lease this reconciler was handed: if it expired and another reconciler took the row
    -- over (a new lease), only that one may send it again.
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND resends < :max_resends
      AND lease_expires_at = CAST(:lease AS timestamptz)
    RETURNING id, dispatch_id, resends
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, 'resent', 'processing', 'processing', dispatch_id, :actor,
           'no queue item or build has this DISPATCH_ID; sending it again (re-send ' || resends || ' of '
           || :max_resends || ', held ' || round(CAST(:quiet_seconds AS float8)) || ' s in Jenkins''s queue so that a late '
           || 'original merges with it)'
    FROM changed
)
SELECT id, resends FROM changed;

-- name: resend_not_taken
-- A re-send Jenkins did not take: never sent (a Jenkins-wide failure; :sent false gives the re-send back)
-- or refused for its job for now (a disabled job; :sent true, it counts). Either way the row keeps
-- processing under the SAME dispatch_id: released or backed off, its next claim would draw a new one, and
-- a late original under this one could then build beside it. The reconciler looks again when the lease
-- that record_resend gave it ends.
WITH changed AS (
    UPDATE jenkins_jobs_queue
    SET resends = CASE WHEN CAST(:sent AS boolean) THEN resends ELSE greatest(resends - 1, 0) END,
        last_error = CAST(:reason AS text), updated_at = now()
    WHERE id = :id AND dispatch_id = :dispatch_id AND status = 'processing' AND jenkins_queue_id IS NULL
    RETURNING id, dispatch_id
), logged AS (
    INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
    SELECT id, CASE WHEN CAST(:sent AS boolean) THEN 'resend_refused' ELSE 'resend_not_sent' END,
           'processing', 'processing', dispatch_id, :actor, :reason
    FROM changed
)
SELECT id FROM changed;

-- name: recently_finished_watched
-- Final rows of one controller (:controller, whose Jenkins the pass asks) a request of whose dispatch may still be
-- in Jenkins, settled within :window seconds: re-sent rows (a re-send whose answer was lost may land after the row
-- settled, then wait RESEND_QUIET_SECONDS in Jenkins's queue), and rows an operator cancelled while their trigger
-- was on its way that settled with nothing of them found in Jenkins (no queue id, no build), until a late arrival
-- of theirs was handled (a late_* event): cancelled_in_flight. Reads the finished_at index; such rows are rare, and
-- the history only for those.
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
    WHERE q.finished_at > now() - make_interval(secs => :window) AND q.controller = :controller
      AND (q.resends > 0 OR (q.status = 'cancelled' AND q.cancel_requested_at IS NOT NULL))
) w
WHERE w.resends > 0 OR w.cancelled_in_flight;

-- name: queue_ids_between
-- Jenkins queue ids our rows hold between :low and :high (both excluded): items of other dispatches, which the
-- reconciler's look back for a person's cancel need not read. The queue-id index, a short range.
SELECT jenkins_queue_id AS queue_id FROM jenkins_jobs_queue
WHERE jenkins_queue_id > CAST(:low AS bigint) AND jenkins_queue_id < CAST(:high AS bigint);

-- name: record_note
-- History only, the row unchanged: what the reconciler saw or did in Jenkins for this dispatch (a duplicate
-- cancelled, a search that could not tell), so `show` tells the operator.
INSERT INTO jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, detail)
SELECT id, :event, status, status, dispatch_id, 'reconciler', :detail
FROM jenkins_jobs_queue WHERE id = :id AND dispatch_id = :dispatch_id;
