-- Who pulled a lever of the web page: behind a login proxy the page records its operator as "ui:NAME" (the
-- name the proxy's header gives), so the history's check admits that form too. The new check admits every value
-- the old one did, so NOT VALID skips re-reading the history.
ALTER TABLE jenkins_job_events
    DROP CONSTRAINT IF EXISTS jenkins_job_events_actor_check,
    ADD CONSTRAINT jenkins_job_events_actor_check
        CHECK (actor IN ('dispatcher', 'webhook', 'reconciler', 'operator', 'ui', 'old_worker')
               OR (actor LIKE 'ui:_%' AND length(actor) <= 63)) NOT VALID;

-- Every cap set or removed, by whom (`limits` from the CLI: user@host; the page: ui or ui:NAME), written by the
-- same statement as the change. Read newest first, a handful at a time: the primary key is the only index.
CREATE TABLE jenkins_job_limit_events (
    id            bigserial PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    controller    text NOT NULL DEFAULT 'default',  -- caps are per controller (0009_controllers.sql)
    job_name      text NOT NULL,
    previous      integer,            -- NULL: the job had no cap
    max_in_flight integer,            -- NULL: the cap was removed
    changed_by    text
);
