"""A Jenkins emulator: a real HTTP server that answers like Jenkins (``docs/jenkins.md`` names, for each
request, the emulator code that copies Jenkins).

Test and demo tooling, never shipped in the Lambda layer. Standard library only. Each module imports only those
before it: ``config`` (defaults) ← ``model`` (state and rules; ``notify`` is its Notification plugin) ← ``views``
(JSON and pages; ``tree`` selects fields) ← ``control`` (``/_emulator/``; ``faults``) ← ``server`` (HTTP).

In-process::

    with JenkinsEmulator(config) as jenkins:      # started on 127.0.0.1, a free port
        client = SomeClient(jenkins.base_url, "admin", "admin-token")
        jenkins.add_fault(path="buildWithParameters$", drop_after_accept=True, times=1)
        jenkins.triggers_for(dispatch_id)          # distinct queue items created with that DISPATCH_ID
        jenkins.set_user("bot", permissions={"deny_build": ["team/*"]})   # per-job permissions, at run time

From a shell: ``python -m jenkins_emulator [--host H] [--port P] [--config FILE] [--notify-url URL]`` prints
its base URL as the first line of stdout, then its users and credentials, then where notifications go, and
serves until interrupted (``--help`` lists the default jobs and user: admin, API token admin-token). A config
that is not of the shape below is refused in one line (exit 2). Another process drives it through
``/_emulator/``.

``--controllers default,b`` runs several emulators from one command, one per name, as several Jenkins
controllers: each its own server on its own port (``--port``, ``--port``+1, ...; free ones with ``--port 0``), so
its own base URL, jobs, queue, counters and ``/_emulator/`` (``POST /_emulator/restart`` takes that one down), all
from the same config and ``--notify-url``. It prints one ``NAME URL`` line per controller, the users and
notifications lines, then ``export JENKINS_URL=… JENKINS_CONTROLLERS='{…}'``, the variables that point
jenkins-dispatch at them (``default`` as ``JENKINS_URL``, the others in ``JENKINS_CONTROLLERS``). The control API:

    GET  /_emulator/state            settings, queue, jobs with their builds, counters, faults
    GET  /_emulator/counters         triggers per DISPATCH_ID and per parameter value, peaks in flight,
                                     unavailable_answers (requests answered 503 during a restart window)
    POST /_emulator/faults           a fault object (or a list): see ``faults.Fault``
    POST /_emulator/faults/clear     removes every fault (the requests they hold go on)
    POST /_emulator/faults/release   lets the requests "hold" faults keep go on: Jenkins acts on them now
    POST /_emulator/config           any top-level setting below (also "notification", "quieting_down")
    POST /_emulator/jobs             a job object: changes an existing job (by "path") or adds one
    POST /_emulator/users            {"name": "dispatch", "permissions": {...}}: changes an existing user (any of
                                     "api_token", "password", "permissions") or adds one; answers
                                     {"name": ..., "permissions": ...}. E.g. grant everything back:
                                     {"name": "dispatch", "permissions": "all"}
    POST /_emulator/restart          {"window_seconds": 2, "kind": "restarting" | "starting"}
    POST /_emulator/counters/reset

Config file (JSON), every key optional. For the settings (the keys before "users"), the values shown are what a
config that leaves them out gets (``config.Settings`` defines them); "users", "folders", "jobs" and
"notification" are empty when left out, and the values shown for them are examples. Without a config,
``JenkinsEmulator()`` and ``python -m jenkins_emulator`` run ``DEFAULT_CONFIG`` (in ``config.py``): the jobs and
the user that ``--help`` names, and of the settings it sets ``executors`` to ``4`` and ``anonymous_read`` to
``true``::

    {
      "version": "2.528",                      # X-Jenkins header
      "context_path": "/",                     # e.g. "/jenkins/"
      "root_url": null,                        # Jenkins' configured URL (task/executable/build urls)
      "location_base": null,                   # e.g. "http://10.0.0.7:8080": a proxy-mangled Location host
      "executors": 2,
      "quiet_period_seconds": 0,               # Jenkins' default is 5; 0 keeps tests fast
      "left_item_retention_seconds": 300,      # how long a LeftItem stays readable (Jenkins: 300)
      "first_queue_id": 1,
      "crumb_mode": "password",                # "password": POSTs authenticated by password need a
                                               #   session-bound crumb, API tokens need none (Jenkins >= 2.96);
                                               # "always": even API-token POSTs need one (older Jenkins);
                                               # "off": no crumb issuer (404), nothing checked
      "anonymous_read": false,                 # false: anonymous requests get 403; true: anonymous may read,
                                               #   not POST
      "bad_credentials": "reject",             # "reject": a wrong password/token is a 401 (Jenkins's own realm);
                                               # "anonymous": the request goes on as anonymous, so it gets 403s
                                               #   (SSO realms that ignore unknown credentials, or a proxy that
                                               #   drops the Authorization header)
      "users": {"admin": {"api_token": "admin-token", "password": "admin", "permissions": "all"}},
                                               # permissions: "all" (the default);
                                               # "read": Overall/Read and Job/Read only: triggers 403, cancels 422;
                                               # or per-job denials on top of "all" (matrix-based security):
                                               #   {"deny_build": ["team/app/deploy", "secret/*"],
                                               #    "deny_read": ["hidden"], "deny_discover": ["private"]}
                                               # Each lists job or folder paths or fnmatch patterns over full
                                               # paths; a folder's denial covers what is inside it.
                                               # deny_build: build/buildWithParameters answer 403 "<user> is
                                               #   missing the Job/Build permission", X-Required-Permission:
                                               #   hudson.model.Item.Build, X-You-Are-Authenticated-As: <user>;
                                               # deny_read (Job/Discover kept): every URL of the job answers 403
                                               #   "Please login to access job <name>";
                                               # deny_discover (neither Read nor Discover): 404, as if absent.
                                               # Listings and queue/api/json leave unreadable jobs out.
                                               # whoAmI/api/json: {"anonymous", "authenticated", "authorities",
                                               #   "name"}; anonymous is "authenticated": true, as in Jenkins.
      "folders": ["team", {"path": "old", "disabled": true}],   # parents of jobs are created anyway
      "jobs": [{
        "path": "team/app/deploy",             # folders separated by "/"
        "kind": "freestyle",                   # or "pipeline" (concurrent by default)
        "parameters": [{"name": "DISPATCH_ID"}, {"name": "ENV", "default": "dev"},
                       {"name": "DRY_RUN", "type": "boolean", "default": false},
                       {"name": "TARGET", "type": "choice", "choices": ["a", "b"]}],
        "parameterized": true,                 # false drops the parameters: buildWithParameters → 400
        "disabled": false,                     # 409 "<fullName> is not buildable"
        "concurrent": false,                   # false: a second item is Blocked while a build runs
        "duration_seconds": 0.2,
        "result": "SUCCESS",
        "quiet_period_seconds": null,          # per-job override
        "refuse": false,                       # a queue plugin vetoes triggers: 302 to the job page
        "notify": true,                        # the Notification plugin is configured on this job
        "downstream": [                        # jobs each build of this one queues (Parameterized Trigger's
          {"job": "team/app/smoke",            #   "Trigger parameterized build on other projects", or a
           "when": "completed",                #   Pipeline's build(job: ..., parameters: ..., wait: false)):
           "pass_parameters": true,            # "started": right after its STARTED notification; "completed"
           "parameters": {"ENV": "qa"}}        #   (the default): when it ends, whatever its result, before its
        ]                                      #   COMPLETED notification. pass_parameters (default true) is
                                               #   "Current build parameters": every parameter of the build,
                                               #   DISPATCH_ID included, of which the child keeps those it
                                               #   declares; "parameters" adds or replaces values (EMULATOR_*
                                               #   names there steer the child's build). EMULATOR_* overrides of
                                               #   the parent are not passed on. The child is queued like any
                                               #   item (same quiet period, merged with an identical one), its
                                               #   builds send their own notifications (the child's name and
                                               #   url, the inherited DISPATCH_ID), and it does not count as a
                                               #   trigger in the counters (items_created counts it). A missing
                                               #   child job is skipped. Settable at run time through
                                               #   POST /_emulator/jobs {"path": ..., "downstream": [...]}.
      }],
      "notification": {                        # the Notification plugin (or just the URL as a string)
        "url": "http://127.0.0.1:8080/jenkins/notify?token=SECRET",   # or http://user:SECRET@host/...
        "drop_probability": 0.0, "duplicate_probability": 0.0, "seed": 0,
        "drop_jobs": [], "drop_phases": [], "timeout_seconds": 5
      }
    }

Per build, three request fields steer the emulator even when the job does not declare them:
``EMULATOR_RESULT`` (SUCCESS, UNSTABLE, FAILURE, NOT_BUILT, ABORTED), ``EMULATOR_DURATION`` (seconds) and
``EMULATOR_NO_NOTIFY=true`` (no notification at all for that build).
"""

from __future__ import annotations

from .config import DEFAULT_CONFIG
from .faults import Fault
from .server import JenkinsEmulator

__all__ = ["DEFAULT_CONFIG", "Fault", "JenkinsEmulator"]
