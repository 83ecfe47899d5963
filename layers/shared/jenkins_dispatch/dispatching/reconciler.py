"""The reconciler: processing rows whose lease expired — follow, adopt, re-send, settle.

A lease expires when nobody reported on a row for ``LEASE_SECONDS``: a dispatcher died mid-batch, a
trigger's answer was lost, the Notification plugin's callbacks never came. For each such row it asks
Jenkins, and:
- a known queue item or build is followed: progress recorded, the row settled from the build's result
  (``decisions.final_status``, as the webhook and `cancel` do), or the lease renewed while it runs;
- a queue item Jenkins accepted that vanished without a build (a person cancelled it and Jenkins has
  since forgotten it, or a restart lost it) is NOT sent again: the row fails saying so;
- a row with no trace is searched by its DISPATCH_ID (queue, then builds back to the claim) and adopted
  when found; only when nothing is there is it sent again with the SAME DISPATCH_ID — no attempt spent
  (Jenkins never saw the earlier one), at most ``MAX_RESENDS`` times — and held ``RESEND_QUIET_SECONDS``
  in Jenkins's queue, so an original that Jenkins acts on late merges with it instead of building twice;
- a re-sent row is watched: a second queue item with its DISPATCH_ID (a late original that arrived after
  the re-send left the queue) is cancelled while it is still queued, and recorded in the row's history;
- a person's cancel in Jenkins wins: after a first re-send, the queue ids below the re-send's are read back to
  the claim for a cancelled item of the dispatch (Jenkins lists only live items; a cancelled one is readable
  by its id for five minutes): if a person cancelled the original, the re-send is withdrawn while it still
  waits in Jenkins's queue, and the row fails saying so;
- a row an operator cancelled while its trigger was on its way is watched like a re-sent one: a late arrival
  of that trigger is cancelled (queued) or stopped (running), and written into the row's history; the row
  stays cancelled.

It never claims new work and never sends anything a second time without having searched first.

A read about one row that fails the way one request can (no answer in time, a 500) is weighed by the pass's
breaker as evidence about that row's job: the row waits for its next lease, and the pass goes on with the others
(their watches included) — unless the failures run across several jobs, which is Jenkins as a whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol

from ..config import DEFAULT_CONTROLLER, Settings
from ..errors import DispatchError, JenkinsError, JenkinsRequestFailed, SearchInconclusive
from ..jenkins.client import LOOK_BACK_ITEMS, CancelResult, JenkinsClient
from ..jenkins.jobs import job_path_error
from ..observability import MetricUnit, logger, metrics, subsegment
from ..store.dispatcher import DispatcherStore
from ..store.queue import LEGACY_DISPATCH_PREFIX, ClaimedJob, ExpiredLease
from ..store.rows import WatchedRow
from .breaker import Breaker
from .cancelling import settle_stopped, stop_dispatch
from .decisions import (
    Evidence,
    Followup,
    Next,
    build_error,
    final_status,
    follow_build,
    follow_queue_item,
    watch_window_seconds,
)

# A pass that found "not found" for a DISPATCH_ID looks once more after this pause: for a moment a
# queue item that just left the queue has no build yet, and must not be mistaken for a lost trigger.
SEARCH_RECHECK_SECONDS = 0.25
EXPIRED_PER_TAKE = 25


@dataclass
class Reconciled:
    """What the reconciler did in one pass, by kind."""
    checked: int = 0
    adopted: int = 0
    requeued: int = 0  # sent again (same DISPATCH_ID)
    settled: int = 0
    waiting: int = 0
    duplicates_cancelled: int = 0
    watching: int = 0  # recently finished re-sent rows whose re-send may still land: look again soon


class Tally(Protocol):
    """What the reconciler counts into: the pass's summary (dispatcher.PassSummary, which imports this module)."""
    reconciled: Reconciled
    completed: int
    failed: int


class Reconciler:
    """One pass's reconciliation, sharing the pass's queue, Jenkins client and summary."""

    def __init__(
        self,
        settings: Settings,
        queue: DispatcherStore,
        client: JenkinsClient,
        summary: Tally,  # the pass's PassSummary: completed / failed counts are shared with the claim side
        resend: Callable[[ClaimedJob, float], None],  # trigger and record one row (the dispatcher's path)
        log: Callable[..., None],
        breaker: Breaker,  # the pass's Jenkins: weighs each failed read
    ):
        self.settings = settings
        self.queue = queue
        self.client = client
        self.summary = summary
        self.counts: Reconciled = summary.reconciled
        self.resend = resend
        self.log = log
        self.breaker = breaker
        # The pass's controller: only its rows are taken (the client speaks to it alone).
        self.controller = settings.jenkins.name if settings.jenkins else DEFAULT_CONTROLLER
        # Looks back for a person's cancel share one HTTP timeout per pass: under a burst of lost answers they
        # must not hold up the pass (its watches of settled rows come only at the next pass's start).
        self._look_back_seconds = client.timeout_seconds

    def run(self, keep_going: Callable[[], bool]) -> bool:
        """Reconcile expired leases while ``keep_going()``; False if it had to stop early."""
        self._watch_recently_finished()
        while keep_going():
            with subsegment("db.take_expired_leases"):
                expired = self.queue.take_expired_leases(EXPIRED_PER_TAKE, controller=self.controller)
            self.counts.checked += len(expired)
            self.reconcile(expired)
            if len(expired) < EXPIRED_PER_TAKE:
                return True
        return False

    def reconcile(self, rows: list[ExpiredLease]) -> None:
        """Follow what Jenkins knows of each row; rows with no trace are searched once more, together,
        after a short pause, before anything is sent again. JenkinsError propagates (Jenkins-wide)."""
        not_found: list[ExpiredLease] = []
        with subsegment("jenkins.reconcile"):
            for row in rows:
                self._about_one_job(row.job_name, partial(self._look_at, row, not_found), (row.id, row.dispatch_id))
            if not_found:
                time.sleep(SEARCH_RECHECK_SECONDS)
            for row in not_found:
                self._about_one_job(row.job_name, partial(self._adopt_or_no_trace, row), (row.id, row.dispatch_id))

    def _adopt_or_no_trace(self, row: ExpiredLease) -> None:
        if not self._adopt(row):
            self._no_trace(row)

    def _look_at(self, row: ExpiredLease, not_found: list[ExpiredLease]) -> None:
        if error := job_path_error(row.job_name):
            self._fail(row, error)
            return
        if row.cancel_requested:
            self._carry_out_cancel(row)
            return
        if row.resends and self._watch_resent(row):
            return
        if row.build_number is not None:
            followup = follow_build(self.client.build(row.job_name, row.build_number))
        elif row.jenkins_queue_id is not None:
            followup = follow_queue_item(self.client.queue_item(row.jenkins_queue_id))
        else:
            followup = None
        if followup is None or followup.next is Next.SEARCH:
            if not self._adopt(row):
                not_found.append(row)
        else:
            self._follow(row, followup)

    def _about_one_job(self, job_name: str, look: Callable[[], object], noted: tuple[int, str] | None) -> None:
        """Run ``look``, a row's requests to Jenkins. A request that failed the way one request can is evidence
        about this job: the row is looked at again after its lease (``noted``: the row whose history says so) and
        the pass goes on. When it completes a run of failures across jobs, the breaker opens and the error
        propagates: Jenkins as a whole, the pass stops."""
        sent_at = self.breaker.now()
        try:
            look()
        except JenkinsRequestFailed as exc:
            if self.breaker.record_failure(job_name, Evidence.SUSPECT, str(exc), sent_at):
                raise
            self.counts.waiting += 1
            metrics.add_metric(name="JenkinsReadsFailed", unit=MetricUnit.Count, value=1)
            extra: dict[str, object] = {"job_name": job_name, "controller": self.controller, "reason": str(exc)}
            if noted is not None:
                extra.update(job_id=noted[0], dispatch_id=noted[1])
                self.queue.record_note(noted[0], noted[1], "jenkins_read_failed",
                                       f"could not read what Jenkins has of it ({exc}); looked at again after the lease")
            logger.warning("a read about one job failed; the pass goes on with the others", extra=extra)
            return
        if not self.breaker.is_open:
            self.breaker.record_success(sent_at)  # a success between failures: they were not in a row

    # ------------------------------------------------------------------ outcomes
    def _fail(self, row: ExpiredLease, error: str) -> None:
        if settled := self.queue.settle(row.id, row.dispatch_id, "failed", error=error, actor="reconciler"):
            metrics.observe_settled(row.job_name, settled.queue_wait_seconds, settled.build_seconds)
            self.counts.settled += 1
            self.summary.failed += 1
            self.log("failed (reconciler)", row, reason=error)

    def _record_started(self, row: ExpiredLease, followup: Followup) -> None:
        """The row's build has started (Jenkins says so; its notification may have been lost)."""
        self.queue.record_progress(row.id, row.dispatch_id, build_number=followup.build_number,
                                   build_url=followup.build_url, started=True, actor="reconciler")

    def _follow(self, row: ExpiredLease, followup: Followup) -> None:
        if followup.next is Next.WAIT:
            self.counts.waiting += 1
            if followup.build_number is not None and row.build_number is None:
                self._record_started(row, followup)
            return
        if followup.next is Next.PROGRESS:
            assert followup.build_number is not None  # follow_queue_item: PROGRESS names the build started
            self._record_started(row, followup)
            self.log("build started (seen by reconciler)", row, build_number=followup.build_number)
            # It may well have finished already: look now rather than after another lease.
            self._follow(replace(row, build_number=followup.build_number, build_url=followup.build_url),
                         follow_build(self.client.build(row.job_name, followup.build_number)))
            return
        if followup.next is Next.SETTLE:
            assert followup.result is not None  # follow_build: SETTLE carries the finished build's result
            self.settle_from_result(row, followup.result, followup.build_number, followup.build_url)
            return
        if followup.next is Next.FAIL:
            self._fail(row, followup.reason)
            return
        # Next.SEARCH after a PROGRESS look-up: the build vanished between two requests.
        if not self._adopt(row):
            time.sleep(SEARCH_RECHECK_SECONDS)
            if not self._adopt(row):
                self._no_trace(row)

    def settle_from_result(self, row: ExpiredLease, result: str, number: int | None, url: str | None) -> None:
        """Settle ``row`` from the result of its finished build (fenced on its dispatch)."""
        status = final_status(result, self.settings.unstable_is_success)
        if settled := self.queue.settle(row.id, row.dispatch_id, status, result=result,
                                        error=build_error(result, number, self.settings.unstable_is_success),
                                        build_number=number, build_url=url, actor="reconciler"):
            metrics.observe_settled(row.job_name, settled.queue_wait_seconds, settled.build_seconds)
            self.counts.settled += 1
            if status == "failed":
                self.summary.failed += 1
            else:
                self.summary.completed += 1
            self.log("settled (reconciler)", row, result=result, build_number=number, status=status)

    def _adopt(self, row: ExpiredLease) -> bool:
        """Look for the row's DISPATCH_ID in Jenkins; adopt (or settle) what is found."""
        since_ms = int(row.claimed_at.timestamp() * 1000) if row.claimed_at else None
        try:
            found = self.client.find_by_dispatch_id(row.job_name, row.dispatch_id, since_ms=since_ms)
        except SearchInconclusive as exc:
            # Absent or not, we cannot tell: sending again could run it twice. Look again next lease.
            metrics.add_metric(name="SearchInconclusive", unit=MetricUnit.Count, value=1)
            logger.warning("cannot tell whether Jenkins has this dispatch; will look again",
                           extra={"job_id": row.id, "dispatch_id": row.dispatch_id, "controller": self.controller,
                                  "reason": str(exc)})
            self.queue.record_note(row.id, row.dispatch_id, "search_inconclusive",
                                   f"cannot tell whether Jenkins has this dispatch ({exc}); not sent again, "
                                   "looked at again after the lease")
            self.counts.waiting += 1
            return True
        if found is None:
            return False
        self.counts.adopted += 1
        if found.build_number is not None and found.result is not None and not found.building:
            self.log("adopted a finished build", row, build_number=found.build_number)
            self.settle_from_result(row, found.result, found.build_number, found.build_url)
            return True
        # A build's JSON may name no queue item (no queueId): the row keeps the one it knew, if any.
        queue_id = found.queue_id if found.queue_id is not None else row.jenkins_queue_id
        seen = ([f"queue item {queue_id}"] if queue_id is not None else []) + (
            [f"build #{found.build_number}"] if found.build_number else [])
        self.queue.mark_triggered(row, queue_id, event="adopted", actor="reconciler",
                                  build_number=found.build_number, build_url=found.build_url,
                                  detail="found in Jenkins: " + ", ".join(seen))
        self.log("adopted", row, jenkins_queue_id=queue_id, build_number=found.build_number)
        return True

    def _no_trace(self, row: ExpiredLease) -> None:
        """Neither the queue nor the builds know this DISPATCH_ID (searched twice)."""
        if row.dispatch_id.startswith(LEGACY_DISPATCH_PREFIX):
            # Its lease ended with the cutover window (0008_cutover.sql): the old worker's result no longer counts.
            self._fail(row, "was still processing under the worker that ran before jenkins-dispatch when the cutover "
                            "window closed, and that worker reported no result; it sent no DISPATCH_ID, so its build "
                            "cannot be identified and it is not triggered again (check Jenkins; "
                            f"`jenkins-dispatch retry {row.id}` runs it if it never ran)")
            return
        if row.jenkins_queue_id is not None:
            # Jenkins accepted it, then it left the queue without a build: a person cancelled it (Jenkins
            # forgets a left item after ~5 minutes, or at a restart). Sending it again would overrule them.
            self._fail(row, f"Jenkins queue item {row.jenkins_queue_id} was accepted, then left the queue without "
                            "a build (cancelled in Jenkins, or lost in a restart); not sent again — "
                            f"`jenkins-dispatch retry {row.id}` runs it")
            return
        quiet = self.settings.resend_quiet_seconds
        resends = self.queue.record_resend(row, max_resends=self.settings.max_resends, quiet_seconds=quiet)
        if resends is None:
            if row.resends >= self.settings.max_resends:
                self._fail(row, f"sent {row.resends + 1} times with DISPATCH_ID {row.dispatch_id} and Jenkins never "
                                "showed a queue item or build for it: check that Jenkins receives our requests "
                                "(proxies, the job's queue plugins), then retry")
            else:
                self.log("lease taken over by another reconciler; leaving the row to it", row)
            return
        self.counts.requeued += 1
        job = ClaimedJob(id=row.id, job_name=row.job_name, parameters=row.parameters, attempts=row.attempts,
                         max_attempts=row.max_attempts, dispatch_id=row.dispatch_id)
        self.log("re-sending with the same DISPATCH_ID", job, resend=resends, quiet_seconds=quiet)
        self.resend(job, quiet)
        if self._keep_one_beside_the_re_send(row):
            return
        if row.resends == 0:  # before a first re-send nothing of ours cancelled an item of this dispatch
            self._honour_a_persons_cancel(row)

    def _keep_one_beside_the_re_send(self, row: ExpiredLease) -> bool:
        """Jenkins may act on the lost original between the search and the re-send: the original is then queued
        or building below the re-send, which waits RESEND_QUIET_SECONDS in Jenkins's queue and merges only with an
        original that comes after it — it would be a second build. So the dispatch is looked at once more, at once
        (``_watch_resent``): True when the row now follows the original's build and the re-send was withdrawn."""
        now = self.queue.get(row.id)
        if now["status"] != "processing" or now["dispatch_id"] != row.dispatch_id or now["jenkins_queue_id"] is None:
            return False  # the re-send was not taken, or the row moved on meanwhile
        return self._watch_resent(replace(row, resends=now["resends"], jenkins_queue_id=now["jenkins_queue_id"]))

    def _honour_a_persons_cancel(self, row: ExpiredLease) -> None:
        """The search found nothing: either Jenkins never queued the lost original, or it did and a person
        cancelled it before the search (Jenkins lists only live items). The re-send's queue id bounds where that
        original can be: a cancelled item of this dispatch below it was a person's doing, and overruling it would
        build what they stopped. The re-send, still held in Jenkins's queue, is then withdrawn."""
        if self._look_back_seconds <= 0:
            self.log("no time left in this pass to look for a person's cancel of the lost original", row)
            return
        now = self.queue.get(row.id)
        resent = now["jenkins_queue_id"]
        if now["status"] != "processing" or now["dispatch_id"] != row.dispatch_id or resent is None:
            return  # the re-send was not taken, or the row moved on meanwhile
        # How long before the re-send the dispatch began, by the database's clock (the lease the re-send's record
        # renewed ends one lease after it): the look back stops there, measured on Jenkins's clock.
        began = None
        if row.claimed_at is not None and now["lease_expires_at"] is not None:
            resent_at = now["lease_expires_at"] - timedelta(seconds=self.settings.lease_seconds)
            began = max(0, int((resent_at - row.claimed_at).total_seconds() * 1000))
        # Items our other rows hold need no look: each carries its own row's DISPATCH_ID.
        ours = self.queue.queue_ids_between(resent - 1 - LOOK_BACK_ITEMS, resent)
        started = time.monotonic()
        try:
            cancelled = self.client.cancelled_item_with(row.job_name, row.dispatch_id, below=resent,
                                                        began_ms_before=began, skip=ours,
                                                        seconds=self._look_back_seconds)
        except (SearchInconclusive, JenkinsError) as exc:
            # The re-send was just taken, so Jenkins answers: this look only failed; the re-send stands.
            logger.warning("could not look for a person's cancel of the lost original",
                           extra={"job_id": row.id, "dispatch_id": row.dispatch_id, "controller": self.controller,
                                  "reason": str(exc)})
            return
        finally:
            self._look_back_seconds -= time.monotonic() - started
        if cancelled is None:
            return
        what = (f"its Jenkins queue item {cancelled} was cancelled in Jenkins (by a person: the trigger's answer had "
                "been lost, so the search after the lease could not see it)")
        if self.client.cancel_queue_item(resent) is not CancelResult.CANCELLED:
            # Already started: the row follows that build; the history says whose cancel it overran.
            self.queue.record_note(row.id, row.dispatch_id, "duplicate_seen",
                                   f"{what}; its re-send, queue item {resent}, had already left the queue")
            return
        self._fail(row, f"{what}; its re-send, queue item {resent}, was withdrawn before it ran — not sent again; "
                        f"`jenkins-dispatch retry {row.id}` runs it")

    def _carry_out_cancel(self, row: ExpiredLease) -> None:
        """An operator cancelled the row while its trigger was in flight. Its lease has run out, so that
        request has ended: whatever Jenkins has of it is cancelled or stopped; nothing at all → cancelled."""
        since_ms = int(row.claimed_at.timestamp() * 1000) if row.claimed_at else None
        try:
            stopped = stop_dispatch(self.client, row.job_name, row.dispatch_id, row.jenkins_queue_id,
                                    row.build_number, since_ms=since_ms)
        except JenkinsError:
            raise  # Jenkins as a whole: the pass stops
        except DispatchError as exc:  # this row only (Jenkins refused the cancel, or the search gave up)
            self.counts.waiting += 1
            logger.warning("could not carry out a requested cancel yet; will try again after the lease",
                           extra={"job_id": row.id, "dispatch_id": row.dispatch_id, "controller": self.controller,
                                  "reason": str(exc)})
            return
        if not stopped.found:
            # Its trigger's answer never came: Jenkins may still act on it (_watch_recently_finished).
            stopped = replace(stopped, note="nothing of it in Jenkins so far; a late arrival is cancelled when seen")
        status = settle_stopped(self.queue, row.id, row.dispatch_id, stopped,
                                "cancelled by operator while its trigger was in flight", actor="reconciler",
                                unstable_is_success=self.settings.unstable_is_success)
        if status is not None:
            self.counts.settled += 1
            self.summary.failed += status == "failed"
            self.summary.completed += status == "completed"
            self.log("requested cancel carried out", row, status=status, jenkins=stopped.note)

    def _watch_resent(self, row: ExpiredLease) -> bool:
        """A re-sent dispatch can exist twice in Jenkins: the re-send, and its original acted on late. Keep one.

        - A build with the DISPATCH_ID exists (the original ran): every queued item of it is a duplicate —
          the re-send included — and is cancelled; the row follows that build (True: handled here).
        - No build yet: one queued item stays (the row's own, else the oldest), the others are cancelled.
        """
        since_ms = int(row.claimed_at.timestamp() * 1000) if row.claimed_at else None
        items = self.client.queued_items_with(row.job_name, row.dispatch_id)
        try:
            built = self.client.find_build_by_dispatch_id(row.job_name, row.dispatch_id, since_ms=since_ms)
        except SearchInconclusive:
            built = None
        if built is None:
            keep = row.jenkins_queue_id if row.jenkins_queue_id in items else (items[0] if items else None)
            self._cancel_items(row.id, row.dispatch_id, [item for item in items if item != keep],
                               "a second item with this DISPATCH_ID")
            return False
        self._cancel_items(row.id, row.dispatch_id, items,
                           f"a copy of build #{built.build_number}, which already carries this DISPATCH_ID")
        if row.build_number == built.build_number:
            return False  # already following that build: the usual path settles it
        self.counts.adopted += 1
        if built.result is not None and not built.building:
            self.settle_from_result(row, built.result, built.build_number, built.build_url)
        else:
            queue_id = built.queue_id if built.queue_id is not None else row.jenkins_queue_id
            self.queue.mark_triggered(row, queue_id, event="adopted",
                                      actor="reconciler", build_number=built.build_number, build_url=built.build_url,
                                      detail=f"found in Jenkins: build #{built.build_number} (its late original)")
        self.log("adopted the build of a late original", row, build_number=built.build_number)
        return True

    def _watch_recently_finished(self) -> None:
        """Requests of a settled row's dispatch that may still be in Jenkins (``decisions.watch_window_seconds``), in
        the row's own controller's Jenkins (this pass's):

        - a re-send whose answer was lost can land after its row settled (the original built meanwhile): its queued
          items are cancelled;
        - an operator's cancel of a row whose trigger was on its way settled it `cancelled` once the lease showed
          nothing in Jenkins, but Jenkins may act on that trigger later still: whatever carries the row's
          DISPATCH_ID is cancelled (queued) or stopped (running), and the row's history says what was done; the
          row itself stays cancelled, and is left once a late arrival was handled.
        """
        window = watch_window_seconds(self.settings.lease_seconds, self.settings.resend_quiet_seconds,
                                      self.client.timeout_seconds)
        for row in self.queue.recently_finished_watched(window, controller=self.controller):
            self.counts.watching += 1
            # Watched every pass while the window lasts: a failed look is logged, not written into the history.
            self._about_one_job(row["job_name"], partial(self._watch_one, row), None)

    def _watch_one(self, row: WatchedRow) -> None:
        if row["cancelled_in_flight"]:
            self._stop_late_arrival(row)
            return
        items = self.client.queued_items_with(row["job_name"], row["dispatch_id"])
        self._cancel_items(row["id"], row["dispatch_id"], items, "a re-send that landed after its job had finished")

    def _stop_late_arrival(self, row: WatchedRow) -> None:
        job_name, dispatch_id = row["job_name"], row["dispatch_id"]
        for item in self.client.queued_items_with(job_name, dispatch_id):
            if self.client.cancel_queue_item(item) is CancelResult.CANCELLED:
                self._late_arrival(row, "late_trigger_cancelled",
                                   f"cancelled Jenkins queue item {item}: the trigger of this cancelled job reached "
                                   "Jenkins after the cancel")
                return
        # Builds after the queue: an item that starts between the two reads is found here.
        claimed_at = row["claimed_at"]
        since_ms = int(claimed_at.timestamp() * 1000) if isinstance(claimed_at, datetime) else None
        try:
            built = self.client.find_build_by_dispatch_id(job_name, dispatch_id, since_ms=since_ms)
        except SearchInconclusive:
            return  # looked at again next pass
        if built is None:
            return
        assert built.build_number is not None  # a build found among the job's builds has its number
        if built.building:
            self.client.stop_build(job_name, built.build_number)
            self._late_arrival(row, "late_build_stopped",
                               f"asked Jenkins to stop build #{built.build_number}, which the trigger of this "
                               "cancelled job started after the cancel")
        else:
            self._late_arrival(row, "late_build_seen",
                               f"build #{built.build_number} ran after the cancel ({built.result}): the trigger "
                               "reached Jenkins late and the build ended before it was seen")

    def _late_arrival(self, row: WatchedRow, event: str, detail: str) -> None:
        metrics.add_metric(name="LateArrivalsAfterCancel", unit=MetricUnit.Count, value=1)
        self.queue.record_note(row["id"], row["dispatch_id"], event, detail)
        logger.warning(detail, extra={"job_id": row["id"], "dispatch_id": row["dispatch_id"],
                                      "controller": self.controller})

    def _cancel_items(self, job_id: int, dispatch_id: str, items: list[int], what: str) -> None:
        """Cancel these queue items of one dispatch (copies), each written in the job's history."""
        for item in items:
            result = self.client.cancel_queue_item(item)
            cancelled = result is CancelResult.CANCELLED
            self.counts.duplicates_cancelled += cancelled
            metrics.add_metric(name="DuplicatesCancelled" if cancelled else "DuplicatesSeen",
                               unit=MetricUnit.Count, value=1)
            detail = (f"cancelled queue item {item}, {what}" if cancelled
                      else f"could not cancel queue item {item} ({result.name.lower()}), {what}")
            self.queue.record_note(job_id, dispatch_id, "duplicate_cancelled" if cancelled else "duplicate_seen",
                                   detail)
            logger.warning(detail, extra={"job_id": job_id, "dispatch_id": dispatch_id, "queue_item": item,
                                          "controller": self.controller})
