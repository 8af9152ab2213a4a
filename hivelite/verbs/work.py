"""``work``: the loop a script or a notebook runs for one agent, safely.

Claim the next ready task (``claim_next``), keep its lease alive from a background
thread while the body runs, submit what the body returns, or return a failed outcome
(the error as the reason) when the body raises. A task the run failed on, or whose
result the store sent straight back (its evidence refused), is passed over for the rest
of the run: the body would only do the same again, and each return counts an attempt, so
no run and no queue can spin on one task. ``KeyboardInterrupt`` at any point gives back
the task in hand and ends the run with its report. It uses only the verbs every store
face has, so it runs the same on a ``Hive`` (the file) and a ``Client`` (``hivelite
serve``).
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..core.caller import Caller
from ..core.clock import format_ts
from ..core.errors import HiveliteError, InvalidInput, NotFound
from ..core.models import ClaimReceipt, NextClaim, Receipt, TaskView, normal_instance
from ..core.protocol import MAX_WAIT, State
from .claims import MAX_SKIP
from .face import TaskFace

SUBMITTED = frozenset({"summary", "evidence", "provenance", "outcome", "tokens",
                       "usd_micros"})
"""What a body may return, as ``submit`` takes it (``summary`` and ``evidence`` needed)."""
Body = Callable[[TaskView], Mapping[str, Any]]


@dataclass
class Released:
    """A task the loop gave back, and why."""

    number: int
    reason: str


@dataclass
class WorkReport:
    """What one ``work`` run did."""

    submitted: list[Receipt] = field(default_factory=list)
    failed: list[Released] = field(default_factory=list)
    """Tasks the body failed on: each was returned as a failed outcome, which counts an
    attempt (its ``max_attempts`` retire it), and skipped for the rest of the run."""
    returned: list[Released] = field(default_factory=list)
    """Tasks whose result the store sent straight back (a policy refused its evidence),
    with the reason it gave: each counts an attempt, and is skipped for the rest of the
    run (the body would only return the same result again)."""
    released: list[Released] = field(default_factory=list)
    """Tasks given back without an attempt counted: the run was interrupted, or a failed
    outcome could not be returned either."""
    lost: list[int] = field(default_factory=list)
    """Tasks whose lease ended while the body ran (the owner held or stopped the agent, a
    renewal came too late): their results were not submitted."""
    interrupted: bool = False
    """The run ended on ``KeyboardInterrupt`` (the task in hand was released)."""

    @property
    def handled(self) -> set[int]:
        """Every task this run is done with: submitted, failed, sent back, released, lost."""
        return ({r.number for r in self.submitted} | set(self.skipped)
                | {r.number for r in self.released} | set(self.lost))

    @property
    def skipped(self) -> list[int]:
        """The tasks the run passed over: those it failed on, then those sent back."""
        return [f.number for f in self.failed] + [r.number for r in self.returned]

    def __repr__(self) -> str:
        back = f", returned {len(self.returned)}" if self.returned else ""
        ended = ", interrupted" if self.interrupted else ""
        return (f"WorkReport(submitted {len(self.submitted)}, failed {len(self.failed)}"
                f"{back}, released {len(self.released)}, lost {len(self.lost)}{ended})")


class _Keeper(threading.Thread):
    """Renews one lease every ``every`` seconds until stopped; a failed renewal ends it
    (the lease is gone: the owner's control, or the clock) and is kept for the loop."""

    def __init__(self, face: TaskFace, caller: Caller, got: NextClaim, minutes: int,
                 every: float) -> None:
        super().__init__(name=f"hivelite-renew-{got.number}", daemon=True)
        self.face, self.caller, self.got, self.minutes, self.every = (
            face, caller, got, minutes, every)
        self.renewals = 0
        self.failure: HiveliteError | None = None
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.every):
            try:
                self.face.renew(self.caller, self.got.number, lease_id=self.got.lease_id,
                                token=self.got.fencing_token, minutes=self.minutes)
                self.renewals += 1
            except HiveliteError as error:
                self.failure = error
                return

    def stop(self) -> None:
        self._done.set()
        if self.ident is not None:  # an interrupt may land before it started
            self.join()


def work(face: TaskFace, caller: Caller, body: Body, *, minutes: int = 10,
         project: str | None = None, label: str | None = None, limit: int | None = None,
         renew_every: float | None = None, wait: float = 0) -> WorkReport:
    """Run ``body`` on the ready tasks of ``caller`` (an agent with its instance), one at a
    time, until none is ready or ``limit`` tasks were taken.

    With ``wait`` (seconds) the run idles on an empty queue instead of ending: it takes
    the next task as soon as one is ready (``claim_next`` waiting, on PostgreSQL woken by
    the commit that routes it), and ends only once ``wait`` seconds pass with none;
    ``math.inf`` idles until interrupted (``KeyboardInterrupt`` while idle ends the run,
    with nothing held).

    ``body(task)`` gets the task's view and returns what ``submit`` takes: at least
    ``summary`` and ``evidence`` (also ``provenance``, ``outcome``, ``tokens``,
    ``usd_micros``). While it runs, the lease of ``minutes`` is renewed every
    ``renew_every`` seconds (default: a third of the lease). When the body raises (or
    returns something else), the task is returned as a failed outcome with the error as
    its reason, which counts an attempt (``max_attempts`` then retires it), and the run
    skips it and goes on with the next ready task: one failing task never starves the
    tasks behind it. A result the store refuses to take (usage over budget) is handled
    like a failure of the body; a result it takes and sends straight back (a policy
    refused its evidence) counts an attempt too, and the run skips that task
    (``report.returned``). On ``KeyboardInterrupt``, at any point of the run, the task in
    hand is released (no attempt counted) and the run ends with its report. Several
    workers may run this at once, in threads or processes, each with its own caller
    instance.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise InvalidInput("invalid_limit", "limit is a number of tasks, at least 1",
                           field="limit")
    if (isinstance(wait, bool) or not isinstance(wait, int | float) or math.isnan(wait)
            or wait < 0):
        raise InvalidInput("invalid_wait", f"wait is a number of seconds, at least 0 (inf:"
                           f" idle until interrupted), not {wait!r}", field="wait")
    every = renew_every if renew_every is not None else minutes * 60 / 3
    report = WorkReport()
    taken = 0
    while limit is None or taken < limit:
        got: NextClaim | None = None
        keeper: _Keeper | None = None
        asked = face.clock()
        try:
            try:  # the newest skips (each return counted an attempt: the rest stay bounded)
                got = _next(face, caller, minutes, project, label,
                            report.skipped[-MAX_SKIP:], wait)
            except NotFound as error:
                if error.reason == "queue_empty":
                    return report
                raise
            if got.number in report.handled:  # past the skip list's length: done with
                _give_back(face, caller, got, f"passed over: next offered it again after"
                           f" {MAX_SKIP} others this run", report)
                return report
            taken += 1
            keeper = _Keeper(face, caller, got, minutes, every)
            keeper.start()
            _one(face, caller, got, body, keeper, report)
        except KeyboardInterrupt:  # at any point: give back what is held, then report
            with _shielded():
                if keeper is not None:
                    keeper.stop()
                if got is None:  # the claim may have been made and its answer not heard
                    _give_back_strays(face, caller, report, asked + timedelta(
                        minutes=minutes))
                elif got.number not in report.handled:  # not yet submitted nor given back
                    _give_back(face, caller, got, "interrupted", report)
            report.interrupted = True
            return report
    return report


def _one(face: TaskFace, caller: Caller, got: NextClaim, body: Body, keeper: _Keeper,
         report: WorkReport) -> None:
    """Run the body on one claimed task and hand back what it returned."""
    try:
        answer = _submitted(body(got.task))
    except Exception as error:  # the body's failure is the task's, not the loop's
        keeper.stop()
        _failed(face, caller, got, f"the body failed: {type(error).__name__}: {error}",
                report)
        return
    keeper.stop()
    if keeper.failure is not None:
        report.lost.append(got.number)
        return
    try:
        receipt = face.submit(caller, got.number, lease_id=got.lease_id,
                              token=got.fencing_token, **answer)
    except HiveliteError as error:  # refused (its evidence, its usage): a failure
        _failed(face, caller, got, f"submit refused: {error.reason}: {error}", report)
        return
    if receipt.state is State.routed:  # sent straight back: an attempt, and skipped
        back = Released(got.number, "sent back")
        report.returned.append(back)  # before the read: an interrupt there loses nothing
        back.reason = _why_back(face, got.number)
    else:
        report.submitted.append(receipt)


def _why_back(face: TaskFace, number: int) -> str:
    """Why the store sent a result back: the reason its journal gave for the move."""
    with suppress(HiveliteError):
        for entry in reversed(face.history(number)):
            if entry.to_state is State.routed:
                return entry.reason or "sent back"
    return "sent back"


@contextmanager
def _shielded() -> Iterator[None]:
    """Run the block to its end through a second Ctrl-C (in the main thread, where Python
    delivers it): the task in hand is given back even when the user presses it twice."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    try:
        before = signal.signal(signal.SIGINT, lambda number, frame: pressed.append(number))
    except ValueError:  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _give_back_strays(face: TaskFace, caller: Caller, report: WorkReport,
                      since: datetime) -> None:
    """After an interrupt during ``claim_next``: give back the claim whose answer it cut
    off, found as a claim of this agent, from this instance and session, whose lease runs
    out no earlier than one taken when the call began (``since``: then plus the lease): a
    claim made before the run, by hand or by another process, is left alone."""
    mine = normal_instance(caller.instance) if caller.instance else None
    try:
        held = face.list(state="accepted", assignee=caller.name, limit=100).items
    except HiveliteError:
        return
    for view in held:
        claim = view.claim
        if claim is None or claim.holder != caller.name or mine is None or (
                normal_instance(claim.instance) != mine or claim.session != caller.session
                or claim.expires_at < format_ts(since)):
            continue
        try:
            lease = face.lease(caller, view.number)
        except HiveliteError:
            continue
        _give_back(face, caller, lease, "interrupted", report)


def _next(face: TaskFace, caller: Caller, minutes: int, project: str | None,
          label: str | None, skip: list[int], wait: float) -> NextClaim:
    """The next task, claimed; waited for up to ``wait`` seconds (however long that is:
    ``claim_next`` waits at most ``MAX_WAIT`` a call, so a longer wait asks again)."""
    deadline = time.monotonic() + wait
    while True:
        left = deadline - time.monotonic()
        try:
            return face.claim_next(caller, minutes=minutes, project=project, label=label,
                                   skip=skip, wait=max(0.0, min(float(MAX_WAIT), left)))
        except NotFound as error:
            if error.reason != "queue_empty" or time.monotonic() >= deadline:
                raise


def _submitted(answer: object) -> dict[str, Any]:
    """What the body returned, as ``submit``'s keywords; anything else is refused."""
    if not isinstance(answer, Mapping):
        raise InvalidInput("invalid_work_result", "the body returns what submit takes, e.g."
                           " {'summary': 'done', 'evidence': [{'kind': 'note', 'summary':"
                           f" 'checked'}}]}}, not {type(answer).__name__}", field="body")
    unknown = sorted(set(answer) - SUBMITTED)
    if unknown:
        raise InvalidInput("invalid_work_result", f"the body returned {', '.join(unknown)};"
                           f" submit takes {', '.join(sorted(SUBMITTED))}", field="body")
    missing = [key for key in ("summary", "evidence") if key not in answer]
    if missing:
        raise InvalidInput("invalid_work_result", "the body returned no"
                           f" {' and no '.join(missing)}; submit needs a summary and evidence",
                           field="body")
    return dict(answer)


def _failed(face: TaskFace, caller: Caller, got: NextClaim, why: str,
            report: WorkReport) -> None:
    """Return the task as a failed outcome (an attempt counted, the reason as its
    evidence) and skip it for the rest of the run; if even that is refused, give it back
    (no attempt counted), and skip it all the same."""
    reason = _cut(why)
    try:
        face.submit(caller, got.number, lease_id=got.lease_id, token=got.fencing_token,
                    summary=reason, evidence=[{"kind": "note", "summary": reason}],
                    outcome="failed")
    except HiveliteError:
        try:
            face.release(caller, got.number, lease_id=got.lease_id,
                         token=got.fencing_token, reason=reason)
        except HiveliteError:  # the lease had ended already: nothing is held
            report.lost.append(got.number)
            return
    report.failed.append(Released(got.number, reason))


def _give_back(face: TaskFace, caller: Caller, got: ClaimReceipt, why: str,
               report: WorkReport) -> None:
    reason = _cut(why)
    try:
        face.release(caller, got.number, lease_id=got.lease_id, token=got.fencing_token,
                     reason=reason)
    except HiveliteError:  # the lease had ended already: nothing is held
        report.lost.append(got.number)
        return
    report.released.append(Released(got.number, reason))


def _cut(why: str) -> str:
    """A reason as a summary and a journal take it: one piece of at most 500 characters."""
    return why if len(why) <= 500 else why[:499] + "…"
