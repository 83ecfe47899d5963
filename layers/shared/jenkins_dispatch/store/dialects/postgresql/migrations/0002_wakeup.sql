-- Wake the dispatcher the moment there is work, and keep scheduled_at a real point in time.
-- Runs inside the migration runner's transaction, under its advisory lock.

-- scheduled_at = '-infinity' (or 'infinity') is valid SQL but no time at all: ages and waits computed
-- from it fail. Rows that already hold one keep their meaning: -infinity is "due now", infinity "never"
-- (the latest time PostgreSQL can still subtract from).
UPDATE jenkins_jobs_queue SET scheduled_at = coalesce(created_at, now()) WHERE scheduled_at = '-infinity';
UPDATE jenkins_jobs_queue SET scheduled_at = '9999-12-31 00:00:00+00' WHERE scheduled_at = 'infinity';
ALTER TABLE jenkins_jobs_queue
    ADD CONSTRAINT jenkins_jobs_queue_scheduled_at_check CHECK (isfinite(scheduled_at));

-- When the next not-yet-due job becomes due: the dispatcher sleeps until then (or a notification).
CREATE INDEX jenkins_jobs_queue_due_idx ON jenkins_jobs_queue (scheduled_at) WHERE status = 'pending';

-- One channel, two payloads: 'work' (rows became pending: inserted, released, retried, backed off, or a
-- cap raised) and 'slot' (a row left processing, so a capped job may start). Notifications are
-- delivered at commit, identical ones within a transaction are folded into one, and a listener that is
-- not listening costs nothing.
CREATE FUNCTION jenkins_dispatch_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jenkins_dispatch', TG_ARGV[0]);
    RETURN NULL;
END $$;

-- Statement level: an INSERT of 10,000 rows sends one notification, and the application's own plain
-- INSERT wakes the dispatcher without any change on its side.
CREATE TRIGGER jenkins_jobs_queue_inserted
    AFTER INSERT ON jenkins_jobs_queue
    FOR EACH STATEMENT EXECUTE FUNCTION jenkins_dispatch_notify('work');

-- Row level with a WHEN clause: the condition is checked without calling the function, so claims and
-- progress updates (which match neither) pay next to nothing.
CREATE TRIGGER jenkins_jobs_queue_pending_again
    AFTER UPDATE OF status ON jenkins_jobs_queue
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status IS DISTINCT FROM 'pending')
    EXECUTE FUNCTION jenkins_dispatch_notify('work');
CREATE TRIGGER jenkins_jobs_queue_slot_freed
    AFTER UPDATE OF status ON jenkins_jobs_queue
    FOR EACH ROW WHEN (OLD.status = 'processing' AND NEW.status <> 'processing')
    EXECUTE FUNCTION jenkins_dispatch_notify('slot');
-- retry_later keeps the row pending and moves its time: the dispatcher must learn the new time.
CREATE TRIGGER jenkins_jobs_queue_rescheduled
    AFTER UPDATE OF scheduled_at ON jenkins_jobs_queue
    FOR EACH ROW WHEN (NEW.status = 'pending' AND NEW.scheduled_at IS DISTINCT FROM OLD.scheduled_at)
    EXECUTE FUNCTION jenkins_dispatch_notify('work');

-- A cap raised or removed can free room for waiting jobs.
CREATE TRIGGER jenkins_job_limits_changed
    AFTER INSERT OR UPDATE OR DELETE ON jenkins_job_limits
    FOR EACH STATEMENT EXECUTE FUNCTION jenkins_dispatch_notify('work');
