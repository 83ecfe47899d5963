-- Pauses per controller (issue 23; docs/controllers.md): the same job name on two controllers is two jobs, and a
-- whole controller may be paused for maintenance. Runs inside the migration runner's transaction, under its
-- advisory lock.
--
-- controller NULL means every controller: what a pause meant before this migration, so each existing pause keeps
-- holding its job back on every controller, as it did. A pause with a controller holds back that controller's
-- rows only; job_name '*' with a controller pauses that whole controller, '*' without one everything.
ALTER TABLE jenkins_job_pauses ADD COLUMN controller text
    CONSTRAINT jenkins_job_pauses_controller_check CHECK (controller ~ '^[a-z0-9][a-z0-9_-]*$');
-- The job name alone is no longer the key: one job may be paused on several controllers (and everywhere).
ALTER TABLE jenkins_job_pauses DROP CONSTRAINT jenkins_job_pauses_pkey;
ALTER TABLE jenkins_job_pauses ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY;
DROP INDEX jenkins_job_pauses_job_key;
-- '' (not a valid controller name) stands for NULL: one pause of a job everywhere, one per controller.
CREATE UNIQUE INDEX jenkins_job_pauses_job_key ON jenkins_job_pauses (coalesce(controller, ''), lower(job_name));

-- The pauses a claim on one controller must honour: its own and every controller's. Ordered against pause_job
-- by the same lock as jenkins_dispatch_paused_jobs() (0004_pauses.sql, whose comment says why), which stays for
-- whatever still calls it.
CREATE FUNCTION jenkins_dispatch_paused_jobs(on_controller text) RETURNS SETOF text LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(4206101979);
    RETURN QUERY SELECT p.job_name FROM jenkins_job_pauses p
                 WHERE p.controller IS NULL OR p.controller = on_controller;
END $$;
