-- The web page (`jenkins-dispatch ui`) is an actor of its own in a job's history: its retries and cancels
-- say `ui`, the command line's `operator`. The new check admits every value the old one did, so no existing
-- row can break it: NOT VALID skips re-reading the whole history under the migration's lock (new rows are
-- checked all the same).
ALTER TABLE jenkins_job_events
    DROP CONSTRAINT jenkins_job_events_actor_check,
    ADD CONSTRAINT jenkins_job_events_actor_check
        CHECK (actor IN ('dispatcher', 'webhook', 'reconciler', 'operator', 'ui')) NOT VALID;
