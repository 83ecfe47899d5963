-- Plain SQL that would make a row's bookkeeping lie (MySQL's 0017_plain_sql.sql). The seed's users fix rows by hand
-- with `UPDATE jenkins_jobs_queue SET status = 'pending' WHERE id = …`:
-- * on a processing row, to "requeue a stuck job". Taken as it reads, the next claim drew a new dispatch_id and sent
--   the job again beside the build Jenkins may already have: two builds. It is taken as a request to look again: the
--   row stays processing under the same dispatch, nothing else the UPDATE set is kept (a re-send must carry the
--   original's job and parameters, or Jenkins cannot merge the two), and the reconciler does what it does for any
--   expired lease: follows the queue item or build Jenkins has, searches for the DISPATCH_ID, and sends again (the same
--   DISPATCH_ID) only when nothing is there. A dispatch Jenkins has answered for is looked at now; one whose trigger
--   may still be on its way keeps its lease (a lease outlasts the request: the search must not come before its end);
--   one the worker that ran before jenkins-dispatch holds keeps its cutover window (0008_cutover.sql);
-- * on a final row, to "retry a failed job". Taken as it reads, the row was claimed as "attempt 4 of 3" with its
--   finish time, re-sends and requested cancel still set. It is the operator's retry, as retry_final makes it; what
--   else the UPDATE set (parameters, priority, a later scheduled_at) stays.
-- Either way the history says so (actor plain_sql). Accepted rather than refused: a refusal rolls the UPDATE back,
-- and its history row with it.
--
-- Told apart from ours by what they leave: every statement of ours that makes a row pending clears its lease and its
-- finish time (tests/unit/test_statements.py holds them to it); the hand-made UPDATE leaves them. One that clears them
-- too is taken as written.

-- plain_sql, an actor of its own in a job's history. As in 0011: the new check admits every value the old one did.
ALTER TABLE jenkins_job_events
    DROP CONSTRAINT IF EXISTS jenkins_job_events_actor_check,
    ADD CONSTRAINT jenkins_job_events_actor_check
        CHECK (actor IN ('dispatcher', 'webhook', 'reconciler', 'operator', 'ui', 'old_worker', 'plain_sql')
               OR (actor LIKE 'ui:_%' AND length(actor) <= 63)) NOT VALID;

-- With the rights of whoever ran `migrate`, as 0008's: the user's tool may be granted the queue table alone.
CREATE OR REPLACE FUNCTION jenkins_dispatch_plain_sql_pending() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    event text;
    detail text;
BEGIN
    IF OLD.status = 'processing' THEN
        event := 'requeue_kept';
        NEW := OLD;
        NEW.updated_at := now();
        IF OLD.dispatch_id LIKE 'legacy-%' THEN
            detail := 'the worker that ran before jenkins-dispatch holds it (docs/cutover.md): jenkins-dispatch never '
                      'sends it, and settles it if that worker has not when the cutover window closes';
        ELSIF OLD.jenkins_queue_id IS NOT NULL OR OLD.build_number IS NOT NULL THEN
            NEW.lease_expires_at := least(OLD.lease_expires_at, now());
            detail := 'Jenkins has it (' || concat_ws(', ', 'queue item ' || OLD.jenkins_queue_id,
                                                      'build #' || OLD.build_number)
                      || '): looked at there now and settled from what Jenkins says; it is not sent again';
        ELSE
            detail := 'its trigger''s answer is not known: '
                      || CASE WHEN OLD.lease_expires_at > now()
                              THEN 'once its lease ends (' || to_char(OLD.lease_expires_at AT TIME ZONE 'UTC',
                                                                      'HH24:MI:SS') || ' UTC; the trigger may still '
                                   'be on its way), '
                              ELSE 'at the next pass, ' END
                      || 'Jenkins is searched for its DISPATCH_ID, and it is sent again, with the same DISPATCH_ID, '
                         'only if nothing is found there';
        END IF;
        detail := format('set back to pending by plain SQL while processing: kept processing under dispatch %s, the rest of '
                         'the UPDATE undone; %s (`jenkins-dispatch cancel %s` stops it)', OLD.dispatch_id, detail, OLD.id);
        IF NEW.lease_expires_at <= now() THEN
            PERFORM pg_notify('jenkins_dispatch', 'work');  -- due for a look now: wake the dispatcher (0002_wakeup.sql)
        END IF;
    ELSE
        event := 'retried';
        NEW.dispatch_id := OLD.dispatch_id;
        NEW.attempts := 0;
        NEW.resends := 0;
        NEW.cancel_requested_at := NULL;
        NEW.finished_at := NULL;
        NEW.lease_expires_at := NULL;
        NEW.jenkins_queue_id := NULL;
        NEW.build_number := NULL;
        NEW.build_url := NULL;
        NEW.jenkins_result := NULL;
        NEW.started_at := NULL;
        NEW.last_error := NULL;
        NEW.updated_at := now();
        IF NEW.scheduled_at IS NOT DISTINCT FROM OLD.scheduled_at THEN
            NEW.scheduled_at := now();
        END IF;
        detail := format('set back to pending by plain SQL while %s: retried as `jenkins-dispatch retry %s` retries it '
                         '(attempts counted afresh)', OLD.status, OLD.id);
    END IF;
    EXECUTE format('INSERT INTO %I.jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, '
                   'detail) VALUES ($1, $2, $3, $4, $5, ''plain_sql'', $6)', TG_TABLE_SCHEMA)
    USING OLD.id, event, OLD.status, NEW.status, OLD.dispatch_id, detail;
    RETURN NEW;
END $$;

-- Picked out by the WHEN clause (no call for any statement of ours). Beside jenkins_jobs_queue_old_worker, which
-- looks at other writes: neither's WHEN matches what the other leaves, so their order does not matter.
DROP TRIGGER IF EXISTS jenkins_jobs_queue_plain_sql ON jenkins_jobs_queue;
CREATE TRIGGER jenkins_jobs_queue_plain_sql
    BEFORE UPDATE OF status ON jenkins_jobs_queue
    FOR EACH ROW WHEN (NEW.status = 'pending' AND (
        (OLD.status = 'processing' AND NEW.lease_expires_at IS NOT NULL)
        OR (OLD.status IN ('completed', 'failed', 'cancelled') AND NEW.finished_at IS NOT NULL)))
    EXECUTE FUNCTION jenkins_dispatch_plain_sql_pending();
