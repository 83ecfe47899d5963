-- Which controllers each dispatcher serves, and how it last found each one (PostgreSQL's 0015;
-- docs/controllers.md): `stats`, a process of its own, has no breaker to ask, so each heartbeat records its
-- dispatcher's, as a JSON object {"NAME": {"status": "ok"|"unavailable"|"unknown", "since": …, "reason": …}, …}.
-- NULL: a dispatcher that has not written it. Written, like 0001, to be run again after a stop part-way: the
-- column is added only when information_schema says it is still missing.

SELECT IF(COUNT(*) = 0, 'ALTER TABLE jenkins_dispatchers ADD COLUMN controllers JSON NULL', 'DO 0')
INTO @jd_ddl
FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'jenkins_dispatchers' AND column_name = 'controllers';
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;
