-- Fair share (PostgreSQL's 0022_fair_share.sql says what a turn is and how it is computed). Written, like 0001, to be
-- run again after a stop part-way.
--
-- Here the turns are given by the dispatchers, not by a trigger: a MySQL trigger's reads, run inside the
-- application's INSERT, are locking reads (at REPEATABLE READ, the default), and the INSERT would wait on every
-- claim holding the rows it reads (measured: the application's INSERT timed out behind a claim in progress). A row
-- is inserted without a turn (fair_round at its largest value, the last of its priority in fair order) and given
-- one by the next pass (claim_plan, in queries/claim.sql), oldest first, by the same rule.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'fair_round' AS name, 'ADD COLUMN fair_round BIGINT NOT NULL DEFAULT 9223372036854775807' AS clause
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.columns c
    WHERE c.table_schema = DATABASE() AND c.table_name = 'jenkins_jobs_queue' AND c.column_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- The claims' walk in fair order (status and controller lead it, as the seed-order claim index, 0006); a group's
-- newest turn on a controller, and whether a controller's pending rows have a fairness key (then the key, NULL
-- first); the turn being served on a controller, and its rows still without a turn (then the turn: theirs is the
-- largest value, in id order). Turns are counted per controller, as its lane alone claims its rows.
SET @jd_ddl = NULL;
SELECT CONCAT('ALTER TABLE jenkins_jobs_queue ', GROUP_CONCAT(wanted.clause ORDER BY wanted.n SEPARATOR ', '))
INTO @jd_ddl
FROM (
    SELECT 1 AS n, 'jenkins_jobs_queue_fair_claim_idx' AS name,
        'ADD INDEX jenkins_jobs_queue_fair_claim_idx (status, controller, claim_priority, fair_round, scheduled_at, id)'
            AS clause
    UNION ALL SELECT 2, 'jenkins_jobs_queue_fair_group_idx',
        'ADD INDEX jenkins_jobs_queue_fair_group_idx (status, controller, fairness_key, fair_round)'
    UNION ALL SELECT 3, 'jenkins_jobs_queue_fair_serving_idx',
        'ADD INDEX jenkins_jobs_queue_fair_serving_idx (status, controller, fair_round)'
) wanted
WHERE NOT EXISTS (
    SELECT 1 FROM information_schema.statistics s
    WHERE s.table_schema = DATABASE() AND s.table_name = 'jenkins_jobs_queue' AND s.index_name = wanted.name
);
SET @jd_ddl = COALESCE(@jd_ddl, 'DO 0');
PREPARE jd_ddl FROM @jd_ddl;
EXECUTE jd_ddl;
DEALLOCATE PREPARE jd_ddl;

-- A row's turn is ours to give: an UPDATE keeps it as it was (a plain-SQL requeue keeps every column of the row this
-- way: 0017's trigger names the columns it keeps, and was written before this one), unless it is the pass giving a
-- waiting row its first turn; a finished row made pending again (a retry, by us or by plain SQL), or a pending row moved
-- to another controller or group (only plain SQL does: its turn counted in another round), is without one again, and
-- the next pass gives it a new one. No read: nothing waits on it.
DROP TRIGGER IF EXISTS jenkins_jobs_queue_fair_round_kept;
CREATE TRIGGER jenkins_jobs_queue_fair_round_kept BEFORE UPDATE ON jenkins_jobs_queue FOR EACH ROW
SET NEW.fair_round = CASE
    WHEN NEW.status = 'pending' AND OLD.status IN ('completed', 'failed', 'cancelled') THEN 9223372036854775807
    WHEN NEW.status = 'pending' AND NOT (NEW.controller <=> OLD.controller AND NEW.fairness_key <=> OLD.fairness_key)
        THEN 9223372036854775807
    WHEN OLD.fair_round = 9223372036854775807 AND OLD.status = 'pending' AND NEW.status = 'pending' THEN NEW.fair_round
    ELSE OLD.fair_round END;
