-- Schedules (docs/schedules.md): recurring rows kept as data. Each tick of an enabled schedule becomes ONE
-- ordinary queue row, enqueued by whichever dispatcher pass takes the tick first (queries/schedules.sql, take_tick:
-- a compare-and-set on next_tick, under a row lock that other takers skip). When the schedule ticks is
-- computed in Python (dispatching/cron.py) from cron and timezone; the table holds the next tick to enqueue.
-- Numbered 0010: 0009 is another change's (the queue's controllers); the runner applies any missing number.
-- Runs inside the migration runner's transaction, under its advisory lock.
CREATE TABLE jenkins_job_schedules (
    name        text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$'),
    job_name    text NOT NULL CHECK (btrim(job_name) <> '' AND length(job_name) <= 1024),
    parameters  jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(parameters) = 'object'),
    cron        text NOT NULL CHECK (btrim(cron) <> ''),
    timezone    text NOT NULL DEFAULT 'UTC',
    priority    integer NOT NULL DEFAULT 0,
    -- Which controller's dispatchers run its rows; handed to the queue row once the queue has the column.
    controller  text NOT NULL DEFAULT 'default' CHECK (btrim(controller) <> ''),
    enabled     boolean NOT NULL DEFAULT true,  -- false: paused (no tick is enqueued, none is caught up)
    next_tick   timestamptz NOT NULL CHECK (isfinite(next_tick)),
    last_tick   timestamptz,  -- the last tick enqueued
    last_job_id bigint,       -- the queue row of that tick (no foreign key: prune may delete it)
    paused_at   timestamptz,
    paused_by   text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- One schedule per name whatever its case (as MySQL's collation compares them).
CREATE UNIQUE INDEX jenkins_job_schedules_name_key ON jenkins_job_schedules (lower(name));
-- The passes' question, "which ticks are due?", and the loop's "when is the next one?".
CREATE INDEX jenkins_job_schedules_due_idx ON jenkins_job_schedules (next_tick) WHERE enabled;

-- A schedule added or resumed may tick sooner than a sleeping dispatcher planned to wake: wake it (0002's
-- channel and payload) so it looks again.
CREATE TRIGGER jenkins_job_schedules_changed
    AFTER INSERT OR UPDATE OF enabled ON jenkins_job_schedules
    FOR EACH STATEMENT EXECUTE FUNCTION jenkins_dispatch_notify('work');
