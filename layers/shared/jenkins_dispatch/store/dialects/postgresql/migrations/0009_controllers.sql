-- Several Jenkins controllers from one queue (issue 23; docs/controllers.md). Runs inside the migration runner's
-- transaction, under its advisory lock.
--
-- 1. Each row names the controller that runs it. A plain INSERT leaves it out and means `default` (JENKINS_URL);
--    every existing row is the default controller's. A constant default adds the column without rewriting the
--    table; the name rule is NOT VALID for the same reason (every existing row holds 'default', which keeps it),
--    and binds every write from now on. The constraint's name is the message a bad INSERT gets.
ALTER TABLE jenkins_jobs_queue ADD COLUMN controller text NOT NULL DEFAULT 'default';
ALTER TABLE jenkins_jobs_queue
    ADD CONSTRAINT jenkins_jobs_queue_controller_check
        CHECK (controller ~ '^[a-z0-9][a-z0-9_-]*$' AND length(controller) <= 64) NOT VALID;

-- 2. A claim takes one controller's rows at a time, in the seed's order: the claim index leads with the
--    controller, so a claim walks only its own controller's part, however long another's backlog (a controller
--    that is down keeps its rows pending; they are never read by the others' claims).
CREATE INDEX jenkins_jobs_queue_claim_by_controller_idx
    ON jenkins_jobs_queue (controller, priority DESC, scheduled_at, id) WHERE status = 'pending';
DROP INDEX jenkins_jobs_queue_claim_idx;

-- 3. Caps are per controller: the same job name on two controllers is two jobs (two caps). Existing caps are the
--    default controller's. The key is (controller, job key); the job name alone is no longer unique.
ALTER TABLE jenkins_job_limits ADD COLUMN controller text NOT NULL DEFAULT 'default'
    CONSTRAINT jenkins_job_limits_controller_check CHECK (controller ~ '^[a-z0-9][a-z0-9_-]*$');
ALTER TABLE jenkins_job_limits DROP CONSTRAINT jenkins_job_limits_pkey;
ALTER TABLE jenkins_job_limits ADD PRIMARY KEY (controller, job_name);
DROP INDEX jenkins_job_limits_job_key;
CREATE UNIQUE INDEX jenkins_job_limits_job_key ON jenkins_job_limits (controller, lower(job_name));
