-- Duties that one dispatcher at a time does for all of them (PostgreSQL's 0020_duties.sql says how the turn is
-- taken: a compare-and-set on due_at). Written, like 0001, to be run again after a stop part-way: the table is
-- created only if missing, the pruner's row only if absent.
CREATE TABLE IF NOT EXISTS jenkins_dispatch_duties (
    name       VARCHAR(64) NOT NULL PRIMARY KEY,
    due_at     DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    holder     VARCHAR(255) NULL,
    updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB;

INSERT IGNORE INTO jenkins_dispatch_duties (name) VALUES ('pruner');
