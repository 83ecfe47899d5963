"""``python -m jenkins_emulator [--host H] [--port P] [--config FILE]``: serve until interrupted."""

from __future__ import annotations

import argparse
import json
import sys
import threading

from . import JenkinsEmulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jenkins_emulator", description="A Jenkins emulator for tests and demos.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--config", help="JSON config file (shape: see the jenkins_emulator docstring)")
    args = parser.parse_args(argv)
    config = None
    if args.config:
        try:
            with open(args.config, encoding="utf-8") as handle:
                config = json.load(handle)
        except (OSError, ValueError) as exc:
            print(f"cannot read emulator config {args.config}: {exc}", file=sys.stderr)
            return 2
    emulator = JenkinsEmulator(config, host=args.host, port=args.port)
    try:
        base_url = emulator.start()
    except OSError as exc:
        print(f"cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    print(base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
