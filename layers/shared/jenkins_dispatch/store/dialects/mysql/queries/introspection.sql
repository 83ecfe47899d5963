-- What `doctor` asks the database: who the session is, the migrations applied, the oldest open transaction,
-- the job names waiting, the cutover window. Run by the introspection store (store/introspection.py).
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.
--
-- The cutover: from the worker that ran before jenkins-dispatch, while it still runs
-- (migrations/0005_cutover.sql, docs/cutover.md).

-- name: server_identity
-- `doctor`: who we are (the account, user@host) on which server, proving the session works.
SELECT CURRENT_USER() AS user_name, DATABASE() AS dbname, VERSION() AS server_version;

-- name: applied_migrations
-- `doctor`: the schema versions `migrate` recorded (the table is missing before the first migrate).
SELECT version, name FROM jenkins_dispatch_migrations ORDER BY version;

-- name: oldest_transaction
-- `doctor`: the oldest transaction open in another session of this database (one row; its columns null
-- when none): the session id (`KILL <pid>` ends it), its account, the program name it gave when connecting
-- (performance_schema, when enabled and readable for the session's account; else NULL), its state and age.
-- hidden_sessions: without PROCESS no transaction can be read at all; the other sessions we can list (our
-- own account's: other accounts' are not even listed) are counted as hidden then.
{{op_oldest_transaction}};
SELECT o.ID AS pid, o.USER AS user_name,
       (SELECT a.ATTR_VALUE FROM performance_schema.session_account_connect_attrs a
         WHERE a.PROCESSLIST_ID = o.ID AND a.ATTR_NAME = 'program_name') AS application_name,
       CASE WHEN o.ID IS NULL THEN NULL
            WHEN @jd_trx_state = 'LOCK WAIT' THEN 'waiting for a lock'
            WHEN o.COMMAND = 'Sleep' THEN 'idle in transaction'
            ELSE 'active' END AS state,
       CASE WHEN o.ID IS NOT NULL THEN @jd_trx_seconds END AS seconds,
       CASE WHEN {{op_may_see_transactions}} THEN 0
            ELSE (SELECT count(*) FROM information_schema.processlist
                  WHERE ID <> CONNECTION_ID() AND DB = DATABASE()) END AS hidden_sessions
FROM (SELECT 1 AS one) AS one
LEFT JOIN information_schema.processlist o ON o.ID = @jd_trx_session;

-- name: waiting_job_names
-- `doctor`: the distinct jobs of unfinished rows (by key, as the caps count them: names differing only in case
-- are one), those with the most rows first, each with its count, and how many there are in all. Counted from
-- the open-job index alone, then each job named by its oldest row. Ties go by the names' bytes, as
-- PostgreSQL's C collation orders them, so that both dialects check the same names.
SELECT q.job_name, k.waiting, k.job_names
FROM (SELECT open_job_key, count(*) AS waiting, min(id) AS named_by, count(*) OVER () AS job_names
      FROM jenkins_jobs_queue WHERE open_job_key IS NOT NULL GROUP BY open_job_key) k
JOIN jenkins_jobs_queue q ON q.id = k.named_by
ORDER BY k.waiting DESC, q.job_name COLLATE utf8mb4_bin LIMIT :limit;

-- name: cutover_window
-- `doctor`: the window (no row: the table was never upgraded while the old worker held jobs) and the jobs the old
-- worker still holds.
SELECT c.upgraded_at, c.window_seconds, c.window_ends_at,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), c.window_ends_at) / 1e6 AS seconds_left,
       (SELECT COUNT(*) FROM jenkins_jobs_queue q
         WHERE q.status = 'processing' AND q.dispatch_id LIKE 'legacy-%') AS held
FROM jenkins_dispatch_cutover c;
