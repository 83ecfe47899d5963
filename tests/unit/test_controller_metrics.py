"""Several controllers in the dispatcher function: one pass over all of them (issue 23, AWS)."""

from __future__ import annotations

import json

from jenkins_dispatch.config import load_settings
from jenkins_dispatch.dispatching import dispatcher as dispatcher_module
from jenkins_dispatch.dispatching.dispatcher import Dispatcher

ONE = {"DATABASE_URL": "postgresql://u@127.0.0.1/db", "JENKINS_URL": "https://ci.example.com/",
       "JENKINS_USER": "dispatch", "JENKINS_API_TOKEN": "t0ken"}
SEVERAL = {**ONE, "JENKINS_CONTROLLERS": json.dumps(
    {"eu": {"url": "https://ci-eu.example.com/", "user": "dispatch", "api_token": "t1"}})}


class _Db:
    """Enough of a session for a pass that stops before its first statement."""
    dialect = "postgresql"
    statements = 0


def test_a_single_pass_over_several_controllers_opens_a_session_per_extra_controller(monkeypatch):
    """The Lambda's one-pass mode (ContinuousDispatch=false) with several controllers: each controller after the
    first gets a session of its own (it named a class that is not imported: NameError on every such pass)."""
    from jenkins_dispatch.dispatching.dispatcher import PassSummary, run_pass

    opened: list[str] = []

    class _Session(_Db):
        def close(self) -> None:
            pass

    def open_database(settings, application_name="jenkins-dispatch"):
        opened.append(application_name)
        return _Session()

    monkeypatch.setattr(dispatcher_module, "open_database", open_database)
    monkeypatch.setattr(dispatcher_module, "fail_rows_of_unknown_controllers", lambda settings, queue: 0)
    monkeypatch.setattr(Dispatcher, "run", lambda self, max_jobs=None: PassSummary().as_dict())
    run_pass(load_settings(SEVERAL), db=_Session())  # type: ignore[arg-type]
    assert opened == ["jenkins-dispatch-eu"]
