from __future__ import annotations

import pytest

from hivelite import Hive, InvalidInput, InvalidState, NotFound, State, WaitingOn

from .conftest import held_task, own_task, packet


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
        own_task(hive, id="task-1")
    assert err.value.reason == "duplicate_id"
    assert len(hive.journal()) == 2


def test_unknown_dependency_refused(hive: Hive) -> None:
    with pytest.raises(InvalidInput) as err:
        own_task(hive, packet=packet(depends_on=["missing"]))
    assert err.value.extra["field"] == "packet.depends_on"
    assert hive.journal() == []


def test_approve_then_approve_again_refused(hive: Hive) -> None:
    number = held_task(hive)
    assert hive.approve(number).task.state is State.routed
    with pytest.raises(InvalidState) as err:
        hive.approve(number)
    assert err.value.reason == "not_awaiting_owner"
