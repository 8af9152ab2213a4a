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

    from hivelite.faces.cli.main import main

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


# -- pages of ready tasks without sorting them all (the queue index, group by group) ------

PRIORITY_RANK = {"urgent": 0, "high": 1, "normal": 2, "low": 3}


def mixed_store(hive: Hive) -> dict[int, tuple[str, str]]:
    """Ready tasks of three assignees and four priorities, interleaved, and some that are
    not ready (claimed, blocked, held); returns the ready ones' (assignee, priority)."""
    ready: dict[int, tuple[str, str]] = {}
    priorities = list(PRIORITY_RANK)
    for i in range(40):
        assignee = ("ana/coder", "ana/writer", "ana/tester")[i % 3]
        priority = priorities[(i * 7) % 4]
        labels = ["odd"] if i % 2 else []
        ready[own_task(hive, assignee=assignee, priority=priority, labels=labels)] = (
            assignee, priority)
    for number in list(ready)[::9]:  # claimed: no longer ready
        if ready[number][0] == "ana/coder":
            hive.claim(CODER, number)
            del ready[number]
    first = next(iter(ready))
    own_task(hive, packet=packet(depends_on=[hive.get(first).task.id]))  # blocked
    held_task(hive)
    return ready


def paged(hive: Hive, size: int, **filters: object) -> list[int]:
    numbers: list[int] = []
    cursor = None
    while True:
        page = hive.list(ready=True, limit=size, cursor=cursor, **filters)  # type: ignore[arg-type]
        numbers += [v.number for v in page.items]
        if page.next_cursor is None:
            return numbers
        cursor = page.next_cursor


def test_ready_pages_come_in_order_whatever_the_groups(hive: Hive) -> None:
    ready = mixed_store(hive)
    by_age = sorted(ready)
    by_priority = sorted(ready, key=lambda n: (PRIORITY_RANK[ready[n][1]], n))
    for size in (1, 4, 7, 50):
        assert paged(hive, size) == by_age
        assert paged(hive, size, sort="priority") == by_priority
    writer = [n for n in by_age if ready[n][0] == "ana/writer"]
    assert paged(hive, 5, assignee="ana/writer") == writer
    assert paged(hive, 3, labels="odd") == [n for n in by_age if hive.get(n).labels == ["odd"]]
    assert paged(hive, 6, assignee="ana/writer", sort="priority") == [
        n for n in by_priority if ready[n][0] == "ana/writer"]


def test_a_ready_page_reads_the_queue_index_and_sorts_nothing(hive: Hive) -> None:
    """Each (assignee, rank) group is read from ``tasks_queue`` in number order; a page
    never sorts every ready task, so its cost does not grow with the backlog. (Mutation
    caught: the listing's old single query, which sorted all ready tasks.)"""
    mixed_store(hive)
    conn = hive.store.conn  # type: ignore[attr-defined]
    seen: list[tuple[str, object]] = []

    def trace(cursor: object, sql: str, bindings: object) -> bool:
        seen.append((sql, bindings))
        return True

    for sort in ("age", "priority"):
        conn.exec_trace = trace
        try:
            hive.list(ready=True, limit=5, sort=sort)
        finally:
            conn.exec_trace = None
    listing = [(sql, b) for sql, b in seen if "FROM tasks t INDEXED BY" in sql
               or "min(assignee)" in sql]
    assert listing
    for sql, bindings in listing:
        plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}",
                                                         bindings))
        assert "USING INDEX tasks_queue" in plan and "TEMP B-TREE" not in plan, (sql, plan)
