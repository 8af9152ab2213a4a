"""The task protocol: states, terminal states, ``waiting_on`` values and the 22 moves.

This module is the single source of truth. The SQL triggers, the ``moves``
table, the guard, ``docs/protocol.md`` and the diagrams are all generated from
it (or tested against it); nothing else in the code lists states or moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    """Every state a task can be in (seed 000)."""

    requested = "requested"
    routed = "routed"
    accepted = "accepted"
    working = "working"
    waiting = "waiting"
    verifying = "verifying"
    approval = "approval"
    completed = "completed"
    rejected = "rejected"
    cancelled = "cancelled"


class WaitingOn(StrEnum):
    """What a ``waiting`` task waits on; set exactly when the state is ``waiting``."""

    owner_approval = "owner_approval"
    human = "human"
    agent = "agent"


PRIORITIES: tuple[str, ...] = ("urgent", "high", "normal", "low")
"""A task's priority, most pressing first: the order ``next`` takes ready tasks in (then
the oldest first). The store ranks them by their place here."""
MIN_LEASE_MINUTES, DEFAULT_LEASE_MINUTES, MAX_LEASE_MINUTES = 5, 10, 15
"""How long a claim's lease lasts (seed 004): 5 to 15 minutes, 10 unless asked."""
MAX_USAGE: dict[str, int] = {"tokens": 10**12, "usd_micros": 10**12}
"""The most one write may report of each kind of usage (DESIGN §10: integers only): a
million times a large model's context, a million dollars. Far below 2^63, so no day's or
task's total can overflow a 64-bit integer. The verbs refuse more (``invalid_usage``),
and so does the store: a usage row is an integer from 0 to this."""
SORTS: tuple[str, ...] = ("age", "priority", "updated")
"""The orders a listing takes: oldest first, most pressing first, most recently changed."""


class Actor(StrEnum):
    """Kinds of actor that may make a move."""

    gate = "gate"
    person = "person"
    assignee = "assignee"
    holder = "holder"
    clock = "clock"
    guard = "guard"
    verifier = "verifier"
    threshold = "threshold"


class Right(StrEnum):
    """What a token may do: seed 004's three rights, and the owner's, which is all of them."""

    read = "tasks.read"
    propose = "tasks.propose"
    work = "tasks.work"
    owner = "owner"


TOKEN_RIGHTS: tuple[Right, ...] = (Right.read, Right.propose, Right.work)
"""The rights an agent's token may carry (an owner token carries ``owner``)."""


class Who(StrEnum):
    """Who may call a verb: the face offers it to them, the verb refuses anyone else."""

    anyone = "anyone"
    """The owner or any agent whose token carries the right (reading)."""
    agent = "agent"
    """Any agent: a handoff of its own, an independent verdict."""
    assignee = "assignee"
    """The agent the task is assigned to (claiming it)."""
    holder = "holder"
    """The agent holding the live claim, on the instance it claimed from."""
    submitter = "submitter"
    """The agent that returned the result."""
    owner = "owner"
    """The store's owner."""


class Mode(StrEnum):
    """How the one write path admits a verb, before its body runs."""

    read = "read"
    """Writes nothing."""
    write = "write"
    """A write: a stopped agent is refused, the store's required plugins must be loaded."""
    claiming = "claiming"
    """Takes a lease: also refused while its agent is held, or its daily budget is used."""
    holder = "holder"
    """Writes under a lease: also refused while its agent is held."""
    authority = "authority"
    """The owner's own controls: never refused for a missing plugin (they ask none), so
    the owner can always stop an agent or mend the policy."""


TERMINAL: frozenset[State] = frozenset({State.completed, State.rejected, State.cancelled})

STATE_NOTES: dict[State, str] = {
    State.requested: "A handoff created the task; the owner's permission gate decides next.",
    State.routed: "The gate allowed it, or the owner approved it; the assignee can claim it.",
    State.accepted: "The assignee claimed it under a lease with a fencing token.",
    State.working: "The holder is doing the work and reporting progress.",
    State.waiting: "Paused until something outside the task happens; waiting_on says what.",
    State.verifying: "A result came back; its evidence is being checked (within one step).",
    State.approval: "Verified work waits for confirmations or the owner's sign-off.",
    State.completed: "Done; the result and its evidence are attached. Ends the task.",
    State.rejected: "Refused by the owner's rule, or denied by the owner. Ends the task.",
    State.cancelled: "Withdrawn by the owner before it finished. Ends the task.",
}

CONTROL_ENDINGS: dict[str, str] = {"hold": "held", "veto": "vetoed", "stop": "stopped"}
"""The owner's controls (DESIGN §10), each with the reason journaled on the move 8 or 9 by
which it ends a live claim, as expiry would."""
CLAIM_ENDINGS: dict[str, str] = {
    "released": "the holder gave it back, or the owner released it (or the reason they gave)",
    "expired": "its lease ran out; the clock ends it at the next write",
    "held": "the owner held its agent, or the instance it acts from",
    "vetoed": "the owner vetoed its agent on this task",
    "stopped": "the owner stopped its agent, its instance, or every agent",
}
"""Why a live claim ends without a result (moves 8 and 9, back to ``routed``): the journaled
reason, and what it means."""

WAITING_NOTES: dict[WaitingOn, str] = {
    WaitingOn.owner_approval: "The gate held the handoff; only the owner's decision moves it on.",
    WaitingOn.human: "The holder paused for a person's answer; the assignee claims again.",
    WaitingOn.agent: "The holder paused for another agent; the assignee claims again.",
}


@dataclass(frozen=True, slots=True)
class Move:
    """One allowed move between two states.

    ``from_waiting`` narrows a move out of ``waiting`` to those ``waiting_on``
    values (empty: any); ``to_waiting`` lists the values a move into
    ``waiting`` may set.
    """

    number: int
    name: str
    source: State
    target: State
    cause: str
    actors: tuple[Actor, ...]
    from_waiting: tuple[WaitingOn, ...] = ()
    to_waiting: tuple[WaitingOn, ...] = ()

    @property
    def pair(self) -> tuple[State, State]:
        return (self.source, self.target)


_S, _W, _A = State, WaitingOn, Actor
_PAUSED = (_W.human, _W.agent)

MOVES: tuple[Move, ...] = (
    Move(1, "route", _S.requested, _S.routed, "gate allows", (_A.gate,)),
    Move(2, "hold", _S.requested, _S.waiting, "gate holds for the owner", (_A.gate,),
         to_waiting=(_W.owner_approval,)),
    Move(3, "refuse", _S.requested, _S.rejected, "gate refuses (owner's rule)", (_A.gate,)),
    Move(4, "approve", _S.waiting, _S.routed, "owner approves", (_A.person,),
         from_waiting=(_W.owner_approval,)),
    Move(5, "deny", _S.waiting, _S.rejected, "owner denies", (_A.person,),
         from_waiting=(_W.owner_approval,)),
    Move(6, "claim", _S.routed, _S.accepted, "assignee claims: a lease with a fencing token",
         (_A.assignee,)),
    Move(7, "start", _S.accepted, _S.working, "holder's first checkpoint or update",
         (_A.holder,)),
    Move(8, "reopen_accepted", _S.accepted, _S.routed,
         "claim released, expired, vetoed or stopped", (_A.holder, _A.person, _A.clock)),
    Move(9, "reopen_working", _S.working, _S.routed,
         "claim released, expired, vetoed or stopped; latest_checkpoint is kept",
         (_A.holder, _A.person, _A.clock)),
    Move(10, "pause", _S.working, _S.waiting,
         "holder pauses on an outside answer; the claim ends", (_A.holder,),
         to_waiting=_PAUSED),
    Move(11, "resume", _S.waiting, _S.working,
         "the answer arrived; the assignee claims again (new token)", (_A.assignee,),
         from_waiting=_PAUSED),
    Move(12, "submit", _S.working, _S.verifying,
         "holder returns a result with evidence; the claim ends", (_A.holder,)),
    Move(13, "pass", _S.verifying, _S.completed,
         "evidence passes and the threshold needs no one", (_A.guard,)),
    Move(14, "await_approval", _S.verifying, _S.approval,
         "evidence passes; sign-off or confirmations needed", (_A.guard,)),
    Move(15, "bounce", _S.verifying, _S.routed,
         "evidence fails its checks; back to the assignee", (_A.guard,)),
    Move(16, "complete", _S.approval, _S.completed,
         "person signs off, or the auto-merge threshold is met", (_A.person, _A.threshold)),
    Move(17, "decline", _S.approval, _S.routed,
         "person declines, or a verifier rejects (reason required)", (_A.person, _A.verifier)),
    *(
        Move(18 + i, f"cancel_{state.value}", state, _S.cancelled,
             "withdrawn before it finished", (_A.person,))
        for i, state in enumerate(
            (_S.requested, _S.waiting, _S.routed, _S.accepted, _S.working)
        )
    ),
)

MOVES_BY_PAIR: dict[tuple[State, State], Move] = {m.pair: m for m in MOVES}
MOVES_BY_NAME: dict[str, Move] = {m.name: m for m in MOVES}
CANCELLABLE: frozenset[State] = frozenset(
    m.source for m in MOVES if m.target is State.cancelled
)


def find_move(
    source: State, target: State, from_waiting: WaitingOn | None = None,
    to_waiting: WaitingOn | None = None,
) -> Move | None:
    """The move from ``source`` to ``target`` under the given ``waiting_on``, if allowed."""
    move = MOVES_BY_PAIR.get((source, target))
    if move is None:
        return None
    if source is State.waiting and move.from_waiting and from_waiting not in move.from_waiting:
        return None
    if target is State.waiting and to_waiting not in move.to_waiting:
        return None
    return move


LIFECYCLE: dict[State, str] = {
    State.requested: "queued",
    State.routed: "queued",
    State.accepted: "claimed",
    State.working: "running",
    State.verifying: "approval",
    State.approval: "approval",
    State.completed: "completed",
    State.rejected: "failed",
    State.cancelled: "cancelled",
}


def lifecycle(state: State, waiting_on: WaitingOn | None, exhausted: bool = False) -> str:
    """The simple lifecycle a dashboard shows (seed 004's queued, claimed, running,
    approval, completed, failed, cancelled), derived from the state.

    A task waiting on the owner is still queued, one paused mid-work is still running; a
    routed task reads ``failed`` only when its attempts are exhausted, so never while it
    can still be claimed; a rejected one reads ``failed``.
    """
    if state is State.waiting:
        return "queued" if waiting_on is WaitingOn.owner_approval else "running"
    if state is State.routed and exhausted:
        return "failed"
    return LIFECYCLE[state]
