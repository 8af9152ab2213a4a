from __future__ import annotations

from typing import Any

import pytest

from hivelite import (
    Caller,
    ForbiddenRight,
    Hive,
    InvalidInput,
    InvalidState,
    NotFound,
    State,
    WaitingOn,
)

from .conftest import GUEST, OWNER, PLANNER, held_task, own_task, packet

pytestmark = pytest.mark.contract


def fields(**overrides: Any) -> dict[str, Any]:
    """A handoff between the owner's own agents (the planner asks the coder)."""
    base: dict[str, Any] = {"requester": "ana/planner", "assignee": "ana/coder",
                            "project": "demo", "packet": packet()}
    base.update(overrides)
    return base


def test_own_agents_are_routed(hive: Hive) -> None:
    view = hive.get(own_task(hive))
    assert view.task.state is State.routed
    assert view.task.waiting_on is None
    assert view.number == 1


def test_other_owner_is_held_for_approval(hive: Hive) -> None:
    view = hive.get(held_task(hive))
    assert view.task.state is State.waiting
    assert view.task.waiting_on is WaitingOn.owner_approval


def test_get_by_id_or_number(hive: Hive) -> None:
    number = own_task(hive)
    view = hive.get(number)
    assert hive.get(view.task.id).number == number
    assert hive.get(str(number)).task.id == view.task.id
    with pytest.raises(NotFound):
        hive.get("nope")


def test_ids_sort_by_creation(hive: Hive, clock) -> None:  # type: ignore[no-untyped-def]
    ids = []
    for _ in range(5):
        ids.append(hive.get(own_task(hive)).task.id)
        clock.advance(milliseconds=3)
    assert ids == sorted(ids)


def test_duplicate_id_refused(hive: Hive) -> None:
    own_task(hive, id="task-1")
    with pytest.raises(InvalidInput) as err:
        own_task(hive, id="task-1", project="other")
    assert err.value.reason == "duplicate_id"
    assert "with other content" in err.value.message
    assert len(hive.journal()) == 2


def test_the_same_handoff_again_answers_with_its_task(hive: Hive) -> None:
    """A retry that names its task id gets the task it made, not a second one."""
    first = hive.handoff(Caller.owner("ana"), id="task-1", requester="ana/planner",
                         assignee="ana/coder", project="demo", packet=packet())
    again = hive.handoff(Caller.owner("ana"), id="task-1", requester="ana/planner",
                         assignee="ana/coder", project="demo", packet=packet())
    assert (again.number, again.id, again.state) == (first.number, "task-1", first.state)
    assert len(hive.journal()) == 2


def test_unknown_dependency_refused(hive: Hive) -> None:
    with pytest.raises(InvalidInput) as err:
        own_task(hive, packet=packet(depends_on=["missing"]))
    assert err.value.extra["field"] == "packet.depends_on"
    assert hive.journal() == []


def test_approve_then_approve_again_refused(hive: Hive) -> None:
    number = held_task(hive)
    receipt = hive.approve(OWNER, number)
    assert receipt.state is State.routed
    assert receipt.waiting_on is None
    assert receipt.seq == hive.history(number)[-1].seq
    with pytest.raises(InvalidState) as err:
        hive.approve(OWNER, number)
    assert err.value.reason == "not_awaiting_owner"
    assert hive.get(number).task.state is State.routed


def test_the_receipt_says_where_the_handoff_left_the_task(hive: Hive) -> None:
    routed = hive.handoff(OWNER, **fields(id="own-1"))
    held = hive.handoff(GUEST, **fields(requester=GUEST.name, id="guest-1"))
    assert (routed.number, routed.id, routed.state, routed.waiting_on) == (
        1, "own-1", State.routed, None)
    assert (held.number, held.id, held.state, held.waiting_on) == (
        2, "guest-1", State.waiting, WaitingOn.owner_approval)
    for receipt in (routed, held):
        assert receipt.seq == hive.history(receipt.number)[-1].seq  # the gate's move
        assert receipt.at == hive.get(receipt.number).task.created_at


@pytest.mark.parametrize("by", [OWNER, PLANNER], ids=str)
def test_the_creation_row_names_the_caller(hive: Hive, by: Caller) -> None:
    """The owner may hand off for any requester; the journal names who really did it."""
    number = hive.handoff(by, **fields()).number
    created = hive.history(number)[0]
    assert (created.from_state, created.to_state) == (None, State.requested)
    assert created.actor == by.name
    assert hive.get(number).task.requester == "ana/planner"


def test_the_owner_hands_off_for_a_guest(hive: Hive) -> None:
    receipt = hive.handoff(OWNER, **fields(requester=GUEST.name))
    assert (receipt.state, receipt.waiting_on) == (State.waiting, WaitingOn.owner_approval)
    assert hive.history(receipt.number)[0].actor == "ana"


@pytest.mark.parametrize("requester", ["ana/lead", "guest/scout"])
def test_an_agent_hands_off_only_as_itself(hive: Hive, requester: str) -> None:
    with pytest.raises(ForbiddenRight) as err:
        hive.handoff(PLANNER, **fields(requester=requester))
    assert err.value.reason == "not_requester"
    assert err.value.status == 403
    assert hive.journal() == []


@pytest.mark.file_only
@pytest.mark.parametrize("caller", [None, "ana", "ana/planner"], ids=repr)
def test_a_handoff_needs_a_caller(hive: Hive, caller: object) -> None:
    with pytest.raises(InvalidInput) as err:
        hive.handoff(caller, **fields())  # type: ignore[arg-type]
    assert err.value.reason == "caller_required"
    assert err.value.status == 422
    assert hive.journal() == []


def test_another_owner_may_not_hand_off_here(hive: Hive) -> None:
    with pytest.raises(ForbiddenRight) as err:
        hive.handoff(Caller.owner("bob"), **fields())
    assert err.value.reason == "not_owner"
    assert hive.journal() == []
