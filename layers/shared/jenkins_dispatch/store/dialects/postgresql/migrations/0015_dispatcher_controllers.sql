-- Which controllers each dispatcher serves, and how it last found each one (issue 23; docs/controllers.md):
-- `stats`, a process of its own, has no breaker to ask, so each heartbeat records its dispatcher's, as a JSON
-- object {"NAME": {"status": "ok"|"unavailable"|"unknown", "since": …, "reason": …}, …}. NULL: a dispatcher
-- that has not written it (one from before this migration). Runs inside the migration runner's transaction.
ALTER TABLE jenkins_dispatchers ADD COLUMN IF NOT EXISTS controllers jsonb;
