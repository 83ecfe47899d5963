-- Concurrency keys and fairness keys on rows (MySQL's 0019_concurrency_keys.sql; docs/concurrency-keys.md). A
-- concurrency key names a shared resource (`deploy:prod`), whatever the job or controller: `limits set --key`
-- caps the rows holding it in flight. A fairness key names a group (a team) the claims serve in turn. Both are
-- optional: a plain INSERT that leaves them out means neither, and every existing row keeps neither.
-- Compared exactly (case and all), 1 to 255 characters, as the CLI and the producers' store accept them; NOT VALID:
-- no existing row holds one, and checking would read the whole table under the migration's lock.
ALTER TABLE jenkins_jobs_queue
    ADD COLUMN IF NOT EXISTS concurrency_key text,
    ADD COLUMN IF NOT EXISTS fairness_key text;

ALTER TABLE jenkins_jobs_queue
    DROP CONSTRAINT IF EXISTS jenkins_jobs_queue_concurrency_key_check,
    ADD CONSTRAINT jenkins_jobs_queue_concurrency_key_check
        CHECK (length(concurrency_key) BETWEEN 1 AND 255) NOT VALID,
    DROP CONSTRAINT IF EXISTS jenkins_jobs_queue_fairness_key_check,
    ADD CONSTRAINT jenkins_jobs_queue_fairness_key_check
        CHECK (length(fairness_key) BETWEEN 1 AND 255) NOT VALID;

-- A schedule's rows carry its keys (`schedule add … --key K --fair F`).
ALTER TABLE jenkins_job_schedules
    ADD COLUMN IF NOT EXISTS concurrency_key text CHECK (length(concurrency_key) BETWEEN 1 AND 255),
    ADD COLUMN IF NOT EXISTS fairness_key text CHECK (length(fairness_key) BETWEEN 1 AND 255);

-- Key caps (`limits set --key K N`): at most max_in_flight rows holding the key in flight, whatever their job or
-- controller. Read by the capped claim under the caps lock, as the jobs' caps are (claim.sql). supersede
-- (`--supersede`): newest wins, the claim cancels the key's older pending rows; stop_running (`--supersede
-- running`): it also asks for the cancel of its older rows in flight, which the reconciler stops in Jenkins.
CREATE TABLE IF NOT EXISTS jenkins_key_limits (
    concurrency_key text PRIMARY KEY CHECK (length(concurrency_key) BETWEEN 1 AND 255),
    max_in_flight   integer NOT NULL CHECK (max_in_flight >= 0),
    supersede       boolean NOT NULL DEFAULT false,
    stop_running    boolean NOT NULL DEFAULT false CHECK (supersede OR NOT stop_running),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- The rows in flight of a key, counted by each capped claim: index entries of keyed rows in flight only.
CREATE INDEX IF NOT EXISTS jenkins_jobs_queue_in_flight_by_key_idx ON jenkins_jobs_queue (concurrency_key)
    WHERE status = 'processing' AND concurrency_key IS NOT NULL;

-- A superseding key's newest pending row, found by each capped claim (max(id) of the key's pending rows).
CREATE INDEX IF NOT EXISTS jenkins_jobs_queue_pending_by_key_idx ON jenkins_jobs_queue (concurrency_key, id)
    WHERE status = 'pending' AND concurrency_key IS NOT NULL;

-- A key cap raised or removed may free rows: the dispatchers are woken, as by a job's cap (0002_wakeup.sql).
DROP TRIGGER IF EXISTS jenkins_key_limits_changed ON jenkins_key_limits;
CREATE TRIGGER jenkins_key_limits_changed
    AFTER INSERT OR UPDATE OR DELETE ON jenkins_key_limits
    FOR EACH STATEMENT EXECUTE FUNCTION jenkins_dispatch_notify('work');
