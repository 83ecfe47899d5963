-- Keys derived from a row's job and parameters (MySQL's 0021_key_rules.sql; docs/concurrency-keys.md): for an
-- application whose INSERTs do not set concurrency_key or fairness_key, a rule per job says how to make them, so
-- that `INSERT … VALUES ('deploy', '{"ENV":"prod"}')` holds `deploy:prod` without a change to its SQL.
-- A template is text with {NAME} for the row's parameter NAME, {job} for its job name: 'deploy:{ENV}'. Set with
-- `jenkins-dispatch keys derive JOB --key TEMPLATE --fair TEMPLATE`. A rule is found by the job's key (its name
-- lower-cased, as caps and pauses find theirs), on every controller.
CREATE TABLE IF NOT EXISTS jenkins_key_rules (
    job_key               text PRIMARY KEY CHECK (job_key = lower(job_key) AND btrim(job_key) <> ''),
    job_name              text NOT NULL,
    concurrency_template  text CHECK (length(concurrency_template) BETWEEN 1 AND 255),
    fairness_template     text CHECK (length(fairness_template) BETWEEN 1 AND 255),
    changed_by            text,
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CHECK (concurrency_template IS NOT NULL OR fairness_template IS NOT NULL)
);

-- A template filled in from a row: each {NAME} by its parameter's value as text ({job}: the job name). A parameter
-- the row does not have, or a result out of a key's bounds (1 to 255 characters, no control character), gives no
-- key rather than a refused INSERT: the row is queued as the application wrote it.
CREATE OR REPLACE FUNCTION jenkins_dispatch_derived_key(template text, job_name text, parameters jsonb)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    result text := template;
    name text;
    value text;
BEGIN
    IF template IS NULL THEN
        RETURN NULL;
    END IF;
    FOR name IN SELECT DISTINCT m[1] FROM regexp_matches(template, '\{([^{}]+)\}', 'g') AS m LOOP
        value := CASE WHEN name = 'job' THEN job_name
                      WHEN jsonb_typeof(parameters) = 'object' THEN parameters ->> name END;
        IF value IS NULL THEN
            RETURN NULL;
        END IF;
        result := replace(result, '{' || name || '}', value);
    END LOOP;
    IF length(result) NOT BETWEEN 1 AND 255 OR result ~ '[\x01-\x1f\x7f]' THEN
        RETURN NULL;
    END IF;
    RETURN result;
END $$;

-- In the INSERT's own transaction, before the row's fair-share turn is given (PostgreSQL runs a table's BEFORE
-- triggers in the order of their names: derived_keys before fair_round), so a derived fairness key has its turn.
-- Only a key the INSERT left out is derived; a row that sets both skips the lookup (the WHEN clause, no call).
CREATE OR REPLACE FUNCTION jenkins_dispatch_derive_keys() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rule record;
BEGIN
    SELECT concurrency_template, fairness_template INTO rule FROM jenkins_key_rules
    WHERE job_key = lower(NEW.job_name);
    IF FOUND THEN
        NEW.concurrency_key := coalesce(NEW.concurrency_key,
                                        jenkins_dispatch_derived_key(rule.concurrency_template, NEW.job_name,
                                                                     NEW.parameters));
        NEW.fairness_key := coalesce(NEW.fairness_key,
                                     jenkins_dispatch_derived_key(rule.fairness_template, NEW.job_name,
                                                                  NEW.parameters));
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS jenkins_jobs_queue_derived_keys ON jenkins_jobs_queue;
CREATE TRIGGER jenkins_jobs_queue_derived_keys
    BEFORE INSERT ON jenkins_jobs_queue
    FOR EACH ROW WHEN (NEW.concurrency_key IS NULL OR NEW.fairness_key IS NULL)
    EXECUTE FUNCTION jenkins_dispatch_derive_keys();
