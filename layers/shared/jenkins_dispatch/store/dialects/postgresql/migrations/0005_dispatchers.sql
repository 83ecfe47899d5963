-- Dispatcher heartbeats: one row per dispatcher (a `serve` process, a Lambda container, a machine running
-- `jenkins-dispatch dispatch`), upserted after each of its passes. `stats` lists the live ones; the
-- Jenkins columns say since when Jenkins has failed as a whole, as that dispatcher last saw it.
-- Rows not seen for a day are removed by the heartbeat statement itself.
CREATE TABLE IF NOT EXISTS jenkins_dispatchers (
    id                        text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 1024),
    kind                      text NOT NULL CHECK (kind IN ('serve', 'lambda', 'cli')),
    host                      text NOT NULL,
    pid                       integer NOT NULL,
    started_at                timestamptz NOT NULL,
    -- Live while its last pass is more recent than this (it knows how often it passes).
    stale_after_seconds       float8 NOT NULL CHECK (stale_after_seconds > 0),
    last_pass_at              timestamptz NOT NULL DEFAULT now(),
    last_outcome              text NOT NULL,  -- ok, jenkins_unavailable, database_busy, failed, crashed, stopped
    last_detail               text,           -- why the pass stopped, or what failed
    passes                    bigint NOT NULL DEFAULT 0,
    jenkins_checked_at        timestamptz,    -- when this dispatcher last learned how Jenkins stands
    jenkins_unavailable_since timestamptz,    -- NULL while Jenkins answers
    jenkins_reason            text
);

CREATE INDEX IF NOT EXISTS jenkins_dispatchers_last_pass_idx ON jenkins_dispatchers (last_pass_at);
