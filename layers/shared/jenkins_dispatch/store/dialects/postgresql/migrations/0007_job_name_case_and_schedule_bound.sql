-- Two rules of the data, each for a real failure (issue 21). Runs inside the migration runner's transaction,
-- under its advisory lock.
--
-- 1. One case rule for job names. Jenkins finds an item whatever the case of its name (Jenkins.items and a
--    folder's items are maps ordered by String.CASE_INSENSITIVE_ORDER): `slow`, `SLOW` and `Slow` are one job
--    there, so a cap or a pause must hold every spelling. Caps, pauses and in-flight counts compare
--    lower(job_name) from now on (queries/), as MySQL always has (its tables key on LOWER(job_name)).
--    lower() folds every letter under a UTF-8 locale (the default almost everywhere, RDS included); a database
--    created with the "C" locale folds ASCII letters only.
--
--    Caps and pauses written before this rule may name one job twice (`Slow` 3 and `slow` 1). One of each is
--    kept: the stricter cap (the smallest; then the oldest), as the one an operator can least afford to see
--    exceeded; and the pause in force the longest (its author and reason with it). The other rows are deleted.

DELETE FROM jenkins_job_limits l
USING (
    SELECT job_name, row_number() OVER (PARTITION BY lower(job_name)
                                        ORDER BY max_in_flight, updated_at, job_name COLLATE "C") AS nth
    FROM jenkins_job_limits
) ranked
WHERE l.job_name = ranked.job_name AND ranked.nth > 1;
CREATE UNIQUE INDEX jenkins_job_limits_job_key ON jenkins_job_limits (lower(job_name));

DELETE FROM jenkins_job_pauses p
USING (
    SELECT job_name, row_number() OVER (PARTITION BY lower(job_name)
                                        ORDER BY paused_at, job_name COLLATE "C") AS nth
    FROM jenkins_job_pauses
) ranked
WHERE p.job_name = ranked.job_name AND ranked.nth > 1;
CREATE UNIQUE INDEX jenkins_job_pauses_job_key ON jenkins_job_pauses (lower(job_name));

-- In-flight rows per job, as caps now count them.
DROP INDEX jenkins_jobs_queue_in_flight_idx;
CREATE INDEX jenkins_jobs_queue_in_flight_idx
    ON jenkins_jobs_queue (lower(job_name), lease_expires_at) INCLUDE (job_name) WHERE status = 'processing';

-- 2. scheduled_at at most 9999-12-31 00:00 UTC (0002_wakeup.sql's "never"). Later times are valid timestamptz
--    but no reader can hold them: pg8000 hands a year past 9999 over as text, and `ls`, `show` and the page
--    broke on it. The constraint's name is the message a plain INSERT gets. Unfinished rows beyond it become
--    "never", as infinity did in 0002; a final row is left as it was (NOT VALID: the rule binds every write from
--    now on, and a final row is only ever written again by `retry`, which sets scheduled_at to now).
UPDATE jenkins_jobs_queue SET scheduled_at = '9999-12-31 00:00:00+00'
WHERE status = 'pending' AND scheduled_at > '9999-12-31 00:00:00+00';
UPDATE jenkins_jobs_queue SET scheduled_at = '9999-12-31 00:00:00+00'
WHERE status = 'processing' AND scheduled_at > '9999-12-31 00:00:00+00';
ALTER TABLE jenkins_jobs_queue
    ADD CONSTRAINT jenkins_jobs_queue_scheduled_at_at_most_9999_12_31
        CHECK (scheduled_at <= '9999-12-31 00:00:00+00') NOT VALID;
