-- Duties that one dispatcher at a time does for all of them (issue 34; dispatching/duties/): one row each, the first
-- the pruner. A dispatcher whose duty is due takes its turn with a compare-and-set on due_at (take_duty: UPDATE …
-- WHERE due_at <= now()), as the schedules' ticks are taken: the one whose UPDATE matched holds the turn until
-- due_at, names itself in holder, renews it batch by batch and hands it back with the next due time (duty_done);
-- everyone else reads when to look again. A holder that stopped answering loses the turn when its hold ends.
-- Runs inside the migration runner's transaction.
CREATE TABLE IF NOT EXISTS jenkins_dispatch_duties (
    name       text PRIMARY KEY,
    due_at     timestamptz NOT NULL DEFAULT now(),
    holder     text,
    updated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO jenkins_dispatch_duties (name) VALUES ('pruner') ON CONFLICT (name) DO NOTHING;
