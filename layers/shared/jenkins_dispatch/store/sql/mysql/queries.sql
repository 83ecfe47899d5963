-- Every statement jenkins-dispatch runs on MySQL 8.0+ / MariaDB 10.6+, in one place.
--
-- Each block starts with "-- name: NAME" and is run under that name by queue.py (the migration runner's by
-- migrations.py); statements.py documents the format. A block may hold several statements separated by
-- ';': store/mysql.py sends it in one round trip, inside one transaction unless the caller holds one, and
-- returns the rows of its last result set that has columns.

-- ==== the migration runner
-- DDL commits implicitly on MySQL: `migrate` runs without a wrapping transaction, each migration file being
-- safe to run again after a failure part-way through. Concurrent runs are serialised by a named lock of
-- the session (not of a transaction): taken before anything else, released in a finally (and by the
-- server if the session dies).

-- name: server_version
-- migrate refuses servers without FOR UPDATE SKIP LOCKED (migrations.server_supported).
SELECT VERSION() AS version;

-- name: lock_migrations
-- 1 once this session holds the lock; 0 after waiting 60 s for another `migrate` (NULL on an error).
SELECT GET_LOCK('jenkins-dispatch-migrate', 60) AS locked;

-- name: unlock_migrations
SELECT RELEASE_LOCK('jenkins-dispatch-migrate') AS released;

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

-- name: lift_statement_limit
-- MariaDB's per-session statement time limit (store/mysql.py sets it) would stop an ALTER of a large seed
-- table half-way: lifted while migrating, restored after. MySQL's own limit covers SELECTs only, and it has
-- no such variable: the SET is prepared from text only on MariaDB.
SET @jd_statement_limit = NULL;
SET @jd_sql = IF(VERSION() LIKE '%MariaDB%',
                 'SET @jd_statement_limit = @@session.max_statement_time, SESSION max_statement_time = 0', 'DO 0');
PREPARE jd_sql FROM @jd_sql;
EXECUTE jd_sql;
DEALLOCATE PREPARE jd_sql;

-- name: restore_statement_limit
SET @jd_sql = IF(@jd_statement_limit IS NULL, 'DO 0',
                 CONCAT('SET SESSION max_statement_time = ', @jd_statement_limit));
PREPARE jd_sql FROM @jd_sql;
EXECUTE jd_sql;
DEALLOCATE PREPARE jd_sql;
