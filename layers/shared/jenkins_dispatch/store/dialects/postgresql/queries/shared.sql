-- What every statement jenkins-dispatch runs on PostgreSQL shares: the advisory-lock keys, the fragments that
-- statements of several files include, and the rules they all follow. The statements are in the other files of
-- this folder, one per concern; statements.py reads the folder as one text, and a name is defined once in it.
--
-- Each block starts with "-- name: NAME" and is run under that name by a store (store/runner.py; the migration
-- runner's by migrations.py). "-- fragment: NAME" blocks are text several statements share, included as
-- {{NAME}}; {{lock:NAME}} is the advisory-lock key declared below. statements.py documents the format.
--
-- Advisory-lock keys (transaction-scoped), written here only. 0004_pauses.sql, applied history, spells
-- the pauses key out in jenkins_dispatch_paused_jobs() (tests/unit/test_statements.py holds the two equal).
-- lock: caps = 4206101977
--   capped claims run one at a time (lock_caps)
-- lock: migrations = 4206101978
--   `migrate` runs one at a time (lock_migrations)
-- lock: pauses = 4206101979
--   taken exclusively by pause_job, shared by every claim (through jenkins_dispatch_paused_jobs())
--
-- Rules every statement here follows:
--   * one round trip per transition; the job_events row is written by the same statement
--     (a data-modifying CTE), so history can never disagree with the row;
--   * every transition out of 'processing' is fenced on (id, dispatch_id, status = 'processing'):
--     a stale worker, or a late callback from an earlier attempt, changes nothing;
--   * a final row (completed, failed, cancelled) is never touched again except by the operator's retry;
--   * a build URL is never downgraded: a relative one (Jenkins without a root URL, as notifications send
--     it) is kept only while no absolute one (from Jenkins's API) is known;
--   * job names compare as Jenkins finds items, whatever their case: caps, pauses and in-flight counts key on
--     lower(job_name) (the job key; 0007_job_name_case_and_schedule_bound.sql indexes it).

-- fragment: live_dispatcher
-- A dispatcher is live while it passed within its own window and did not say it stopped.
(last_pass_at > now() - make_interval(secs => stale_after_seconds) AND last_outcome <> 'stopped')

-- fragment: latest_word_on_jenkins
-- The latest word about Jenkins among live dispatchers: the one that asked Jenkins last.
SELECT id AS dispatcher_id, jenkins_unavailable_since AS since, jenkins_reason AS reason,
       jenkins_checked_at AS checked_at
FROM jenkins_dispatchers
WHERE jenkins_checked_at IS NOT NULL AND {{live_dispatcher}}
ORDER BY jenkins_checked_at DESC, id
LIMIT 1
