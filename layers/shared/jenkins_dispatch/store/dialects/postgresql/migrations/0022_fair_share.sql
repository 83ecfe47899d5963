-- Fair share (MySQL's 0020_fair_share.sql; docs/concurrency-keys.md): rows waiting at the same priority are claimed
-- round-robin across fairness keys, rows without one forming a group of their own.
--
-- Each row is given its turn, fair_round, as it becomes pending (start-time fair queueing): one more than the
-- newest turn its group has waiting, and never earlier than the turn being served now -- both on the row's own
-- controller, whose lane alone claims it: counted over every controller, a row arriving on a controller that lags
-- behind another would take the other's turn and wait behind its own controller's whole backlog. A team that enqueues 10,000
-- rows takes turns 0 to 9,999; another team's row arriving while turn 5 is served takes turn 5, and is claimed in
-- the same round as that team's sixth row. While any pending row has a fairness key, the claims read the queue in
-- (priority DESC, fair_round, scheduled_at, id) order on an index of their own: one index walk per batch, whatever
-- the number of rows or keys. Without fairness keys they keep the seed's order (claim.sql says how they choose).
--
-- The turn is computed in the inserting transaction, by the trigger below, from what that transaction sees: two
-- transactions inserting rows of one group at the same moment may give both the same turn (ties are then served
-- oldest first). Fairness is best effort in that sense; it never holds a row back from a claim that has room.
-- Existing rows take turn 0: they are served first, in the seed's order, as they would have been.
ALTER TABLE jenkins_jobs_queue ADD COLUMN IF NOT EXISTS fair_round bigint NOT NULL DEFAULT 0;

-- The claims' walk in fair order, one controller at a time as the seed-order claim index (0009_controllers.sql).
CREATE INDEX IF NOT EXISTS jenkins_jobs_queue_fair_claim_idx
    ON jenkins_jobs_queue (controller, priority DESC, fair_round, scheduled_at, id) WHERE status = 'pending';

-- The trigger's lookups below, each within one controller: a group's newest waiting turn (rows without a key are
-- the group of NULL, found on the same index), the latest turn in flight, the earliest waiting. Each index's predicate names fair_round >= 0
-- (always true), which only these lookups say: no other statement's plan can take them. A bench run found the keyed
-- claim counting a key's rows in flight on an index of (status, fair_round) instead of the key's own, once the
-- planner's statistics held no row in flight: 1.4 s a claim instead of milliseconds.
CREATE INDEX IF NOT EXISTS jenkins_jobs_queue_fair_group_idx
    ON jenkins_jobs_queue (controller, fairness_key, fair_round) WHERE status = 'pending' AND fair_round >= 0;
CREATE INDEX IF NOT EXISTS jenkins_jobs_queue_fair_in_flight_idx
    ON jenkins_jobs_queue (controller, fair_round) WHERE status = 'processing' AND fair_round >= 0;
CREATE INDEX IF NOT EXISTS jenkins_jobs_queue_fair_waiting_idx
    ON jenkins_jobs_queue (controller, fair_round) WHERE status = 'pending' AND fair_round >= 0;

-- Each lookup is an ORDER BY … LIMIT 1 that one index answers in its own order, and sorting is off (a scan that
-- would need one costs too much to be chosen): plpgsql plans a lookup once per session, on its first row, and a
-- plan made while the table was small (an aggregate over a whole index, say) would be kept for every later row,
-- each costing as much as the rows before it (an INSERT of 2,000 rows took 1.3 s that way). With these plans a row
-- costs the same however many there are (an INSERT of 20,000 rows: 0.54 s without this trigger, 2.2 s with it).
-- JIT is off too: while a transaction older than an upgrade runs anywhere in the cluster, sessions whose snapshots
-- reach back that far may not plan with indexes the upgrade built over rows changed in place (indcheckxmin), and
-- the lookups fall back to a scan with the switched-off sort, whose cost (~10^10) made PostgreSQL compile each one
-- with LLVM: 0.35 s a row, and a 20-row INSERT past its 15 s statement timeout on a loaded machine. The scan of a
-- table waits only until that transaction ends; its compilation was paid again by every row.
CREATE OR REPLACE FUNCTION jenkins_dispatch_fair_round() RETURNS trigger LANGUAGE plpgsql
SET enable_sort = off SET jit = off AS $$
DECLARE
    group_next bigint;
    in_flight bigint;
    waiting bigint;
BEGIN
    -- Two statements rather than IS NOT DISTINCT FROM, which no index serves.
    IF NEW.fairness_key IS NULL THEN
        SELECT fair_round + 1 INTO group_next FROM jenkins_jobs_queue
        WHERE status = 'pending' AND fair_round >= 0 AND controller = NEW.controller AND fairness_key IS NULL
        ORDER BY controller DESC, fairness_key DESC, fair_round DESC LIMIT 1;
    ELSE
        SELECT fair_round + 1 INTO group_next FROM jenkins_jobs_queue
        WHERE status = 'pending' AND fair_round >= 0 AND controller = NEW.controller
          AND fairness_key = NEW.fairness_key
        ORDER BY controller DESC, fairness_key DESC, fair_round DESC LIMIT 1;
    END IF;
    SELECT fair_round INTO in_flight FROM jenkins_jobs_queue
    WHERE status = 'processing' AND fair_round >= 0 AND controller = NEW.controller
    ORDER BY controller DESC, fair_round DESC LIMIT 1;
    SELECT fair_round INTO waiting FROM jenkins_jobs_queue
    WHERE status = 'pending' AND fair_round >= 0 AND controller = NEW.controller
    ORDER BY controller, fair_round LIMIT 1;
    NEW.fair_round := greatest(coalesce(group_next, 0), coalesce(in_flight, 0), coalesce(waiting, 0));
    RETURN NEW;
END $$;

-- A row inserted pending (whoever inserts it: the CLI, a schedule, the application's plain INSERT; each row of a
-- many-row INSERT sees the rows before it), a finished row made pending again (a retry, by us or by plain SQL), and
-- a pending row moved to another controller or group (only plain SQL does: its old turn counted in another round)
-- takes a turn. A row going back to pending from processing (released unsent, retried after a backoff) keeps its
-- turn: it has had it, and goes first once due.
DROP TRIGGER IF EXISTS jenkins_jobs_queue_fair_round ON jenkins_jobs_queue;
CREATE TRIGGER jenkins_jobs_queue_fair_round
    BEFORE INSERT ON jenkins_jobs_queue
    FOR EACH ROW WHEN (NEW.status = 'pending')
    EXECUTE FUNCTION jenkins_dispatch_fair_round();
DROP TRIGGER IF EXISTS jenkins_jobs_queue_fair_round_again ON jenkins_jobs_queue;
CREATE TRIGGER jenkins_jobs_queue_fair_round_again
    BEFORE UPDATE OF status, controller, fairness_key ON jenkins_jobs_queue
    FOR EACH ROW WHEN (NEW.status = 'pending' AND (OLD.status IN ('completed', 'failed', 'cancelled')
                       OR NEW.controller IS DISTINCT FROM OLD.controller
                       OR NEW.fairness_key IS DISTINCT FROM OLD.fairness_key))
    EXECUTE FUNCTION jenkins_dispatch_fair_round();
