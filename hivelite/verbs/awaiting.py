"""``await``: wait for a task's outcome, or for the verdict on its submitted result.

What a caller waits for is read from the task each time it looks: its state for an
outcome, its journal for a verdict (the first move out of ``verifying`` or ``approval``
after the submission awaited, so a result sent back and submitted again still answers
the wait on the first one). A verdict awaited on an open task that has no result yet
waits for the task's first submission, then for its verdict (and, should the task close
without one, ends with that close). Nothing is written. The wait itself is the store's (its
notification or its short sleeps, as ``next`` waits), outside every transaction, and it
looks again at least every :data:`LOOK_EVERY` seconds, so a change the store does not
announce is seen all the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeVar

from ..core.caller import Caller, require_caller
from ..core.errors import ForbiddenRight, InvalidInput, InvalidState
from ..core.models import Awaited, Outcome, TaskView, Until
from ..core.protocol import TERMINAL, State, WaitingOn
from ..store import JournalRow, Store
from . import guard
from .claims import wait_seconds

if TYPE_CHECKING:
    from .base import HiveBase

T = TypeVar("T")
LOOK_EVERY = 1.0
"""The longest a waiting ``await`` goes without looking again (seconds)."""
UNTIL: tuple[Until, ...] = ("outcome", "verdict")
JUDGED = frozenset({State.verifying.value, State.approval.value})
"""A submitted result's states while it awaits its verdict."""
SUBMIT = 12
"""The move that submits a result (``working -> verifying``)."""
CLOSED: dict[State, Outcome] = {State.completed: "completed", State.rejected: "rejected",
                                State.cancelled: "cancelled"}


def until_of(until: object) -> Until:
    """What to wait for, or ``422 invalid_input invalid_until``."""
    if until not in UNTIL:
        raise InvalidInput("invalid_until", f"until is outcome or verdict, not {until!r}",
                           field="until")
    return "verdict" if until == "verdict" else "outcome"


def standing(view: TaskView) -> str:
    """Where a task stands, in one line for people and models."""
    task, claim = view.task, view.claim
    state, on = task.state, task.waiting_on
    if state is State.requested:
        return "handed off: the owner's gate decides"
    if state is State.waiting:
        if on is WaitingOn.owner_approval:
            return "held for the owner"
        asked = "a person" if on is WaitingOn.human else "another agent"
        return f"paused: {task.assignee} asks {asked} a question"
    if state is State.routed:
        if view.blocked_by:
            tasks = ", ".join(str(n) for n in view.blocked_by)
            return f"routed to {task.assignee}, waiting on task {tasks}"
        return f"routed to {task.assignee}, not claimed yet"
    if state in (State.accepted, State.working) and claim is not None:
        if claim.expired:
            return f"the claim of {claim.holder} ran out: routed again at the next write"
        doing = "working" if state is State.working else "claimed"
        return f"{doing}: claimed by {claim.holder} on {claim.instance}"
    if state is State.verifying:
        return "result submitted: being checked"
    if state is State.approval:
        counted = sum(1 for c in view.confirmations if c.counted and c.verdict == "accept")
        if view.threshold:
            return f"result awaits its verdict: {counted} of {view.threshold} confirmations"
        return "result awaits the owner's sign-off"
    if state is State.completed:
        return "completed"
    return f"{state.value}: {view.last_reason}" if view.last_reason else state.value


def _submission(rows: list[JournalRow], since: object, number: int,
                first: bool = False) -> int | None:
    """The seq of the submission a verdict is awaited on: ``since``, which must be one of
    the task's submissions, else its latest (its first, for a wait that began before any:
    ``first``); None while it has none."""
    submitted = [r.seq for r in rows if r.move == SUBMIT]
    if since is None:
        if not submitted:
            return None
        return submitted[0] if first else submitted[-1]
    if isinstance(since, bool) or not isinstance(since, int) or since not in submitted:
        raise InvalidInput("invalid_since", f"since names a submission of task {number}"
                           f" (the journal seq of its submit), not {since!r}", field="since")
    return since


def _verdict(rows: list[JournalRow], since: int) -> JournalRow | None:
    """The move that judged the result submitted at ``since``, once one has (the guard's
    judgement is in the submission's own row since migration 19: at ``since`` too)."""
    for row in rows:
        if (row.seq >= since and row.from_state in JUDGED and row.is_move
                and row.to_state not in JUDGED):
            return row
    return None


def look(hive: HiveBase, caller: Caller, ref: str | int, until: Until,
         since: object = None, *, first: bool = False) -> Awaited:
    """Where the task stands against what ``caller`` waits for, now. A verdict awaited
    with no submission to await: not settled while the task is open (``since`` None); on
    a closed task ``409 not_submitted`` (no verdict will come), unless the wait began
    while it was open (``first``: the wait awaits the task's first submission, and ends
    with the close)."""
    verdict, since_seq = None, None
    if until == "verdict":  # the journal before the view: a verdict seen stays settled
        with hive.store.read() as reader:
            row = guard.found(reader.task(ref), ref)
            rows = reader.journal(row.number)
        since_seq = _submission(rows, since, row.number, first)
        verdict = _verdict(rows, since_seq) if since_seq is not None else None
    view = hive.get(ref)
    state = view.task.state
    outcome: Outcome | None = None
    status = standing(view)
    if until == "verdict" and since_seq is None:  # no result yet: one may come
        settled = state in TERMINAL
        if settled and not first:
            raise InvalidState("not_submitted", f"task {view.number} is {state.value} with"
                               " no submitted result: no verdict will come",
                               number=view.number)
        outcome = CLOSED[state] if settled else None
        reason = view.last_reason if settled else None
        if not settled:
            status = f"{status}; no result submitted yet"
    elif until == "verdict":
        settled = verdict is not None
        if verdict is not None:
            outcome = "completed" if verdict.to_state == State.completed.value else "sent_back"
        reason = verdict.reason if verdict is not None else None
    else:
        settled = state in TERMINAL
        if settled:
            outcome = CLOSED[state]
        reason = view.last_reason if settled else None
    decision: Literal["approve", "sign_off"] | None = None
    if caller.is_owner and not settled:
        if state is State.waiting and view.task.waiting_on is WaitingOn.owner_approval:
            decision = "approve"
        elif state is State.approval:
            decision = "sign_off"
    return Awaited.model_construct(
        number=view.number, until=until, since=since_seq, settled=settled, outcome=outcome,
        reason=reason, status=status, decision=decision, view=view)


def await_task(hive: HiveBase, caller: Caller, ref: str | int, *, until: Until = "outcome",
               since: int | None = None, wait: float = 0) -> Awaited:
    """Where a task stands against what the caller waits for: its ``outcome`` (it closes)
    or the ``verdict`` on its submitted result (``since``: that submission's journal seq;
    default the latest, or, while it has none, the first to come). With ``wait``
    (seconds), waits that long at most for it to settle. A read: nothing is written, and
    any caller may wait on any task it may read."""
    return follow(hive, caller, ref, until=until, since=since, wait=wait)


def follow(hive: HiveBase, caller: Caller, ref: str | int, *, until: object = "outcome",
           since: object = None, wait: object = 0, first: bool = False) -> Awaited:
    """:func:`await_task`, for a wait that may have begun before (``first``: a verdict
    awaited since before the task's first submission, as a watch keeps it)."""
    checked = require_caller(caller, "await")
    if checked.is_owner and checked.name != hive.owner:
        raise ForbiddenRight("not_owner", f"this store belongs to {hive.owner!r};"
                             f" {checked.name!r} is not its owner")
    what = until_of(until)
    seconds = wait_seconds(wait)
    found = look(hive, checked, ref, what, since, first=first)
    # a verdict awaited before any submission: the first to come, whatever comes after
    before = first or (what == "verdict" and found.since is None)
    return looked_until(hive.store, seconds, found,
                        lambda: look(hive, checked, found.number, what, found.since,
                                     first=before),
                        lambda seen: seen.settled)


def looked_until(store: Store, seconds: float, first: T, again: Callable[[], T],
                 done: Callable[[T], bool]) -> T:
    """``first``, or, while it is not ``done`` and ``seconds`` have not passed, what
    ``again()`` finds after each change the store announces (and at least every
    :data:`LOOK_EVERY` seconds): what a wait ends with. The store listens only once a wait
    begins, and stops with it."""
    if done(first) or seconds <= 0:
        return first
    found, deadline = first, time.monotonic() + seconds
    store.listen()
    try:
        while (left := deadline - time.monotonic()) > 0:
            store.wait_for_work(min(left, LOOK_EVERY))
            found = again()
            if done(found):
                break
    finally:
        store.unlisten()
    return found


__all__ = ["LOOK_EVERY", "UNTIL", "await_task", "follow", "look", "looked_until",
           "standing", "until_of"]
