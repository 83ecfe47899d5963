"""The pure side of the webhook: body decoding, payload parsing, phase → transition, token checks."""

import base64
import json

import pytest

from jenkins_dispatch.callbacks.notifications import (
    MAX_BODY_BYTES,
    MISSING_OR_WRONG_TOKEN,
    SEVERAL_TOKENS,
    Notification,
    authentication_failure,
    is_authorised,
    names_job,
    parse_notification,
    presented_tokens,
    redact_query,
    request_body,
    token_matches,
    transition_for,
)
from jenkins_dispatch.errors import RejectedNotification
from jenkins_dispatch.jenkins.jobs import job_path_from_url
from jenkins_dispatch.store.dispatch_ids import row_id_hint

SECRET = "s3cret-token"


def plugin_payload(phase, status=None, **build_overrides):
    """The Notification plugin's JSON as Gson writes it (snake_case keys, nulls omitted)."""
    build = {
        "full_url": "https://ci.example.com/job/team/job/deploy/42/",
        "number": 42,
        "queue_id": 17,
        "timestamp": 1718000000000,
        "duration": 0,
        "phase": phase,
        "url": "job/team/job/deploy/42/",
        "scm": {"changes": [], "culprits": []},
        "parameters": {"ENV": "prod", "DRY_RUN": "false", "DISPATCH_ID": "jd-7-0a1b2c3d4e"},
        "log": "",
        "artifacts": {},
    }
    if status is not None:
        build["status"] = status
    build.update(build_overrides)
    build = {k: v for k, v in build.items() if v is not None}
    return {"name": "deploy", "display_name": "deploy", "url": "job/team/job/deploy/", "build": build}


def encoded(payload) -> bytes:
    return json.dumps(payload).encode()


# ------------------------------------- the Notification plugin's payloads (docs/jenkins.md#notifications)

NOTES_SAMPLES = {
    # QUEUED: sent just before STARTED, no status, timestamp ≈ when it became buildable (0 without executor).
    "queued": (plugin_payload("QUEUED", timestamp=0), "QUEUED", None),
    "started, no git checkout yet": (plugin_payload("STARTED"), "STARTED", None),
    "completed success with scm and tests": (
        plugin_payload(
            "COMPLETED", "SUCCESS", duration=93512,
            scm={"url": "https://git.example.com/t.git", "branch": "origin/main", "commit": "3f2a9c1",
                 "changes": ["src/a.py"], "culprits": ["alice"]},
            test_summary={"total": 10, "failed": 0, "passed": 10, "skipped": 0, "failed_tests": []},
        ),
        "COMPLETED", "SUCCESS",
    ),
    "finalized failure": (plugin_payload("FINALIZED", "FAILURE", duration=4120), "FINALIZED", "FAILURE"),
    "no Jenkins root URL: no full_url": (plugin_payload("COMPLETED", "ABORTED", full_url=None), "COMPLETED", "ABORTED"),
    "notes and log lines configured": (
        plugin_payload("FINALIZED", "UNSTABLE", notes="deployed by CI", log="line 1\nline 2\n"),
        "FINALIZED", "UNSTABLE",
    ),
    "NOT_BUILT": (plugin_payload("COMPLETED", "NOT_BUILT"), "COMPLETED", "NOT_BUILT"),
    "artifacts listed": (
        plugin_payload("FINALIZED", "SUCCESS",
                       artifacts={"out/app.zip": {"archive": "https://ci.example.com/job/x/42/artifact/out/app.zip"}}),
        "FINALIZED", "SUCCESS",
    ),
    "notifyEndpoints step with a phase label and notes": (
        plugin_payload("STARTED", notes="manual notification"), "STARTED", None,
    ),
}


@pytest.mark.parametrize("payload, phase, status", NOTES_SAMPLES.values(), ids=NOTES_SAMPLES.keys())
def test_every_plugin_sample_parses(payload, phase, status):
    n = parse_notification(encoded(payload))
    assert (n.phase, n.status, n.build_number, n.queue_id) == (phase, status, 42, 17)
    assert n.dispatch_id == "jd-7-0a1b2c3d4e"
    assert n.job_path == "team/deploy"
    assert n.job_name == "deploy"
    expected_url = payload["build"].get("full_url", "job/team/job/deploy/42/")
    assert n.build_url == expected_url


def test_run_without_parameters_action_has_no_dispatch_id():
    n = parse_notification(encoded(plugin_payload("STARTED", parameters=None)))
    assert n.dispatch_id is None and n.parameters == {}


def test_parameter_names_are_case_insensitive_like_jenkins_envvars():
    n = parse_notification(encoded(plugin_payload("STARTED", parameters={"dispatch_id": "jd-3-abc"})))
    assert n.dispatch_id == "jd-3-abc"


def test_an_empty_dispatch_id_default_counts_as_absent():
    assert parse_notification(encoded(plugin_payload("STARTED", parameters={"DISPATCH_ID": " "}))).dispatch_id is None


def test_multibranch_job_names_are_decoded_once():
    payload = plugin_payload("STARTED")
    payload["name"] = "feature%2Ffoo"
    payload["url"] = "job/org/job/repo/job/feature%252Ffoo/"
    assert parse_notification(encoded(payload)).job_path == "org/repo/feature%2Ffoo"


@pytest.mark.parametrize(
    "url, path",
    [
        ("job/a/", "a"),
        ("job/a/job/b/", "a/b"),
        ("job/a/job/b/42/", "a/b"),
        ("https://ci.example.com/jenkins/job/a/job/b%20c/7/", "a/b c"),
        ("job/job/job/x/", "job/x"),  # a folder literally called 'job'
        ("https://ci.example.com/view/all/job/a/", "a"),  # a view on the way is not part of the name
        ("job/f/view/v/job/b/", "f/b"),
        ("job/a/42/job/b/", "a"),  # the names end where the job's own URL does
        ("job/a/job", "a"),
        ("view/all/", None),
        ("", None),
        (None, None),
    ],
)
def test_job_path_from_url(url, path):
    assert job_path_from_url(url) == path


def test_job_path_falls_back_to_the_build_url():
    payload = plugin_payload("STARTED")
    del payload["url"]
    assert parse_notification(encoded(payload)).job_path == "team/deploy"


def test_job_path_falls_back_to_the_full_build_url():
    payload = plugin_payload("STARTED", url=None, full_url="https://ci.example.com/jenkins/job/team/job/app/9/")
    del payload["url"]
    assert parse_notification(encoded(payload)).job_path == "team/app"


@pytest.mark.parametrize("url", ["http://[/job/deploy/", "http://ex\u2100ample/job/a/", "//[x/job/a/"])
def test_job_path_from_a_malformed_url_is_none_not_an_exception(url):
    assert job_path_from_url(url) is None


MALFORMED_URLS = ["http://[/job/deploy/", "https://[zz]/job/deploy/", "http://ex\u2100ample.com/job/deploy/",
                  "https://ci\uff03x/job/deploy/42/", "//[ci/job/deploy/"]


@pytest.mark.parametrize("field", ["url", "build.url", "build.full_url"])
@pytest.mark.parametrize("url", MALFORMED_URLS)
def test_a_malformed_url_in_any_url_field_is_400(field, url):
    payload = plugin_payload("STARTED")
    if field == "url":
        payload["url"] = url
    else:
        payload["build"][field.split(".")[1]] = url
    with pytest.raises(RejectedNotification) as caught:
        parse_notification(encoded(payload))
    message = str(caught.value)
    assert caught.value.http_status == 400
    assert message.startswith(f"{field} is not a valid URL") and "\n" not in message
    assert url not in message  # never quoted: a full_url may carry userinfo


def _named(name="deploy", job_url="job/team/job/deploy/", **build):
    payload = plugin_payload("STARTED", **build)
    payload["name"] = name
    if job_url is None:
        del payload["url"]
    else:
        payload["url"] = job_url
    return parse_notification(encoded(payload))


@pytest.mark.parametrize(
    "notification, job_name, expected",
    [
        (_named(), "team/deploy", True),
        (_named(), "Team/DEPLOY", True),  # Jenkins item names are case-insensitive (ASCII folding only)
        (_named(), "deploy", False),
        (_named(), "team/deploy/x", False),
        (_named(), "other/deploy", False),
        (_named("child", "job/team/job/child/"), "team/deploy", False),
        (_named("feature%2Ffoo", "job/repo/job/feature%252Ffoo/"), "repo/feature%2Ffoo", True),
        (_named("feature%2Ffoo", "job/repo/job/feature%252Ffoo/"), "repo/feature/foo", False),
        (_named("Test Job", "job/Test%20Job/"), "Test Job", True),
        (_named("déploiement", "job/d%C3%A9ploiement/"), "déploiement", True),
        (_named("déploiement", "job/d%C3%A9ploiement/"), "DÉPLOIEMENT", False),  # not ASCII: compared as is
        # no job url: build.url, then full_url, then the leaf name against the row's last segment
        (_named(job_url=None), "team/deploy", True),
        (_named(job_url=None), "other/deploy", False),
        (_named("deploy", None, url=None, full_url=None), "team/deploy", True),
        (_named("deploy", None, url=None, full_url=None), "other/deploy", True),
        (_named("deploy", None, url=None, full_url=None), "team/deploy-child", False),
        (_named("child", None, url=None, full_url=None), "team/deploy", False),
    ],
)
def test_names_job(notification, job_name, expected):
    assert names_job(notification, job_name) is expected


# --------------------------------------------------------------------------- malformed bodies → 400 / 413

MALFORMED = {
    "not JSON": (b"{nope", "not valid JSON"),
    "JSON array": (b"[1, 2]", "must be a JSON object, got a JSON array"),
    "JSON string": (b'"hello"', "got a JSON string"),
    "no build": (b'{"name": "deploy"}', "no 'build' object"),
    "build not an object": (b'{"build": [1]}', "'build' must be a JSON object"),
    "no phase": (b'{"build": {"number": 1}}', "build.phase is missing"),
    "phase not text": (b'{"build": {"phase": 3}}', "build.phase is not a string"),
    "unknown phase": (b'{"build": {"phase": "EXPLODED"}}', "build.phase 'EXPLODED' is unknown"),
    "number as text": (b'{"build": {"phase": "STARTED", "number": "42"}}', "build.number must be a whole number"),
    "number as float": (b'{"build": {"phase": "STARTED", "number": 4.2}}', "build.number must be a whole number"),
    "number as bool": (b'{"build": {"phase": "STARTED", "number": true}}', "build.number must be a whole number"),
    "negative number": (b'{"build": {"phase": "STARTED", "number": -1}}', "between 0 and"),
    "number too big": (b'{"build": {"phase": "STARTED", "number": 4294967296}}', "between 0 and"),
    "queue id zero": (b'{"build": {"phase": "STARTED", "queue_id": 0}}', "build.queue_id must be between"),
    "url not text": (b'{"url": 5, "build": {"phase": "STARTED"}}', "url must be a string"),
    "parameters a list": (b'{"build": {"phase": "STARTED", "parameters": []}}', "build.parameters must be a JSON object"),
    "dispatch id a number": (
        b'{"build": {"phase": "STARTED", "parameters": {"DISPATCH_ID": 5}}}', "DISPATCH_ID must be a string"
    ),
    "dispatch id absurd": (
        json.dumps({"build": {"phase": "STARTED", "parameters": {"DISPATCH_ID": "x" * 300}}}).encode(),
        "longer than 256",
    ),
    "url absurd": (json.dumps({"url": "j" * 9000, "build": {"phase": "STARTED"}}).encode(), "longer than 8192"),
    "NaN": (b'{"build": {"phase": "STARTED", "duration": NaN}}', "invalid value"),
    "huge integer": (b'{"build": {"phase": "STARTED", "number": ' + b"9" * 5000 + b"}}", "invalid value"),
    "deep nesting": (b"[" * 100_000, "nested too deeply"),
    "not UTF-8": (b'{"build": {"phase": "\xff"}}', "not UTF-8"),
    "XML format": (b'<?xml version="1.0"?><job><build><phase>COMPLETED</phase></build></job>', "must use Format: JSON"),
    "XML after whitespace": (b"  \n<job/>", "must use Format: JSON"),
    # A hand-rolled post { always { httpRequest ... } } payload (not the Notification plugin) has another shape.
    "pipeline httpRequest payload": (
        b'{"jobName":"deploy","buildId":"42","result":"SUCCESS","params":{"BRANCH":"main"}}', "no 'build' object"
    ),
}


@pytest.mark.parametrize("raw, reason", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_bodies_are_rejected_with_one_clear_line(raw, reason):
    with pytest.raises(RejectedNotification) as caught:
        parse_notification(raw)
    assert caught.value.http_status == 400
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


MORE_MALFORMED = {
    "build null": (b'{"build": null}', "the body has no 'build' object"),
    "build a string": (b'{"build": "x"}', "'build' must be a JSON object, got a JSON string"),
    "phase lower case": (b'{"build": {"phase": "started"}}', "build.phase 'started' is unknown"),
    "parameters a number": (b'{"build": {"phase": "STARTED", "parameters": 3}}', "got a JSON number"),
    "dispatch id with NUL": (b'{"build": {"phase": "STARTED", "parameters": {"DISPATCH_ID": "jd-1\\u0000"}}}',
                             "build.parameters.DISPATCH_ID contains a NUL character"),
    "dispatch id a lone surrogate": (b'{"build": {"phase": "STARTED", "parameters": {"DISPATCH_ID": "\\ud800"}}}',
                                     "build.parameters.DISPATCH_ID is not valid Unicode"),
    "dispatch id a list": (b'{"build": {"phase": "STARTED", "parameters": {"dispatch_id": []}}}',
                           "DISPATCH_ID must be a string, got list"),
    "status a number": (b'{"build": {"phase": "COMPLETED", "status": 1}}', "build.status must be a string, got int"),
    "name a list": (b'{"name": [], "build": {"phase": "STARTED"}}', "name must be a string, got list"),
    "full_url a number": (b'{"build": {"phase": "STARTED", "full_url": 1}}', "build.full_url must be a string"),
    "queue id too big": (b'{"build": {"phase": "STARTED", "queue_id": 9223372036854775808}}',
                         "build.queue_id must be between 1 and"),
}


@pytest.mark.parametrize("raw, reason", MORE_MALFORMED.values(), ids=MORE_MALFORMED.keys())
def test_each_field_of_a_notification_is_checked(raw, reason):
    """The checks the table above leaves out, each field's own."""
    with pytest.raises(RejectedNotification) as caught:
        parse_notification(raw)
    assert caught.value.http_status == 400 and reason in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("parameters", "dispatch_id"), [
    ({"DISPATCH_ID": "  jd-7-abc  "}, "jd-7-abc"),
    ({"DISPATCH_ID": "x" * 256}, "x" * 256),
    ({"DISPATCH_ID": None}, None),
    ({"OTHER": "jd-7-abc"}, None),
    ({"Dispatch_Id": "jd-8-abc", "BRANCH": "main"}, "jd-8-abc"),
])
def test_the_dispatch_id_parameter(parameters, dispatch_id):
    notification = parse_notification(encoded(plugin_payload("STARTED", parameters=parameters)))
    assert notification.dispatch_id == dispatch_id and notification.parameters == parameters


@pytest.mark.parametrize("phase", ["COMPLETED", "FINALIZED"])
@pytest.mark.parametrize(
    "status, reason",
    [(None, "build.status is missing"), ("FAILED", "build.status 'FAILED' is unknown"),  # the plugin help page's typo
     ("success", "is unknown")],
)
def test_a_final_phase_needs_a_known_status(phase, status, reason):
    notification = parse_notification(encoded(plugin_payload(phase, status)))
    with pytest.raises(RejectedNotification, match=reason) as caught:
        transition_for(notification)
    assert caught.value.http_status == 400


# --------------------------------------------------------------------------- the HTTP body


def test_plain_body_is_returned_as_utf8_bytes():
    assert request_body({"body": '{"a": "é"}'}) == '{"a": "é"}'.encode()


def test_base64_body_is_decoded():
    raw = encoded(plugin_payload("STARTED"))
    assert request_body({"body": base64.b64encode(raw).decode(), "isBase64Encoded": True}) == raw


@pytest.mark.parametrize(
    "event, status, reason",
    [
        ({}, 400, "no body"),
        ({"body": None}, 400, "no body"),
        ({"body": ""}, 400, "no body"),
        ({"body": "   \n"}, 400, "blank"),
        ({"body": 12}, 400, "must be text"),
        ({"body": "!!not base64!!", "isBase64Encoded": True}, 400, "not valid base64"),
        ({"body": "x" * (MAX_BODY_BYTES + 1)}, 413, "larger than 256 KiB"),
        ({"body": "é" * (MAX_BODY_BYTES // 2 + 1)}, 413, "larger than 256 KiB"),  # over in bytes, not in chars
        ({"body": base64.b64encode(b"x" * (MAX_BODY_BYTES + 1)).decode(), "isBase64Encoded": True}, 413, "256 KiB"),
        ({"body": "A" * (MAX_BODY_BYTES * 2), "isBase64Encoded": True}, 413, "256 KiB"),
    ],
)
def test_bad_bodies(event, status, reason):
    with pytest.raises(RejectedNotification, match=reason) as caught:
        request_body(event)
    assert caught.value.http_status == status


def test_a_body_of_exactly_256_kib_is_accepted():
    assert len(request_body({"body": "x" * MAX_BODY_BYTES})) == MAX_BODY_BYTES


# --------------------------------------------------------------------------- phase → transition


def _transition(phase, status=None, unstable_is_success=True, **build):
    return transition_for(parse_notification(encoded(plugin_payload(phase, status, **build))),
                          unstable_is_success=unstable_is_success)


@pytest.mark.parametrize(
    "phase, status, unstable_ok, final_status, error",
    [
        ("QUEUED", None, True, None, None),
        ("STARTED", None, True, None, None),
        ("STARTED", "SUCCESS", True, None, None),  # a status before COMPLETED is ignored
        ("COMPLETED", "SUCCESS", True, "completed", None),
        ("FINALIZED", "SUCCESS", False, "completed", None),
        ("COMPLETED", "UNSTABLE", True, "completed", None),
        ("FINALIZED", "UNSTABLE", False, "failed", "Jenkins build #42 finished UNSTABLE"),
        ("COMPLETED", "FAILURE", True, "failed", "Jenkins build #42 finished FAILURE"),
        ("FINALIZED", "ABORTED", True, "failed", "Jenkins build #42 finished ABORTED"),
        ("COMPLETED", "NOT_BUILT", True, "failed", "Jenkins build #42 finished NOT_BUILT"),
    ],
)
def test_transitions(phase, status, unstable_ok, final_status, error):
    t = _transition(phase, status, unstable_is_success=unstable_ok)
    assert t.final_status == final_status
    assert t.error == error
    assert t.result == (status if final_status else None)
    assert (t.build_number, t.queue_id) == (42, 17)
    assert t.build_url == "https://ci.example.com/job/team/job/deploy/42/"
    assert t.started == (phase == "STARTED")
    assert t.event == phase.lower()


def test_failure_message_without_a_build_number():
    assert _transition("COMPLETED", "FAILURE", number=None).error == "Jenkins build finished FAILURE"


@pytest.mark.parametrize(
    "dispatch_id, row_id",
    [("jd-7-0a1b2c3d4e", 7), ("jd-123456-ffffffffff", 123456), ("legacy-9", 9),
     ("jd-x-0a", None), ("something-else", None), ("jd-7-0a1b-extra", None), ("jd-7-", None)],
)
def test_row_id_hint(dispatch_id, row_id):
    assert row_id_hint(dispatch_id) == row_id


# --------------------------------------------------------------------------- tokens


def basic(userinfo: str) -> str:
    return "Basic " + base64.b64encode(userinfo.encode()).decode()


@pytest.mark.parametrize(
    "event",
    [
        {"rawQueryString": f"token={SECRET}"},
        {"rawQueryString": f"a=1&token={SECRET}&b=2"},
        {"queryStringParameters": {"token": SECRET}},
        {"headers": {"authorization": basic(f"jenkins:{SECRET}")}},
        {"headers": {"Authorization": basic(f":{SECRET}")}},
        {"headers": {"authorization": f"Bearer {SECRET}"}},
        {"headers": {"AUTHORIZATION": f"bearer {SECRET}"}},
        {"headers": {"x-jenkins-dispatch-token": SECRET}},
        {"headers": {"X-Jenkins-Dispatch-Token": SECRET}},
        # API Gateway sends the query twice, raw and parsed: one token, not two.
        {"rawQueryString": f"token={SECRET}", "queryStringParameters": {"token": SECRET}},
        # The same value in several places is still one token.
        {"rawQueryString": f"token={SECRET}&token={SECRET}", "headers": {"authorization": f"Bearer {SECRET}"}},
    ],
)
def test_the_secret_is_accepted_from_each_place(event):
    assert is_authorised(event, SECRET)


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"rawQueryString": "token=wrong"},
        {"rawQueryString": f"tokenx={SECRET}"},
        {"rawQueryString": f"token={SECRET}x"},
        {"headers": {"authorization": basic(f"{SECRET}:other")}},  # the user part is not the password
        {"headers": {"authorization": basic(SECRET)}},  # no colon: no password
        {"headers": {"authorization": f"Basic {SECRET}"}},  # not base64 of user:password
        {"headers": {"authorization": f"Token {SECRET}"}},
        {"headers": {"x-other-token": SECRET}},
        {"headers": {"x-jenkins-dispatch-token": "s3cret-token\ud800"}},
        {"headers": {"x-jenkins-dispatch-token": 5}},
        {"headers": "not a mapping", "rawQueryString": 5, "queryStringParameters": []},
    ],
)
def test_missing_or_wrong_secrets_are_refused(event):
    assert not is_authorised(event, SECRET)


@pytest.mark.parametrize(
    "event",
    [
        {"rawQueryString": "token=wrong", "headers": {"x-jenkins-dispatch-token": SECRET}},
        {"rawQueryString": f"token={SECRET}", "headers": {"x-jenkins-dispatch-token": "wrong"}},
        {"rawQueryString": f"token=a&token={SECRET}"},
        {"rawQueryString": "&".join(f"token={i}" for i in range(1000)) + f"&token={SECRET}"},
        {"rawQueryString": f"token=&token={SECRET}"},
        {"headers": {"authorization": basic(f"jenkins:{SECRET}"), "x-jenkins-dispatch-token": ""}},
        {"headers": {"authorization": f"Bearer {SECRET}", "X-Jenkins-Dispatch-Token": "other"}},
        {"queryStringParameters": {"token": "wrong"}, "headers": {"authorization": f"Bearer {SECRET}"}},
    ],
)
def test_several_different_tokens_are_refused_even_if_one_is_right(event):
    assert not is_authorised(event, SECRET)
    assert authentication_failure(event, SECRET) == SEVERAL_TOKENS


def test_a_wrong_or_missing_token_says_so():
    assert authentication_failure({}, SECRET) == MISSING_OR_WRONG_TOKEN
    assert authentication_failure({"rawQueryString": "token=wrong"}, SECRET) == MISSING_OR_WRONG_TOKEN
    assert authentication_failure({"rawQueryString": f"token={SECRET}"}, SECRET) is None


def test_an_empty_secret_never_matches():
    assert not token_matches([""], "")


def test_non_ascii_secrets_compare_safely():
    assert token_matches(["pässwörd"], "pässwörd")
    assert not token_matches(["pässword"], "pässwörd")


def test_all_presented_tokens_are_collected():
    event = {"rawQueryString": "token=a", "headers": {"authorization": "Bearer b", "x-jenkins-dispatch-token": "c"}}
    assert presented_tokens(event) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "query, redacted",
    [
        ("token=abc", "token=REDACTED"),
        ("a=1&token=abc&b=2", "a=1&token=REDACTED&b=2"),
        ("TOKEN=abc", "TOKEN=REDACTED"),
        ("", ""),
        (None, ""),
    ],
)
def test_query_strings_are_redacted_for_logs(query, redacted):
    assert redact_query(query) == redacted


def test_notification_is_a_plain_value():
    n = parse_notification(encoded(plugin_payload("STARTED")))
    assert isinstance(n, Notification)
    assert n.parameters["ENV"] == "prod"


# --------------------------------------------------------------------------- a controller's own webhook secret

_SECRETS = dict(shared="shared-s", own={"b": "b-s"}, urls={"default": "https://a.example/", "b": "https://b.example/ci/"})


@pytest.mark.parametrize(("token", "full_url", "status", "says"), [
    ("b-s", "https://b.example/ci/job/deploy/1/", None, None),  # b's build, b's own secret
    ("shared-s", "https://a.example/job/deploy/1/", None, None),  # a controller without one: the shared secret
    ("shared-s", "https://b.example/ci/job/deploy/1/", 401, "controller 'b' has a webhook secret of its own"),
    ("b-s", "https://a.example/job/deploy/1/", 401, "controller 'default' uses the shared WEBHOOK_SECRET"),
    ("b-s", None, 401, "no controller with a secret of its own uses the shared WEBHOOK_SECRET"),  # relative URL
    ("shared-s", None, None, None),
    ("nope", "https://b.example/ci/job/deploy/1/", 401, "token"),  # refused before the body is read
])
def test_a_controllers_own_webhook_secret_replaces_the_shared_one(token, full_url, status, says):
    from jenkins_dispatch.callbacks.webhook import Callback, WebhookAnswer, WebhookSecrets, check

    build = {"phase": "COMPLETED", "status": "SUCCESS", "number": 1, "url": "job/deploy/1/",
             "parameters": {"DISPATCH_ID": "jd-1"}}
    if full_url:
        build["full_url"] = full_url
    read = []

    def body() -> bytes:
        read.append(True)
        return json.dumps({"name": "deploy", "url": "job/deploy/", "build": build}).encode()

    checked = check(Callback("POST", "/jenkins/notify", f"token={token}", {}, body),
                    secret=WebhookSecrets(**_SECRETS))
    if status is None:
        assert not isinstance(checked, WebhookAnswer), checked
    else:
        assert isinstance(checked, WebhookAnswer) and checked.status_code == status, checked
        assert says in checked.message
    assert bool(read) is (token != "nope")
