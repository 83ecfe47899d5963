"""The pure rules that turn Jenkins's answers into outcomes and states."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jenkins_dispatch.jenkins_answers import (
    Accepted,
    AuthRejected,
    BadRequest,
    Building,
    BuildStarted,
    CrumbRequired,
    Disabled,
    Finished,
    JobNotFound,
    Merged,
    NotParameterized,
    NotStartedYet,
    OutcomeUnknown,
    QueueBlocked,
    QueueBuildable,
    QueueCancelled,
    QueueWaiting,
    Refused,
    StillQueued,
    Unavailable,
    classify_trigger_answer,
    dispatch_id_of,
    form_value,
    job_path,
    job_url_matches,
    parse_build,
    parse_job_info,
    parse_queue_item,
    queue_id_from_location,
    raw_encode,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("deploy", "job/deploy/"),
        ("team/app/deploy", "job/team/job/app/job/deploy/"),
        ("Test Job", "job/Test%20Job/"),
        ("repo/feature%2Ffoo", "job/repo/job/feature%252Ffoo/"),
        ("déploiement", "job/d%C3%A9ploiement/"),
        ("a+b(c)'d,e=f@g!h$i&j*k", "job/a+b(c)'d,e=f@g!h$i&j*k/"),
        ("x#y?z[1]~{}|^`<>\"\\;:", "job/x%23y%3Fz%5B1%5D%7E%7B%7D%7C%5E%60%3C%3E%22%5C%3B%3A/"),
    ],
)
def test_job_path_encodes_each_segment_like_util_raw_encode(name: str, expected: str) -> None:
    assert job_path(name) == expected


@pytest.mark.parametrize("name", ["", "/a", "a/", "a//b"])
def test_job_path_refuses_empty_segments(name: str) -> None:
    with pytest.raises(ValueError, match="invalid Jenkins job name"):
        job_path(name)


segment_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), min_size=1, max_size=20)


@given(st.lists(segment_text, min_size=1, max_size=4))
def test_job_path_round_trips_and_stays_plain_ascii(segments: list[str]) -> None:
    path = job_path("/".join(segments))
    assert re.fullmatch(r"(job/[A-Za-z0-9!$&'()*+,\-._=@%]+/)+", path)
    assert [unquote(part) for part in path.split("/")[1::2]] == segments
    assert all(re.fullmatch(r"%[0-9A-F]{2}", m) for m in re.findall(r"%..", path))


@given(segment_text)
def test_raw_encode_only_escapes_unsafe_characters(segment: str) -> None:
    encoded = raw_encode(segment)
    assert unquote(encoded) == segment
    assert " " not in encoded and "/" not in encoded


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("http://10.116.178.97:8050/queue/item/1151/", 1151),
        ("https://ci.example.com/jenkins/queue/item/7/", 7),
        ("http://internal:8080/queue/item/42", 42),
        ("/queue/item/3/", 3),
        ("http://evil.example/queue/item/9/?x=/queue/item/1/", 9),
        ("http://ci/job/deploy/", None),
        ("http://ci/job/123/", None),
        ("http://ci/queue/item/abc/", None),
        ("", None),
        (None, None),
    ],
)
def test_queue_id_comes_from_the_location_path(location: str | None, expected: int | None) -> None:
    assert queue_id_from_location(location) == expected


@given(
    scheme=st.sampled_from(["http", "https"]),
    host=st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?", fullmatch=True),
    port=st.one_of(st.none(), st.integers(1, 65535)),
    context=st.lists(st.from_regex(r"[a-z0-9_-]{1,8}", fullmatch=True), max_size=3),
    queue_id=st.integers(0, 10**15),
    trailing=st.booleans(),
)
def test_any_location_yields_its_queue_id_whatever_the_host(scheme, host, port, context, queue_id, trailing) -> None:
    netloc = host + (f":{port}" if port else "")
    prefix = "".join(f"/{c}" for c in context)
    location = f"{scheme}://{netloc}{prefix}/queue/item/{queue_id}" + ("/" if trailing else "")
    assert queue_id_from_location(location) == queue_id


def classify(status: int, body: str = "", **headers: str):
    return classify_trigger_answer(status, headers, body, job_name="team/app", user="bot")


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected"),
    [
        (201, "", {"Location": "http://x/queue/item/5/"}, Accepted(5)),
        (303, "", {"Location": "http://x/queue/item/5/"}, Merged(5)),
        (404, "<h1>Oops!</h1>", {}, JobNotFound("team/app")),
        (400, "team/app is not parameterized", {}, NotParameterized("team/app")),
        (500, "java.lang.IllegalStateException: This build is not parameterized!", {}, NotParameterized("team/app")),
        (409, "team/app is not buildable", {}, Disabled("team/app")),
        (500, "team/app is not buildable", {}, Disabled("team/app")),
        (302, "", {"Location": "http://x/job/team/job/app/"}, Refused),
        (302, "", {"Location": "http://x/login?from=%2F"}, AuthRejected),
        (400, "<h2>Nothing is submitted</h2>", {}, BadRequest),
        (500, "Illegal number of parameter values for X: 2", {}, BadRequest),
        (401, "", {"WWW-Authenticate": 'Basic realm="Jenkins"'}, AuthRejected),
        (403, "Authentication required", {}, AuthRejected),
        (403, "", {"X-Required-Permission": "hudson.model.Item.Build"}, AuthRejected),
        (403, "No valid crumb was included in the request", {}, CrumbRequired),
        (503, "Please wait while Jenkins is getting ready to work", {}, Unavailable("Jenkins is starting (HTTP 503)")),
        (503, "Please wait while Jenkins is restarting", {}, Unavailable("Jenkins is restarting (HTTP 503)")),
        (500, "A problem occurred", {}, Unavailable),
        (502, "", {}, OutcomeUnknown),
        (504, "", {}, OutcomeUnknown),
        (524, "A timeout occurred", {}, OutcomeUnknown),  # a CDN: the origin got the request and was slow
        (501, "", {}, OutcomeUnknown),
        (429, "Too Many Requests", {}, Unavailable),  # a proxy refused it before Jenkins saw it
        (408, "", {}, Unavailable),
        (201, "", {"Location": "http://x/job/team/job/app/"}, OutcomeUnknown),
        (200, "", {}, OutcomeUnknown),
        (405, "This URL requires POST", {"Allow": "POST"}, BadRequest),
        (410, "", {}, BadRequest),
    ],
)
def test_trigger_answers_are_classified(status, body, headers, expected) -> None:
    outcome = classify(status, body, **headers)
    if isinstance(expected, type):
        assert isinstance(outcome, expected)
    else:
        assert outcome == expected


def test_auth_rejection_names_the_user_and_the_settings_to_check() -> None:
    outcome = classify(401)
    assert outcome == AuthRejected("Jenkins rejected the credentials of user bot: check JENKINS_USER / JENKINS_API_TOKEN")
    assert "hudson.model.Item.Build" in classify(403, **{"X-Required-Permission": "hudson.model.Item.Build"}).detail


def test_bad_request_detail_is_one_line_without_html() -> None:
    outcome = classify(400, "<html><body>\n<h2>Nothing\nis submitted</h2></body></html>")
    assert outcome.detail == "Jenkins refused the parameters for team/app: HTTP 400 Nothing is submitted"


LEFT = "hudson.model.Queue$LeftItem"


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"_class": "hudson.model.Queue$WaitingItem", "why": "In the quiet period. Expires in 4.2 sec"}, QueueWaiting("In the quiet period. Expires in 4.2 sec")),
        ({"_class": "hudson.model.Queue$BlockedItem", "blocked": True, "why": "Build #41 is already in progress (ETA: 1 min 12 sec)"}, QueueBlocked("Build #41 is already in progress (ETA: 1 min 12 sec)")),
        ({"_class": "hudson.model.Queue$BuildableItem", "buildable": True, "why": "Waiting for next available executor"}, QueueBuildable("Waiting for next available executor")),
        ({"_class": LEFT, "cancelled": False, "executable": {"number": 42, "url": "http://x/job/a/42/"}}, BuildStarted(42, "http://x/job/a/42/")),
        ({"_class": LEFT, "cancelled": False, "executable": None}, NotStartedYet()),
        ({"_class": LEFT, "cancelled": True, "executable": None}, QueueCancelled()),
    ],
)
def test_queue_items_are_parsed(doc, expected) -> None:
    assert parse_queue_item(doc) == expected


def test_every_in_queue_state_matches_still_queued() -> None:
    for state in (QueueWaiting(None), QueueBlocked("b"), QueueBuildable("c")):
        match state:
            case StillQueued(why=why):
                assert why == state.why
            case _:
                pytest.fail("not matched")


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"number": 3, "url": "u", "building": True, "result": None, "duration": 0}, Building(3, "u")),
        ({"number": 3, "url": "u", "building": False, "result": "FAILURE", "duration": 1234}, Finished(3, "FAILURE", 1234, "u")),
        ({"number": 3, "url": "u", "building": False, "result": None, "duration": 0}, Building(3, "u")),
    ],
)
def test_builds_are_parsed(doc, expected) -> None:
    assert parse_build(doc) == expected


def test_dispatch_id_comes_from_actions_or_the_params_string() -> None:
    build = {"actions": [{}, {"_class": "hudson.model.ParametersAction", "parameters": [
        {"_class": "hudson.model.BooleanParameterValue", "name": "FLAG", "value": True},
        {"_class": "hudson.model.StringParameterValue", "name": "DISPATCH_ID", "value": "d-1"}]}]}
    assert dispatch_id_of(build) == "d-1"
    assert dispatch_id_of({"actions": [{}], "params": "\nENV=prod\nDISPATCH_ID=d-2"}) == "d-2"
    assert dispatch_id_of({"actions": [{"causes": []}]}) is None
    assert dispatch_id_of({"params": "\nNOT_DISPATCH_ID=x"}) is None


def test_job_info_reads_properties_and_old_style_actions() -> None:
    modern = parse_job_info({"buildable": True, "property": [{"parameterDefinitions": [{"name": "ENV"}, {"name": "DISPATCH_ID"}]}]})
    assert (modern.exists, modern.buildable, modern.parameterized, modern.declares_dispatch_id) == (True, True, True, True)
    assert modern.parameter_names == ("ENV", "DISPATCH_ID")
    old = parse_job_info({"buildable": True, "actions": [{}, {"parameterDefinitions": [{"name": "X"}]}]})
    assert old.parameter_names == ("X",) and not old.declares_dispatch_id
    plain = parse_job_info({"buildable": False, "property": []})
    assert not plain.parameterized and not plain.buildable


@pytest.mark.parametrize(
    ("value", "text"),
    [("prod", "prod"), ("", ""), (True, "true"), (False, "false"), (3, "3"), (2.5, "2.5"), (None, "null"),
     ({"a": [1, "é"]}, '{"a":[1,"é"]}'), ([1, 2], "[1,2]")],
)
def test_form_values(value, text) -> None:
    assert form_value(value) == text


@pytest.mark.parametrize(
    ("url", "job", "expected"),
    [
        ("http://ci/job/deploy/", "deploy", True),
        ("https://ci.example.com/jenkins/job/team/job/app/job/deploy/", "team/app/deploy", True),
        ("http://ci/job/x/job/team/job/app/", "team/app", False),
        ("http://ci/job/Test%20Job/", "Test Job", True),
        ("http://ci/job/repo/job/feature%252Ffoo/", "repo/feature%2Ffoo", True),
        ("http://ci/job/deploy/", "deploy2", False),
        ("http://ci/view/all/", "deploy", False),
    ],
)
def test_queue_task_urls_are_matched_to_jobs(url, job, expected) -> None:
    assert job_url_matches(url, job) is expected
