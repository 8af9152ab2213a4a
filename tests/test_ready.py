"""``list(ready=True)`` / ``hivelite list --ready``: what an agent could claim right now."""

from __future__ import annotations

from hivelite import Hive, State

from .conftest import CODER, OWNER, held_task, own_task, packet

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]


def ready_numbers(hive: Hive) -> list[int]:
    return [v.number for v in hive.list(ready=True).items]


def complete(hive: Hive, number: int) -> None:
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    assert hive.sign_off(OWNER, number).state is State.completed


def test_ready_lists_routed_tasks_whose_dependencies_are_completed(hive: Hive) -> None:
    first = own_task(hive)
    second = own_task(hive)
    first_id, second_id = hive.get(first).task.id, hive.get(second).task.id
    waits_on_both = own_task(hive, packet=packet(depends_on=[first_id, second_id]))
    held = held_task(hive)
    assert ready_numbers(hive) == [first, second]  # not the blocked one, not the held one
    complete(hive, first)
    assert ready_numbers(hive) == [second]  # one dependency is still open
    complete(hive, second)
    assert ready_numbers(hive) == [waits_on_both]
    hive.approve(OWNER, held)
    assert ready_numbers(hive) == [waits_on_both, held]


def test_a_claimed_task_is_not_ready(hive: Hive) -> None:
    number = own_task(hive)
    assert hive.claim(CODER, number).state is State.accepted
    assert ready_numbers(hive) == []


def test_ready_combines_with_the_other_filters(hive: Hive) -> None:
    own_task(hive, project="site")
    shop = own_task(hive, project="shop")
    assert [v.number for v in hive.list(ready=True, project="shop").items] == [shop]
    assert hive.list(ready=True, assignee="ana/other").items == []


def test_cli_list_ready(db_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    import pytest

    from hivelite.cli import main

    with Hive.open(db_path, owner="ana") as hive:
        first = own_task(hive)
        blocked = own_task(hive, packet=packet(depends_on=[hive.get(first).task.id]))
    for args, expected in (([], [first, blocked]), (["--ready"], [first])):
        try:
            main(["--db", str(db_path), "--json", "list", *args])
        except SystemExit as done:  # main exits only on an error
            pytest.fail(f"exit {done.code}: {capsys.readouterr().err}")
        out = json.loads(capsys.readouterr().out)
        assert [item["number"] for item in out["items"]] == expected
