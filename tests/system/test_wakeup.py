"""Wake on enqueue under `serve` (a process): a plain-SQL INSERT reaches Jenkins within a second."""

from __future__ import annotations

import time

from ..integration.test_wakeup import insert_plain_sql, triggered_within
from ..serve_helpers import serve_env, start_serve


def test_serve_triggers_a_plain_sql_insert_within_a_second(jenkins, database_url, db, tmp_path):
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log")  # default --interval 10
    try:
        time.sleep(0.5)  # past its first pass: from now on only a notification can wake it early
        for n in range(1, 4):
            insert_plain_sql(database_url, "INSERT INTO jenkins_jobs_queue (job_name, parameters) "
                                           "VALUES ('deploy', '{\"ENV\": \"prod\"}')")
            took = triggered_within(jenkins, n, 5)
            assert took is not None and took < 1.0, (took, served.log()[-2000:])
            time.sleep(0.3)
    finally:
        assert served.stop() == 0
