"""Working under a claim: claim, resume, renew, release, checkpoint, update, pause.

A claim is a lease of 5-15 minutes with a lease id and a fencing token kept on
the task row; every holder write carries both, so a holder whose lease ran
out, or was replaced, is refused with ``stale_claim``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

from ..core.caller import Caller, require_agent, require_caller
from ..core.clock import format_ts, parse_ts
from ..core.errors import ForbiddenRight, InvalidInput, InvalidState, NotFound
from ..core.ids import new_lease_id
from ..core.models import (
    DEFERRED,
    Checkpoint,
    ClaimReceipt,
    NextClaim,
    Receipt,
    UpdateSummary,
    made,
)
from ..core.protocol import (
    DEFAULT_LEASE_MINUTES,
    MAX_LEASE_MINUTES,
    MAX_USAGE,
    MAX_WAIT,
    MIN_LEASE_MINUTES,
    SERVED_WAIT,
    Mode,
    State,
    WaitingOn,
)
from ..store import Held, Lease, Store, Taken, TaskRow, Writer
from ..store.contract import Pick, vetoed_tasks
from . import guard
from .authority import admit_controls
from .base import HiveBase, charge, invalid
from .retries import idempotent, idempotent_as
from .scope import inactive, outside_rights
from .unit import Unit, receipt, updated
from .views import question_of

_SUMMARY = TypeAdapter(UpdateSummary, config=DEFERRED)
T = TypeVar("T")


def lease_minutes(minutes: int) -> int:
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not (
        MIN_LEASE_MINUTES <= minutes <= MAX_LEASE_MINUTES
    ):
        raise InvalidInput("lease_minutes", f"a lease lasts {MIN_LEASE_MINUTES} to"
                           f" {MAX_LEASE_MINUTES} minutes, not {minutes!r}", field="minutes")
    return minutes


def usage_fits(tokens: int | None, usd_micros: int | None) -> None:
    for field, value in (("tokens", tokens), ("usd_micros", usd_micros)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value <= MAX_USAGE[field]):
            raise InvalidInput("invalid_usage", f"{field} must be an integer from 0 to"
                               f" {MAX_USAGE[field]:_} per write, not {value!r}", field=field)


def lease_expiry(now: datetime, minutes: int) -> str:
    """When a lease of ``minutes`` taken at ``now`` runs out, or ``422 invalid_input
    time_out_of_range`` when that is past the last instant a timestamp can hold (year 9999)."""
    try:
        return format_ts(now + timedelta(minutes=minutes))
    except OverflowError:
        raise InvalidInput("time_out_of_range", f"a {minutes}-minute lease from"
                           f" {format_ts(now)} would end after the year 9999; check the clock"
                           " ($HIVELITE_NOW)", field="minutes") from None


MAX_SKIP = 500
"""The most tasks one ``next`` may pass over."""


def skipped(skip: object) -> tuple[int, ...]:
    """The task numbers ``next`` passes over: whole numbers, at most ``MAX_SKIP`` of them,
    else ``422 invalid_input invalid_skip``."""
    if isinstance(skip, str | bytes) or not isinstance(skip, Sequence | set | frozenset):
        raise InvalidInput("invalid_skip", f"skip is a list of task numbers, not {skip!r}",
                           field="skip")
    numbers = tuple(skip)
    bad = [n for n in numbers if isinstance(n, bool) or not isinstance(n, int)
           or not 0 < n < 2**63]
    if bad or len(numbers) > MAX_SKIP:
        raise InvalidInput("invalid_skip", f"skip is at most {MAX_SKIP} task numbers, not"
                           f" {bad[0] if bad else f'{len(numbers)} of them'!r}",
                           field="skip")
    return tuple(sorted(set(numbers)))


def wait_seconds(wait: object) -> float:
    """How long ``next`` may wait for work: a number of seconds from 0 to ``MAX_WAIT``,
    else ``422 invalid_input invalid_wait`` (before anything is looked at)."""
    if (isinstance(wait, bool) or not isinstance(wait, int | float)
            or not math.isfinite(wait) or not 0 <= wait <= MAX_WAIT):
        raise InvalidInput("invalid_wait", f"wait is a number of seconds from 0 to"
                           f" {MAX_WAIT}, not {wait!r}", field="wait")
    return float(wait)


def served_wait(wait: object) -> float:
    """The wait a server grants one request: checked as :func:`wait_seconds` checks it,
    then cut to ``SERVED_WAIT`` (the caller asks again for longer)."""
    return min(wait_seconds(wait), float(SERVED_WAIT))


def until_ready(store: Store, wait: float, look: Callable[[], T]) -> T:
    """``look()`` for work; while it finds the queue empty (``404 queue_empty``) and
    ``wait`` seconds have not passed, wait for work on ``store`` and look again (once
    more when the time is up).

    The store listens before every look that a wait may follow (after the first look
    found nothing, before the second), so a task made ready between a look and the wait
    wakes it all the same, and one made ready before the listening began is seen by the
    look after it. A worker that finds work at once never listens, and the listening
    ends with the call: no thread keeps hearing of work it no longer waits for. The wait
    is the store's (PostgreSQL's notification, SQLite's short sleeps) and happens
    outside every transaction, so a waiting worker holds no lock."""
    try:
        return look()
    except NotFound as error:
        if error.reason != "queue_empty" or wait <= 0:
            raise
    deadline = time.monotonic() + wait
    store.listen()
    try:
        while True:
            try:
                return look()
            except NotFound as error:
                left = deadline - time.monotonic()
                if error.reason != "queue_empty" or left <= 0:
                    raise
            store.wait_for_work(left)
    finally:
        store.unlisten()


def fencing_token(token: object) -> int:
    """The fencing token a holder's write carries: an ``int``, nothing that merely equals
    one (``2.0``, ``True``, ``"2"``), or ``422 invalid_input invalid_token`` before any
    write begins."""
    if isinstance(token, bool) or not isinstance(token, int):
        raise InvalidInput("invalid_token", f"the fencing token is an integer, not"
                           f" {type(token).__name__} {token!r}", field="token")
    return token


def _start(hive: HiveBase, caller: Caller, ref: str | int, minutes: int, *,
           resume: bool) -> ClaimReceipt:
    verb = "resume" if resume else "claim"
    agent = require_agent(hive._caller(caller, verb), verb)
    lease_minutes(minutes)
    lease_id = new_lease_id()
    target = State.working if resume else State.accepted
    def body(unit: Unit) -> ClaimReceipt:
        row = unit.task(ref)  # a veto on it is refused here
        guard.claimable(row, agent.name, resume=resume)
        if not resume:
            _check_ready(hive, unit, row)
            return _lease(hive, unit, row, target, lease_id, minutes)
        receipt = _lease(hive, unit, row, target, lease_id, minutes)
        receipt.question = question_of(unit.tx.question(row.number))  # the answers, to read
        return receipt

    return hive._verb(agent, verb, _taking(
        agent, lease_id, minutes,
        (lambda tx, lease, at: tx.take_paused(ref, lease, at=at)) if resume else
        (lambda tx, lease, at: tx.take_task(ref, lease, at=at)), resumed=resume), body,
        about=ref)


def _taking(agent: Caller, lease_id: str, minutes: int,
            take: Callable[[Writer, Lease, str], Taken | None],
            empty: Callable[[], NotFound] | None = None, *, resumed: bool = False
            ) -> Callable[[Writer, datetime, str], ClaimReceipt | None]:
    """A claim's statement for :meth:`HiveBase._statement`: ``take`` under a lease of
    ``minutes`` from the write's time, answered as the claim's receipt (None: it took
    nothing). ``empty``: the answer when it took nothing and no control or enrolment
    refuses (``next``: the full run's pick would find nothing either, and need not look
    again). ``resumed``: a
    paused task taken again, working, its receipt with the question and its answers."""
    def statement(tx: Writer, now: datetime, at: str) -> ClaimReceipt | None:
        assert agent.instance is not None
        expires = lease_expiry(now, minutes)
        enrolled = tx.enrolments(agent.name)  # taken under it, within its projects and
        scope = enrolled[0] if enrolled else None  # roles (the rules hold the lease to it)
        taken = take(tx, Lease(
            lease_id, agent.name, agent.instance, agent.session, expires,
            scope=scope.seq if scope else None,
            projects=tuple(json.loads(scope.projects)) or None if scope else None,
            roles=tuple(json.loads(scope.roles)) if scope else ()), at)
        if taken is None:  # nothing to take: empty, unless a control or the enrolment
            if empty is not None:  # refuses (in the full run's words)
                admit_controls(tx.controls(), agent, Mode.claiming)
                if scope is None or not (inactive(scope, agent.name) or outside_rights(
                        scope, agent.name, "next", "tasks.work")):
                    raise empty()
            return None
        return made(ClaimReceipt, {
            "number": taken.number, "id": taken.id,
            "state": State.working if resumed else State.accepted,
            "waiting_on": None, "at": at, "seq": taken.seq, "lease_id": lease_id,
            "fencing_token": taken.token, "holder": agent.name, "instance": agent.instance,
            "session": agent.session, "expires_at": expires,
            "question": question_of(tx.question(taken.number)) if resumed else None})
    return statement


def _queue_empty(agent: str, project: str | None, label: str | None) -> NotFound:
    """``404 not_found queue_empty``: no task is ready for ``agent`` (as narrowed)."""
    narrowed = "".join(f" {k} {v!r}" for k, v in (("in project", project),
                                                   ("labelled", label)) if v)
    return NotFound("queue_empty", f"no task is ready for {agent}{narrowed}", agent=agent)


def _lease(hive: HiveBase, unit: Unit, row: TaskRow, target: State, lease_id: str,
           minutes: int) -> ClaimReceipt:
    expires = lease_expiry(unit.now, minutes)
    return unit.claim_receipt(unit.start_lease(
        row, target, lease_id=lease_id, token=row.lease_token + 1, expires=expires,
        reason="resumed" if target is State.working else "claimed"))


def _check_ready(hive: HiveBase, unit: Unit, row: TaskRow) -> None:
    """A claim takes a ready task: ``blocked`` while a dependency is not completed
    (naming each, with its state), ``attempts_exhausted`` when its attempts ran out."""
    if row.depends:
        waiting = [d for d in unit.tx.dependencies(row.number)
                   if d.state != State.completed.value]
        if waiting:
            named = ", ".join(f"{d.number} ({d.state})" for d in waiting)
            dead = [d for d in waiting if d.state in ("cancelled", "rejected")]
            hint = ("; a dependency that will never complete keeps it blocked: the owner"
                    " cancels it, or hands the work off again without it") if dead else ""
            raise InvalidState("blocked", f"task {row.number} waits on tasks not yet"
                               f" completed: {named}{hint}",
                               blocked_by=[d.number for d in waiting])
    if row.exhausted:
        raise InvalidState("attempts_exhausted", f"task {row.number}'s result came back"
                           f" {row.attempts} time(s) (failed, or sent back), its limit of"
                           f" {row.attempt_limit};"
                           f" the owner re-opens it (hivelite fields {row.number}"
                           " --max-attempts N --base-version V) or cancels it")


def claim_next(hive: HiveBase, caller: Caller, *, minutes: int = DEFAULT_LEASE_MINUTES,
               project: str | None = None, label: str | None = None,
               skip: Sequence[int] = (), wait: float = 0,
               request_id: str | None = None) -> NextClaim:
    """Claim the best ready task of the calling agent in one step: routed, assigned to
    it, every dependency completed, attempts left; the most pressing priority first,
    then the oldest, passing over the tasks numbered in ``skip`` (those a worker has
    already failed on in its run, say). Answers with the claim; its ``task`` is the
    task's full view, read when first asked for; ``404 not_found queue_empty`` when
    there is none.

    With ``wait`` (seconds, at most ``MAX_WAIT``), an empty queue is waited on: the claim
    is answered as soon as a task is ready for the agent, ``queue_empty`` once the time
    is up (:func:`until_ready`). A retry with the same ``request_id`` answers the claim
    the first call made, whatever its wait.

    One write transaction picks and claims, so any number of workers can call it at
    once: each task is claimed once, and no worker is refused a task it picked. The
    task's view is read after the commit, outside the write lock, and only when asked.
    """
    seconds, passed = wait_seconds(wait), skipped(skip)
    lease = until_ready(hive.store, seconds, lambda: _next_lease(
        hive, caller, minutes=minutes, project=project, label=label, skip=passed,
        request_id=request_id))
    return NextClaim.of(lease, hive.get)


@idempotent_as("next")
def _next_lease(hive: HiveBase, caller: Caller, *, minutes: int, project: str | None,
                label: str | None, skip: tuple[int, ...] = (),
                request_id: str | None = None) -> ClaimReceipt:
    """The writing part of :meth:`claim_next`: pick and claim, answer the lease."""
    agent = require_agent(hive._caller(caller, "next"), "next")
    lease_minutes(minutes)
    lease_id = new_lease_id()

    def body(unit: Unit) -> ClaimReceipt:
        vetoed = vetoed_tasks(unit.controls, agent.name)  # (passed over)
        enrolment = unit.enrolment()  # only what it covers: its projects, its roles
        row = unit.tx.next_ready(
            agent.name, project=project, label=label, skip=[*vetoed, *skip],
            projects=json.loads(enrolment.projects) or None if enrolment else None,
            roles=json.loads(enrolment.roles) if enrolment else ())
        if row is None:
            raise _queue_empty(agent.name, project, label)
        return _lease(hive, unit, row, State.accepted, lease_id, minutes)

    return hive._verb(agent, "next", _taking(
        agent, lease_id, minutes, lambda tx, lease, at: tx.take_next(
            lease, at=at, project=project, label=label, skip=skip),
        lambda: _queue_empty(agent.name, project, label)), body,
        about=Pick(agent.name, project, label, tuple(skip)))


@idempotent
def claim(hive: HiveBase, caller: Caller, ref: str | int, *,
          minutes: int = DEFAULT_LEASE_MINUTES, request_id: str | None = None) -> ClaimReceipt:
    """The assignee takes a routed task under a lease: routed -> accepted.

    Refused with ``task_claimed`` while another claim holds it, ``task_not_open``
    unless routed, ``blocked`` until every ``depends_on`` task is completed.
    """
    return _start(hive, caller, ref, minutes, resume=False)


@idempotent
def resume(hive: HiveBase, caller: Caller, ref: str | int, *,
           minutes: int = DEFAULT_LEASE_MINUTES, request_id: str | None = None) -> ClaimReceipt:
    """The answer arrived: the assignee claims a paused task again, with a new token."""
    return _start(hive, caller, ref, minutes, resume=True)


def lease(hive: HiveBase, caller: Caller, ref: str | int) -> ClaimReceipt:
    """The live claim again, for its holder alone (the agent, on the instance it claimed
    from): its lease id and fencing token, shown once at claim and needed by every
    holder write. Anyone else is refused (``403 not_permitted``); a task with no live
    claim is ``409 no_claim``. A read: nothing is written."""
    agent = require_agent(require_caller(caller, "lease"), "lease")
    at = format_ts(hive.clock())
    with hive.store.read() as reader:
        row = guard.found(reader.task(ref), ref)
    if row.lease_id is None or (row.lease_expires or "") <= at:
        raise InvalidState("no_claim", f"task {row.number} has no live claim").about(
            row.number)
    try:
        guard.holder(row, row.lease_id, row.lease_token, agent.name, at, agent.instance)
    except ForbiddenRight as error:
        raise error.about(row.number) from None
    return ClaimReceipt.model_construct(
        number=row.number, id=row.id, state=State(row.state), waiting_on=None,
        at=row.updated_at, seq=None, lease_id=row.lease_id, fencing_token=row.lease_token,
        holder=row.lease_holder or "", instance=row.lease_instance or "",
        session=row.lease_session, expires_at=row.lease_expires or "")


@idempotent
def renew(hive: HiveBase, caller: Caller, ref: str | int, *, lease_id: str, token: int,
          minutes: int = DEFAULT_LEASE_MINUTES, request_id: str | None = None) -> ClaimReceipt:
    """Extend the live claim; lease id and token stay the same."""
    agent = require_agent(hive._caller(caller, "renew"), "renew")
    token = fencing_token(token)
    lease_minutes(minutes)

    def body(unit: Unit) -> ClaimReceipt:
        row = unit.task(ref)
        hive._fence(unit, row, lease_id, token)
        expires = lease_expiry(unit.now, minutes)
        unit.tx.extend_lease(row.number, expires, at=unit.at)
        return unit.claim_receipt(updated(row, lease_expires=expires, updated_at=unit.at))

    def statement(tx: Writer, now: datetime, at: str) -> ClaimReceipt | None:
        held = tx.held(ref, lease_id=lease_id, token=token, holder=agent.name,
                       instance=agent.instance or "", at=at)
        if held is None:
            return None
        expires = lease_expiry(now, minutes)
        tx.extend_lease(held.number, expires, at=at)
        return made(ClaimReceipt, {
            "number": held.number, "id": held.id, "state": State(held.state),
            "waiting_on": None, "at": at, "seq": None, "lease_id": lease_id,
            "fencing_token": token, "holder": agent.name, "instance": agent.instance or "",
            "session": held.session, "expires_at": expires, "question": None})

    return hive._verb(agent, "renew", statement, body, about=ref)


@idempotent
def release(hive: HiveBase, caller: Caller, ref: str | int, *, lease_id: str | None = None,
            token: int | None = None, reason: str | None = None,
            request_id: str | None = None) -> Receipt:
    """Give the task back: the holder with its lease id and token, or the owner without.
    It is routed again."""
    caller = hive._caller(caller, "release")
    reason = guard.reason_fits(reason)
    if caller.is_owner:
        if lease_id is not None or token is not None:
            raise InvalidInput("owner_release", "the owner releases without a lease id"
                               " or token (they are the holder's)", field="lease_id")
    elif lease_id is None and token is None:
        raise ForbiddenRight("not_permitted", f"only the owner {hive.owner!r} releases a"
                             f" claim without its lease; {caller} may not (the holder"
                             " gives its lease id and fencing token)")
    elif lease_id is None or token is None:
        raise InvalidInput("lease_required", "the holder releases with its lease id and"
                           " fencing token", field="lease_id")
    if token is not None:
        token = fencing_token(token)

    def routed(tx: Writer, at: str, number: int, task_id: str, state: str,
               holder: str | None, held_with: int) -> Receipt:
        """The release's move: the claim ends and the task is routed again (the rules
        check the move), as its statement answers it."""
        tx.move(number, state, State.routed.value, at=at, actor=caller.name,
                reason=reason or "released", end_lease=True,
                detail={"holder": holder, "fencing_token": held_with})
        return receipt(number, task_id, State.routed, at)

    def body(unit: Unit) -> Receipt:
        row = unit.task(ref)
        if caller.is_owner:
            guard.still_open(row)
            if row.lease_id is None:
                if any(s.number == row.number for s in unit.swept):
                    return _swept(unit.tx, row, unit.at)  # the clock ended it just now
                raise InvalidState("not_claimed", f"task {row.number} has no claim")
        else:
            hive._fence(unit, row, str(lease_id), int(token or 0))
        row = unit.move(row, State.routed, actor=caller.name, reason=reason or "released",
                        end_lease=True, detail={"holder": row.lease_holder,
                                                "fencing_token": row.lease_token})
        return unit.receipt(row)

    if caller.is_owner:
        swept: list[TaskRow] = []

        def given_back(tx: Writer, now: datetime, at: str) -> Receipt | None:
            """The owner's release as its statement: a claimed task is routed again; one
            whose claim the clock ended in this write is answered as routed, the sweep its
            only write. A task with no claim takes the full run, which says why."""
            row = tx.lock_task(ref)
            if row is None:
                return None
            if row.lease_id is None:
                if row.state == State.routed.value and any(
                        s.number == row.number for s in swept):
                    return _swept(tx, row, at)
                return None
            return routed(tx, at, row.number, row.id, row.state, row.lease_holder,
                          row.lease_token)

        return hive._verb(caller, "release", given_back, body, about=ref, swept=swept)
    assert lease_id is not None and token is not None  # (a holder's: narrowed above)
    given_id, given_token = lease_id, token

    def statement(tx: Writer, now: datetime, at: str) -> Receipt | None:
        held = tx.held(ref, lease_id=given_id, token=given_token, holder=caller.name,
                       instance=caller.instance or "", at=at, scoped=False)
        return None if held is None else routed(
            tx, at, held.number, held.id, held.state, caller.name, given_token)

    return hive._verb(caller, "release", statement, body, about=ref)


def _swept(tx: Writer, row: TaskRow, at: str) -> Receipt:
    """The owner's release of a claim the clock ended in the same write: the task routed
    again, named by the sweep's row of it (the sweep may end other claims after it)."""
    answer = receipt(row.number, row.id, State.routed, at)
    answer.seq = tx.journal(row.number)[-1].seq
    return answer


def _start_work(hive: HiveBase, unit: Unit, row: TaskRow, why: str) -> TaskRow:
    """The holder's first progress moves accepted -> working (move 7)."""
    if row.state == State.accepted.value:
        return unit.move(row, State.working, actor=unit.who, reason=why)
    unit.tx.touch(row.number, unit.at)
    return updated(row, updated_at=unit.at)


def _started(tx: Writer, held: Held, at: str, actor: str, why: str) -> State:
    """:func:`_start_work` as a statement: accepted -> working (move 7) on the holder's
    first progress, else the task's time moves on; the state it leaves."""
    if held.state == State.accepted.value:
        tx.move(held.number, held.state, State.working.value, at=at, actor=actor, reason=why)
        return State.working
    tx.touch(held.number, at)
    return State(held.state)


def _holder_write(hive: HiveBase, caller: Caller, ref: str | int, verb: str, lease_id: str,
                  token: int, write: Callable[[Unit, TaskRow], TaskRow],
                  plain: Callable[[Writer, Held, str, str], tuple[State, WaitingOn | None]]
                  ) -> Receipt:
    """A write under the caller's live claim: fenced, then ``write``. ``plain``: the same
    write as its statements, given the task, the time and the holder's name after the
    fence's own statement (``Writer.held``), answering the state it left (see
    ``HiveBase._statement``)."""
    agent = require_agent(hive._caller(caller, verb), verb)
    token = fencing_token(token)

    def body(unit: Unit) -> Receipt:
        row = unit.task(ref)
        hive._fence(unit, row, lease_id, token)
        return unit.receipt(write(unit, row))

    def statement(tx: Writer, now: datetime, at: str) -> Receipt | None:
        held = tx.held(ref, lease_id=lease_id, token=token, holder=agent.name,
                       instance=agent.instance or "", at=at)
        if held is None:
            return None
        state, waiting = plain(tx, held, at, agent.name)
        return receipt(held.number, held.id, state, at, waiting)

    return hive._verb(agent, verb, statement, body, about=ref)


@idempotent
def checkpoint(hive: HiveBase, caller: Caller, ref: str | int, *, lease_id: str, token: int,
               progress: str, decisions: list[str] | None = None,
               files_touched: list[str] | None = None, next_steps: list[str] | None = None,
               open_questions: list[str] | None = None,
               request_id: str | None = None) -> Receipt:
    """Record where the work stands (``latest_checkpoint``); the first one starts the work."""
    try:
        checkpoint = Checkpoint(progress=progress, decisions=decisions or [],
                                files_touched=files_touched or [],
                                next_steps=next_steps or [],
                                open_questions=open_questions or [])
    except ValidationError as exc:
        raise invalid(exc, "checkpoint") from None
    body = checkpoint.model_dump_json()

    def write(unit: Unit, row: TaskRow) -> TaskRow:
        unit.tx.set_checkpoint(row.number, body)
        return _start_work(hive, unit, row, "checkpoint")

    def plain(tx: Writer, held: Held, at: str, who: str) -> tuple[State, WaitingOn | None]:
        tx.set_checkpoint(held.number, body)
        return _started(tx, held, at, who, "checkpoint"), None

    return _holder_write(hive, caller, ref, "checkpoint", lease_id, token, write, plain)


@idempotent
def update(hive: HiveBase, caller: Caller, ref: str | int, *, lease_id: str, token: int,
           summary: str, tokens: int | None = None,
           usd_micros: int | None = None, request_id: str | None = None) -> Receipt:
    """One line of progress (at most 300 characters), with optional usage."""
    try:
        _SUMMARY.validate_python(summary)
    except ValidationError as exc:
        from ..core.wording import expected

        raise InvalidInput("invalid_summary", "an update summary is one line of 1-300"
                           f" characters: {expected(exc.errors()[0])}",
                           field="summary") from None
    usage_fits(tokens, usd_micros)

    def write(unit: Unit, row: TaskRow) -> TaskRow:
        if tokens is not None or usd_micros is not None:
            hive._charge(unit, usage=True)
        unit.tx.add_update(row.number, at=unit.at, actor=unit.who, summary=summary,
                           tokens=tokens, usd_micros=usd_micros)
        return _start_work(hive, unit, row, "update")

    usage = tokens is not None or usd_micros is not None

    def plain(tx: Writer, held: Held, at: str, who: str) -> tuple[State, WaitingOn | None]:
        if usage:  # charged against the day's budget (the report that crosses it is kept)
            charge(tx, parse_ts(at), who, usage=True)
        tx.add_update(held.number, at=at, actor=who, summary=summary, tokens=tokens,
                      usd_micros=usd_micros)
        return _started(tx, held, at, who, "update"), None

    return _holder_write(hive, caller, ref, "update", lease_id, token, write, plain)


@idempotent
def pause(hive: HiveBase, caller: Caller, ref: str | int, *, lease_id: str, token: int, on: str,
          reason: str, request_id: str | None = None) -> Receipt:
    """Wait for an outside answer (``on`` human or agent); the claim ends."""
    if on not in (WaitingOn.human.value, WaitingOn.agent.value):
        raise InvalidInput("invalid_waiting_on", f"pause on 'human' or 'agent', not {on!r}",
                           field="on")
    why = str(guard.reason_fits(reason, required=True))

    def write(unit: Unit, row: TaskRow) -> TaskRow:
        row = _start_work(hive, unit, row, "pause")
        return unit.move(row, State.waiting, actor=unit.who, reason=why,
                         waiting_on=WaitingOn(on), end_lease=True)

    def plain(tx: Writer, held: Held, at: str, who: str) -> tuple[State, WaitingOn | None]:
        state = _started(tx, held, at, who, "pause")
        tx.move(held.number, state.value, State.waiting.value, at=at, actor=who, reason=why,
                waiting_on=on, end_lease=True)
        return State.waiting, WaitingOn(on)

    return _holder_write(hive, caller, ref, "pause", lease_id, token, write, plain)


__all__ = ["checkpoint", "claim", "claim_next", "lease", "pause", "release", "renew", "resume",
           "served_wait", "until_ready", "update", "wait_seconds"]
