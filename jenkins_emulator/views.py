"""The emulator's answers: the JSON Jenkins exports for each object (Stapler's shapes: ``_class`` first, then
the properties in Jenkins' order) and the HTML and error pages it serves, rendered from the model.

Reads the model under its lock (held by the caller) and never changes it; knows nothing of URLs being routed,
of faults or of the control API.
"""

from __future__ import annotations

import html
import json
import uuid
from dataclasses import dataclass
from typing import Any

from .model import (
    FULL_PERMISSIONS,
    Build,
    Folder,
    Jenkins,
    Job,
    ParameterDefinition,
    Permissions,
    QueueItem,
    now_ms,
    parameter_text,
)
from .tree import TreeSyntaxError, parse_tree, prune

JOB_CLASSES = {
    "freestyle": ("hudson.model.FreeStyleProject", "hudson.model.FreeStyleBuild"),
    "pipeline": ("org.jenkinsci.plugins.workflow.job.WorkflowJob", "org.jenkinsci.plugins.workflow.job.WorkflowRun"),
}
FOLDER_CLASS = "com.cloudbees.hudson.plugins.folder.Folder"
COLORS = {"SUCCESS": "blue", "UNSTABLE": "yellow", "FAILURE": "red", "NOT_BUILT": "notbuilt", "ABORTED": "aborted"}
PARAMETER_CLASSES = {
    "string": ("hudson.model.StringParameterDefinition", "hudson.model.StringParameterValue"),
    "text": ("hudson.model.TextParameterDefinition", "hudson.model.StringParameterValue"),
    "choice": ("hudson.model.ChoiceParameterDefinition", "hudson.model.StringParameterValue"),
    "boolean": ("hudson.model.BooleanParameterDefinition", "hudson.model.BooleanParameterValue"),
    "password": ("hudson.model.PasswordParameterDefinition", "hudson.model.PasswordParameterValue"),
}


# ----------------------------------------------------------------------------------------------------------
# JSON exports of the model

def parameter_definition_json(definition: ParameterDefinition) -> dict[str, Any]:
    """One entry of ``ParametersDefinitionProperty.parameterDefinitions``."""
    definition_class, value_class = PARAMETER_CLASSES[definition.type]
    default_value: dict[str, Any] = {"_class": value_class, "name": definition.name}
    if definition.type != "password":
        default_value["value"] = definition.value_from(None)
    doc: dict[str, Any] = {"_class": definition_class, "defaultParameterValue": default_value, "description": "", "name": definition.name, "type": definition_class.rsplit(".", 1)[1]}
    if definition.type == "choice":
        doc["choices"] = list(definition.choices)
    return doc


def parameters_action(parameters: list[tuple[ParameterDefinition, Any]]) -> dict[str, Any]:
    """``ParametersAction``: the values a queue item or build runs with (password values left out)."""
    exported = []
    for definition, value in parameters:
        entry: dict[str, Any] = {"_class": PARAMETER_CLASSES[definition.type][1], "name": definition.name}
        if definition.type != "password":
            entry["value"] = value
        exported.append(entry)
    return {"_class": "hudson.model.ParametersAction", "parameters": exported}


def cause_action(user: str, count: int) -> dict[str, Any]:
    """``CauseAction``: one ``UserIdCause`` per merged request."""
    cause = {"_class": "hudson.model.Cause$UserIdCause", "shortDescription": f"Started by user {user}", "userId": user, "userName": user}
    return {"_class": "hudson.model.CauseAction", "causes": [dict(cause) for _ in range(count)]}


def _actions(parameters: list[tuple[ParameterDefinition, Any]], user: str, causes: int) -> list[dict[str, Any]]:
    actions = [parameters_action(parameters)] if parameters else []
    return [*actions, cause_action(user, causes)]


def job_color(jenkins: Jenkins, job: Job) -> str:
    """The ball color: the last finished result, ``_anime`` while building, ``disabled``, ``notbuilt``."""
    if not jenkins.is_buildable(job):
        return "disabled"
    finished = [b for b in job.builds.values() if not b.building]
    color = COLORS[max(finished, key=lambda b: b.number).result or "SUCCESS"] if finished else "notbuilt"
    return color + "_anime" if any(b.building for b in job.builds.values()) else color


def task_json(jenkins: Jenkins, job: Job) -> dict[str, Any]:
    """A queue item's ``task``: the job as a reference."""
    return {"_class": JOB_CLASSES[job.kind][0], "name": job.name, "url": jenkins.url_of(job), "color": job_color(jenkins, job)}


def queue_item_json(jenkins: Jenkins, item: QueueItem) -> dict[str, Any]:
    """``queue/item/N/api/json``: Waiting, Blocked, Buildable or LeftItem, with the fields each exports."""
    kind = {"waiting": "WaitingItem", "blocked": "BlockedItem", "buildable": "BuildableItem", "left": "LeftItem"}[item.state]
    params = "".join(f"\n{_short_description(d, v)}" for d, v in item.parameters if d.type != "password")
    doc: dict[str, Any] = {
        "_class": f"hudson.model.Queue${kind}",
        "actions": _actions(item.parameters, item.user, item.causes),
        "blocked": item.state == "blocked",
        "buildable": item.state == "buildable",
        "id": item.id,
        "inQueueSince": item.in_queue_since_ms,
        "params": params,
        "stuck": False,
        "task": task_json(jenkins, item.job),
        "url": f"queue/item/{item.id}/",
        "why": item.why if item.state != "left" else None,
    }
    if item.state == "waiting":
        doc["timestamp"] = int(item.due * 1000)
    elif item.state in ("blocked", "buildable"):
        doc["buildableStartMilliseconds"] = item.buildable_since_ms or now_ms()
        if item.state == "buildable":
            doc["pending"] = False
    else:
        doc["cancelled"] = item.cancelled
        doc["executable"] = None if item.build is None else {"_class": JOB_CLASSES[item.job.kind][1], "number": item.build.number, "url": jenkins.url_of(item.build)}
    return doc


def build_json(jenkins: Jenkins, build: Build) -> dict[str, Any]:
    """``job/…/N/api/json`` in the FreeStyle or Pipeline shape."""
    job = build.job
    doc: dict[str, Any] = {
        "_class": JOB_CLASSES[job.kind][1],
        "actions": _actions(build.parameters, build.user, build.causes),
        "artifacts": [],
        "building": build.building,
        "description": None,
        "displayName": f"#{build.number}",
        "duration": build.duration_ms,
        "estimatedDuration": int(job.duration_seconds * 1000),
        "executor": ({"_class": "hudson.model.Executor"} if build.building else None),
        "fullDisplayName": f"{' » '.join(job.path.split('/'))} #{build.number}",
        "id": str(build.number),
        "inProgress": build.building,
        "keepLog": False,
        "number": build.number,
        "queueId": build.queue_id,
        "result": build.result,
        "timestamp": build.timestamp_ms,
        "url": jenkins.url_of(build),
    }
    if job.kind == "freestyle":
        doc.update({"builtOn": "", "changeSet": {"_class": "hudson.scm.EmptyChangeLogSet", "items": [], "kind": None}, "culprits": []})
    else:
        doc.update({"changeSets": [], "culprits": []})
    return doc


def build_ref(jenkins: Jenkins, build: Build | None) -> dict[str, Any] | None:
    """A build as a reference (``lastBuild`` and the like), or None."""
    return None if build is None else {"_class": JOB_CLASSES[build.job.kind][1], "number": build.number, "url": jenkins.url_of(build)}


def job_json(jenkins: Jenkins, job: Job, tree: str | None = None) -> dict[str, Any]:
    """``builds`` holds the newest 100 (like Jenkins); ``allBuilds`` every one. Both are rendered only
    when the request's ``tree`` can select them, which keeps job lookups cheap on long histories."""
    builds = sorted(job.builds.values(), key=lambda b: -b.number)
    finished = [b for b in builds if not b.building]
    queued = next((i for i in sorted(jenkins.items.values(), key=lambda i: i.id) if i.job is job and i.state != "left"), None)

    def last(predicate: Any) -> dict[str, Any] | None:
        return build_ref(jenkins, next((b for b in finished if predicate(b)), None))

    properties = []
    if job.parameters:
        properties.append({"_class": "hudson.model.ParametersDefinitionProperty", "parameterDefinitions": [parameter_definition_json(d) for d in job.parameters]})
    return {
        "_class": JOB_CLASSES[job.kind][0],
        "actions": [{}, {"_class": "hudson.model.ParametersDefinitionProperty", "parameterDefinitions": [parameter_definition_json(d) for d in job.parameters]}] if job.parameters else [{}],
        "description": "",
        "displayName": job.name,
        "displayNameOrNull": None,
        "fullDisplayName": " » ".join(job.path.split("/")),
        "fullName": job.path,
        "name": job.name,
        "url": jenkins.url_of(job),
        "buildable": jenkins.is_buildable(job),
        "builds": [build_json(jenkins, b) for b in builds[:100]] if tree is None or "builds" in tree else [],
        "allBuilds": [build_json(jenkins, b) for b in builds] if tree and "allBuilds" in tree else [],
        "color": job_color(jenkins, job),
        "firstBuild": build_ref(jenkins, builds[-1] if builds else None),
        "healthReport": [],
        "inQueue": queued is not None,
        "keepDependencies": False,
        "lastBuild": build_ref(jenkins, builds[0] if builds else None),
        "lastCompletedBuild": last(lambda b: True),
        "lastFailedBuild": last(lambda b: b.result == "FAILURE"),
        "lastStableBuild": last(lambda b: b.result == "SUCCESS"),
        "lastSuccessfulBuild": last(lambda b: b.result in ("SUCCESS", "UNSTABLE")),
        "lastUnstableBuild": last(lambda b: b.result == "UNSTABLE"),
        "lastUnsuccessfulBuild": last(lambda b: b.result != "SUCCESS"),
        "nextBuildNumber": job.next_number,
        "property": properties,
        "queueItem": None if queued is None else queue_item_json(jenkins, queued),
        "concurrentBuild": job.concurrent,
        "disabled": job.disabled,
    }


def children_json(jenkins: Jenkins, prefix: str, permissions: Permissions = FULL_PERMISSIONS) -> list[dict[str, Any]]:
    """``ItemGroup.getItems``: only the items the user may read."""
    depth = 0 if not prefix else prefix.count("/") + 1
    children: list[dict[str, Any]] = []
    for path in sorted(set(jenkins.jobs) | set(jenkins.folders), key=str.lower):
        if path.count("/") != depth or (prefix and not path.startswith(prefix + "/")) or not permissions.may_read(path):
            continue
        thing = jenkins.find(path)
        if isinstance(thing, Job):
            children.append(job_json(jenkins, thing))
        elif thing is not None:
            children.append(folder_json(jenkins, thing, permissions))
    return children


def folder_json(jenkins: Jenkins, folder: Folder, permissions: Permissions = FULL_PERMISSIONS) -> dict[str, Any]:
    """A folder's ``api/json``, its ``jobs`` limited to what the user may read."""
    return {
        "_class": FOLDER_CLASS,
        "actions": [{}],
        "description": None,
        "displayName": folder.name,
        "displayNameOrNull": None,
        "fullDisplayName": " » ".join(folder.path.split("/")),
        "fullName": folder.path,
        "name": folder.name,
        "url": jenkins.url_of(folder),
        "healthReport": [],
        "jobs": children_json(jenkins, folder.path, permissions),
        "primaryView": {"_class": "hudson.model.AllView", "name": "All", "url": jenkins.url_of(folder)},
        "views": [{"_class": "hudson.model.AllView", "name": "All", "url": jenkins.url_of(folder)}],
    }


def root_json(jenkins: Jenkins, permissions: Permissions = FULL_PERMISSIONS) -> dict[str, Any]:
    """The root ``api/json`` (``hudson.model.Hudson``), its ``jobs`` limited to what the user may read."""
    return {
        "_class": "hudson.model.Hudson",
        "assignedLabels": [{"name": "built-in"}],
        "mode": "NORMAL",
        "nodeDescription": "the Jenkins controller's built-in node",
        "nodeName": "",
        "numExecutors": jenkins.settings.executors,
        "description": None,
        "jobs": children_json(jenkins, "", permissions),
        "overallLoad": {},
        "primaryView": {"_class": "hudson.model.AllView", "name": "all", "url": jenkins.base_url},
        "quietDownReason": None,
        "quietingDown": jenkins.quieting_down,
        "slaveAgentPort": -1,
        "unlabeledLoad": {"_class": "jenkins.model.UnlabeledLoadStatistics"},
        "url": jenkins.base_url,
        "useCrumbs": jenkins.settings.crumb_mode != "off",
        "useSecurity": True,
        "views": [{"_class": "hudson.model.AllView", "name": "all", "url": jenkins.base_url}],
    }


def queue_json(jenkins: Jenkins, permissions: Permissions = FULL_PERMISSIONS) -> dict[str, Any]:
    """``Queue.getItems`` lists what the user may read; ``getDiscoverableItems`` names what it may only discover."""
    queued = [i for i in sorted(jenkins.items.values(), key=lambda i: i.id) if i.state != "left"]
    items = [queue_item_json(jenkins, i) for i in queued if permissions.may_read(i.job.path)]
    discoverable = [{"_class": "hudson.model.Queue$StubItem", "task": {"_class": "hudson.model.Queue$StubTask", "name": i.job.name}}
                    for i in queued if permissions.may_discover(i.job.path) and not permissions.may_read(i.job.path)]
    return {"_class": "hudson.model.Queue", "discoverableItems": discoverable, "items": items}


def _short_description(definition: ParameterDefinition, value: Any) -> str:
    if definition.type == "boolean":
        return f"(BooleanParameterValue) {definition.name}='{parameter_text(value)}'"
    return f"{definition.name}={value}"


# ----------------------------------------------------------------------------------------------------------
# HTTP answers: pages, errors, and the JSON API with tree= and depth


@dataclass
class Response:
    """One HTTP answer; the server adds Jenkins' own headers (X-Jenkins, X-Jenkins-Session, ...) when writing it."""

    status: int
    body: bytes = b""
    content_type: str | None = "text/html;charset=utf-8"
    headers: list[tuple[str, str]] | None = None


def html_page(title: str, text: str) -> bytes:
    """A minimal Jenkins page: its title and one paragraph."""
    return f"<!DOCTYPE html><html><head><title>{title} [Jenkins]</title></head><body><h1>{title}</h1><p>{text}</p></body></html>".encode()


def not_found() -> Response:
    """Jenkins' 404 Oops page, also what an item the user may not discover looks like."""
    body = (b"<!DOCTYPE html><html><head><title>Jenkins</title></head><body><div id='error-description'><h1>Oops!</h1>"
            b"<h2>Not Found</h2><p>This page may not exist, or you may not have permission to see it.</p></div></body></html>")
    return Response(404, body)


def oops(status: int, message: str) -> Response:
    """``HttpResponses.error`` rendered as the Oops page (since 2.224), status kept."""
    body = (f"<!DOCTYPE html><html><head><title>Jenkins</title></head><body><h1>Oops!</h1><h2>{message}</h2>"
            f"<p>A problem occurred while processing the request.</p><p>Logging ID={uuid.uuid4()}</p></body></html>").encode()
    return Response(status, body)


def send_error(status: int, message: str) -> Response:
    """``sendError(status, message)``: Jetty's plain error page."""
    body = (f"<html><head><title>Error {status} {message}</title></head><body><h2>HTTP ERROR {status} {message}</h2>"
            f"<table><tr><th>MESSAGE:</th><td>{message}</td></tr></table></body></html>").encode()
    return Response(status, body)


def access_denied(message: str, headers: list[tuple[str, str]] | None = None) -> Response:
    """``AccessDeniedHandlerImpl``: an authenticated user lacking a permission gets 403 and ``accessDenied.jelly``."""
    body = (f"<!DOCTYPE html><html><head><title>Jenkins Login [Jenkins]</title></head><body><h1>Access Denied</h1>"
            f"<p class='error'>{html.escape(message)}</p></body></html>").encode()
    return Response(403, body, headers=headers)


# Permission.impliedBy chains, reported one X-Permission-Implied-By header each (AccessDeniedException3).
IMPLIED_BY = {
    "hudson.model.Item.Build": ("hudson.security.Permission.GenericUpdate", "hudson.security.Permission.GenericWrite", "hudson.model.Hudson.Administer"),
}


def missing_permission(user: str, permission_id: str, title: str) -> Response:
    """``AccessDeniedException3`` for an authenticated user: "<user> is missing the <Group/Name> permission", and
    the diagnosis headers ``reportAsHeaders`` adds (group headers off, as by default)."""
    headers = [("X-You-Are-Authenticated-As", user),
               ("X-You-Are-In-Group-Disabled", "JENKINS-39402: use -Dhudson.security.AccessDeniedException2.REPORT_GROUP_HEADERS=true or use /whoAmI to diagnose"),
               ("X-Required-Permission", permission_id)]
    headers += [("X-Permission-Implied-By", implied) for implied in IMPLIED_BY.get(permission_id, ("hudson.model.Hudson.Administer",))]
    return access_denied(f"{user} is missing the {title} permission", headers)


def unavailable_page(kind: str) -> Response:
    """The 503 page Jenkins serves while it is ``restarting`` or ``starting``."""
    if kind == "starting":
        page = html_page("Starting Jenkins", "Please wait while Jenkins is getting ready to work ... Your browser will reload automatically when Jenkins is ready.")
    else:
        page = html_page("Restarting Jenkins", "Please wait while Jenkins is restarting ... Your browser will reload automatically when Jenkins is ready.")
    return Response(503, page, headers=[("Expires", "0"), ("Cache-Control", "no-cache,no-store,must-revalidate")])


def json_response(doc: Any, status: int = 200) -> Response:
    """``doc`` as UTF-8 JSON."""
    return Response(status, json.dumps(doc, ensure_ascii=False).encode("utf-8"), "application/json;charset=utf-8")


def anonymous_denied(permission: str) -> Response:
    """What anonymous gets for a URL that needs ``permission``: 403 and the headers naming it."""
    body = html_page("Authentication required", "You are authenticated as: anonymous")
    headers = [("X-You-Are-Authenticated-As", "anonymous"), ("X-You-Are-In-Group-Disabled", "JENKINS-39402: use -Dhudson.security.AccessDeniedException2.REPORT_GROUP_HEADERS=true or use /whoAmI to diagnose"),
               ("X-Required-Permission", permission), ("X-Permission-Implied-By", "hudson.security.Permission.GenericRead")]
    return Response(403, body, headers=headers)


def requires_post() -> Response:
    """A GET on a URL that only takes POST: 405 with ``Allow: POST``."""
    return Response(405, html_page("This URL requires POST", "This URL requires POST"), headers=[("Allow", "POST")])


_REFERENCE_FIELDS = ("_class", "name", "url", "color")
_BUILD_REF_FIELDS = ("_class", "number", "url")


def _depth_zero(doc: dict[str, Any]) -> dict[str, Any]:
    """What Jenkins exports without ``tree``/``depth``: child jobs and builds only as references."""
    shaped = dict(doc)
    if "jobs" in shaped:
        shaped["jobs"] = [{k: job[k] for k in _REFERENCE_FIELDS if k in job} for job in shaped["jobs"]]
    if "builds" in shaped:
        shaped["builds"] = [{k: build[k] for k in _BUILD_REF_FIELDS} for build in shaped["builds"]]
    return shaped


def api_answer(doc: dict[str, Any], tree: str | None, shallow_children: bool = False) -> Response:
    """``…/api/json``: ``tree`` selects fields; without it, ``shallow_children`` exports children as references."""
    if tree:
        try:
            doc = prune(doc, parse_tree(tree))
        except (TreeSyntaxError, ValueError) as exc:
            return oops(500, f"Invalid tree: {exc}")
    elif shallow_children:
        doc = _depth_zero(doc)
    return json_response(doc)
