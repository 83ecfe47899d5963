"""The emulator answers like Jenkins (docs/jenkins.md, each section's "Emulator" part): payloads field by field, over real HTTP."""

from __future__ import annotations

import json
import threading
import time

import jenkins as python_jenkins
import pytest
import requests

from ..emulator_fixtures import ADMIN_TOKEN

AUTH = ("admin", ADMIN_TOKEN)


def post(emulator, path: str, data=None, auth=AUTH, **kwargs) -> requests.Response:
    return requests.post(emulator.base_url + path, data=data, auth=auth, allow_redirects=False, timeout=5, **kwargs)


def get(emulator, path: str, auth=AUTH, **kwargs) -> requests.Response:
    return requests.get(emulator.base_url + path, auth=auth, allow_redirects=False, timeout=5, **kwargs)


def wait_json(emulator, path: str, accept, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        doc = get(emulator, path).json()
        if accept(doc) or time.monotonic() > deadline:
            return doc
        time.sleep(0.02)


# --- triggers ------------------------------------------------------------------------------------------------


def test_trigger_answers_201_with_absolute_location_and_empty_body(jenkins) -> None:
    response = post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "a"})
    assert response.status_code == 201
    assert response.headers["Location"] == f"{jenkins.base_url}queue/item/1/"
    assert response.content == b"" and response.headers["Content-Length"] == "0"
    assert response.headers["X-Jenkins"] == "2.528" and response.headers["X-Jenkins-Session"]


def test_merge_semantics(jenkins) -> None:
    first = post(jenkins, "job/waiting/buildWithParameters", {"DISPATCH_ID": "same"})
    merged = post(jenkins, "job/waiting/buildWithParameters", {"DISPATCH_ID": "same"})
    other = post(jenkins, "job/waiting/buildWithParameters", {"DISPATCH_ID": "other"})
    assert (first.status_code, merged.status_code, other.status_code) == (201, 303, 201)
    assert merged.headers["Location"] == first.headers["Location"] != other.headers["Location"]
    item = get(jenkins, "queue/item/1/api/json").json()
    assert len(item["actions"][-1]["causes"]) == 2  # the folded cause shows up twice

    # Defaults count: omitting ENV is the same request as sending its default.
    a = post(jenkins, "job/deploy/buildWithParameters?delay=30sec", {"DISPATCH_ID": "x"})
    b = post(jenkins, "job/deploy/buildWithParameters?delay=30sec", {"DISPATCH_ID": "x", "ENV": "dev"})
    assert (a.status_code, b.status_code) == (201, 303)

    # /build on a non-parameterized job merges with 201 and the same Location.
    jenkins.set_job("nightly", quiet_period_seconds=30)
    one, two = post(jenkins, "job/nightly/build"), post(jenkins, "job/nightly/build")
    assert (one.status_code, two.status_code) == (201, 201) and one.headers["Location"] == two.headers["Location"]
    counters = jenkins.counters()
    assert counters["triggers_by_dispatch_id"] == {"same": 1, "other": 1, "x": 1}
    assert counters["merged_requests"] == 3 and counters["items_created"] == 4


def test_the_record_of_when_each_job_got_its_items(jenkins) -> None:
    """What a rate limit is checked against: the moment each queue item was created, per job; a merged request
    creates none."""
    before = time.time()
    post(jenkins, "job/waiting/buildWithParameters", {"DISPATCH_ID": "one"})
    post(jenkins, "job/waiting/buildWithParameters", {"DISPATCH_ID": "one"})  # merged
    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "two"})
    created = jenkins.counters()["items_created_at_by_job"]
    assert sorted(created) == ["deploy", "waiting"] and len(created["waiting"]) == 1 and len(created["deploy"]) == 1
    assert before <= created["waiting"][0] <= created["deploy"][0] <= time.time()
    assert jenkins.item_times("waiting") == created["waiting"] and jenkins.item_times("nightly") == []


def test_no_merge_once_the_item_left_the_queue(jenkins) -> None:
    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "again"})
    wait_json(jenkins, "queue/item/1/api/json", lambda d: d["_class"].endswith("LeftItem"))
    assert post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "again"}).status_code == 201
    assert jenkins.triggers_for("again") == 2


def _send_in_background(emulator, path: str, data: dict) -> list[requests.Response]:
    """POST on a thread of its own (a fault may hold it); the answer lands in the list returned."""
    answers: list[requests.Response] = []
    threading.Thread(target=lambda: answers.append(post(emulator, path, data)), daemon=True).start()
    return answers


def test_a_request_jenkins_acts_on_late_is_queued_then_under_the_next_id(jenkins) -> None:
    """Jenkins gives a request its queue item when ``Queue.schedule2`` runs (``scheduleInternal`` makes the
    WaitingItem, whose id is the next one), not when the request arrived: one whose thread waited (a saturated
    request pool, the queue lock held) is nowhere to be seen until then — neither in the queue nor among the builds
    — and then comes after every item made meanwhile. An identical request that has already left the queue as a
    build does not take it in (jenkins-api-notes.md, section 5 "Queue coalescing": merging happens only while the
    earlier item is still queued). A ``hold`` fault keeps the request until the test releases it."""
    held = jenkins.add_fault(path="buildWithParameters$", method="POST", hold=True, times=1)
    late = _send_in_background(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "late"})
    assert jenkins.wait_until(lambda: held.waiting == 1)  # arrived, and held until released
    assert jenkins.triggers_for("late") == 0 and get(jenkins, "queue/api/json").json()["items"] == []
    # Meanwhile an identical request is queued and built (a re-send, say): item 1, build #1.
    assert post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "late"}).status_code == 201
    wait_json(jenkins, "queue/item/1/api/json", lambda d: d["_class"].endswith("LeftItem"))

    held.release()
    assert jenkins.wait_until(lambda: late != [] and held.waiting == 0)
    assert late[0].status_code == 201 and late[0].headers["Location"] == f"{jenkins.base_url}queue/item/2/"
    assert jenkins.wait_idle()
    assert [(b.number, b.queue_id) for b in jenkins.builds("deploy")] == [(1, 1), (2, 2)]
    assert jenkins.counters()["merged_requests"] == 0


def test_a_request_jenkins_acts_on_late_merges_into_an_identical_item_still_queued(jenkins) -> None:
    """The other side of section 5: the identical item is still waiting (its quiet period, ``delay``) when Jenkins
    acts on the late request, so the request merges into it (303 to that item) and pulls its due time in."""
    held = jenkins.add_fault(path="buildWithParameters$", method="POST", hold=True, times=1)
    late = _send_in_background(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "late"})
    assert jenkins.wait_until(lambda: held.waiting == 1)
    assert post(jenkins, "job/deploy/buildWithParameters?delay=60sec", {"DISPATCH_ID": "late"}).status_code == 201

    requests.post(jenkins.base_url + "_emulator/faults/release", timeout=5)  # as another process would
    assert jenkins.wait_until(lambda: late != [])
    assert late[0].status_code == 303 and late[0].headers["Location"] == f"{jenkins.base_url}queue/item/1/"
    assert jenkins.wait_idle()  # the due time pulled in from 60 s to now: built at once
    assert [(b.number, b.queue_id, b.causes) for b in jenkins.builds("deploy")] == [(1, 1, 2)]


@pytest.mark.parametrize(
    ("method", "path", "status", "text"),
    [
        ("POST", "job/nightly/buildWithParameters", 400, "nightly is not parameterized"),
        ("POST", "job/frozen/buildWithParameters", 409, "frozen is not buildable"),
        ("POST", "job/old/job/job/buildWithParameters", 409, "old/job is not buildable"),
        ("POST", "job/frozen/build", 409, "frozen is not buildable"),
        ("POST", "job/deploy/build", 400, "Nothing is submitted"),
        ("POST", "job/deploy/build?x=1", 400, "This page expects a form submission"),
        ("GET", "job/deploy/buildWithParameters", 405, "This URL requires POST"),
        ("GET", "job/nightly/build", 405, "This URL requires POST"),
        ("POST", "job/missing/buildWithParameters", 404, "Oops!"),
        ("POST", "job/team/job/missing/buildWithParameters", 404, "Not Found"),
        ("GET", "job/deploy/77/api/json", 404, "This page may not exist"),
    ],
)
def test_error_answers(jenkins, method, path, status, text) -> None:
    response = requests.request(method, jenkins.base_url + path, auth=AUTH, allow_redirects=False, timeout=5)
    assert response.status_code == status
    assert text in response.text
    if status == 405:
        assert response.headers["Allow"] == "POST"


def test_refused_trigger_redirects_to_the_job(jenkins) -> None:
    response = post(jenkins, "job/vetoed/buildWithParameters", {"DISPATCH_ID": "v"})
    assert response.status_code == 302 and response.headers["Location"] == f"{jenkins.base_url}job/vetoed/"


def test_build_with_json_form_answers_the_job_url(jenkins) -> None:
    form = {"json": json.dumps({"parameter": [{"name": "DISPATCH_ID", "value": "j"}]})}
    response = post(jenkins, "job/deploy/build", form)
    assert response.status_code == 201 and response.headers["Location"] == f"{jenkins.base_url}job/deploy/"


def test_duplicate_parameter_is_a_500(jenkins) -> None:
    response = post(jenkins, "job/deploy/buildWithParameters", [("DISPATCH_ID", "a"), ("DISPATCH_ID", "b")])
    assert response.status_code == 500 and "Illegal number of parameter values for DISPATCH_ID: 2" in response.text


# --- authentication and crumbs -------------------------------------------------------------------------------


def test_bad_credentials_get_401_with_basic_realm(jenkins) -> None:
    response = get(jenkins, "api/json", auth=("admin", "nope"))
    assert response.status_code == 401 and response.headers["WWW-Authenticate"] == 'Basic realm="Jenkins"'


def test_anonymous_gets_403(jenkins) -> None:
    response = get(jenkins, "api/json", auth=None)
    assert response.status_code == 403
    assert response.headers["X-You-Are-Authenticated-As"] == "anonymous"
    assert get(jenkins, "whoAmI/api/json", auth=None).json()["name"] == "anonymous"


def test_password_posts_need_a_session_bound_crumb(jenkins) -> None:
    password = ("admin", "admin-password")
    refused = post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "p"}, auth=password)
    assert refused.status_code == 403 and "No valid crumb was included in the request" in refused.text
    with requests.Session() as session:
        session.auth = password
        issued = session.get(jenkins.base_url + "crumbIssuer/api/json", timeout=5)
        doc = issued.json()
        assert doc["_class"] == "hudson.security.csrf.DefaultCrumbIssuer" and doc["crumbRequestField"] == "Jenkins-Crumb"
        assert len(doc["crumb"]) == 64
        assert any(cookie.name.startswith("JSESSIONID.") and len(cookie.name) == 19 for cookie in session.cookies)
        headers = {"Jenkins-Crumb": doc["crumb"]}
        without_cookie = post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "p"}, auth=password, headers=headers)
        assert without_cookie.status_code == 403
        accepted = session.post(jenkins.base_url + "job/deploy/buildWithParameters", data={"DISPATCH_ID": "p"}, headers=headers, allow_redirects=False, timeout=5)
        assert accepted.status_code == 201
    # An API token needs no crumb at all.
    assert post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "t"}).status_code == 201


def test_me_endpoint(jenkins) -> None:
    assert get(jenkins, "me/api/json").json()["id"] == "admin"


def test_who_am_i_answers_like_jenkins_for_a_user_and_for_anonymous(jenkins) -> None:
    assert get(jenkins, "whoAmI/api/json").json() == {
        "_class": "hudson.security.WhoAmI", "anonymous": False, "authenticated": True, "authorities": ["authenticated"], "name": "admin"}
    # An UnprotectedRootAction: readable without Overall/Read. Spring's anonymous token counts as "authenticated".
    assert get(jenkins, "whoAmI/api/json", auth=None).json() == {
        "_class": "hudson.security.WhoAmI", "anonymous": True, "authenticated": True, "authorities": ["anonymous"], "name": "anonymous"}
    assert get(jenkins, "whoAmI/api/json?tree=name").json() == {"_class": "hudson.security.WhoAmI", "name": "admin"}
    assert get(jenkins, "whoAmI/api/json", auth=("admin", "nope")).status_code == 401
    assert "Who Am I" in get(jenkins, "whoAmI/").text
    assert get(jenkins, "whoAmI/nothing").status_code == 404


def test_unknown_credentials_can_be_taken_as_anonymous(make_jenkins) -> None:
    emulator = make_jenkins(bad_credentials="anonymous")  # an SSO security realm, or a proxy dropping Authorization
    wrong = ("admin", "nope")
    assert get(emulator, "whoAmI/api/json", auth=wrong).json()["anonymous"] is True
    denied = get(emulator, "api/json", auth=wrong)
    assert denied.status_code == 403 and denied.headers["X-You-Are-Authenticated-As"] == "anonymous"
    assert get(emulator, "api/json").status_code == 200


# --- per-job permissions -------------------------------------------------------------------------------------

RESTRICTED_USERS = {
    "admin": {"api_token": ADMIN_TOKEN},
    "dispatch": {"api_token": "dispatch-token", "permissions": {
        "deny_build": ["team/app/deploy", "secret/*"], "deny_read": ["hidden"], "deny_discover": ["private"]}},
}
RESTRICTED_JOBS = [{"path": name, "parameters": [{"name": "DISPATCH_ID"}], "quiet_period_seconds": 30}
                   for name in ("secret/one", "hidden", "private")]
DISPATCH = ("dispatch", "dispatch-token")


@pytest.fixture
def restricted(make_jenkins):
    return make_jenkins(users=RESTRICTED_USERS, jobs=RESTRICTED_JOBS)


@pytest.mark.parametrize("path", ["job/team/job/app/job/deploy/buildWithParameters", "job/secret/job/one/buildWithParameters",
                                  "job/secret/job/one/build"])
def test_a_job_the_user_may_not_build_answers_403_missing_job_build(restricted, path) -> None:
    response = post(restricted, path, {"DISPATCH_ID": "f"}, auth=DISPATCH)
    assert response.status_code == 403
    assert "dispatch is missing the Job/Build permission" in response.text and "Access Denied" in response.text
    assert response.headers["X-Required-Permission"] == "hudson.model.Item.Build"
    assert response.headers["X-You-Are-Authenticated-As"] == "dispatch"
    # requests joins repeated headers: the whole impliedBy chain of Item.Build, as AccessDeniedException3 reports it.
    assert response.headers["X-Permission-Implied-By"] == (
        "hudson.security.Permission.GenericUpdate, hudson.security.Permission.GenericWrite, hudson.model.Hudson.Administer")
    assert restricted.counters()["trigger_requests"] == 0
    assert post(restricted, path, {"DISPATCH_ID": "f"}).status_code in (201, 400)  # admin may; /build wants json
    assert post(restricted, "job/deploy/buildWithParameters", {"DISPATCH_ID": "ok"}, auth=DISPATCH).status_code == 201


def test_a_job_the_user_may_not_read_is_403_with_discover_else_404(restricted) -> None:
    for path in ("job/hidden/api/json", "job/hidden/buildWithParameters"):
        response = requests.request("POST" if path.endswith("Parameters") else "GET", restricted.base_url + path,
                                    auth=DISPATCH, data={"DISPATCH_ID": "h"}, allow_redirects=False, timeout=5)
        assert response.status_code == 403 and "Please login to access job hidden" in response.text
        assert "X-Required-Permission" not in response.headers  # a plain AccessDeniedException
    for path in ("job/private/api/json", "job/missing/api/json"):
        response = get(restricted, path, auth=DISPATCH)
        assert response.status_code == 404 and "This page may not exist" in response.text
    assert get(restricted, "job/team/job/app/job/deploy/api/json", auth=DISPATCH).status_code == 200  # read, not build
    assert get(restricted, "job/hidden/api/json").json()["name"] == "hidden"  # admin


def test_listings_hide_what_the_user_may_not_read(restricted) -> None:
    assert post(restricted, "job/hidden/buildWithParameters", {"DISPATCH_ID": "q1"}).status_code == 201
    assert post(restricted, "job/private/buildWithParameters", {"DISPATCH_ID": "q2"}).status_code == 201
    names = [j["name"] for j in get(restricted, "api/json", auth=DISPATCH).json()["jobs"]]
    assert "deploy" in names and "hidden" not in names and "private" not in names
    assert len(get(restricted, "api/json").json()["jobs"]) == len(names) + 2
    queue = get(restricted, "queue/api/json", auth=DISPATCH).json()
    assert queue["items"] == []
    # Discover without Read: Queue.getDiscoverableItems shows the task's name only.
    assert queue["discoverableItems"] == [{"_class": "hudson.model.Queue$StubItem",
                                           "task": {"_class": "hudson.model.Queue$StubTask", "name": "hidden"}}]
    assert len(get(restricted, "queue/api/json").json()["items"]) == 2


def test_a_queue_item_of_a_job_the_user_may_not_read_is_403_with_discover_else_404(restricted) -> None:
    """Queue.Item.getApi: null without Job/Discover (404), AccessDeniedException without Job/Read (403)."""
    assert post(restricted, "job/hidden/buildWithParameters", {"DISPATCH_ID": "q1"}).status_code == 201
    assert post(restricted, "job/private/buildWithParameters", {"DISPATCH_ID": "q2"}).status_code == 201
    hidden = get(restricted, "queue/item/1/api/json", auth=DISPATCH)
    assert hidden.status_code == 403 and "Please log in to access job/hidden/" in hidden.text
    assert get(restricted, "queue/item/2/api/json", auth=DISPATCH).status_code == 404
    assert get(restricted, "queue/item/1/api/json").json()["id"] == 1  # admin


def test_permissions_change_at_run_time_through_the_control_api(restricted) -> None:
    control = restricted.base_url + "_emulator/"
    forbidden = "job/team/job/app/job/deploy/buildWithParameters"
    assert post(restricted, forbidden, {"DISPATCH_ID": "g"}, auth=DISPATCH).status_code == 403
    granted = requests.post(control + "users", json={"name": "dispatch", "permissions": {"deny_build": ["secret/*"]}}, timeout=5)
    assert granted.status_code == 200 and granted.json() == {
        "name": "dispatch", "permissions": {"deny_build": ["secret/*"], "deny_read": [], "deny_discover": []}}
    assert post(restricted, forbidden, {"DISPATCH_ID": "g"}, auth=DISPATCH).status_code == 201
    state = requests.get(control + "state", timeout=5).json()
    assert state["users"]["dispatch"] == {"permissions": {"deny_build": ["secret/*"], "deny_read": [], "deny_discover": []}}
    assert "api_token" not in json.dumps(state["users"])
    # "read" is the old shorthand: Overall/Read and Job/Read, nothing else.
    requests.post(control + "users", json={"name": "dispatch", "permissions": "read"}, timeout=5)
    assert post(restricted, "job/deploy/buildWithParameters", {"DISPATCH_ID": "r"}, auth=DISPATCH).status_code == 403
    # A new user, then the Python face of the same thing.
    requests.post(control + "users", json={"name": "bot", "api_token": "bot-token"}, timeout=5)
    assert get(restricted, "whoAmI/api/json", auth=("bot", "bot-token")).json()["name"] == "bot"
    restricted.set_user("bot", permissions={"deny_build": ["deploy"]})
    assert post(restricted, "job/deploy/buildWithParameters", {"DISPATCH_ID": "b"}, auth=("bot", "bot-token")).status_code == 403
    for bad in ({"name": "dispatch", "permissions": {"deny_everything": ["*"]}}, {"name": "dispatch", "permissions": "root"},
                {"name": "dispatch", "permissions": {"deny_build": "deploy"}}, {"permissions": "all"}, {"name": "x", "shoe_size": 9}):
        answer = requests.post(control + "users", json=bad, timeout=5)
        assert answer.status_code == 400 and "error" in answer.json()


# --- queue items ---------------------------------------------------------------------------------------------


def test_queue_item_shapes_through_the_lifecycle(jenkins) -> None:
    jenkins.configure(executors=1)
    post(jenkins, "job/serial/buildWithParameters", {"DISPATCH_ID": "s1"})
    wait_json(jenkins, "queue/item/1/api/json", lambda d: d["_class"].endswith("LeftItem"))
    post(jenkins, "job/serial/buildWithParameters", {"DISPATCH_ID": "s2"})
    blocked = wait_json(jenkins, "queue/item/2/api/json", lambda d: d["_class"].endswith("BlockedItem"))
    assert blocked["blocked"] is True and blocked["buildable"] is False
    assert blocked["why"].startswith("Build #1 is already in progress (ETA:")
    assert isinstance(blocked["buildableStartMilliseconds"], int)

    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "d1", "FLAG": "true"})
    buildable = wait_json(jenkins, "queue/item/3/api/json", lambda d: d["_class"].endswith("BuildableItem"))
    assert buildable["why"] == "Waiting for next available executor" and buildable["pending"] is False

    post(jenkins, "job/waiting/buildWithParameters", {"DISPATCH_ID": "w1"})
    waiting = get(jenkins, "queue/item/4/api/json").json()
    assert list(waiting) == ["_class", "actions", "blocked", "buildable", "id", "inQueueSince", "params", "stuck", "task", "url", "why", "timestamp"]
    assert waiting["_class"] == "hudson.model.Queue$WaitingItem"
    assert waiting["why"].startswith("In the quiet period. Expires in ")
    assert waiting["params"] == "\nDISPATCH_ID=w1" and waiting["url"] == "queue/item/4/"
    assert waiting["task"] == {"_class": "hudson.model.FreeStyleProject", "name": "waiting", "url": f"{jenkins.base_url}job/waiting/", "color": "notbuilt"}
    assert waiting["actions"][0] == {"_class": "hudson.model.ParametersAction", "parameters": [
        {"_class": "hudson.model.StringParameterValue", "name": "DISPATCH_ID", "value": "w1"}]}

    left = wait_json(jenkins, "queue/item/3/api/json", lambda d: d["_class"].endswith("LeftItem"), timeout=5)
    assert left["why"] is None and left["cancelled"] is False
    assert left["executable"] == {"_class": "hudson.model.FreeStyleBuild", "number": 1, "url": f"{jenkins.base_url}job/deploy/1/"}
    assert "\n(BooleanParameterValue) FLAG='true'" in left["params"]

    queue = get(jenkins, "queue/api/json").json()
    assert queue["_class"] == "hudson.model.Queue" and 4 in [item["id"] for item in queue["items"]]
    assert get(jenkins, "queue/item/4/").text.startswith("Queue item exists.")


def test_cancel_item_answers(jenkins) -> None:
    post(jenkins, "job/waiting/buildWithParameters", {"DISPATCH_ID": "c"})
    assert post(jenkins, "queue/cancelItem?id=1").status_code == 204
    cancelled = get(jenkins, "queue/item/1/api/json").json()
    assert cancelled["_class"] == "hudson.model.Queue$LeftItem" and cancelled["cancelled"] is True and cancelled["executable"] is None
    again = post(jenkins, "queue/cancelItem?id=1")
    assert again.status_code == 500 and "Could not cancel run for id 1" in again.text
    missing = post(jenkins, "queue/cancelItem?id=99")
    assert missing.status_code == 404 and "Provided id (99) not found" in missing.text


def test_left_items_expire(make_jenkins) -> None:
    emulator = make_jenkins(left_item_retention_seconds=0.2)
    post(emulator, "job/deploy/buildWithParameters", {"DISPATCH_ID": "e"})
    assert emulator.wait_until(lambda: get(emulator, "queue/item/1/api/json").status_code == 404, timeout=3)
    assert "Oops!" in get(emulator, "queue/item/1/api/json").text


# --- builds and jobs -----------------------------------------------------------------------------------------


def test_build_json_running_then_finished(jenkins) -> None:
    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "b1", "FLAG": "true", "EMULATOR_RESULT": "FAILURE", "EMULATOR_DURATION": "0.3"})
    running = wait_json(jenkins, "job/deploy/1/api/json", lambda d: True) if jenkins.wait_until(lambda: jenkins.builds("deploy")) else {}
    assert running["building"] is True and running["result"] is None and running["duration"] == 0 and running["inProgress"] is True
    assert running["_class"] == "hudson.model.FreeStyleBuild" and running["number"] == 1 and running["queueId"] == 1
    assert running["id"] == "1" and running["url"] == f"{jenkins.base_url}job/deploy/1/" and isinstance(running["timestamp"], int)
    parameters = running["actions"][0]["parameters"]
    assert {"_class": "hudson.model.BooleanParameterValue", "name": "FLAG", "value": True} in parameters
    assert "EMULATOR_RESULT" not in [p["name"] for p in parameters]  # undeclared: dropped, like Jenkins
    done = wait_json(jenkins, "job/deploy/1/api/json", lambda d: not d["building"])
    assert done["result"] == "FAILURE" and done["duration"] >= 250 and done["inProgress"] is False and done["executor"] is None


def test_stop_answers_302_and_aborts(jenkins) -> None:
    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "s", "EMULATOR_DURATION": "30"})
    assert jenkins.wait_until(lambda: jenkins.builds("deploy"))
    response = post(jenkins, "job/deploy/1/stop")
    assert response.status_code == 302
    assert wait_json(jenkins, "job/deploy/1/api/json", lambda d: not d["building"])["result"] == "ABORTED"
    assert post(jenkins, "job/deploy/9/stop").status_code == 404


def test_tree_selects_fields_nests_and_ranges(jenkins) -> None:
    for n in range(3):
        post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": f"t{n}"})
    jenkins.wait_idle()
    doc = get(jenkins, "job/deploy/api/json?tree=builds[number,queueId,actions[parameters[name,value]]]{0,2}").json()
    assert doc["_class"] == "hudson.model.FreeStyleProject" and list(doc) == ["_class", "builds"]
    assert [b["number"] for b in doc["builds"]] == [3, 2]
    assert doc["builds"][0]["actions"][0]["parameters"][0] == {"_class": "hudson.model.StringParameterValue", "name": "DISPATCH_ID", "value": "t2"}
    assert doc["builds"][0]["actions"][1] == {"_class": "hudson.model.CauseAction"}
    assert get(jenkins, "job/deploy/1/api/json?tree=result,nope").json() == {"_class": "hudson.model.FreeStyleBuild", "result": "SUCCESS"}


def test_tree_ranges_apply_at_every_level_like_stapler(jenkins) -> None:
    """Stapler's NamedPathPruner takes ``{M,N}`` / ``{N}`` after any node, and Property.writeValue applies it to any
    array it writes: ``actions[parameters[name,value]{k}]`` returns the k-th parameter only (searches rely on it)."""
    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "r1", "ENV": "prod", "PAYLOAD": "x" * 1000})
    jenkins.wait_idle()
    names = get(jenkins, "job/deploy/api/json?tree=allBuilds[number,actions[parameters[name]]]{0}").json()
    assert [p["name"] for p in names["allBuilds"][0]["actions"][0]["parameters"]] == ["DISPATCH_ID", "ENV", "FLAG", "COUNT", "PAYLOAD"]
    one = get(jenkins, "job/deploy/1/api/json?tree=actions[parameters[name,value]{1}]").json()
    assert one["actions"][0]["parameters"] == [{"_class": "hudson.model.StringParameterValue", "name": "ENV", "value": "prod"}]
    assert one["actions"][1] == {"_class": "hudson.model.CauseAction"}
    queued = get(jenkins, "queue/api/json?tree=items[id,actions[parameters[name,value]{0}]]{0,5}").json()
    assert queued == {"_class": "hudson.model.Queue", "items": []}


def test_job_and_folder_json(jenkins) -> None:
    job = get(jenkins, "job/team/job/app/job/deploy/api/json").json()
    assert (job["name"], job["fullName"], job["buildable"]) == ("deploy", "team/app/deploy", True)
    assert job["url"] == f"{jenkins.base_url}job/team/job/app/job/deploy/"
    definitions = job["property"][0]["parameterDefinitions"]
    assert [d["name"] for d in definitions] == ["DISPATCH_ID", "VERSION"]
    assert definitions[0]["_class"] == "hudson.model.StringParameterDefinition"
    assert get(jenkins, "job/nightly/api/json").json()["property"] == []
    folder = get(jenkins, "job/team/api/json").json()
    assert folder["_class"] == "com.cloudbees.hudson.plugins.folder.Folder" and "buildable" not in folder
    assert folder["jobs"] == [{"_class": "com.cloudbees.hudson.plugins.folder.Folder", "name": "app", "url": f"{jenkins.base_url}job/team/job/app/"}]
    root = get(jenkins, "api/json").json()
    assert root["_class"] == "hudson.model.Hudson" and "deploy" in [j["name"] for j in root["jobs"]]
    encoded = get(jenkins, "job/d%C3%A9ploiement%20%C3%BCn%C3%AF/api/json").json()
    assert encoded["url"] == f"{jenkins.base_url}job/d%C3%A9ploiement%20%C3%BCn%C3%AF/"
    branch = get(jenkins, "job/repo/job/feature%252Ffoo/api/json").json()
    assert branch["name"] == "feature%2Ffoo" and branch["_class"] == "org.jenkinsci.plugins.workflow.job.WorkflowJob"


# --- availability, faults, counters --------------------------------------------------------------------------


def test_restart_window_then_a_restarted_jenkins(jenkins) -> None:
    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "r"})
    jenkins.wait_until(lambda: jenkins.builds("deploy"))
    session_before = get(jenkins, "api/json").headers["X-Jenkins-Session"]
    jenkins.restart(window_seconds=0.3)
    during = get(jenkins, "api/json")
    assert during.status_code == 503 and "Please wait while Jenkins is restarting" in during.text
    assert during.headers["Cache-Control"] == "no-cache,no-store,must-revalidate"
    time.sleep(0.35)
    assert get(jenkins, "queue/item/1/api/json").status_code == 404
    assert get(jenkins, "api/json").headers["X-Jenkins-Session"] != session_before


def test_peak_in_flight_counts_queued_and_running(make_jenkins) -> None:
    # No executor until all six are queued: a build that ended before the last request came (a loaded machine)
    # would lower the peak, whatever the emulator counts.
    emulator = make_jenkins(executors=0)
    for n in range(5):
        post(emulator, "job/deploy/buildWithParameters", {"DISPATCH_ID": f"p{n}"})
    post(emulator, "job/nightly/build")
    requests.post(emulator.base_url + "_emulator/config", json={"executors": 2}, timeout=5)
    assert emulator.wait_idle(timeout=15)
    assert emulator.peak_in_flight("deploy") == 5 and emulator.peak_in_flight() == 6
    assert emulator.counters()["builds_started"] == 6


def test_control_api_drives_faults_and_reports(jenkins) -> None:
    control = jenkins.base_url + "_emulator/"
    assert requests.post(control + "faults", json={"path": "buildWithParameters$", "status": 500, "times": 1}, timeout=5).status_code == 200
    assert post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "f"}).status_code == 500
    assert post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "f"}).status_code == 201
    requests.post(control + "jobs", json={"path": "deploy", "result": "UNSTABLE"}, timeout=5)
    requests.post(control + "config", json={"executors": 3}, timeout=5)
    state = requests.get(control + "state", timeout=5).json()
    assert state["settings"]["executors"] == 3 and state["jobs"]["deploy"]["result"] == "UNSTABLE"
    assert requests.get(control + "counters", timeout=5).json()["triggers_by_dispatch_id"] == {"f": 1}
    assert requests.post(control + "nope", timeout=5).status_code == 404


# --- notifications -------------------------------------------------------------------------------------------


def test_notification_payloads_match_the_plugin(jenkins, receiver) -> None:
    jenkins.configure(notification={"url": receiver.url + "/jenkins/notify?token=SECRET"})
    post(jenkins, "job/team/job/app/job/deploy/buildWithParameters", {"DISPATCH_ID": "n1", "VERSION": "7"})
    assert jenkins.wait_until(lambda: len(receiver.requests) == 4, timeout=5)
    phases = [r["json"]["build"]["phase"] for r in receiver.requests]
    assert phases == ["QUEUED", "STARTED", "COMPLETED", "FINALIZED"]
    first, completed = receiver.requests[0], receiver.requests[2]
    assert first["path"] == "/jenkins/notify?token=SECRET"
    assert first["headers"]["Content-Type"] == "application/json;charset=UTF-8"
    assert list(first["json"]) == ["name", "display_name", "url", "build"]
    assert first["json"]["name"] == "deploy" and first["json"]["url"] == "job/team/job/app/job/deploy/"
    build = first["json"]["build"]
    assert list(build) == ["full_url", "number", "queue_id", "timestamp", "duration", "phase", "url", "scm", "parameters", "log", "artifacts"]
    assert build["full_url"] == f"{jenkins.base_url}job/team/job/app/job/deploy/1/" and build["url"] == "job/team/job/app/job/deploy/1/"
    assert (build["number"], build["queue_id"], build["duration"], build["log"], build["artifacts"]) == (1, 1, 0, "", {})
    assert build["parameters"] == {"DISPATCH_ID": "n1", "VERSION": "7"}
    assert completed["json"]["build"]["status"] == "SUCCESS" and completed["json"]["build"]["duration"] > 0
    assert "status" not in receiver.requests[1]["json"]["build"]


def test_notification_basic_auth_booleans_and_opt_outs(jenkins, receiver) -> None:
    jenkins.configure(notification={"url": receiver.url.replace("http://", "http://jenkins:s3cret@") + "/hook"})
    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "quiet", "EMULATOR_NO_NOTIFY": "true"})
    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "loud", "FLAG": "true"})
    assert jenkins.wait_idle()
    assert jenkins.wait_until(lambda: len(receiver.requests) == 4)
    assert {r["json"]["build"]["parameters"]["DISPATCH_ID"] for r in receiver.requests} == {"loud"}
    assert receiver.requests[0]["json"]["build"]["parameters"]["FLAG"] == "true"
    assert receiver.requests[0]["headers"]["Authorization"] == "Basic amVua2luczpzM2NyZXQ="


def test_notifications_dropped_or_duplicated_by_seeded_chance(jenkins, receiver) -> None:
    jenkins.configure(notification={"url": receiver.url, "duplicate_probability": 1.0})
    post(jenkins, "job/nightly/build")
    assert jenkins.wait_idle() and jenkins.wait_until(lambda: len(receiver.requests) == 8)
    jenkins.configure(notification={"url": receiver.url, "drop_probability": 1.0})
    post(jenkins, "job/nightly/build")
    assert jenkins.wait_idle()
    time.sleep(0.1)
    assert len(receiver.requests) == 8 and jenkins.counters()["notifications"]["dropped"] == 4


DOWNSTREAM_JOBS = [
    {"path": "pipe/parent", "parameters": [{"name": "DISPATCH_ID"}, {"name": "VERSION"}], "duration_seconds": 0.4,
     "downstream": [{"job": "pipe/on-start", "when": "started", "pass_parameters": True},
                    {"job": "other/on-end", "when": "completed", "pass_parameters": True},
                    {"job": "pipe/plain", "when": "completed", "pass_parameters": False,
                     "parameters": {"VERSION": "fixed"}}]},
    {"path": "pipe/on-start", "parameters": [{"name": "DISPATCH_ID"}, {"name": "VERSION"}], "duration_seconds": 0.05,
     "result": "FAILURE"},
    {"path": "other/on-end", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.05},
    {"path": "pipe/plain", "parameters": [{"name": "DISPATCH_ID"}, {"name": "VERSION"}], "duration_seconds": 0.05},
]


def test_downstream_jobs_get_the_parents_parameters_and_notify_like_any_build(make_jenkins, receiver) -> None:
    jenkins = make_jenkins(jobs=DOWNSTREAM_JOBS, notification={"url": receiver.url + "/hook"})
    post(jenkins, "job/pipe/job/parent/buildWithParameters",
         {"DISPATCH_ID": "d-1", "VERSION": "7", "EMULATOR_RESULT": "UNSTABLE"})
    assert jenkins.wait_until(lambda: len(receiver.requests) == 16 and jenkins.wait_idle(0), timeout=10)
    [parent], [on_start], [on_end], [plain] = (jenkins.builds(p) for p in
                                               ("pipe/parent", "pipe/on-start", "other/on-end", "pipe/plain"))
    assert parent.result == "UNSTABLE"  # EMULATOR_* steer one build: they are no parameters, so never passed on
    assert on_start.result == "FAILURE" and on_end.result == "SUCCESS"
    values = {b.job.path: {d.name: v for d, v in b.parameters} for b in (on_start, on_end, plain)}
    assert values == {"pipe/on-start": {"DISPATCH_ID": "d-1", "VERSION": "7"},
                      "other/on-end": {"DISPATCH_ID": "d-1"},  # what the child does not declare is dropped
                      "pipe/plain": {"DISPATCH_ID": "", "VERSION": "fixed"}}
    # "started": queued when the parent starts, so it ran (and failed) while the parent was building.
    assert on_start.started + on_start.duration_ms / 1000 < parent.started + parent.duration_ms / 1000
    # "completed": queued when the parent ends, before the parent's COMPLETED notification (a publisher).
    assert on_end.started >= parent.started + parent.duration_ms / 1000 - 0.01
    by_job: dict[str, list[dict]] = {}
    for request in receiver.requests:
        by_job.setdefault(request["json"]["url"], []).append(request["json"])
    assert sorted(by_job) == ["job/other/job/on-end/", "job/pipe/job/on-start/", "job/pipe/job/parent/",
                              "job/pipe/job/plain/"]
    for url, payloads in by_job.items():
        assert [p["build"]["phase"] for p in payloads] == ["QUEUED", "STARTED", "COMPLETED", "FINALIZED"], url
        assert {p["name"] for p in payloads} == {url.rstrip("/").rsplit("/", 1)[1]}
        assert all(p["build"]["url"].startswith(url) for p in payloads)
    child = by_job["job/pipe/job/on-start/"]
    assert child[2]["build"]["status"] == "FAILURE"
    assert child[0]["build"]["parameters"] == {"DISPATCH_ID": "d-1", "VERSION": "7"}
    assert by_job["job/other/job/on-end/"][0]["build"]["parameters"] == {"DISPATCH_ID": "d-1"}


def test_downstream_can_be_set_through_the_control_api_and_is_checked(make_jenkins) -> None:
    jenkins = make_jenkins(jobs=DOWNSTREAM_JOBS[1:])
    control = jenkins.base_url + "_emulator/"
    spec = [{"job": "pipe/on-start", "when": "started", "pass_parameters": True}]
    answer = requests.post(control + "jobs", json={"path": "deploy", "downstream": spec}, timeout=5)
    assert answer.status_code == 200, answer.text
    assert requests.get(control + "state", timeout=5).json()["jobs"]["deploy"]["downstream"] == spec
    post(jenkins, "job/deploy/buildWithParameters", {"DISPATCH_ID": "d-2"})
    assert jenkins.wait_until(lambda: len(jenkins.builds("pipe/on-start")) == 1 and jenkins.wait_idle(0))
    assert {d.name: v for d, v in jenkins.builds("pipe/on-start")[0].parameters}["DISPATCH_ID"] == "d-2"
    for bad in ([{"job": "pipe/on-start", "when": "later"}], [{"when": "started"}], {"job": "x"},
                [{"job": "pipe/on-start", "parameters": ["A"]}]):
        answer = requests.post(control + "jobs", json={"path": "deploy", "downstream": bad}, timeout=5)
        assert answer.status_code == 400 and "downstream" in answer.json()["error"], (bad, answer.text)


# --- python-jenkins as a client ------------------------------------------------------------------------------


def test_python_jenkins_can_drive_it(jenkins) -> None:
    server = python_jenkins.Jenkins(jenkins.base_url, username="admin", password=ADMIN_TOKEN, timeout=5)
    assert server.get_whoami()["id"] == "admin"
    assert server.get_version() == "2.528"
    names = {job["fullname"] for job in server.get_all_jobs()}
    assert {"deploy", "team/app/deploy", "Test Job"} <= names
    info = server.get_job_info("team/app/deploy")
    assert info["property"][0]["parameterDefinitions"][0]["name"] == "DISPATCH_ID"
    queue_id = server.build_job("team/app/deploy", {"DISPATCH_ID": "pj", "VERSION": "1"})
    assert queue_id == 1
    assert jenkins.wait_until(lambda: (server.get_queue_item(queue_id).get("executable") or {}).get("number") == 1)
    assert jenkins.wait_until(lambda: server.get_build_info("team/app/deploy", 1)["result"] == "SUCCESS")
    with pytest.raises(python_jenkins.JenkinsException, match="does not exist"):
        server.get_job_info("missing")
    with pytest.raises(python_jenkins.JenkinsException):
        python_jenkins.Jenkins(jenkins.base_url, username="admin", password="wrong", timeout=5).get_whoami()
    # Password auth: python-jenkins fetches a crumb and keeps the session cookie.
    password_server = python_jenkins.Jenkins(jenkins.base_url, username="admin", password="admin-password", timeout=5)
    assert password_server.build_job("deploy", {"DISPATCH_ID": "pw"}) == 2


# --- the command line ----------------------------------------------------------------------------------------


# --- item names, whatever their case --------------------------------------------------------------------------


def test_items_are_found_whatever_the_case_of_their_names_like_jenkins(jenkins) -> None:
    """Jenkins.items and a folder's items are maps ordered by String.CASE_INSENSITIVE_ORDER (core Jenkins.java,
    cloudbees-folder AbstractFolder.java): /job/DEPLOY/ is job `deploy`, and answers under its own name."""
    info = get(jenkins, "job/DEPLOY/api/json").json()
    assert (info["name"], info["fullName"], info["url"]) == ("deploy", "deploy", f"{jenkins.base_url}job/deploy/")
    assert get(jenkins, "job/TEAM/job/App/job/Deploy/api/json").json()["fullName"] == "team/app/deploy"
    assert get(jenkins, "job/test%20JOB/api/json").status_code == 200
    assert get(jenkins, "job/DÉPLOIEMENT%20ÜNÏ/api/json").json()["fullName"] == "déploiement ünï"
    response = post(jenkins, "job/Deploy/buildWithParameters", {"DISPATCH_ID": "cased"})
    assert response.status_code == 201
    item = wait_json(jenkins, "queue/item/1/api/json", lambda d: d.get("executable"))
    assert item["task"]["url"] == f"{jenkins.base_url}job/deploy/"
    assert [b.number for b in jenkins.builds("deploy")] == [1]
    # Builds and stops go to the one job as well.
    assert get(jenkins, "job/DEPLOY/1/api/json").json()["url"] == f"{jenkins.base_url}job/deploy/1/"
    assert get(jenkins, "job/deploy2/api/json").status_code == 404


def test_a_second_item_differing_only_in_case_is_refused_like_jenkins(jenkins) -> None:
    """Jenkins refuses to create it ("A job already exists with the name"): a config or the control API cannot."""
    with pytest.raises(ValueError, match="already exists"):
        jenkins.add_job({"path": "DEPLOY", "parameters": ["DISPATCH_ID"]})
    answer = requests.post(jenkins.base_url + "_emulator/jobs", json={"path": "Team/App/Other"}, timeout=5)
    assert answer.status_code == 200 and answer.json() == {"path": "team/app/Other"}
    assert get(jenkins, "job/team/job/app/job/other/api/json").json()["fullName"] == "team/app/Other"
    changed = requests.post(jenkins.base_url + "_emulator/jobs", json={"path": "WAITING", "quiet_period_seconds": 1},
                            timeout=5)
    assert changed.json() == {"path": "waiting"}
