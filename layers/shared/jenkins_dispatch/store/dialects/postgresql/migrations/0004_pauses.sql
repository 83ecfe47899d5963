-- Pause and resume: an operator holds back one job (or everything) without touching its rows. Claims skip
-- the pending rows of a paused job; rows already claimed or in Jenkins carry on. A pause may come before
-- the job's first row. The name '*' (a character Jenkins forbids in item names) stands for every job.
-- Runs inside the migration runner's transaction, under its advisory lock.
CREATE TABLE jenkins_job_pauses (
    job_name  text PRIMARY KEY CHECK (btrim(job_name) <> ''),
    paused_at timestamptz NOT NULL DEFAULT now(),
    paused_by text,
    reason    text
);

-- The pauses a claim must honour. A pause takes lock 4206101979 exclusively (queries/levers.sql, pause_job);
-- this function takes it shared, and only then reads the pauses, in a query of its own: a VOLATILE
-- function's query runs on a fresh snapshot, whereas the calling claim's snapshot was taken before it
-- waited for the lock and could miss a pause that committed meanwhile. Either the claim holds the lock
-- first, and the pause commits only after the claim has; or the pause commits first, and the claim sees it.
CREATE FUNCTION jenkins_dispatch_paused_jobs() RETURNS SETOF text LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(4206101979);
    RETURN QUERY SELECT p.job_name FROM jenkins_job_pauses p;
END $$;

-- A lifted pause makes rows claimable again: wake the dispatcher (0002_wakeup.sql's channel and payload).
CREATE TRIGGER jenkins_job_pauses_lifted
    AFTER DELETE ON jenkins_job_pauses
    FOR EACH STATEMENT EXECUTE FUNCTION jenkins_dispatch_notify('work');
