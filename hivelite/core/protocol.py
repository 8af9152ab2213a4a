"""The task protocol: states, terminal states, ``waiting_on`` values and the 22 moves.

This module is the single source of truth. The SQL triggers, the ``moves``
table, the guard, ``docs/protocol.md`` and the diagrams are all generated from
it (or tested against it); nothing else in the code lists states or moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise


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
MAX_WAIT = 3600
"""The longest ``next`` waits for work when the queue is empty, in seconds (an hour: a
worker that idles longer asks again)."""
SERVED_WAIT = 60
"""The longest a server (HTTP, MCP) holds one ``next`` open waiting for work, in seconds:
a longer wait is cut to this, so no caller holds a server thread for long (``Client``
asks again until its own wait is up)."""
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
    requester = "requester"
    """In team mode, an agent of the guest owner whose agent handed the task off: acting
    for that owner, it withdraws the request (seed 000: the requesting agent's owner)."""
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
STATE_OF: dict[str, State] = {s.value: s for s in State}
"""Each state by its name, as a row stores it (a lookup: ``State(name)`` costs a call into
the enum's machinery on every move)."""
WAITING_OF: dict[str, WaitingOn] = {w.value: w for w in WaitingOn}

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


SUBMITTED_VIA: dict[State, tuple[State, ...]] = {
    State.accepted: (State.working, State.verifying),
    State.working: (State.verifying,),
}
"""A submission is one journal row (issue 47, ``docs/decisions.md``): from the holder's
state, the states it passes through (the row's ``via``: moves 7 and 12, or 12 alone)
before the guard's judgement, one of the moves out of ``verifying`` (13, 14 or 15). The
row stands for those seed moves; history, events and every face show them one by one."""
JUDGEMENTS: frozenset[State] = frozenset(m.target for m in MOVES if m.source is State.verifying)
"""Where the guard's judgement of a submission leads (moves 13, 14, 15)."""


def passage(source: State, via: tuple[str, ...] | list[str], target: State
            ) -> tuple[Move, ...] | None:
    """The seed moves a submission's journal row stands for (from ``source`` through
    ``via`` to ``target``), or None when the row is no submission's."""
    path = SUBMITTED_VIA.get(source)
    if path is None or target not in JUDGEMENTS or len(via) != len(path) or any(
            step.value != name for step, name in zip(path, via, strict=True)):
        return None
    states = (source, *path, target)
    return tuple(MOVES_BY_PAIR[pair] for pair in pairwise(states))


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


@dataclass(frozen=True, slots=True)
class LifecycleCell:
    """One row of the lifecycle mapping: a task at rest in ``state`` with ``waiting_on``,
    holding a live claim or none, reads ``lifecycle``; ``reason`` says why, wherever the word
    is not the seeds' own (empty where seed 004 names the same thing)."""

    state: State
    waiting_on: WaitingOn | None
    claim: bool
    lifecycle: str
    reason: str = ""
    exhausted: bool = False
    """A routed task whose attempts ran out (``max_attempts``)."""


LIFECYCLE_CELLS: tuple[LifecycleCell, ...] = (
    LifecycleCell(State.requested, None, False, "queued",
                  "seed 004's proposed: a handoff the gate has not yet decided on; nothing"
                  " before claimed but queued"),
    LifecycleCell(State.waiting, WaitingOn.owner_approval, False, "queued",
                  "seed 004's proposed, held for the owner's approval: still before any"
                  " claim"),
    LifecycleCell(State.routed, None, False, "queued"),
    LifecycleCell(State.routed, None, False, "failed",
                  "its attempts ran out (max_attempts failed outcomes): it can no longer be"
                  " claimed, which is Hive v5's failed; the owner may raise the limit or"
                  " cancel it", exhausted=True),
    LifecycleCell(State.accepted, None, True, "claimed"),
    LifecycleCell(State.working, None, True, "running"),
    LifecycleCell(State.waiting, WaitingOn.human, False, "running",
                  "paused mid-work on a person's answer: the claim ended, but the work is"
                  " its assignee's alone to resume (never the queue's), so it is still"
                  " under way"),
    LifecycleCell(State.waiting, WaitingOn.agent, False, "running",
                  "paused mid-work on another agent's answer; as for human"),
    LifecycleCell(State.verifying, None, False, "approval",
                  "passed through inside the submit's one transaction, never seen at rest;"
                  " named as the step it leads to"),
    LifecycleCell(State.approval, None, False, "approval",
                  "seed 000's approval: a result awaiting confirmations or the owner's"
                  " sign-off. Hive v5 ends a task at its result, with no one deciding;"
                  " hivelite keeps seed 000's and C0 2.2's verdict, so it shows the wait"),
    LifecycleCell(State.completed, None, False, "completed"),
    LifecycleCell(State.rejected, None, False, "failed",
                  "refused by the gate or denied by the owner: it ended without a result,"
                  " and Hive v5's lifecycle has no rejected"),
    LifecycleCell(State.cancelled, None, False, "cancelled"),
)
"""Every state, waiting_on and claim a task can rest in, and the lifecycle it reads
(``docs/decisions.md`` shows this table). An expired claim not yet swept still counts as
live until the next write returns the task to routed."""

_LIFECYCLE_BY_KEY: dict[tuple[State, WaitingOn | None, bool], str] = {
    (c.state, c.waiting_on, c.exhausted): c.lifecycle for c in LIFECYCLE_CELLS}


def lifecycle(state: State, waiting_on: WaitingOn | None, exhausted: bool = False) -> str:
    """The simple lifecycle a dashboard shows (Hive v5's queued, claimed, running,
    completed, failed, cancelled, and seed 000's approval), looked up in
    ``LIFECYCLE_CELLS``; ``exhausted`` counts only for a routed task."""
    return _LIFECYCLE_BY_KEY[(state, waiting_on, exhausted and state is State.routed)]


SEED_004_STATES: dict[str, tuple[State, ...]] = {
    "proposed": (State.requested, State.waiting),
    "open": (State.routed,),
    "claimed": (State.accepted, State.working),
    "submitted": (State.verifying, State.approval),
    "done": (State.completed,),
    "rejected": (State.rejected,),
    "cancelled": (State.cancelled,),
}
"""Seed 004's state words, each with the seed 000 states it covers; hivelite speaks and
filters in seed 000's words only (one vocabulary on every face), and this table is how a
reader of 004 translates. ``proposed`` covers a waiting task only while it waits on the
owner's approval: a task paused on a question (waiting on human or agent) is 004's claimed
work with its claim ended, and 004 has no word for it."""
