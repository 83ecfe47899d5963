-- Re-sends are counted apart from attempts: a dispatch that never reached Jenkins (a dispatcher that died
-- between claim and trigger, a request Jenkins never saw) does not use up the job's attempts, but it is
-- sent again only a bounded number of times.
ALTER TABLE jenkins_jobs_queue ADD COLUMN IF NOT EXISTS resends integer NOT NULL DEFAULT 0;

-- An operator's cancel of a row whose trigger is still in flight (no queue id yet) is recorded here:
-- whoever learns the queue id or finds the build (dispatcher, reconciler) cancels it in Jenkins, then
-- settles the row 'cancelled'.
ALTER TABLE jenkins_jobs_queue ADD COLUMN IF NOT EXISTS cancel_requested_at timestamptz;
