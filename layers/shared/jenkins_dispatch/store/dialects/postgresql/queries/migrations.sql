-- The migration runner's own statements (migrations.py): its lock, the bookkeeping table, the cutover window it
-- hands the cutover migration.
--
-- Run by migrations.py, all in one transaction: the lock, the bookkeeping table, then each migration file
-- (dialects/postgresql/migrations/NNNN_*.sql) not yet recorded, each recorded as it is applied.

-- name: lock_migrations
-- Concurrent `migrate` runs queue up here; the next one then finds nothing left to do.
SELECT pg_advisory_xact_lock({{lock:migrations}});

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS jenkins_dispatch_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migration_versions
SELECT version FROM jenkins_dispatch_migrations;

-- name: record_migration
INSERT INTO jenkins_dispatch_migrations (version, name) VALUES (:version, :name);

-- name: set_cutover_window
-- The migration runner, before the files: how long the old worker's results for the jobs it holds still count
-- (CUTOVER_WINDOW_SECONDS), read by 0008_cutover.sql. For this transaction only.
SELECT set_config('jenkins_dispatch.cutover_window_seconds', CAST(CAST(:seconds AS float8) AS text), true);
