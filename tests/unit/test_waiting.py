"""Why a pending job waits: the pure decision (waiting.why_waiting), table-driven, and how durations read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.operating.display import duration
from jenkins_dispatch.operating.operator import Caps
from jenkins_dispatch.operating.waiting import JenkinsOutage, held_back, why_waiting
from jenkins_dispatch.store.queue import KeyHold, Pause, RateWindow
from jenkins_dispatch.store.session import OddTime

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=12)
EARLIER = NOW - timedelta(minutes=3)
JOB_PAUSE = Pause("deploy", NOW - timedelta(hours=1), "alice", "release freeze")
ALL_PAUSE = Pause(None, NOW - timedelta(minutes=5), "bob", None)
OUTAGE = JenkinsOutage(NOW - timedelta(minutes=2), "Jenkins answered 503")




def row(status="pending", scheduled_at=EARLIER, attempts=0, last_error=None):
    return {"job_name": "deploy", "status": status, "scheduled_at": scheduled_at, "attempts": attempts,
            "max_attempts": 3, "last_error": last_error}


FREE = dict(job_cap=None, job_in_flight=0, global_cap=None, total_in_flight=0, pause=None)


CASES = [
    # (what, row, conditions, code, text)
    ("not pending", row(status="processing"), dict(FREE, pause=JOB_PAUSE), None, None),
    ("nothing holds it", row(), FREE, "due", "due for 3m: the next dispatcher pass takes it"),
    ("job paused", row(), dict(FREE, pause=JOB_PAUSE), "paused",
     "paused since 2026-11-30 11:00:00 UTC by alice: release freeze (`jenkins-dispatch resume deploy` lifts it)"),
    ("everything paused", row(), dict(FREE, pause=ALL_PAUSE), "paused",
     "everything is paused since 2026-11-30 11:55:00 UTC by bob (`jenkins-dispatch resume` lifts it)"),
    ("its controller paused", row(), dict(FREE, pause=Pause(None, NOW - timedelta(minutes=5), "bob", "upgrade", "b")),
     "paused", "controller b is paused since 2026-11-30 11:55:00 UTC by bob: upgrade "
               "(`jenkins-dispatch resume --controller b` lifts it)"),
    ("job paused on its controller", row(),
     dict(FREE, pause=Pause("deploy", NOW - timedelta(hours=1), "alice", None, "b")), "paused",
     "paused on b since 2026-11-30 11:00:00 UTC by alice (`jenkins-dispatch resume deploy --controller b` lifts it)"),
    ("paused beats not due, caps, Jenkins", row(scheduled_at=LATER),
     dict(job_cap=1, job_in_flight=1, global_cap=1, total_in_flight=1, pause=JOB_PAUSE, jenkins_unavailable=OUTAGE),
     "paused", None),
    ("not due", row(scheduled_at=LATER), FREE, "not_due", "not due until 2026-11-30 12:12:00 UTC (in 12m)"),
    ("not due beats a full cap", row(scheduled_at=LATER), dict(FREE, job_cap=1, job_in_flight=1), "not_due", None),
    ("backing off", row(scheduled_at=NOW + timedelta(seconds=40), attempts=2, last_error="Jenkins answered 500"),
     FREE, "backing_off",
     "backing off until 2026-11-30 12:00:40 UTC (in 40s) after attempt 2 of 3: Jenkins answered 500"),
    ("backing off beats caps and Jenkins", row(scheduled_at=LATER, attempts=1),
     dict(FREE, global_cap=2, total_in_flight=2, jenkins_unavailable=OUTAGE), "backing_off", None),
    ("its controller not configured", row(), dict(FREE, controller_configured=False), "controller_not_configured",
     "controller default is not configured: the next dispatcher pass fails it, nothing sent (configure it in "
     "JENKINS_CONTROLLERS first to have it run)"),
    ("not configured beats caps and Jenkins", row(),
     dict(FREE, job_cap=1, job_in_flight=1, jenkins_unavailable=OUTAGE, controller_configured=False),
     "controller_not_configured", None),
    ("paused beats not configured", row(), dict(FREE, pause=JOB_PAUSE, controller_configured=False), "paused", None),
    ("no live dispatcher", row(), dict(FREE, dispatchers_live=0), "no_dispatcher",
     "due for 3m, but no dispatcher is running (none has recorded a pass lately): start `jenkins-dispatch serve`, or "
     "check the dispatcher function's schedule (`jenkins-dispatch stats` lists the dispatchers)"),
    ("a live dispatcher takes it", row(), dict(FREE, dispatchers_live=2), "due", None),
    ("a full cap holds it whether or not a dispatcher runs", row(),
     dict(FREE, global_cap=1, total_in_flight=1, dispatchers_live=0), "global_cap", None),
    ("job cap full", row(), dict(FREE, job_cap=3, job_in_flight=3), "job_cap", "job cap full (3/3 in flight)"),
    ("job cap of 0", row(), dict(FREE, job_cap=0), "job_cap", None),
    ("job cap with room", row(), dict(FREE, job_cap=3, job_in_flight=2), "due", None),
    ("job cap beats global cap", row(), dict(FREE, job_cap=1, job_in_flight=1, global_cap=1, total_in_flight=1),
     "job_cap", None),
    ("global cap full", row(), dict(FREE, global_cap=8, total_in_flight=8), "global_cap",
     "global cap full (8/8 in flight, MAX_IN_FLIGHT)"),
    ("global cap beats Jenkins", row(), dict(FREE, global_cap=8, total_in_flight=9, jenkins_unavailable=OUTAGE),
     "global_cap", None),
    ("its controller's cap full", dict(row(), controller="c"), dict(FREE, controller_cap=2, controller_in_flight=2),
     "controller_cap", "controller c's cap full (2/2 in flight, max_in_flight in JENKINS_CONTROLLERS)"),
    ("its controller's cap with room", row(), dict(FREE, controller_cap=2, controller_in_flight=1), "due", None),
    ("global cap beats the controller's", row(),
     dict(FREE, global_cap=2, total_in_flight=2, controller_cap=2, controller_in_flight=2), "global_cap", None),
    ("the controller's cap beats Jenkins", row(),
     dict(FREE, controller_cap=1, controller_in_flight=1, jenkins_unavailable=OUTAGE), "controller_cap",
     "controller default's cap full (1/1 in flight, max_in_flight in JENKINS_CONTROLLERS)"),
    ("Jenkins unavailable", row(), dict(FREE, jenkins_unavailable=OUTAGE), "jenkins_unavailable",
     "Jenkins unavailable since 2026-11-30 11:58:00 UTC: Jenkins answered 503"),
    ("released earlier, due again", row(attempts=0, last_error="not sent: the pass stopped"), FREE, "due", None),
]


@pytest.mark.parametrize(("what", "the_row", "conditions", "code", "text"), CASES, ids=[c[0] for c in CASES])
def test_why_waiting(what, the_row, conditions, code, text):
    waiting = why_waiting(the_row, NOW, **conditions)
    if code is None:
        assert waiting is None
        return
    assert waiting.code == code, waiting
    if text is not None:
        assert waiting.text == text


MORE_CASES = [
    # (what, row, conditions, code, text): the branches the table above leaves out
    ("rate full", row(), dict(FREE, rate=RateWindow(2, 2, 23.2)), "rate_limit",
     "rate limit 2/min: 2 started in the last minute; next start in ~24s"),
    ("rate full, next start unknown", row(), dict(FREE, rate=RateWindow(2, 3)), "rate_limit",
     "rate limit 2/min: 3 started in the last minute"),
    ("rate full, next start within a second", row(), dict(FREE, rate=RateWindow(1, 1, 0.2)), "rate_limit",
     "rate limit 1/min: 1 started in the last minute; next start in ~1s"),
    ("rate with room", row(), dict(FREE, rate=RateWindow(2, 1)), "due", None),
    ("job cap beats rate", row(), dict(FREE, job_cap=1, job_in_flight=1, rate=RateWindow(1, 1)), "job_cap", None),
    ("rate beats global cap", row(), dict(FREE, rate=RateWindow(1, 1), global_cap=1, total_in_flight=1),
     "rate_limit", None),
    ("job cap of 0 says so", row(), dict(FREE, job_cap=0), "job_cap",
     "job cap full (0/0): a cap of 0 holds this job back"),
    ("backing off without an error", row(scheduled_at=NOW + timedelta(seconds=40), attempts=1), FREE, "backing_off",
     "backing off until 2026-11-30 12:00:40 UTC (in 40s) after attempt 1 of 3"),
    ("scheduled past 9999", row(scheduled_at=OddTime("10000-01-01 00:00:00+00")), dict(FREE, job_cap=0),
     "not_due", "not due until 10000-01-01 00:00:00+00, later than any time this tool can show: never taken "
                "(give it a scheduled_at up to 9999-12-31, or cancel it)"),
    ("a zero date is due", row(scheduled_at=OddTime("0000-00-00 00:00:00")), FREE, "due",
     "due since 0000-00-00 00:00:00: the next dispatcher pass takes it"),
    ("a zero date, no dispatcher", row(scheduled_at=OddTime("0000-00-00 00:00:00")), dict(FREE, dispatchers_live=0),
     "no_dispatcher", None),
    ("its named controller not configured", dict(row(), controller="eu"), dict(FREE, controller_configured=False),
     "controller_not_configured", "controller eu is not configured: the next dispatcher pass fails it, nothing sent "
                                  "(configure it in JENKINS_CONTROLLERS first to have it run)"),
    ("its controller's Jenkins unavailable", dict(row(), controller="eu"),
     dict(FREE, jenkins_unavailable=JenkinsOutage(NOW - timedelta(minutes=2), "HTTP 503", "eu")),
     "jenkins_unavailable", "Jenkins unavailable (controller eu) since 2026-11-30 11:58:00 UTC: HTTP 503"),
    ("Jenkins unavailable beats no dispatcher", row(), dict(FREE, jenkins_unavailable=OUTAGE, dispatchers_live=0),
     "jenkins_unavailable", None),
    ("due exactly now", row(scheduled_at=NOW), FREE, "due", "due for 0s: the next dispatcher pass takes it"),
]


@pytest.mark.parametrize(("what", "the_row", "conditions", "code", "text"), MORE_CASES, ids=[c[0] for c in MORE_CASES])
def test_why_waiting_more(what, the_row, conditions, code, text):
    test_why_waiting(what, the_row, conditions, code, text)


def keyed(job_id=9, key="deploy:prod", **changes):
    return dict(row(**changes), id=job_id, concurrency_key=key)


KEY_CASES = [
    # (what, row, conditions, code, text): a row's concurrency key (docs/concurrency-keys.md)
    ("key cap full", keyed(), dict(FREE, key=KeyHold(1, 1, (812,))), "key_cap",
     "key deploy:prod at its cap (1/1 in flight, held by #812)"),
    ("key cap full, many holders", keyed(), dict(FREE, key=KeyHold(2, 5, (3, 5, 7))), "key_cap",
     "key deploy:prod at its cap (5/2 in flight, held by #3, #5, #7 and 2 more)"),
    ("key cap of 0", keyed(), dict(FREE, key=KeyHold(0, 0, ())), "key_cap",
     "key deploy:prod has a cap of 0: its rows are held back (`jenkins-dispatch limits rm --key deploy:prod` lifts "
     "it)"),
    ("key cap with room", keyed(), dict(FREE, key=KeyHold(2, 1, (3,))), "due", None),
    ("no key cap", keyed(), FREE, "due", None),
    ("job cap beats key cap", keyed(), dict(FREE, job_cap=1, job_in_flight=1, key=KeyHold(1, 1, (3,))), "job_cap",
     None),
    ("key cap beats rate and global cap", keyed(),
     dict(FREE, key=KeyHold(1, 1, (3,)), rate=RateWindow(1, 1), global_cap=1, total_in_flight=1), "key_cap", None),
    ("superseded", keyed(job_id=3), dict(FREE, key=KeyHold(1, 1, (1,), newest=4)), "superseded",
     "superseded by #4: the next dispatcher claim cancels it (newest wins on key deploy:prod)"),
    ("the newest is not superseded", keyed(job_id=4), dict(FREE, key=KeyHold(1, 1, (1,), newest=4)), "key_cap", None),
    ("superseded beats paused and not due", keyed(job_id=3, scheduled_at=LATER),
     dict(FREE, pause=JOB_PAUSE, key=KeyHold(1, 0, (), newest=4)), "superseded", None),
]


@pytest.mark.parametrize(("what", "the_row", "conditions", "code", "text"), KEY_CASES, ids=[c[0] for c in KEY_CASES])
def test_why_waiting_for_a_key(what, the_row, conditions, code, text):
    test_why_waiting(what, the_row, conditions, code, text)


def test_a_wait_until_a_time_says_the_time():
    assert why_waiting(row(scheduled_at=LATER), NOW, **FREE).until == LATER
    assert why_waiting(row(), NOW, **FREE).until is None


@pytest.mark.parametrize(("seconds", "text"), [(-5, "0s"), (45, "45s"), (119, "119s"), (720, "12m"),
                                               (3 * 3600 + 300, "3h05m"), (2 * 86400 + 4 * 3600, "2d04h")])
def test_duration(seconds, text):
    assert duration(seconds) == text


@pytest.mark.parametrize(("paused", "cap", "in_flight", "pending", "word"), [
    (False, None, 5, 3, "-"),
    (True, None, 0, 3, "paused"),
    (True, 2, 2, 3, "paused"),  # paused says most, as in why_waiting
    (False, 0, 0, 0, "cap 0"),
    (False, 2, 2, 1, "cap full"),
    (False, 2, 3, 1, "cap full"),
    (False, 2, 2, 0, "-"),  # nothing waits behind the full cap
    (False, 2, 1, 4, "-"),
])
def test_held_back(paused, cap, in_flight, pending, word):
    assert held_back(paused=paused, cap=cap, in_flight=in_flight, pending=pending) == word


@pytest.mark.parametrize(("paused", "cap", "in_flight", "paused_on", "word"), [
    (False, None, 0, ["b"], "paused on b"),
    (False, None, 0, ["b", "c"], "paused on b, c"),
    (True, None, 0, ["b"], "paused"),  # paused everywhere (or on the default controller) says most
    (False, 2, 2, ["b"], "cap full"),  # the default controller's cap holds its rows back: it comes first
    (False, 2, 1, [], "-"),
])
def test_held_back_names_the_controllers_a_job_is_paused_on(paused, cap, in_flight, paused_on, word):
    assert held_back(paused=paused, cap=cap, in_flight=in_flight, pending=1, paused_on=paused_on) == word


@pytest.mark.parametrize(("cap", "in_flight"), [(None, 0), (None, 9), (0, 0), (1, 0), (1, 1), (2, 5)])
def test_a_job_held_back_by_its_cap_is_what_each_of_its_pending_rows_says(cap, in_flight):
    """`stats`'s word for a job and `show`'s reason for its pending rows read the same cap rule."""
    word = held_back(paused=False, cap=cap, in_flight=in_flight, pending=1)
    reason = why_waiting(row(), NOW, **dict(FREE, job_cap=cap, job_in_flight=in_flight))
    assert (word != "-") == (reason.code == "job_cap")


WHOLE = JenkinsOutage(NOW - timedelta(minutes=9), "Jenkins unavailable: HTTP 503 (another lane)")


@pytest.mark.parametrize(("controller", "health", "expected"), [
    ("default", {}, WHOLE),  # no dispatcher recorded its controllers: Jenkins as a whole, as before
    ("b", {"default": {"status": "ok"}}, WHOLE),  # nothing recorded of b
    ("default", {"default": {"status": "ok"}, "b": {"status": "unavailable", "since": "2026-11-30T11:57:00+00:00",
                                                    "reason": "HTTP 503"}}, None),  # its own is up
    ("b", {"default": {"status": "ok"}, "b": {"status": "unavailable", "since": "2026-11-30T11:57:00+00:00",
                                              "reason": "HTTP 503"}},
     JenkinsOutage(NOW - timedelta(minutes=3), "HTTP 503", "b")),
    ("default", {"default": {"status": "unavailable", "since": "2026-11-30T11:57:00+00:00", "reason": None}},
     JenkinsOutage(NOW - timedelta(minutes=3), "no reason recorded", None)),  # one controller: not named
])
def test_a_row_waits_for_its_own_controllers_jenkins(controller, health, expected):
    from jenkins_dispatch.operating.waiting import jenkins_outage_for

    assert jenkins_outage_for(controller, health, WHOLE) == expected


# --------------------------------------------------------------------------- the caps the dispatchers keep


def _dispatcher(live=True, **controllers):
    return {"id": "serve@x:1", "live": live, "controllers": controllers}


HERE = Caps(5, {"default": None})


@pytest.mark.parametrize("what, dispatchers, expected", [
    ("no dispatcher: the caller's own", [], HERE),
    ("a dispatcher that recorded no caps (an older one): the caller's own",
     [_dispatcher(default={"status": "ok"})], HERE),
    ("a dead dispatcher's caps do not count", [_dispatcher(False, default={"max_in_flight": 3,
                                                                           "own_max_in_flight": None})], HERE),
    ("one live dispatcher: its caps and its controllers",
     [_dispatcher(default={"max_in_flight": 3, "own_max_in_flight": None}, eu={"max_in_flight": 3,
                                                                             "own_max_in_flight": 2})],
     Caps(3, {"default": None, "eu": 2})),
    ("two with different caps: the loosest holds (a row waits only while no one may claim it)",
     [_dispatcher(default={"max_in_flight": 3, "own_max_in_flight": 1}),
      _dispatcher(default={"max_in_flight": 8, "own_max_in_flight": 4})], Caps(8, {"default": 4})),
    ("no cap anywhere beats any cap", [_dispatcher(default={"max_in_flight": 3, "own_max_in_flight": 1}),
                                       _dispatcher(default={"max_in_flight": None, "own_max_in_flight": None})],
     Caps(None, {"default": None})),
    ("the controllers served are the union", [_dispatcher(default={"max_in_flight": 3, "own_max_in_flight": None}),
                                              _dispatcher(eu={"max_in_flight": 3, "own_max_in_flight": None})],
     Caps(3, {"default": None, "eu": None})),
])
def test_rows_wait_for_the_caps_the_live_dispatchers_keep(what, dispatchers, expected):
    assert HERE.recorded_by(dispatchers) == expected, what
