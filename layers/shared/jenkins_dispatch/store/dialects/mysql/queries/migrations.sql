-- The migration runner's own statements (migrations.py): its lock, the bookkeeping table, the cutover window it
-- hands the cutover migration.
--
-- The same statements as PostgreSQL's file of the same name (dialects/postgresql/queries/), whose comments say
-- what each is for; the comments here say how each is done on MySQL and MariaDB.
--
-- DDL commits implicitly on MySQL: `migrate` runs without a wrapping transaction, each migration file being
-- safe to run again after a failure part-way through. Concurrent runs are serialised by a named lock of
-- the session (not of a transaction), taken before anything else; the runner ends the session in a finally,
-- which releases it (RELEASE_LOCK would be a MySQL-only statement, and could itself fail).

-- name: lock_migrations
-- 1 once this session holds the lock; 0 after waiting 60 s for another `migrate` (NULL on an error).
-- First, MariaDB's per-session statement time limit (session.py sets it) is lifted for the rest of the
-- session: it would cut the wait short, or stop an ALTER of a large seed table half-way. MySQL's
-- own limit covers SELECTs only and it has no such variable, so the SET is prepared from text on MariaDB only.
SET @jd_sql = IF(VERSION() LIKE '%MariaDB%',
                 'SET SESSION max_statement_time = 0', 'DO 0');
PREPARE jd_sql FROM @jd_sql;
EXECUTE jd_sql;
DEALLOCATE PREPARE jd_sql;
-- The lock is named after the database (GET_LOCK names are server-wide, at most 64 characters): migrations of
-- other databases on the same server do not wait for this one.
SELECT GET_LOCK(CONCAT('jenkins-dispatch-migrate:', LEFT(DATABASE(), 38)), 60) AS locked;

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS jenkins_dispatch_migrations (
    version    INT NOT NULL PRIMARY KEY,
    name       VARCHAR(255) NOT NULL,
    applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- name: migration_versions
SELECT version FROM jenkins_dispatch_migrations;

-- name: record_migration
INSERT INTO jenkins_dispatch_migrations (version, name) VALUES (:version, :name);

-- name: set_cutover_window
-- The migration runner, before the files: how long the old worker's results for the jobs it holds still count
-- (CUTOVER_WINDOW_SECONDS), read by 0005_cutover.sql. A variable of the runner's session, which it ends.
SET @jd_cutover_window_seconds = :seconds;
