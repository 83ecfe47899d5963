-- Every statement jenkins-dispatch runs on MySQL 8.0+ / MariaDB 10.6+, in one place.
--
-- Each block starts with "-- name: NAME" and is run under that name by queue.py (the migration runner's by
-- migrations.py); statements.py documents the format. A block may hold several statements separated by
-- ';': store/mysql.py sends it in one round trip, inside one transaction unless the caller holds one, and
-- returns the rows of its last result set that has columns.

-- ==== the migration runner
-- DDL commits implicitly on MySQL: `migrate` runs without a wrapping transaction, each migration file being
-- safe to run again after a failure part-way through. Concurrent runs are serialised by a named lock of
-- the session (not of a transaction), taken before anything else; the runner ends the session in a finally,
-- which releases it (RELEASE_LOCK would be a MySQL-only statement, and could itself fail).

-- name: lock_migrations
-- 1 once this session holds the lock; 0 after waiting 60 s for another `migrate` (NULL on an error).
-- First, MariaDB's per-session statement time limit (store/mysql.py sets it) is lifted for the rest of the
-- session: it would cut the wait short, or stop an ALTER of a large seed table half-way. MySQL's
-- own limit covers SELECTs only and it has no such variable, so the SET is prepared from text on MariaDB only.
SET @jd_sql = IF(VERSION() LIKE '%MariaDB%',
                 'SET SESSION max_statement_time = 0', 'DO 0');
PREPARE jd_sql FROM @jd_sql;
EXECUTE jd_sql;
DEALLOCATE PREPARE jd_sql;
SELECT GET_LOCK('jenkins-dispatch-migrate', 60) AS locked;

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
