"""After `resume`, which pauses still in force are named on a line of their own: a pure decision, from a table."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jenkins_dispatch.cli.pauses import still_named_after_resume
from jenkins_dispatch.store.queue import Pause

AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("left", "resumed", "named"), [
    # (the pause still in force: job, controller), (what `resume` was given: job, controller), named on its own line
    ((None, None), ("deploy", None), True),  # everything is still paused: deploy stays held back
    ((None, None), ("deploy", "eu"), True),
    ((None, "eu"), ("deploy", "eu"), True),  # the whole controller is still paused
    ((None, "eu"), ("deploy", "us"), False),  # another controller's pause holds other rows
    (("deploy", None), ("deploy", "eu"), True),  # deploy paused everywhere still holds it on eu
    (("DEPLOY", "eu"), ("deploy", None), True),  # job names compared ignoring case
    (("build", None), ("deploy", None), False),  # another job
    (("deploy", None), ("deploy", None), False),  # the pause just lifted
    ((None, "eu"), (None, "eu"), False),
    (("deploy", None), (None, None), False),  # after `resume` of everything: listed together, not one by one
    ((None, "eu"), (None, None), True),  # a controller's pause after `resume` of everything
    ((None, None), (None, "eu"), True),  # everything still paused after lifting a controller's pause
])
def test_which_pauses_still_in_force_are_named(left, resumed, named) -> None:
    pause = Pause(job_name=left[0], paused_at=AT, controller=left[1])
    assert still_named_after_resume(pause, *resumed) is named
