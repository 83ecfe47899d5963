-- Indexes a claim changes, laid out for it, and the per-job counts' index (PostgreSQL needs neither: its
-- partial indexes leave pending rows out). Written, like 0001, to be run again after a stop part-way.

SET SESSION group_concat_max_len = 1048576;

-- ---- The job key of an unfinished row.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    -- An unfinished row's job as jenkins_job_limits and jenkins_job_pauses key it (their job_key): 32 bytes,
    -- where the name (up to 4,096 bytes) exceeds InnoDB's 3,072-byte key, so that an index holding it answers
    -- per-job counts of unfinished rows alone, without a lookup per row. NULL once final: finished rows add
    -- small entries only. VIRTUAL: added without copying the table (1M rows: seconds, with its index).
    SELECT 1 AS n, 'open_job_key' AS name,
        'ADD COLUMN open_job_key BINARY(32) AS '
        '(CASE WHEN status IN (''pending'', ''processing'') THEN UNHEX(SHA2(LOWER(job_name), 256)) END) VIRTUAL' AS clause
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.columns c
    WHERE c.table_schema = DATABASE() AND c.table_name = 'jenkins_jobs_queue' AND c.column_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- ---- Indexes.
-- Every index an UPDATE of a claim changes (status leads it) holds a pending row's entry after the status
-- and a column that is NULL until later (lease, finished_at) or shared by many rows (the job name): without
-- more, those entries sit in id order, and a claim of rows far apart by id reads as many index pages, from
-- disk once the table outgrows InnoDB's buffer pool. Followed by the claim's own order (claim_priority,
-- scheduled_at), a claim's rows sit together in them too, as in the claim index (benchmarks/bench_queue.py's
-- claim latency at 1M pending rows counts the pages a claim reads from disk).
-- An index made without that suffix (by 0001 before this file existed) is dropped here and made again below.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(DISTINCT CONCAT('DROP INDEX ', s.index_name)))
INTO @jd_ddl
FROM information_schema.statistics s
WHERE s.table_schema = DATABASE() AND s.table_name = 'jenkins_jobs_queue'
  AND s.index_name IN ('jenkins_jobs_queue_in_flight_idx', 'jenkins_jobs_queue_lease_idx',
                       'jenkins_jobs_queue_status_finished_idx')
  AND NOT EXISTS (
      SELECT 1 FROM information_schema.statistics c
      WHERE c.table_schema = s.table_schema AND c.table_name = s.table_name AND c.index_name = s.index_name
        AND c.column_name = 'claim_priority'
  );
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- Those missing, in one ALTER.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    -- In-flight counts per job (caps). A prefix: 1024 utf8mb4 characters exceed InnoDB's 3072-byte key.
    SELECT 1 AS n, 'jenkins_jobs_queue_in_flight_idx' AS name,
        'ADD INDEX jenkins_jobs_queue_in_flight_idx (status, job_name(255), claim_priority, scheduled_at)' AS clause
    -- The reconciler's expired leases.
    UNION ALL SELECT 2, 'jenkins_jobs_queue_lease_idx',
        'ADD INDEX jenkins_jobs_queue_lease_idx (status, lease_expires_at, claim_priority, scheduled_at)'
    -- Recent outcomes per status (stats) without scanning the history.
    UNION ALL SELECT 3, 'jenkins_jobs_queue_status_finished_idx',
        'ADD INDEX jenkins_jobs_queue_status_finished_idx (status, finished_at, claim_priority, scheduled_at)'
    -- Unfinished rows per job, oldest first (stats --per-job, doctor). Not led by status: a claim changes
    -- neither column, so it leaves this index alone (a settle moves the row's entry to NULL).
    UNION ALL SELECT 4, 'jenkins_jobs_queue_open_job_idx',
        'ADD INDEX jenkins_jobs_queue_open_job_idx (open_job_key, scheduled_at)'
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.statistics s
    WHERE s.table_schema = DATABASE() AND s.table_name = 'jenkins_jobs_queue' AND s.index_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;
