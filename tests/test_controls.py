"""The owner's controls: hold, veto, stop and lift (DESIGN §10, issue 16).

Seed 004: "the claim is a bus lease, so Hold, Veto and Stop end it like any lease". Each
control ends the leases it covers exactly as expiry does (moves 8/9, its own reason, the
owner as actor); from then on the one write path refuses what it forbids, and the store's
``task_lease_controlled`` trigger refuses a lease to whom it binds. Only the owner makes or
lifts a control; the owner's own writes are never refused by one. A refused call leaves
every row of the store as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw
import pytest

from hivelite import (
    Caller,
    ClaimReceipt,
    ForbiddenRight,
    Hive,
    InvalidInput,
    InvalidState,
    ManualClock,
    NotFound,
    State,
)
from hivelite.core.clock import format_ts
from hivelite.core.models import Control, JournalEntry

from . import rawsql
from .conftest import (
    CODER,
    GUEST,
    OWNER,
    PLANNER,
    REVIEWER,
    Snap,
    own_task,
    packet,
    refused,
)
from .test_claims import EVIDENCE, fence

pytestmark = pytest.mark.contract

CODER_ON_DESKTOP = Caller.agent(CODER.name, "desktop")
"""The coder again, from another instance than the laptop."""
TESTER = Caller.agent("ana/tester", "laptop")
"""Another of the owner's agents on the coder's instance."""




def accepted(hive: Hive, caller: Caller = CODER, **overrides: Any) -> tuple[int, ClaimReceipt]:
    """A task assigned to ``caller``'s agent, claimed by it (``accepted``)."""
    number = own_task(hive, assignee=caller.name, **overrides)
    return number, hive.claim(caller, number)


def working(hive: Hive, caller: Caller = CODER, **overrides: Any) -> tuple[int, ClaimReceipt]:
    """A claimed task its holder checkpointed (``working``)."""
    number, lease = accepted(hive, caller, **overrides)
    hive.checkpoint(caller, number, **fence(lease), progress="read the code")
    assert hive.get(number).task.state is State.working
    return number, lease


def paused(hive: Hive, caller: Caller = CODER, on: str = "human") -> int:
    """A task its holder paused mid-work (waiting on a human, or ``on`` an agent; no
    claim)."""
    number, lease = working(hive, caller)
    hive.pause(caller, number, **fence(lease), on=on, reason="which parser?")
    return number


def in_approval(hive: Hive, caller: Caller = CODER) -> int:
    """A task whose result awaits a confirmation."""
    number, lease = accepted(hive, caller)
    receipt = hive.submit(caller, number, **fence(lease), summary="done", evidence=EVIDENCE)
    assert receipt.state is State.approval
    return number


def last(hive: Hive, number: int) -> JournalEntry:
    return hive.history(number)[-1]


def store_rows(hive: Hive) -> list[JournalEntry]:
    """Journal rows about no task (controls, lifts, budgets, policy)."""
    return [e for e in hive.journal() if e.number is None]


def assert_ended(hive: Hive, number: int, lease: ClaimReceipt, *, move: int, reason: str,
                 control: int) -> None:
    """The control ended the lease as expiry does: back to routed by move 8 or 9, the owner
    as actor, its own reason, the holder and token kept in the detail."""
    view = hive.get(number)
    assert view.task.state is State.routed
    assert view.claim is None
    row = last(hive, number)
    assert (row.move, row.actor, row.reason) == (move, "ana", reason)
    assert row.detail == {"control": control, "holder": lease.holder,
                          "fencing_token": lease.fencing_token}


# -- only the owner ------------------------------------------------------------------


AGENT_CALLS: dict[str, Callable[[Hive, Caller, int], object]] = {
    "hold": lambda h, c, n: h.hold(c, agent=CODER.name),
    "hold instance": lambda h, c, n: h.hold(c, instance="laptop"),
    "veto": lambda h, c, n: h.veto(c, n, agent=CODER.name),
    "stop": lambda h, c, n: h.stop(c, agent=CODER.name),
    "stop everyone": lambda h, c, n: h.stop(c, everyone=True),
    "lift by id": lambda h, c, n: h.lift(c, 1),
    "lift by scope": lambda h, c, n: h.lift(c, agent=PLANNER.name),
}


@pytest.mark.parametrize("call", AGENT_CALLS.values(), ids=AGENT_CALLS.keys())
@pytest.mark.parametrize("agent", [CODER, REVIEWER, GUEST], ids=["coder", "reviewer", "guest"])
def test_only_the_owner_makes_or_lifts_a_control(
        hive: Hive, snap: Snap, call: Callable[[Hive, Caller, int], object],
        agent: Caller) -> None:
    """An agent (even the one named) may not hold, veto, stop or lift: 403 not_permitted,
    and its claim and the live control stay as they were."""
    number, _ = accepted(hive)
    hive.hold(OWNER, agent=PLANNER.name)  # control 1, so a lift has something to find
    refused(snap, ForbiddenRight, "not_permitted", lambda: call(hive, agent, number))
    assert [c.id for c in hive.controls()] == [1]
    assert hive.get(number).claim is not None


def test_an_owner_caller_of_another_store_is_refused(hive: Hive, snap: Snap) -> None:
    """A person who does not own this store is not its owner, whatever the caller kind."""
    refused(snap, ForbiddenRight, "not_owner",
            lambda: hive.stop(Caller.owner("bob"), everyone=True))


SCOPES: dict[str, Callable[[Hive], object]] = {
    "hold nothing": lambda h: h.hold(OWNER),
    "hold agent and instance": lambda h: h.hold(OWNER, agent=CODER.name, instance="laptop"),
    "stop nothing": lambda h: h.stop(OWNER),
    "stop agent and everyone": lambda h: h.stop(OWNER, agent=CODER.name, everyone=True),
    "stop instance and everyone": lambda h: h.stop(OWNER, instance="laptop", everyone=True),
    "stop agent and instance": lambda h: h.stop(OWNER, agent=CODER.name, instance="laptop"),
    "lift nothing": lambda h: h.lift(OWNER),
    "lift id and agent": lambda h: h.lift(OWNER, 1, agent=CODER.name),
    "lift agent and instance": lambda h: h.lift(OWNER, agent=CODER.name, instance="laptop"),
    "lift id and everyone": lambda h: h.lift(OWNER, 1, everyone=True),
}


@pytest.mark.parametrize("call", SCOPES.values(), ids=SCOPES.keys())
def test_a_control_names_exactly_one_scope(hive: Hive, snap: Snap,
                                           call: Callable[[Hive], object]) -> None:
    """Naming none or two of agent / instance / everyone is 422 control_scope, nothing
    written (so a lift cannot quietly lift more than was meant)."""
    hive.hold(OWNER, agent=CODER.name)
    refused(snap, InvalidInput, "control_scope", lambda: call(hive))


BAD_NAMES: dict[str, tuple[Callable[[Hive], object], str]] = {
    "hold bad agent": (lambda h: h.hold(OWNER, agent="coder"), "invalid_agent"),
    "stop bad instance": (lambda h: h.stop(OWNER, instance="lap top"), "invalid_instance"),
    "veto bad agent": (lambda h: h.veto(OWNER, 1, agent="ana"), "invalid_agent"),
    "lift bad kind": (lambda h: h.lift(OWNER, kind="pause", agent=CODER.name),
                      "invalid_control"),
}


@pytest.mark.parametrize(("call", "reason"), BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_a_malformed_scope_is_refused(hive: Hive, snap: Snap, call: Callable[[Hive], object],
                                      reason: str) -> None:
    """A control binds a well-formed agent or instance; a kind is hold, veto or stop."""
    own_task(hive)
    hive.hold(OWNER, agent=CODER.name)
    refused(snap, InvalidInput, reason, lambda: call(hive))


# -- hold ----------------------------------------------------------------------------


def test_a_hold_ends_the_agents_claims_as_expiry_does(hive: Hive, clock: ManualClock) -> None:
    """accepted -> routed is move 8, working -> routed move 9; the owner is the actor, the
    reason "held", and the detail names the control, the holder and its token. Other agents'
    claims are untouched."""
    first, first_lease = accepted(hive)
    second, second_lease = working(hive)
    other, _ = accepted(hive, TESTER)
    clock.advance(minutes=1)
    control = hive.hold(OWNER, agent=CODER.name, reason="misbehaving")
    assert (control.kind, control.agent, control.instance, control.task) == (
        "hold", CODER.name, None, None)
    assert (control.by, control.at, control.reason, control.live) == (
        "ana", format_ts(clock()), "misbehaving", True)
    assert control.ended == [first, second]
    assert_ended(hive, first, first_lease, move=8, reason="held", control=control.id)
    assert_ended(hive, second, second_lease, move=9, reason="held", control=control.id)
    assert hive.get(other).task.state is State.accepted
    row = store_rows(hive)[-1]
    assert (row.actor, row.reason, row.task, row.at) == ("ana", "hold", None, control.at)
    assert row.detail is not None and row.detail["control"] == control.id


def test_a_hold_with_no_live_claim_ends_nothing(hive: Hive) -> None:
    """A hold is recorded even when the agent holds nothing (it binds from then on)."""
    number = own_task(hive)
    control = hive.hold(OWNER, agent=CODER.name)
    assert control.ended == []
    assert hive.get(number).task.state is State.routed
    assert [c.id for c in hive.controls()] == [control.id]


CLAIMS: dict[str, Callable[[Hive, Caller, int, int], object]] = {
    "claim": lambda h, c, routed, waiting: h.claim(c, routed),
    "next": lambda h, c, routed, waiting: h.claim_next(c),
    "resume": lambda h, c, routed, waiting: h.resume(c, waiting),
}


@pytest.mark.parametrize("call", CLAIMS.values(), ids=CLAIMS.keys())
def test_a_held_agent_takes_no_claim(hive: Hive, snap: Snap,
                                     call: Callable[[Hive, Caller, int, int], object]) -> None:
    """claim, next and resume are 403 held, naming the control; nothing is written."""
    waiting = paused(hive)
    routed = own_task(hive)
    control = hive.hold(OWNER, agent=CODER.name)
    err = refused(snap, ForbiddenRight, "held", lambda: call(hive, CODER, routed, waiting))
    assert err.extra["control"] == control.id


def _checkpoint(h: Hive, c: Caller, n: int, lease: ClaimReceipt) -> object:
    return h.checkpoint(c, n, **fence(lease), progress="carried on")


def _update(h: Hive, c: Caller, n: int, lease: ClaimReceipt) -> object:
    return h.update(c, n, **fence(lease), summary="carried on", tokens=5)


def _pause(h: Hive, c: Caller, n: int, lease: ClaimReceipt) -> object:
    return h.pause(c, n, **fence(lease), on="human", reason="stuck")


def _renew(h: Hive, c: Caller, n: int, lease: ClaimReceipt) -> object:
    return h.renew(c, n, **fence(lease))


def _release(h: Hive, c: Caller, n: int, lease: ClaimReceipt) -> object:
    return h.release(c, n, **fence(lease))


def _submit(h: Hive, c: Caller, n: int, lease: ClaimReceipt) -> object:
    return h.submit(c, n, **fence(lease), summary="done", evidence=EVIDENCE)


HOLDER_WRITES = [
    pytest.param(_checkpoint, id="checkpoint"),
    pytest.param(_update, id="update"),
    pytest.param(_pause, id="pause"),
    pytest.param(_renew, id="renew"),
    pytest.param(_release, id="release"),
    pytest.param(_submit, id="submit"),  # fenced early too: the control is named first
]
HolderWrite = Callable[[Hive, Caller, int, ClaimReceipt], object]


@pytest.mark.parametrize("write", HOLDER_WRITES)
def test_every_holder_write_of_a_held_agent_is_refused(hive: Hive, snap: Snap,
                                                       write: HolderWrite) -> None:
    """The holder the hold interrupted learns why: 403 held (not a bare stale claim), and
    the task stays routed."""
    number, lease = working(hive)
    hive.hold(OWNER, agent=CODER.name)
    refused(snap, ForbiddenRight, "held", lambda: write(hive, CODER, number, lease))
    assert hive.get(number).task.state is State.routed


def test_a_held_agent_still_reads_hands_off_and_verifies(hive: Hive) -> None:
    """A hold stops claims, not the rest: the held reviewer reads and confirms, the held
    coder hands work off as itself."""
    number = in_approval(hive)
    hive.hold(OWNER, agent=REVIEWER.name)
    hive.hold(OWNER, agent=CODER.name)
    assert hive.get(number).task.state is State.approval
    assert [v.number for v in hive.list().items] == [number]
    assert hive.verify(REVIEWER, number).state is State.completed
    receipt = hive.handoff(CODER, requester=CODER.name, assignee=TESTER.name,
                           project="demo", packet=packet())
    assert hive.get(receipt.number).task.requester == CODER.name


def test_a_hold_of_an_instance_binds_every_agent_there_normalised(hive: Hive,
                                                                  snap: Snap) -> None:
    """``Laptop.`` is the machine ``laptop``: the hold is stored normalised, ends the
    claims taken there (by any agent) and refuses claims from there, while the same agent
    on another instance claims freely."""
    first, first_lease = accepted(hive)
    second, second_lease = accepted(hive, TESTER)
    elsewhere, _ = accepted(hive, CODER_ON_DESKTOP)
    control = hive.hold(OWNER, instance="Laptop.")
    assert (control.instance, control.agent) == ("laptop", None)
    assert control.ended == [first, second]
    assert_ended(hive, first, first_lease, move=8, reason="held", control=control.id)
    assert_ended(hive, second, second_lease, move=8, reason="held", control=control.id)
    assert hive.get(elsewhere).task.state is State.accepted
    refused(snap, ForbiddenRight, "held", lambda: hive.claim(CODER, first))
    refused(snap, ForbiddenRight, "held",
            lambda: hive.claim(Caller.agent(CODER.name, " LAPTOP "), first))
    assert hive.claim(CODER_ON_DESKTOP, first).instance == "desktop"


# -- veto ----------------------------------------------------------------------------


def test_a_veto_ends_that_agents_claim_on_that_task_only(hive: Hive) -> None:
    """The vetoed claim goes back to routed with reason "vetoed"; the agent's other claim
    and the task's other agents are untouched."""
    number, lease = working(hive)
    other, _ = accepted(hive)
    control = hive.veto(OWNER, number, agent=CODER.name, reason="wrong approach")
    assert (control.kind, control.agent, control.task, control.instance) == (
        "veto", CODER.name, number, None)
    assert control.ended == [number]
    assert_ended(hive, number, lease, move=9, reason="vetoed", control=control.id)
    assert hive.get(other).task.state is State.accepted
    row = store_rows(hive)[-1]
    assert (row.actor, row.reason, row.number) == ("ana", "veto", None)
    assert row.detail is not None and row.detail["task"] == number


def test_a_veto_of_an_agent_not_holding_the_task_ends_nothing(hive: Hive) -> None:
    """A veto ends only the named agent's claim: the holder keeps working."""
    number, _ = accepted(hive)
    control = hive.veto(OWNER, number, agent=TESTER.name)
    assert control.ended == []
    assert hive.get(number).task.state is State.accepted


def test_a_vetoed_agent_may_not_claim_that_task_again(hive: Hive, snap: Snap) -> None:
    """403 vetoed on that task, by any ref; another task it claims freely."""
    number, _ = accepted(hive)
    other = own_task(hive)
    control = hive.veto(OWNER, number, agent=CODER.name)
    err = refused(snap, ForbiddenRight, "vetoed", lambda: hive.claim(CODER, number))
    assert err.extra == {"control": control.id, "number": number}
    task_id = hive.get(number).task.id
    refused(snap, ForbiddenRight, "vetoed", lambda: hive.claim(CODER_ON_DESKTOP, task_id))
    assert hive.claim(CODER, other).number == other


@pytest.mark.parametrize("write", HOLDER_WRITES)
def test_a_vetoed_holders_writes_are_refused(hive: Hive, snap: Snap,
                                             write: HolderWrite) -> None:
    """The holder the veto interrupted gets 403 vetoed on its old lease."""
    number, lease = working(hive)
    hive.veto(OWNER, number, agent=CODER.name)
    refused(snap, ForbiddenRight, "vetoed", lambda: write(hive, CODER, number, lease))


def test_next_skips_the_vetoed_task_and_gives_the_next(hive: Hive, snap: Snap) -> None:
    """The most pressing task is vetoed for this agent: ``next`` hands it the next one;
    with nothing else ready, the queue is empty for it."""
    urgent = own_task(hive)
    hive.set_fields(OWNER, urgent, base_version=hive.get(urgent).fields_version,
                    priority="urgent")
    normal = own_task(hive)
    hive.veto(OWNER, urgent, agent=CODER.name)
    took = hive.claim_next(CODER)
    assert took.number == normal
    assert hive.get(urgent).task.state is State.routed
    refused(snap, NotFound, "queue_empty", lambda: hive.claim_next(CODER))


def test_a_veto_on_a_closed_task_is_refused(hive: Hive, snap: Snap) -> None:
    """409 task_closed: a veto binds an open task."""
    number = in_approval(hive)
    hive.verify(REVIEWER, number)
    assert hive.get(number).task.state is State.completed
    refused(snap, InvalidState, "task_closed",
            lambda: hive.veto(OWNER, number, agent=CODER.name))


def test_a_veto_on_no_such_task_is_not_found(hive: Hive, snap: Snap) -> None:
    refused(snap, NotFound, "no_such_task", lambda: hive.veto(OWNER, 99, agent=CODER.name))


def test_a_vetoed_agent_may_still_verify_and_hold_nothing_else(hive: Hive) -> None:
    """A veto is narrow: the reviewer vetoed on one task still confirms another."""
    number = in_approval(hive)
    other = own_task(hive)
    hive.veto(OWNER, other, agent=REVIEWER.name)
    assert hive.verify(REVIEWER, number).state is State.completed


# -- stop ----------------------------------------------------------------------------


def test_a_stop_ends_every_claim_of_the_agent(hive: Hive) -> None:
    """Reason "stopped", moves 8 and 9, the owner as actor; others keep their claims."""
    first, first_lease = accepted(hive)
    second, second_lease = working(hive, CODER_ON_DESKTOP)
    other, _ = accepted(hive, TESTER)
    control = hive.stop(OWNER, agent=CODER.name)
    assert (control.kind, control.agent, control.instance) == ("stop", CODER.name, None)
    assert control.ended == [first, second]
    assert_ended(hive, first, first_lease, move=8, reason="stopped", control=control.id)
    assert_ended(hive, second, second_lease, move=9, reason="stopped", control=control.id)
    assert hive.get(other).task.state is State.accepted
    assert store_rows(hive)[-1].reason == "stop"


def test_a_stop_of_everyone_ends_every_claim(hive: Hive) -> None:
    first, first_lease = accepted(hive)
    second, second_lease = working(hive, TESTER)
    control = hive.stop(OWNER, everyone=True)
    assert (control.agent, control.instance, control.task) == (None, None, None)
    assert control.scope == "every agent"
    assert control.ended == [first, second]
    assert_ended(hive, first, first_lease, move=8, reason="stopped", control=control.id)
    assert_ended(hive, second, second_lease, move=9, reason="stopped", control=control.id)


def test_a_stop_mid_claim_fails_the_holders_next_write_and_routes_the_task(
        hive: Hive, snap: Snap) -> None:
    """Issue 16, done when: a stop mid-claim makes the holder's next write fail with
    ``vetoed`` and returns the task to routed (working -> routed, move 9)."""
    number, lease = working(hive)
    control = hive.stop(OWNER, agent=CODER.name)
    assert_ended(hive, number, lease, move=9, reason="stopped", control=control.id)
    err = refused(snap, ForbiddenRight, "vetoed", lambda: _checkpoint(hive, CODER, number,
                                                                      lease))
    assert err.extra == {"control": control.id, "number": number}
    assert err.exit_code == 4
    assert hive.get(number).task.state is State.routed


def _verify(h: Hive, c: Caller, t: dict[str, int]) -> object:
    return h.verify(c, t["approval"])


def _handoff(h: Hive, c: Caller, t: dict[str, int]) -> object:
    return h.handoff(c, requester=c.name, assignee=TESTER.name, project="demo",
                     packet=packet())


def _fields(h: Hive, c: Caller, t: dict[str, int]) -> object:
    n = t["mine"]
    return h.set_fields(c, n, base_version=h.get(n).fields_version, priority="high")


def _amend(h: Hive, c: Caller, t: dict[str, int]) -> object:
    return h.amend(c, t["mine_in_approval"], summary="better")


def _expire(h: Hive, c: Caller, t: dict[str, int]) -> object:
    return h.expire(c)


def _answer(h: Hive, c: Caller, t: dict[str, int]) -> object:
    return h.answer(c, t["asking"], text="the fast one")


def _claim(h: Hive, c: Caller, t: dict[str, int]) -> object:
    return h.claim(c, t["mine"])


def _next(h: Hive, c: Caller, t: dict[str, int]) -> object:
    return h.claim_next(c)


def _resume(h: Hive, c: Caller, t: dict[str, int]) -> object:
    return h.resume(c, t["paused"])


ANY_WRITE = {"claim": _claim, "next": _next, "resume": _resume, "verify": _verify,
             "handoff": _handoff, "fields": _fields, "amend": _amend, "expire": _expire,
             "answer": _answer}
NAMES_A_TASK = {"claim": "mine", "resume": "paused", "verify": "approval", "fields": "mine",
                "amend": "mine_in_approval", "answer": "asking"}
"""The task each write names, which its refusal names too (next, handoff, expire: none)."""


@pytest.fixture
def tasks(hive: Hive) -> dict[str, int]:
    """Work the reviewer could touch: one of its own routed, one paused, one of its results
    awaiting a decision, the coder's result awaiting the reviewer's confirmation, and the
    coder's question to an agent."""
    return {"mine": own_task(hive, assignee=REVIEWER.name),
            "paused": paused(hive, REVIEWER),
            "mine_in_approval": in_approval(hive, REVIEWER),
            "approval": in_approval(hive),
            "asking": paused(hive, on="agent")}


STOPS: dict[str, Callable[[Hive], Control]] = {
    "agent": lambda h: h.stop(OWNER, agent=REVIEWER.name),
    "instance": lambda h: h.stop(OWNER, instance="Desktop"),
    "everyone": lambda h: h.stop(OWNER, everyone=True),
}


@pytest.mark.parametrize("stop", STOPS.values(), ids=STOPS.keys())
@pytest.mark.parametrize("write", ANY_WRITE.values(), ids=ANY_WRITE.keys())
def test_every_write_of_a_stopped_agent_is_refused(
        hive: Hive, snap: Snap, tasks: dict[str, int], stop: Callable[[Hive], Control],
        write: Callable[[Hive, Caller, dict[str, int]], object]) -> None:
    """The kill switch: not only claims, every write (verify, hand off, fields, amend, even
    expire) is 403 vetoed, naming the control; nothing is written."""
    control = stop(hive)
    err = refused(snap, ForbiddenRight, "vetoed", lambda: write(hive, REVIEWER, tasks))
    named = NAMES_A_TASK.get(next(k for k, v in ANY_WRITE.items() if v is write))
    assert err.extra == {"control": control.id,
                         **({"number": tasks[named]} if named else {})}


@pytest.mark.parametrize("write", ["verify", "fields", "amend", "answer"])
def test_a_veto_refuses_every_write_of_its_agent_on_its_task(
        hive: Hive, snap: Snap, tasks: dict[str, int], write: str) -> None:
    """A veto binds its agent on its task for every write, not only a claim: a verdict, a
    change of fields, an amendment, an answer is 403 vetoed, naming the control and the
    task; nothing is written."""
    number = tasks[NAMES_A_TASK[write]]
    control = hive.veto(OWNER, number, agent=REVIEWER.name)
    err = refused(snap, ForbiddenRight, "vetoed", lambda: ANY_WRITE[write](hive, REVIEWER, tasks))
    assert err.extra == {"control": control.id, "number": number}


@pytest.mark.parametrize("write", ANY_WRITE.values(), ids=ANY_WRITE.keys())
def test_an_agent_on_another_instance_is_not_stopped_by_an_instance_stop(
        hive: Hive, tasks: dict[str, int],
        write: Callable[[Hive, Caller, dict[str, int]], object]) -> None:
    """A stop of the laptop binds no one on the desktop: the same writes go through."""
    hive.stop(OWNER, instance="laptop")
    write(hive, REVIEWER, tasks)


@pytest.mark.parametrize("write", HOLDER_WRITES)
def test_every_holder_write_of_a_stopped_agent_is_vetoed(hive: Hive, snap: Snap,
                                                         write: HolderWrite) -> None:
    number, lease = working(hive)
    hive.stop(OWNER, agent=CODER.name)
    refused(snap, ForbiddenRight, "vetoed", lambda: write(hive, CODER, number, lease))


def test_a_stop_outranks_a_hold(hive: Hive, snap: Snap) -> None:
    """Held and stopped at once, the agent's claim is refused as stopped (vetoed), and so
    is a write a hold alone allows."""
    number = own_task(hive)
    hive.hold(OWNER, agent=CODER.name)
    stop = hive.stop(OWNER, agent=CODER.name)
    err = refused(snap, ForbiddenRight, "vetoed", lambda: hive.claim(CODER, number))
    assert err.extra == {"control": stop.id, "number": number}
    refused(snap, ForbiddenRight, "vetoed", lambda: _handoff(hive, CODER, {}))


def test_the_owners_own_writes_are_never_refused_by_controls(hive: Hive) -> None:
    """Stopped everyone, the owner still hands off, edits, releases, signs off, cancels,
    sets policy and budgets, and lifts."""
    number, _ = accepted(hive)
    approval = in_approval(hive, TESTER)
    hive.stop(OWNER, everyone=True)
    hive.hold(OWNER, instance="laptop")
    hive.veto(OWNER, number, agent=CODER.name)
    fresh = hive.handoff(OWNER, requester=PLANNER.name, assignee=CODER.name, project="demo",
                         packet=packet()).number
    hive.set_fields(OWNER, fresh, base_version=hive.get(fresh).fields_version,
                    priority="high")
    hive.cancel(OWNER, fresh, reason="not needed")
    assert hive.sign_off(OWNER, approval).state is State.completed
    hive.set_policy(OWNER, "threshold", 2)
    hive.set_budget(OWNER, CODER.name, tasks=3)
    hive.expire(OWNER)
    assert len(hive.lift(OWNER, everyone=True)) == 1
    assert hive.get(fresh).task.state is State.cancelled


# -- lift ----------------------------------------------------------------------------


def test_lift_by_id_lets_the_agent_claim_again(hive: Hive, clock: ManualClock) -> None:
    """The lift answers what it lifted (with when and by whom), is journaled, and from then
    on the agent claims as before."""
    number, _ = accepted(hive)
    control = hive.hold(OWNER, agent=CODER.name)
    clock.advance(minutes=5)
    lifted = hive.lift(OWNER, control.id, reason="sorted out")
    assert [(c.id, c.kind, c.lifted_at, c.lifted_by, c.live) for c in lifted] == [
        (control.id, "hold", format_ts(clock()), "ana", False)]
    row = store_rows(hive)[-1]
    assert (row.actor, row.reason, row.at, row.number) == ("ana", "lift", format_ts(clock()),
                                                           None)
    assert row.detail == {"control": control.id, "kind": "hold", "scope": CODER.name,
                          "why": "sorted out"}
    assert hive.controls() == []
    assert hive.claim(CODER, number).holder == CODER.name


def test_every_control_and_lift_is_journaled_by_the_owner(hive: Hive) -> None:
    """One row per control and per lift, about no task, the owner as actor."""
    number = own_task(hive)
    hold = hive.hold(OWNER, agent=CODER.name)
    veto = hive.veto(OWNER, number, agent=TESTER.name)
    stop = hive.stop(OWNER, instance="laptop")
    hive.lift(OWNER, hold.id)
    rows = store_rows(hive)
    assert [(r.reason, r.actor, r.task) for r in rows] == [
        ("hold", "ana", None), ("veto", "ana", None), ("stop", "ana", None),
        ("lift", "ana", None)]
    assert [r.detail["control"] for r in rows if r.detail] == [hold.id, veto.id, stop.id,
                                                               hold.id]


SCOPED_LIFTS: dict[str, tuple[Callable[[Hive, int], Control], Callable[[Hive, int], object]]] = {
    "agent": (lambda h, n: h.hold(OWNER, agent=CODER.name),
              lambda h, n: h.lift(OWNER, agent=CODER.name)),
    "instance": (lambda h, n: h.stop(OWNER, instance="laptop"),
                 lambda h, n: h.lift(OWNER, instance="Laptop.")),
    "everyone": (lambda h, n: h.stop(OWNER, everyone=True),
                 lambda h, n: h.lift(OWNER, everyone=True)),
    "veto": (lambda h, n: h.veto(OWNER, n, agent=CODER.name),
             lambda h, n: h.lift(OWNER, agent=CODER.name, task=n)),
    "veto by task id": (lambda h, n: h.veto(OWNER, n, agent=CODER.name),
                        lambda h, n: h.lift(OWNER, agent=CODER.name,
                                            task=h.get(n).task.id)),
}


@pytest.mark.parametrize(("make", "lift"), SCOPED_LIFTS.values(), ids=SCOPED_LIFTS.keys())
def test_lift_by_scope(hive: Hive, make: Callable[[Hive, int], Control],
                       lift: Callable[[Hive, int], object]) -> None:
    """A lift may name the scope instead of the id; afterwards the agent claims again."""
    number = own_task(hive)
    control = make(hive, number)
    with pytest.raises(ForbiddenRight):
        hive.claim(CODER, number)
    lifted = lift(hive, number)
    assert isinstance(lifted, list)
    assert [c.id for c in lifted] == [control.id]
    assert hive.controls() == []
    assert hive.claim(CODER, number).number == number


def test_lift_by_agent_lifts_every_live_control_of_it(hive: Hive) -> None:
    """Naming the agent lifts its hold, its stop and its vetoes together; ``kind`` narrows
    it to one kind; another agent's controls stay."""
    number = own_task(hive)
    hold = hive.hold(OWNER, agent=CODER.name)
    stop = hive.stop(OWNER, agent=CODER.name)
    veto = hive.veto(OWNER, number, agent=CODER.name)
    others = hive.hold(OWNER, agent=TESTER.name)
    assert [c.id for c in hive.lift(OWNER, agent=CODER.name, kind="stop")] == [stop.id]
    assert [c.id for c in hive.controls()] == [hold.id, veto.id, others.id]
    assert [c.id for c in hive.lift(OWNER, agent=CODER.name)] == [hold.id, veto.id]
    assert [c.id for c in hive.controls()] == [others.id]


def test_lift_everyone_lifts_only_the_stop_of_everyone(hive: Hive) -> None:
    """``everyone`` names the stop of every agent, not each agent's own controls."""
    mine = hive.stop(OWNER, agent=CODER.name)
    everyone = hive.stop(OWNER, everyone=True)
    assert [c.id for c in hive.lift(OWNER, everyone=True)] == [everyone.id]
    assert [c.id for c in hive.controls()] == [mine.id]


def test_lift_of_a_veto_by_task_leaves_the_agents_other_vetoes(hive: Hive) -> None:
    first, second = own_task(hive), own_task(hive)
    hive.veto(OWNER, first, agent=CODER.name)
    kept = hive.veto(OWNER, second, agent=CODER.name)
    hive.lift(OWNER, agent=CODER.name, task=first)
    assert [c.id for c in hive.controls()] == [kept.id]
    assert hive.claim(CODER, first).number == first
    with pytest.raises(ForbiddenRight, match="vetoed"):
        hive.claim(CODER, second)


NOTHING_LIVE: dict[str, Callable[[Hive], object]] = {
    "unknown id": lambda h: h.lift(OWNER, 99),
    "lifted id": lambda h: h.lift(OWNER, 1),
    "agent with none": lambda h: h.lift(OWNER, agent=TESTER.name),
    "instance with none": lambda h: h.lift(OWNER, instance="desktop"),
    "everyone with none": lambda h: h.lift(OWNER, everyone=True),
    "kind that is not live": lambda h: h.lift(OWNER, agent=CODER.name, kind="hold"),
    "veto on another task": lambda h: h.lift(OWNER, agent=CODER.name, task=1),
    "id of another kind": lambda h: h.lift(OWNER, 2, kind="hold"),
}


@pytest.mark.parametrize("call", NOTHING_LIVE.values(), ids=NOTHING_LIVE.keys())
def test_lifting_nothing_live_is_not_found(hive: Hive, snap: Snap,
                                           call: Callable[[Hive], object]) -> None:
    """404 no_such_control, nothing written, the live control still binds."""
    own_task(hive)
    second = own_task(hive)
    first = hive.hold(OWNER, agent=CODER.name)  # id 1, lifted below
    hive.lift(OWNER, first.id)
    live = hive.stop(OWNER, agent=CODER.name)  # id 2, live
    hive.veto(OWNER, second, agent=CODER.name)  # id 3, on task 2
    refused(snap, NotFound, "no_such_control", lambda: call(hive))
    assert live.id in [c.id for c in hive.controls()]


def test_controls_lists_live_ones_and_all_with_lifted(hive: Hive,
                                                      clock: ManualClock) -> None:
    """``controls()`` the live ones oldest first; ``live=False`` every one, a lifted one
    with when and by whom."""
    number = own_task(hive)
    hold = hive.hold(OWNER, agent=CODER.name, reason="r1")
    clock.advance(minutes=1)
    veto = hive.veto(OWNER, number, agent=TESTER.name)
    clock.advance(minutes=1)
    hive.lift(OWNER, hold.id)
    live = hive.controls()
    assert [(c.id, c.kind, c.task, c.live) for c in live] == [(veto.id, "veto", number, True)]
    every = hive.controls(live=False)
    assert [c.id for c in every] == [hold.id, veto.id]
    assert (every[0].lifted_at, every[0].lifted_by, every[0].reason) == (
        format_ts(clock()), "ana", "r1")
    assert every[0].at == hold.at != every[0].lifted_at
    assert (every[1].lifted_at, every[1].lifted_by) == (None, None)
    assert all(c.ended == [] for c in every)


def test_a_task_view_shows_the_controls_bearing_on_it(hive: Hive) -> None:
    """A veto on the task, a hold or stop of its assignee, a stop of everyone; not a veto
    on another task or a hold of another agent; a lifted control no longer."""
    number = own_task(hive)
    other = own_task(hive)
    veto = hive.veto(OWNER, number, agent=CODER.name)
    hive.veto(OWNER, other, agent=CODER.name)
    hold = hive.hold(OWNER, agent=CODER.name)
    hive.hold(OWNER, agent=TESTER.name)
    stop = hive.stop(OWNER, everyone=True)
    assert [c.id for c in hive.get(number).controls] == [veto.id, hold.id, stop.id]
    hive.lift(OWNER, hold.id)
    assert [c.id for c in hive.get(number).controls] == [veto.id, stop.id]
    assert hive.get(own_task(hive, assignee=TESTER.name)).controls[-1].id == stop.id


# -- the store itself (a second, raw connection) -------------------------------------


def test_control_rows_cannot_be_deleted(hive: Hive, hive_raw: apsw.Connection) -> None:
    """Live or lifted, a control is kept: forbidden_right:controls_kept."""
    hold = hive.hold(OWNER, agent=CODER.name)
    hive.stop(OWNER, everyone=True)
    hive.lift(OWNER, hold.id)
    rawsql.refused(hive_raw, "forbidden_right:controls_kept", "DELETE FROM controls")
    rawsql.refused(hive_raw, "forbidden_right:controls_kept", "DELETE FROM controls WHERE id = ?",
                   (hold.id,))


def test_a_raw_lift_of_a_live_control_stands(hive: Hive, hive_raw: apsw.Connection) -> None:
    """The one update the store allows (so the refusals above are about their change)."""
    live = hive.stop(OWNER, agent=CODER.name)
    hive_raw.execute("UPDATE controls SET lifted_at = '2026-12-03T00:00:00.000Z', lifted_by = 'ana'"
                " WHERE id = ?", (live.id,))
    assert hive.controls() == []


GOOD_CONTROLS = {
    "hold of an agent": ("hold", CODER.name, None, None),
    "hold of an instance": ("hold", None, "laptop", None),
    "veto": ("veto", CODER.name, None, 1),
    "stop of everyone": ("stop", None, None, None),
}


@pytest.mark.parametrize("values", GOOD_CONTROLS.values(), ids=GOOD_CONTROLS.keys())
def test_a_control_with_a_good_scope_is_taken(hive: Hive, hive_raw: apsw.Connection,
                                              values: tuple[object, ...]) -> None:
    """The same INSERT with a well-formed scope stands, and the library reads it."""
    own_task(hive)
    hive_raw.execute("INSERT INTO controls(kind, agent, instance, task, at, by)"
                " VALUES (?, ?, ?, ?, '2026-12-02T09:00:00.000Z', 'ana')", values)
    assert [(c.kind, c.agent, c.instance, c.task) for c in hive.controls()] == [values]
