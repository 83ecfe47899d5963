"""`stats`: counts per status, per controller and per job, the pauses in force and the live dispatchers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import DEFAULT_CONTROLLER
from ..operating.display import age
from ..operating.waiting import held_back
from ..store.queue import Pause
from .context import Context
from .output import print_json, print_table
from .pauses import pause_target, pause_text

JENKINS_WORDS = {"ok": "up", "unavailable": "down", "unknown": "-"}


def cmd_stats(ctx: Context, args) -> None:
    """`stats`: counts per status, per controller and per job, pauses and live dispatchers."""
    from ..operating.overview import controllers_of  # the web page's reads too

    stats = ctx.queue.stats()
    per_job = ctx.queue.stats_per_job()
    dispatchers = ctx.queue.dispatchers()
    pauses = ctx.queue.pauses()
    controllers = controllers_of(ctx.queue, ctx.settings, pauses, dispatchers)
    keys = ctx.queue.key_limits()
    if args.json:
        print_json({"totals": stats, "controllers": controllers, "jobs": per_job, "keys": keys,
                    "pauses": [p.as_dict() for p in pauses], "dispatchers": dispatchers})
        return
    _print_totals(stats)
    print(dispatchers_line(dispatchers))
    for pause in pauses:
        print(_pause_line(pause))
    if len(controllers) > 1 or any(c["controller"] != DEFAULT_CONTROLLER for c in controllers):
        _print_controllers(controllers)
    print()
    _print_jobs(per_job)
    if keys:  # the caps on concurrency keys, whatever the job or controller (docs/concurrency-keys.md)
        print()
        print_table([dict(k, held_back=held_back(paused=False, cap=k["max_in_flight"], in_flight=k["in_flight"],
                                                 pending=k["pending"])) for k in keys],
                    ["concurrency_key", "max_in_flight", "in_flight", "pending", "held_back"])


def _print_totals(stats: Mapping[str, Any]) -> None:
    print(
        f"pending {stats['pending']} (due {stats['due']})  processing {stats['processing']} "
        f"(lease expired {stats['leases_expired']})  oldest pending {age(stats['oldest_pending_seconds'])}"
    )
    print(
        f"last hour: completed {stats['completed_last_hour']}  failed {stats['failed_last_hour']}  "
        f"cancelled {stats['cancelled_last_hour']}   oldest open transaction {age(stats['oldest_transaction_seconds'])}"
    )


def _pause_line(pause: Pause) -> str:
    """A pause in force: of everything and of a whole controller in capitals, with how to lift it."""
    if pause.job_name is None and pause.controller is None:
        return (f"EVERYTHING IS PAUSED {pause_text(pause)}: nothing new is dispatched "
                "(`jenkins-dispatch resume` lifts it)")
    if pause.job_name is None:
        return (f"CONTROLLER {pause.controller} IS PAUSED {pause_text(pause)}: none of its rows is dispatched "
                f"(`jenkins-dispatch resume --controller {pause.controller}` lifts it)")
    return f"paused: {pause_target(pause.job_name, pause.controller)} {pause_text(pause)}"


def _in_flight(row: Mapping[str, Any]) -> str:
    """In flight against the cap: `3/5`, or `3/-` without one."""
    return f"{row['in_flight']}/{row['cap'] if row['cap'] is not None else '-'}"


def _print_controllers(controllers: Sequence[Mapping[str, Any]]) -> None:
    """Several controllers: each one's backlog, in flight against its own cap, and whether it is paused."""
    print()
    # "jenkins": its breaker as the live dispatchers last found it (their heartbeats; "-": none said).
    print_table([dict(c, in_flight=_in_flight(c), jenkins=JENKINS_WORDS[c["jenkins"]["status"]])
                 for c in controllers], ["controller", "pending", "due", "in_flight", "state", "jenkins"])
    for c in controllers:
        if c["note"]:
            print(c["note"])
        if c["jenkins"]["status"] == "unavailable":
            print(f"controller {c['controller']}: Jenkins unavailable since {c['jenkins']['since']}, as "
                  f"{c['jenkins']['seen_by']} found it: {c['jenkins']['reason']}")


def _print_jobs(per_job: Sequence[Mapping[str, Any]]) -> None:
    rows = [
        dict(r, in_flight=_in_flight(r), oldest_pending=age(r["oldest_pending_seconds"]),
             held_back=held_back(paused=r["paused"], cap=r["cap"], in_flight=r["in_flight"], pending=r["pending"],
                                 paused_on=r["paused_on"]))
        for r in per_job
    ]
    print_table(rows, ["job_name", "pending", "in_flight", "held_back", "completed_last_hour", "failed_last_hour",
                       "oldest_pending"], empty="no jobs")


def dispatchers_line(dispatchers: Sequence[Mapping[str, Any]]) -> str:
    """One line: the live dispatchers with the age and outcome of each one's last pass, or plainly none."""

    def last_pass(d: Mapping[str, Any]) -> str:
        detail = f" ({d['last_detail']})" if d.get("last_detail") else ""
        served = sorted(d.get("controllers") or ())
        # The controllers it serves, when that says more than "the default one".
        serves = f" [controllers {', '.join(served)}]" if served and served != [DEFAULT_CONTROLLER] else ""
        return f"{d['id']} {age(d['last_pass_seconds'])} ago: {d['last_outcome']}{detail}{serves}"

    live = [d for d in dispatchers if d["live"]]
    if live:
        return f"dispatchers: {len(live)} live - " + "; ".join(last_pass(d) for d in live)
    if dispatchers:
        return "dispatchers: none live; the last pass was " + last_pass(dispatchers[0])
    return "dispatchers: none live; no dispatcher has passed in the last day"


def add_stats_command(command) -> None:
    """`stats`, through ``command`` (``arguments.command_adder``)."""
    command("stats", cmd_stats, "queue counts, in flight per job vs cap, pauses, oldest pending age, live dispatchers")
