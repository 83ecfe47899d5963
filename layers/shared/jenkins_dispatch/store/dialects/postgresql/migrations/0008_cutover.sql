-- The cutover from the worker that ran before jenkins-dispatch, while it still runs (docs/cutover.md; MySQL's
-- 0005_cutover.sql). That worker (the original question's: SELECT … FOR UPDATE SKIP LOCKED LIMIT 1, UPDATE … SET
-- status = 'processing', COMMIT, the Jenkins job, then UPDATE … SET status = 'completed' or 'failed') knows nothing
-- of dispatch ids or leases:
-- * the jobs it holds when this runs (0001 made them 'legacy-N' dispatches on a seed upgrade) stay its own for a
--   window, CUTOVER_WINDOW_SECONDS long (`migrate` hands it over as jenkins_dispatch.cutover_window_seconds; a file
--   applied by hand opens none). Its 'completed' or 'failed' for them is kept and written in their history; their
--   lease ends with the window, so only then does the reconciler settle what is left;
-- * every other write of its kind (a claim; a result after the window, or for a job it does not hold) is refused
--   with a message that tells its owner what to do, instead of a constraint's name and a dump of the row.
-- Runs inside the migration runner's transaction, under its advisory lock: on a seed upgrade, in the same
-- transaction as 0001, so the old worker never sees the table in between. Written to run again, as MySQL's: after a
-- rollback to the old worker (docs/cutover.md), deleting its record and running `migrate` does the cutover again
-- (the rows the old worker then holds, its unfinished results, the two rules about them, a new window).

-- One row at most: when the table was upgraded while the old worker held jobs, and until when their results count.
CREATE TABLE IF NOT EXISTS jenkins_dispatch_cutover (
    id             integer PRIMARY KEY CHECK (id = 1),
    upgraded_at    timestamptz NOT NULL,
    window_seconds float8 NOT NULL CHECK (window_seconds >= 0),
    window_ends_at timestamptz NOT NULL
);

-- The old worker is an actor of its own in a job's history. As in 0006: the new check admits every value the old
-- one did, so NOT VALID skips re-reading the history.
ALTER TABLE jenkins_job_events
    DROP CONSTRAINT IF EXISTS jenkins_job_events_actor_check,
    ADD CONSTRAINT jenkins_job_events_actor_check
        CHECK (actor IN ('dispatcher', 'webhook', 'reconciler', 'operator', 'ui', 'old_worker')) NOT VALID;

-- Called only for the writes the trigger's WHEN clause picks out, which jenkins-dispatch never makes: every claim of
-- ours draws a new dispatch_id, and every result of ours sets finished_at. It runs with the rights of whoever ran
-- `migrate` (SECURITY DEFINER), as MySQL's triggers do: the old worker's database user may be granted its table
-- and nothing else. Hence too a search_path of the system catalog only, the tables named with the trigger's schema.
CREATE OR REPLACE FUNCTION jenkins_dispatch_old_worker_write() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    window_ends timestamptz;
    shown text;
    told constant text := 'rows are dispatched by jenkins-dispatch now: stop this worker (see docs/cutover.md)';
    why text;
BEGIN
    EXECUTE format('SELECT window_ends_at FROM %I.jenkins_dispatch_cutover', TG_TABLE_SCHEMA) INTO window_ends;
    shown := to_char(window_ends AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC';
    IF NEW.status = 'processing' THEN
        RAISE EXCEPTION USING MESSAGE = format('%s; row %s was not claimed: it stays %s, for jenkins-dispatch',
                                               told, OLD.id, OLD.status);
    END IF;
    -- A result reported by the old worker: NEW.status is final and finished_at was left as it was.
    IF OLD.status = 'processing' AND NEW.status IN ('completed', 'failed')
       AND (OLD.lease_expires_at IS NULL OR (OLD.dispatch_id LIKE 'legacy-%' AND window_ends > now())) THEN
        NEW.finished_at := now();
        NEW.updated_at := now();
        NEW.lease_expires_at := NULL;
        NEW.last_error := CASE WHEN NEW.status = 'failed'
                               THEN 'failed by the worker that ran before jenkins-dispatch (it gives no reason)' END;
        EXECUTE format('INSERT INTO %I.jenkins_job_events (job_id, event, from_status, to_status, dispatch_id, actor, '
                       'detail) VALUES ($1, ''settled'', ''processing'', $2, $3, ''old_worker'', $4)', TG_TABLE_SCHEMA)
        USING OLD.id, NEW.status, OLD.dispatch_id,
              NEW.status || ' by the worker that ran before jenkins-dispatch, which held it when `migrate` '
              || 'upgraded the table (its results count until ' || coalesce(shown, 'now') || ')';
        RETURN NEW;
    END IF;
    why := CASE
        WHEN OLD.status IN ('completed', 'failed', 'cancelled')
            THEN format('it is already %s (since %s UTC) and a final row never changes', OLD.status,
                        to_char(OLD.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'))
        WHEN NEW.status = 'cancelled' THEN format('cancel it with `jenkins-dispatch cancel %s`', OLD.id)
        WHEN OLD.dispatch_id LIKE 'legacy-%'
            THEN format('the cutover window for the jobs this worker held closed at %s; jenkins-dispatch settles it',
                        coalesce(shown, 'the upgrade'))
        WHEN OLD.status = 'processing' THEN format('jenkins-dispatch runs it (dispatch %s)', OLD.dispatch_id)
        ELSE format('it is %s, for jenkins-dispatch to run', OLD.status)
    END;
    RAISE EXCEPTION USING MESSAGE = format('%s; row %s was not marked %s: %s', told, OLD.id, NEW.status, why);
END $$;

DROP TRIGGER IF EXISTS jenkins_jobs_queue_old_worker ON jenkins_jobs_queue;
CREATE TRIGGER jenkins_jobs_queue_old_worker
    BEFORE UPDATE OF status ON jenkins_jobs_queue
    FOR EACH ROW WHEN (
        (NEW.status = 'processing' AND OLD.status <> 'processing' AND NEW.dispatch_id IS NOT DISTINCT FROM OLD.dispatch_id)
        OR (NEW.status IN ('completed', 'failed', 'cancelled') AND NEW.status <> OLD.status
            AND NEW.finished_at IS NOT DISTINCT FROM OLD.finished_at))
    EXECUTE FUNCTION jenkins_dispatch_old_worker_write();

-- ---- The window, opened when the old worker holds jobs: 0001's legacy rows, or (run again after a rollback) its
-- rows in 'processing' without a lease of ours.
INSERT INTO jenkins_dispatch_cutover AS c (id, upgraded_at, window_seconds, window_ends_at)
SELECT 1, now(), w.seconds, now() + make_interval(secs => w.seconds)
FROM (SELECT coalesce(CAST(nullif(current_setting('jenkins_dispatch.cutover_window_seconds', true), '') AS float8), 0)
             AS seconds) w
WHERE EXISTS (SELECT 1 FROM jenkins_jobs_queue
              WHERE status = 'processing' AND (lease_expires_at IS NULL OR dispatch_id LIKE 'legacy-%'))
ON CONFLICT (id) DO UPDATE
SET upgraded_at = EXCLUDED.upgraded_at, window_seconds = EXCLUDED.window_seconds,
    window_ends_at = greatest(c.window_ends_at, EXCLUDED.window_ends_at);

-- Rows in 'processing' the old worker claimed since 0001 (only after a rollback): marked as 0001 marks them.
UPDATE jenkins_jobs_queue
SET dispatch_id = 'legacy-' || id,
    attempts = max_attempts,
    last_error = 'was processing under the dispatcher that ran before jenkins-dispatch; its Jenkins build '
              || 'cannot be identified, so it is not triggered again (check Jenkins; retry it if it never ran)'
WHERE status = 'processing' AND lease_expires_at IS NULL;
-- Every job the old worker holds: its lease ends with the window.
UPDATE jenkins_jobs_queue q SET lease_expires_at = c.window_ends_at
FROM jenkins_dispatch_cutover c
WHERE q.status = 'processing' AND q.dispatch_id LIKE 'legacy-%'
  AND (q.lease_expires_at IS NULL OR q.lease_expires_at < c.window_ends_at);
-- Results it reported while the rules below were dropped: they finished at an unknown time, before this.
UPDATE jenkins_jobs_queue SET finished_at = now()
WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at IS NULL;

-- The two rules about processing and final rows (0001's), back if a rollback dropped them.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'jenkins_jobs_queue'::regclass
                   AND conname = 'jenkins_jobs_queue_processing_check') THEN
        ALTER TABLE jenkins_jobs_queue ADD CONSTRAINT jenkins_jobs_queue_processing_check
            CHECK (status <> 'processing' OR (dispatch_id IS NOT NULL AND lease_expires_at IS NOT NULL));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'jenkins_jobs_queue'::regclass
                   AND conname = 'jenkins_jobs_queue_final_check') THEN
        ALTER TABLE jenkins_jobs_queue ADD CONSTRAINT jenkins_jobs_queue_final_check
            CHECK (status NOT IN ('completed', 'failed', 'cancelled') OR finished_at IS NOT NULL);
    END IF;
END $$;
