-- Schedules (PostgreSQL's 0010_schedules.sql says what they are). Numbered 0007: 0006 is another change's (the
-- queue's controllers); the runner applies any missing number. Written to be run again after a stop part-way.
-- The name's collation compares it ignoring case, as PostgreSQL's lower(name) index does.
CREATE TABLE IF NOT EXISTS jenkins_job_schedules (
    name        VARCHAR(200) NOT NULL PRIMARY KEY,
    job_name    VARCHAR(1024) NOT NULL,
    parameters  JSON NOT NULL DEFAULT (JSON_OBJECT()),
    cron        VARCHAR(255) NOT NULL,
    timezone    VARCHAR(64) NOT NULL DEFAULT 'UTC',
    priority    INT NOT NULL DEFAULT 0,
    controller  VARCHAR(255) NOT NULL DEFAULT 'default',
    enabled     BOOLEAN NOT NULL DEFAULT TRUE,
    next_tick   DATETIME(6) NOT NULL,
    last_tick   DATETIME(6),
    last_job_id BIGINT,
    paused_at   DATETIME(6),
    paused_by   TEXT,
    created_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    INDEX jenkins_job_schedules_due_idx (enabled, next_tick),
    CONSTRAINT jenkins_job_schedules_name_check CHECK (name REGEXP '^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$'),
    CONSTRAINT jenkins_job_schedules_job_name_check CHECK (TRIM(job_name) <> ''),
    CONSTRAINT jenkins_job_schedules_parameters_check CHECK (JSON_TYPE(parameters) = 'OBJECT'),
    CONSTRAINT jenkins_job_schedules_controller_check CHECK (TRIM(controller) <> '')
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
