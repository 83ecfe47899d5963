-- The starts of rated jobs by age (0010_rate_limits.sql): every capped claim drops its controller's starts older
-- than two minutes, and on the window index (controller, job_key, at) that read every start the controller kept,
-- each claim, however few had expired. On this index it reads the expired ones only. Written, like 0010, to be
-- run again after a stop part-way (MySQL 8 has no CREATE INDEX IF NOT EXISTS).
SELECT IF(COUNT(*) = 0, 'CREATE INDEX jenkins_job_starts_expiry_idx ON jenkins_job_starts (controller, at)', 'DO 0')
INTO @jd_ddl
FROM information_schema.statistics
WHERE table_schema = DATABASE() AND table_name = 'jenkins_job_starts' AND index_name = 'jenkins_job_starts_expiry_idx';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
SET @jd_ddl = NULL;
