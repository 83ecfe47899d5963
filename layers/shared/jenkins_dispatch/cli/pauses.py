"""`pause` and `resume`: hold back one job, a controller or everything until resumed, and say what still holds the
same rows back when one pause is lifted."""

from __future__ import annotations

from ..operating.display import when
from ..store.queue import Pause, ResumeResult
from .arguments import controller_name, job_name
from .context import Context, operator_name
from .output import print_json


def pause_text(pause) -> str:
    """Since when a pause holds, by whom and why: `since 2024-05-01 10:00:00 by ana@host: deploy freeze`."""
    who = f" by {pause.paused_by}" if pause.paused_by else ""
    why = f": {pause.reason}" if pause.reason else ""
    return f"since {when(pause.paused_at)}{who}{why}"


def pause_target(job: str | None, controller: str | None) -> str:
    """What a pause holds back, in words: `deploy`, `everything`, `deploy on eu`, `controller eu`."""
    if controller is None:
        return job or "everything"
    return f"{job} on {controller}" if job else f"controller {controller}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _resume_command(job: str | None, controller: str | None) -> str:
    """The `resume` that lifts the pause of ``job`` on ``controller``, quoted as the output shows it."""
    return ("`jenkins-dispatch resume" + (f" {job}" if job else "")
            + (f" --controller {controller}" if controller else "") + "`")


def cmd_pause(ctx: Context, args) -> None:
    """`pause [JOB] [--controller C]`: stop claiming one job (or every job), on one controller or on every
    one, until resumed. A controller given must be configured here: its rows fail at their first pass anyway."""
    if args.controller is not None:
        ctx.configured(args.controller)
    result = ctx.queue.pause(args.job, reason=args.reason, paused_by=operator_name(), controller=args.controller)
    if args.json:
        print_json(dict(result.as_dict(), created=result.created, changed=result.created, pending=result.pending))
        return
    target = pause_target(args.job, args.controller)
    if result.created:
        waiting = (f"no pending jobs of {target} now; any enqueued will wait" if args.job and result.pending == 0
                   else f"{_plural(result.pending, 'pending job')} wait")
        print(f"paused {target}: {waiting} until {_resume_command(args.job, args.controller)}; jobs already in "
              "Jenkins continue")
    else:
        print(f"{target} was already paused ({pause_text(result)}); nothing changed")
        if args.job and result.pending == 0:
            print(f"no pending jobs of {target} now")


def still_named_after_resume(pause: Pause, job: str | None, controller: str | None) -> bool:
    """Whether `resume [job] [--controller controller]` names ``pause``, left in force, on a line of its own: it
    holds back some of the same rows (the same job, ignoring case, and the same controller, where both say one)
    and is not the pause just lifted. After `resume` of everything, the pauses of single jobs are named together
    instead (``_paused_on_their_own``)."""
    if pause.controller is not None and controller is not None and pause.controller != controller:
        return False
    if pause.job_name is not None and job is not None and pause.job_name.lower() != job.lower():
        return False
    if (pause.job_name, pause.controller) == (job, controller):
        return False
    return not (job is None and controller is None and pause.job_name is not None)


def _resumed_line(args, result: ResumeResult) -> str:
    target = pause_target(args.job, args.controller)
    if result.resumed:
        return f"resumed {target}: {_plural(result.pending, 'pending job')} may be dispatched again"
    if args.job or args.controller:
        return f"{target} was not paused; nothing changed"
    return "everything was not paused (no pause of every job was in force); nothing changed"


def _paused_on_their_own(args, result: ResumeResult) -> str | None:
    """After `resume` of everything: the jobs still paused by pauses of their own, on one line."""
    own = [pause_target(p.job_name, p.controller) for p in result.still_paused if p.job_name is not None]
    if args.job or args.controller or not own:
        return None
    return f"still paused on their own: {', '.join(own)} (`jenkins-dispatch resume JOB` lifts each)"


def cmd_resume(ctx: Context, args) -> None:
    """`resume [JOB] [--controller C]`: lift a pause (the one given for that controller, or for every one)."""
    result = ctx.queue.resume(args.job, controller=args.controller)
    if args.json:
        print_json({"job_name": args.job, "everything": args.job is None, "controller": args.controller,
                    "resumed": result.resumed, "changed": result.resumed, "pending": result.pending,
                    "still_paused": [p.as_dict() for p in result.still_paused]})
        return
    print(_resumed_line(args, result))
    if args.job and result.pending == 0:
        print(f"no pending jobs of {pause_target(args.job, args.controller)} now")
    for pause in result.still_paused:  # what still holds the same rows back, and how to lift it
        if still_named_after_resume(pause, args.job, args.controller):
            print(f"{pause_target(pause.job_name, pause.controller)} is still paused ({pause_text(pause)}): "
                  f"{_resume_command(pause.job_name, pause.controller)} lifts it")
    if own := _paused_on_their_own(args, result):
        print(own)


def add_pause_and_resume(command) -> None:
    """`pause` and `resume`, through ``command`` (``arguments.command_adder``)."""
    p = command("pause", cmd_pause,
                "stop dispatching JOB (every job without one) from the next claim of every dispatcher, until "
                "`resume`; jobs already in Jenkins continue. Kept in the database. JOB need not have any row "
                "yet. Pausing a paused job changes nothing (and says so).")
    p.add_argument("job", nargs="?", type=job_name, metavar="JOB", help="exact job_name (default: everything)")
    p.add_argument("--reason", help="why, shown by stats, show and ls")
    p.add_argument("--controller", type=controller_name, metavar="C",
                   help="on this controller only, one configured here (without JOB: the whole controller, for "
                        "maintenance); default: on every controller")

    p = command("resume", cmd_resume,
                "lift the pause of JOB (without JOB: the pause of everything; jobs paused on their own stay "
                "paused); dispatchers wake at once. Resuming a job that is not paused changes nothing.")
    p.add_argument("job", nargs="?", metavar="JOB", help="exact job_name (default: everything)")
    p.add_argument("--controller", metavar="C",
                   help="the pause given for this controller (default: the pause of every controller); "
                        "each is lifted on its own")
