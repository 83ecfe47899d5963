"""``python -m jenkins_emulator [--host H] [--port P] [--config FILE] [--notify-url URL] [--controllers A,B]``: serve
until interrupted.

Owns the command line only: reading the config file, the start-up lines and exit codes; the emulator itself is
``server.JenkinsEmulator`` and the default config ``config.DEFAULT_CONFIG``.
"""

from __future__ import annotations

import argparse
import errno
import json
import re
import shlex
import sys
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .config import DEFAULT_CONFIG
from .server import JenkinsEmulator

PROG = "python -m jenkins_emulator"

EPILOG = """\
It prints its base URL as the first line of stdout, then who may log in and where notifications go.
Without --config: jobs deploy, build-app, nightly and team/app/deploy (each declares DISPATCH_ID),
user admin with API token admin-token (password admin), anonymous read allowed, no notifications.
--notify-url makes every build POST the Notification plugin's JSON to that URL, e.g.
http://127.0.0.1:8080/jenkins/notify?token=SECRET for `jenkins-dispatch serve` with WEBHOOK_SECRET=SECRET.
--controllers default,b runs one emulator per name, each a Jenkins of its own (its own URL, on --port, --port+1,
... or free ports with --port 0; its own jobs, queue, counters and /_emulator/ control, e.g. POST
/_emulator/restart to take it down), all from the same config: one "NAME URL" line each first, then the users and
notifications lines, then an `export` line that points jenkins-dispatch at them (JENKINS_URL for "default",
JENKINS_CONTROLLERS for the others).
The config file's shape is in the jenkins_emulator package docstring.
"""

# jenkins-dispatch's rule for a controller's name (its config.py), repeated here: the emulator imports only the
# standard library.
CONTROLLER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def credentials_line(config: dict[str, Any]) -> str:
    """Who may log in, as the start-up line shows it: these are test fixtures, not secrets."""
    users = []
    for name, spec in (config.get("users") or {}).items():
        ways = [f"API token {spec['api_token']}"] if spec.get("api_token") else []
        ways += [f"password {spec['password']}"] if spec.get("password") else []
        users.append(f"user {name}: {', '.join(ways) or 'no credentials'}")
    return "; ".join(users) or "no users (anonymous only)"


def notifications_line(config: dict[str, Any]) -> str:
    """Where builds send notifications; the URL without its query or user info, which may hold the webhook token."""
    raw = config.get("notification")
    url = raw.get("url") if isinstance(raw, dict) else raw
    if not url:
        return "notifications: off (--notify-url URL sends them)"
    parts = urlsplit(url)
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    return f"notifications: POST to {urlunsplit((parts.scheme, netloc, parts.path, '', ''))}"


def controllers_problem(names: list[str]) -> str | None:
    """What is wrong with the names given to --controllers, in jenkins-dispatch's terms; None if nothing."""
    for name in names:
        if not CONTROLLER_NAME.match(name):
            return (f"{name!r} is not a controller name: lower-case letters, digits, '_' and '-', starting with a "
                    "letter or digit, at most 64 characters")
    if len(set(names)) < len(names):
        return "a name is given twice"
    return None


def dispatch_env_line(config: dict[str, Any], urls: dict[str, str]) -> str:
    """The variables that point jenkins-dispatch at these controllers: "default" as JENKINS_URL & co., the others
    as JENKINS_CONTROLLERS; the config's first user with an API token logs in (a test fixture, not a secret)."""
    user, token = next(((name, spec["api_token"]) for name, spec in (config.get("users") or {}).items()
                        if spec.get("api_token")), (None, None))
    login = {"user": user, "api_token": token} if user else {}
    words = []
    if "default" in urls:
        words.append(f"JENKINS_URL={urls['default']}")
        words += [f"JENKINS_USER={user}", f"JENKINS_API_TOKEN={token}"] if user else []
    others = {name: {"url": url, **login} for name, url in urls.items() if name != "default"}
    if others:
        words.append("JENKINS_CONTROLLERS=" + shlex.quote(json.dumps(others)))
    return "export " + " ".join(words)  # pasted into a shell, it points jenkins-dispatch at them


def serve_forever(emulators: list[JenkinsEmulator]) -> None:
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        for emulator in emulators:
            emulator.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="A Jenkins emulator for tests and demos.", epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--config", help="JSON config file (shape: see the jenkins_emulator docstring)")
    parser.add_argument("--notify-url", metavar="URL",
                        help="send Notification-plugin callbacks for every build to URL (overrides the config's)")
    parser.add_argument("--controllers", metavar="NAME,NAME",
                        help="run one emulator per name, each on its own port (see below)")
    args = parser.parse_args(argv)
    names = args.controllers.split(",") if args.controllers is not None else []
    problem = controllers_problem(names) if args.controllers is not None else None
    if problem:
        print(f"{PROG}: error: --controllers {args.controllers}: {problem}", file=sys.stderr)
        return 2
    config: Any = DEFAULT_CONFIG
    where = "default config"
    if args.config:
        where = args.config
        try:
            with open(args.config, encoding="utf-8") as handle:
                config = json.load(handle)
        except (OSError, ValueError) as exc:
            print(f"{PROG}: error: cannot read {args.config}: {exc}", file=sys.stderr)
            return 2
    if args.notify_url and isinstance(config, dict):
        notification = config.get("notification")
        settings = dict(notification) if isinstance(notification, dict) else {}  # keep drop/duplicate settings
        config = {**config, "notification": {**settings, "url": args.notify_url}}
    try:
        emulators = [JenkinsEmulator(config, host=args.host, port=args.port + i if args.port else 0)
                     for i in range(max(len(names), 1))]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        print(f"{PROG}: error: {where}: {exc}", file=sys.stderr)
        return 2
    started: list[JenkinsEmulator] = []
    for emulator in emulators:
        try:
            emulator.start()
        except OSError as exc:
            for running in started:
                running.stop()
            taken = " (another process listens there: stop it, or choose another --port)" \
                if exc.errno == errno.EADDRINUSE else ""
            print(f"{PROG}: error: cannot listen on {args.host}:{emulator.port}: {exc.strerror or exc}{taken}",
                  file=sys.stderr)
            return 2
        started.append(emulator)
    first = emulators[0].config
    if names:
        urls = {name: emulator.base_url for name, emulator in zip(names, emulators, strict=True)}
        lines = [f"{name} {url}" for name, url in urls.items()]
        print(*lines, credentials_line(first), notifications_line(first), dispatch_env_line(first, urls), sep="\n",
              flush=True)
    else:
        print(emulators[0].base_url, credentials_line(first), notifications_line(first), sep="\n", flush=True)
    serve_forever(emulators)
    return 0

if __name__ == "__main__":
    sys.exit(main())
