"""The pure rules that turn Jenkins's answers into outcomes and states."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jenkins_dispatch.jenkins.answers import (
    Accepted,
    AuthRejected,
    BadRequest,
    Building,
    BuildStarted,
    CrumbRequired,
    Disabled,
    Finished,
    Forbidden,
    Identity,
    JobForbidden,
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
    ServerError,
    StillQueued,
    Unavailable,
    classify_forbidden,
    classify_trigger_answer,
    dispatch_id_of,
    parse_build,
    parse_job_info,
    parse_queue_item,
    parse_who_am_i,
    queue_id_from_location,
    resolve_forbidden,
)
from jenkins_dispatch.jenkins.jobs import (
    JsonNumber,
    form_value,
    job_path,
    job_path_error,
    job_url_matches,
    loads_parameters,
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


@pytest.mark.parametrize("name", [".", "..", "a/../b", "team/../app/deploy", "a/./b", "./a", "a/..", "a/."])
def test_job_path_refuses_dot_segments(name: str) -> None:
    """HTTP clients resolve ``.`` and ``..`` segments (``job/a/job/../job/b/`` becomes ``job/a/job/b/``), so such a
    name would reach another job; Jenkins.checkGoodName forbids them as item names anyway."""
    assert "'.' and '..'" in job_path_error(name)
    with pytest.raises(ValueError, match="invalid Jenkins job name"):
        job_path(name)


@pytest.mark.parametrize("name", ["...", ".hidden", "a.b", "v1.2/..x", "x./y"])
def test_job_path_keeps_names_that_only_contain_dots(name: str) -> None:
    assert job_path_error(name) is None
    assert [unquote(part) for part in job_path(name).split("/")[1::2]] == name.split("/")


segment_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), min_size=1, max_size=20).filter(
    lambda segment: segment not in (".", "..")
)
# An item's name: no control character either (Jenkins refuses them, and so does job_path_error).
item_name_text = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/"), min_size=1,
                         max_size=20).filter(lambda segment: segment not in (".", ".."))


@given(st.lists(item_name_text, min_size=1, max_size=4))
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
        (403, "", {"X-Required-Permission": "hudson.model.Item.Build"}, Forbidden("team/app", "Job/Build")),
        (403, "No valid crumb was included in the request", {}, CrumbRequired),
        (503, "Please wait while Jenkins is getting ready to work", {}, Unavailable("Jenkins is starting (HTTP 503)")),
        (503, "Please wait while Jenkins is restarting", {}, Unavailable("Jenkins is restarting (HTTP 503)")),
        (500, "A problem occurred", {}, ServerError),  # this request failed: one is not "Jenkins is down"
        (503, "Service Unavailable", {}, ServerError),  # not Jenkins's restart page: the breaker weighs it
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


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected"),
    [
        (303, "", {}, OutcomeUnknown("Jenkins answered 303 for team/app without a queue item Location (None)")),
        (201, "", {"location": "/queue/item/7/"}, Accepted(7)),  # a header's name in any case
        (301, "", {"Location": "http://x/job/team/job/app/"}, Refused),
        (307, "", {"Location": "http://x/login"}, AuthRejected),
        (308, "", {}, Refused("Jenkins refused to queue team/app (HTTP 308 to None): a queue plugin vetoed it")),
        (100, "", {}, OutcomeUnknown("Jenkins answered the trigger of team/app with an unexpected HTTP 100")),
        (304, "", {}, OutcomeUnknown("Jenkins answered the trigger of team/app with an unexpected HTTP 304")),
        (600, "", {}, OutcomeUnknown("something in front of Jenkins answered HTTP 600 while triggering team/app")),
        (502, "", {}, OutcomeUnknown("a proxy in front of Jenkins answered HTTP 502 while triggering team/app")),
        (400, "", {}, BadRequest("Jenkins refused the parameters for team/app: HTTP 400")),
        (422, "<p>bad</p>", {}, BadRequest("Jenkins refused the trigger of team/app: HTTP 422 bad")),
        (429, "", {}, Unavailable("a proxy in front of Jenkins answered HTTP 429 (busy or rate limited)")),
        (500, "", {}, ServerError(500, "Jenkins failed with HTTP 500 while triggering team/app:")),
        (500, "<b>Illegal number of parameter values</b>", {},
         BadRequest("Jenkins refused the parameters for team/app: Illegal number of parameter values")),
        (503, "<h1>Down</h1>", {}, ServerError(503, "Jenkins answered HTTP 503 while triggering team/app: Down")),
        (409, "", {}, Disabled("team/app")),
    ],
)
def test_every_kind_of_trigger_answer_and_its_words(status, body, headers, expected) -> None:
    """The answers the table above leaves out: a 303 without a Location, every redirect, statuses no Jenkins sends,
    and the exact detail of each refusal."""
    outcome = classify(status, body, **headers)
    if isinstance(expected, type):
        assert isinstance(outcome, expected)
    else:
        assert outcome == expected


def test_auth_rejection_names_the_user_and_the_settings_to_check() -> None:
    outcome = classify(401)
    assert outcome == AuthRejected("Jenkins rejected the credentials of user bot: check JENKINS_USER / JENKINS_API_TOKEN")
    assert "Overall/Read" in classify(403, **{"X-Required-Permission": "hudson.model.Hudson.Read"}).detail


# --- 403: this job, or Jenkins as a whole? ------------------------------------------------------------------

ACCESS_DENIED = "<html><body><h1>Access Denied</h1><p class='error'>bot is missing the Job/Build permission</p></body></html>"
ANONYMOUS = {"X-You-Are-Authenticated-As": "anonymous", "X-Required-Permission": "hudson.model.Item.Build"}


@pytest.mark.parametrize(
    ("body", "headers", "expected"),
    [
        # Jenkins's AccessDeniedHandlerImpl for an authenticated user lacking Job/Build on this job.
        (ACCESS_DENIED, {"X-You-Are-Authenticated-As": "bot", "X-Required-Permission": "hudson.model.Item.Build"},
         Forbidden("team/app", "Job/Build")),
        (ACCESS_DENIED, {}, Forbidden("team/app", "Job/Build")),  # a proxy dropped the headers
        ("", {"X-Required-Permission": "hudson.model.Item.Build"}, Forbidden("team/app", "Job/Build")),
        ("", {"x-required-permission": "hudson.model.Item.Read"}, Forbidden("team/app", "Job/Read")),
        ("", {"X-Required-Permission": "hudson.model.Item.Cancel"}, Forbidden("team/app", "Job/Cancel")),
        ("bot is missing the Job/Workspace permission", {}, Forbidden("team/app", "Job/Workspace")),
        ("", {"X-Required-Permission": "org.example.Plugin.Frob"}, Forbidden("team/app", "org.example.Plugin.Frob")),
        # Item/Discover without Item/Read: a plain AccessDeniedException, no permission headers.
        ("<p class='error'>Please login to access job app</p>", {}, Forbidden("team/app", "Job/Read")),
        # Jenkins saw no credentials at all: nothing to ask whoAmI.
        ("Authentication required", ANONYMOUS, AuthRejected),
        # Overall permissions are needed by every request: Jenkins-wide, whoever we are.
        ("bot is missing the Overall/Read permission", {"X-Required-Permission": "hudson.model.Hudson.Read"}, AuthRejected),
        ("bot is missing the Overall/Read permission", {}, AuthRejected),
        ("", {"X-Required-Permission": "jenkins.model.Jenkins.Administer"}, AuthRejected),
        # A 403 Jenkins's authorization did not write (a WAF, a proxy): never fail a job on it.
        ("Request blocked", {}, AuthRejected),
        ("", {}, AuthRejected),
        ("No valid crumb was included in the request", {}, CrumbRequired),
    ],
)
def test_a_403_is_sorted_into_job_level_or_jenkins_wide(body, headers, expected) -> None:
    for outcome in (classify(403, body, **headers), classify_forbidden(headers, body, job_name="team/app", user="bot")):
        if isinstance(expected, type):
            assert isinstance(outcome, expected)
        else:
            assert outcome == expected


def test_jenkins_wide_403_details_name_the_user_and_what_to_check() -> None:
    assert classify(403, "Authentication required", **ANONYMOUS) == AuthRejected(
        "Jenkins rejected the credentials of user bot: check JENKINS_USER / JENKINS_API_TOKEN")
    overall = classify(403, **{"X-Required-Permission": "hudson.model.Hudson.Read"})
    assert overall.detail == "Jenkins user bot lacks the Overall/Read permission, which every request needs: grant it"


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        # Jenkins >= 2.219 (SECURITY-1695): name, authenticated, anonymous, authorities (details and toString no longer exported).
        ({"_class": "hudson.security.WhoAmI", "anonymous": False, "authenticated": True, "authorities": ["authenticated"], "name": "bot"},
         Identity("bot", authenticated=True, anonymous=False)),
        # An anonymous request IS "authenticated" (Spring's AnonymousAuthenticationToken): only "anonymous" tells.
        ({"_class": "hudson.security.WhoAmI", "anonymous": True, "authenticated": True, "authorities": ["anonymous"], "name": "anonymous"},
         Identity("anonymous", authenticated=True, anonymous=True)),
        ({"name": "anonymous", "authenticated": True}, Identity("anonymous", authenticated=True, anonymous=True)),
        ({"name": "bot", "authenticated": False, "anonymous": False}, Identity("bot", authenticated=False, anonymous=False)),
        ({}, Identity("", authenticated=False, anonymous=True)),
        ({"name": None, "authenticated": "yes"}, Identity("", authenticated=False, anonymous=True)),
    ],
)
def test_who_am_i_is_parsed(doc, expected) -> None:
    assert parse_who_am_i(doc) == expected


@pytest.mark.parametrize(
    ("identity", "user", "works"),
    [
        (Identity("bot", authenticated=True, anonymous=False), "bot", True),
        (Identity("Bot", authenticated=True, anonymous=False), "bot", True),  # Jenkins user ids ignore case by default
        (Identity("anonymous", authenticated=True, anonymous=True), "bot", False),
        (Identity("someone-else", authenticated=True, anonymous=False), "bot", False),
        (Identity("bot", authenticated=False, anonymous=False), "bot", False),
        (Identity("anonymous", authenticated=True, anonymous=True), "anonymous", False),
    ],
)
def test_credentials_work_only_when_jenkins_knows_us_by_name(identity, user, works) -> None:
    assert identity.is_user(user) is works


FORBIDDEN = Forbidden("team/app/deploy", "Job/Build")


@pytest.mark.parametrize(
    ("credentials_work", "expected"),
    [
        (True, JobForbidden("team/app/deploy", "bot", "Job/Build")),
        (False, AuthRejected("Jenkins rejected the credentials of user bot: check JENKINS_USER / JENKINS_API_TOKEN")),
        (None, Unavailable),
    ],
)
def test_whoami_decides_what_a_job_level_403_means(credentials_work, expected) -> None:
    outcome = resolve_forbidden(FORBIDDEN, credentials_work, "bot")
    if isinstance(expected, type):
        assert isinstance(outcome, expected) and "whoAmI" in outcome.reason
    else:
        assert outcome == expected


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
        ({"number": 3, "url": "u", "building": False, "result": "FAILURE", "duration": 1234}, Finished(3, "FAILURE", "u")),
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
    assert (modern.exists, modern.buildable, modern.declares_dispatch_id) == (True, True, True)
    assert modern.parameter_names == ("ENV", "DISPATCH_ID")
    old = parse_job_info({"buildable": True, "actions": [{}, {"parameterDefinitions": [{"name": "X"}]}]})
    assert old.parameter_names == ("X",) and not old.declares_dispatch_id
    plain = parse_job_info({"buildable": False, "property": []})
    assert plain.parameter_names == () and not plain.buildable


@pytest.mark.parametrize(
    ("value", "text"),
    [("prod", "prod"), ("", ""), (True, "true"), (False, "false"), (3, "3"), (2.5, "2.5"), (None, None),
     ({"a": [1, "é", None]}, '{"a":[1,"é",null]}'), ([1, 2], "[1,2]"), ("1.10", "1.10"),
     (JsonNumber("1.10"), "1.10"), (JsonNumber("-0.001500"), "-0.001500"),
     ({"z": JsonNumber("2.50"), "q": 'say "hi"'}, '{"z":2.50,"q":"say \\"hi\\""}'),
     ([JsonNumber("1.0"), {"b": [JsonNumber("19.990")]}, False], '[1.0,{"b":[19.990]},false]')],
)
def test_form_values(value, text) -> None:
    """None means: the field is not sent, so Jenkins uses the job's default."""
    assert form_value(value) == text


def test_parameters_read_as_text_keep_every_number_as_written() -> None:
    text = '{"a": 1.10, "b": 19.990, "c": 12345678901234567890123, "d": {"z": 2.50}, "e": null, "f": [1.0, true]}'
    parameters = loads_parameters(text)
    assert parameters == {"a": "1.10", "b": "19.990", "c": "12345678901234567890123", "d": {"z": "2.50"}, "e": None,
                          "f": ["1.0", True]}
    assert all(isinstance(parameters[k], JsonNumber) for k in "abc") and isinstance(parameters["d"]["z"], JsonNumber)
    assert {k: form_value(v) for k, v in parameters.items()} == {
        "a": "1.10", "b": "19.990", "c": "12345678901234567890123", "d": '{"z":2.50}', "e": None, "f": "[1.0,true]"}
    assert form_value("plain") == "plain" and type(form_value(JsonNumber("1"))) is str
    with pytest.raises(ValueError, match="JSON object"):
        loads_parameters("[1]")


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
        # Jenkins finds items whatever their case: its task url spells the job as it was created.
        ("http://ci/job/slow/", "SLOW", True),
        ("http://ci/job/Team/job/App/", "team/app", True),
        ("http://ci/job/d%C3%A9ploiement/", "DÉPLOIEMENT", True),
        ("http://ci/job/slow/", "slow2", False),
    ],
)
def test_queue_task_urls_are_matched_to_jobs(url, job, expected) -> None:
    assert job_url_matches(url, job) is expected
