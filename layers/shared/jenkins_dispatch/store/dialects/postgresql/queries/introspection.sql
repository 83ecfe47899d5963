-- What `doctor` asks the database: who the session is, the migrations applied, the oldest open transaction,
-- the job names waiting, the cutover window. Run by the introspection store (store/introspection.py).
--
-- The cutover: from the worker that ran before jenkins-dispatch, while it still runs
-- (migrations/0008_cutover.sql, docs/cutover.md).

-- name: server_identity
-- `doctor`: who we are on which server, proving the session works.
SELECT current_user AS user_name, current_database() AS dbname, current_setting('server_version') AS server_version;

-- name: applied_migrations
-- `doctor`: the schema versions `migrate` recorded (the table is missing before the first migrate).
SELECT version, name FROM jenkins_dispatch_migrations ORDER BY version;

-- name: oldest_transaction
-- `doctor`: the oldest transaction open in this database, besides ours (one row; its columns null when none),
-- and how many sessions hide their details from us (pg_stat_activity shows other users' transactions only to
-- superusers and members of pg_read_all_stats).
WITH sessions AS (
    SELECT pid, usename, application_name, state, xact_start, query = '<insufficient privilege>' AS hidden
    FROM pg_stat_activity
    WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
), oldest AS (
    SELECT * FROM sessions WHERE xact_start IS NOT NULL ORDER BY xact_start LIMIT 1
)
SELECT o.pid, o.usename AS user_name, o.application_name, o.state,
       extract(epoch FROM now() - o.xact_start)::float8 AS seconds,
       (SELECT count(*) FROM sessions WHERE hidden) AS hidden_sessions
FROM (SELECT 1) AS one LEFT JOIN oldest o ON true;

-- name: waiting_job_names
-- `doctor`: the distinct jobs of unfinished rows (by job key: names differing only in case are one), those with
-- the most rows first, each with its count and the first of its spellings, and how many there are in all (the
-- partial indexes of unfinished rows only).
SELECT min(job_name COLLATE "C") AS job_name, count(*) AS waiting, count(*) OVER () AS job_names
FROM jenkins_jobs_queue WHERE status IN ('pending', 'processing')
GROUP BY lower(job_name) ORDER BY count(*) DESC, 1 LIMIT :limit;

-- name: cutover_window
-- `doctor`: the window (no row: the table was never upgraded while the old worker held jobs) and the jobs the old
-- worker still holds (partial index of processing rows).
SELECT c.upgraded_at, c.window_seconds, c.window_ends_at,
       extract(epoch FROM c.window_ends_at - now())::float8 AS seconds_left,
       (SELECT count(*) FROM jenkins_jobs_queue q
         WHERE q.status = 'processing' AND q.dispatch_id LIKE 'legacy-%') AS held
FROM jenkins_dispatch_cutover c;
