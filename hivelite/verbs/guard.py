"""The Python half of the protocol's enforcement: precise errors before anything is written.

The triggers enforce the same rules in the store; the guard exists so a caller
learns *which* rule it broke, and so a refused call never begins a write.
"""

from __future__ import annotations

from typing import TypeVar

from ..core.errors import ForbiddenRight, InvalidInput, InvalidState, NotFound
from ..core.protocol import (
    STATE_OF,
    SUBMITTED_VIA,
    TERMINAL,
    WAITING_OF,
    Move,
    State,
    WaitingOn,
    find_move,
    passage,
)
from ..store import TaskRow

Found = TypeVar("Found")


def found(row: Found | None, ref: str | int) -> Found:
    """The row, or ``404 not_found`` naming what was asked for."""
    if row is None:
        raise NotFound("no_such_task", f"no task {ref!r} in this store").about(ref)
    return row


def still_open(row: TaskRow) -> State:
    """The task's state, or ``409 task_closed`` once it is completed, rejected or cancelled."""
    state = STATE_OF.get(row.state) or State(row.state)
    if state in TERMINAL:
        raise InvalidState("task_closed", f"task {row.number} is {state.value}")
    return state


def check_move(
    state: State | str,
    waiting_on: WaitingOn | str | None,
    target: State,
    to_waiting: WaitingOn | None = None,
) -> Move:
    """The move from ``state`` to ``target``, or ``409 invalid_state`` saying why not."""
    source = state if isinstance(state, State) else STATE_OF.get(state) or State(state)
    if source in TERMINAL:
        raise InvalidState("task_closed", f"the task is {source.value}; it cannot change")
    current = (None if not waiting_on else waiting_on if isinstance(waiting_on, WaitingOn)
               else WAITING_OF.get(waiting_on) or WaitingOn(waiting_on))
    move = find_move(source, target, current, to_waiting)
    if move is None:
        where = f"{source.value}({current.value})" if current else source.value
        into = f"{target.value}({to_waiting.value})" if to_waiting else target.value
        raise InvalidState("no_such_move", f"no move from {where} to {into}")
    return move


def check_passage(state: State | str, target: State) -> list[str]:
    """The states a submission passes through from ``state`` to the judgement ``target``
    (its journal row's via), or ``409 invalid_state`` naming the move that is missing."""
    source = state if isinstance(state, State) else STATE_OF.get(state) or State(state)
    path = SUBMITTED_VIA.get(source)
    if path is None:  # only a holder's state leads there: say why not (closed, no move)
        check_move(source, None, State.verifying)
    via = [s.value for s in path or ()]
    if passage(source, via, target) is None:
        check_move(State.verifying, None, target)
    return via


def awaiting_owner(row: TaskRow, verb: str) -> None:
    """Approve and deny apply only to a task the gate held for the owner."""
    state = State(row.state)
    if state in TERMINAL:
        raise InvalidState("task_closed", f"task {row.number} is {state.value}; cannot {verb}")
    if state is not State.waiting or row.waiting_on != WaitingOn.owner_approval.value:
        what = f"waiting on {row.waiting_on}" if row.waiting_on else state.value
        raise InvalidState(
            "not_awaiting_owner",
            f"task {row.number} is {what}, not waiting on owner_approval; cannot {verb}",
        )


def cancellable(row: TaskRow) -> Move:
    """Cancel applies to the five open states before a result is in."""
    state = State(row.state)
    if state in TERMINAL:
        raise InvalidState("task_closed", f"task {row.number} is already {state.value}")
    move = find_move(state, State.cancelled, WaitingOn(row.waiting_on) if row.waiting_on else None)
    if move is None:
        raise InvalidState(
            "not_cancellable",
            f"task {row.number} is {state.value}: a result is awaiting a decision;"
            " decline or sign it off instead",
        )
    return move


MAX_REASON = 500
MAX_ANSWER = 4000


def asking(row: TaskRow, agent: str | None, owner: str) -> None:
    """Only a task paused on a question is answered: one on a person by the owner, one on
    an agent by the owner or any agent but its assignee (who asked it)."""
    state = State(row.state)
    if state in TERMINAL:
        raise InvalidState("task_closed", f"task {row.number} is {state.value}; cannot answer")
    if state is not State.waiting or row.waiting_on not in (WaitingOn.human.value,
                                                            WaitingOn.agent.value):
        what = f"waiting on {row.waiting_on}" if row.waiting_on else state.value
        raise InvalidState("not_asking", f"task {row.number} is {what}; only a task paused"
                           " on a question (waiting on human or agent) is answered")
    if agent is None:  # the owner answers every question
        return
    if row.waiting_on == WaitingOn.human.value:
        raise ForbiddenRight("not_permitted", f"task {row.number} waits on a person: only the"
                             f" owner {owner!r} answers it, not {agent}")
    if agent == row.assignee:
        raise ForbiddenRight("self_answer", f"{agent} asked task {row.number}'s question;"
                             " another agent or the owner answers it")


def answer_fits(text: object) -> str:
    """An answer: 1 to 4000 characters, not blank."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("answer_required", "text is required: the answer, 1-4000"
                           f" characters, not {text!r}", field="text")
    if len(text) > MAX_ANSWER:
        raise InvalidInput("answer_too_long", f"text is {len(text)} characters; at most"
                           f" {MAX_ANSWER}", field="text")
    return text


def reason_fits(reason: str | None, *, required: bool = False,
                field: str = "reason") -> str | None:
    """The reason to journal: at most 500 characters; blank counts as none given."""
    if reason is None or not reason.strip():
        if required:
            raise InvalidInput("reason_required", f"{field} is required here", field=field)
        return None
    if len(reason) > MAX_REASON:
        raise InvalidInput("reason_too_long",
                           f"{field} is {len(reason)} characters; at most {MAX_REASON}",
                           field=field)
    return reason


def holder(row: TaskRow, lease_id: str, token: int, agent: str | None, at: str,
           instance: str | None = None) -> str:
    """The holder's write is fenced: the lease id and token must be the live claim's, and
    the caller the agent that holds it, on the instance it claimed from (any session:
    a restarted process carries on with its lease)."""
    still_open(row)
    if row.lease_id is None or row.lease_id != lease_id or row.lease_token != token:
        raise InvalidState(
            "stale_claim",
            f"lease {lease_id} with token {token} is not task {row.number}'s current claim",
        )
    if row.lease_expires is not None and row.lease_expires <= at:
        raise InvalidState("stale_claim", f"lease {lease_id} expired at {row.lease_expires};"
                           " it returns to routed at the next write: claim the task to take"
                           " it back, with a new lease and token")
    if agent is not None and agent != row.lease_holder:
        raise ForbiddenRight("not_permitted", f"the claim on task {row.number} is"
                             f" {row.lease_holder}'s, not {agent}'s")
    held_from = row.lease_instance or ""
    if instance is not None and instance.casefold() != held_from.casefold():
        raise ForbiddenRight("not_permitted", f"the claim on task {row.number} is held from"
                             f" {held_from}, not {instance}")
    return row.lease_holder or ""


def claimable(row: TaskRow, agent: str, *, resume: bool = False) -> None:
    """Only the assignee claims, only a routed task (or, to resume, one paused mid-work)."""
    state = still_open(row)
    if row.lease_id is not None:
        raise InvalidState("task_claimed", f"task {row.number} is claimed by {row.lease_holder}"
                           f" until {row.lease_expires}")
    paused = state is State.waiting and row.waiting_on in (WaitingOn.human, WaitingOn.agent)
    if resume and not paused:
        raise InvalidState("task_not_open",
                           f"task {row.number} is {state.value}; only a task paused on a"
                           " human or agent resumes")
    if not resume and state is not State.routed:
        hint = "; it was paused, so resume it" if paused else ""
        raise InvalidState("task_not_open",
                           f"task {row.number} is {state.value}; only a routed task can be"
                           f" claimed{hint}")
    if agent != row.assignee:
        raise ForbiddenRight("not_permitted",
                             f"only the assignee {row.assignee} may claim task {row.number}")


def awaiting_decision(row: TaskRow) -> None:
    """Verdicts, sign-off and decline apply to a task in ``approval``."""
    state = still_open(row)
    if state is not State.approval:
        raise InvalidState("not_submitted",
                           f"task {row.number} is {state.value}; no result awaits a decision")
