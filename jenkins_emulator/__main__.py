"""``python -m jenkins_emulator [--host H] [--port P] [--config FILE] [--notify-url URL]``: serve until interrupted.

Owns the command line only: reading the config file, the start-up lines and exit codes; the emulator itself is
``server.JenkinsEmulator`` and the default config ``config.DEFAULT_CONFIG``.
"""

from __future__ import annotations

import argparse
import errno
import json
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
The config file's shape is in the jenkins_emulator package docstring.
"""


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="A Jenkins emulator for tests and demos.", epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--config", help="JSON config file (shape: see the jenkins_emulator docstring)")
    parser.add_argument("--notify-url", metavar="URL",
                        help="send Notification-plugin callbacks for every build to URL (overrides the config's)")
    args = parser.parse_args(argv)
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
        emulator = JenkinsEmulator(config, host=args.host, port=args.port)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        print(f"{PROG}: error: {where}: {exc}", file=sys.stderr)
        return 2
    try:
        base_url = emulator.start()
    except OSError as exc:
        taken = " (another process listens there: stop it, or choose another --port)" \
            if exc.errno == errno.EADDRINUSE else ""
        print(f"{PROG}: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}{taken}", file=sys.stderr)
        return 2
    print(base_url, credentials_line(emulator.config), notifications_line(emulator.config), sep="\n", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
