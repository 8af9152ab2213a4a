"""Bulk handoff (issue 18): ``Hive.handoff_many`` and ``hivelite handoff --from-jsonl``.

Many tasks in one transaction, each through the gate as a single handoff goes: the same
rows and journal as one by one, all of them or (at the first refusal) none, the refusal
naming the failing task's place; a streamed batch is read once; a task may depend on an
earlier one of the same batch; a retry of a batch of named tasks answers with them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, ForbiddenRight, Hive, InvalidInput, PluginError, hookimpl

from .conftest import GUEST, HANG_S, OWNER, PLANNER, START, OpenHive, Snap, packet, refused
from .test_cli_e2e import hivelite_command


def request(n: int, **overrides: Any) -> dict[str, Any]:
    made: dict[str, Any] = {"requester": "ana/planner", "assignee": "ana/coder",
                            "project": "bulk", "packet": packet(task=f"Task number {n}")}
    made.update(overrides)
    return made


def test_a_batch_makes_each_task_as_a_handoff_would(open_hive: OpenHive,
                                                    tmp_path: Path) -> None:
    """The same states, rows and journal as the same handoffs made one at a time."""
    batch = [request(0), request(1, priority="high", labels=["x"]),
             request(2, requester=GUEST.name), request(3, id="bulk-3")]
    many = open_hive()
    receipts = many.handoff_many(OWNER, batch)
    assert [(r.number, r.state.value) for r in receipts] == [
        (1, "routed"), (2, "routed"), (3, "waiting"), (4, "routed")]
    single = open_hive(path=tmp_path / "single.db")
    for item in batch:
        single.handoff(OWNER, **item)

    def shape(hive: Hive) -> list[tuple[object, ...]]:
        return [(e.number, e.actor, e.from_state, e.to_state, e.waiting_on, e.move, e.reason)
                for e in hive.journal()]
    assert shape(many) == shape(single)
    for n in (1, 2, 3, 4):
        a, b = many.get(n), single.get(n)
        assert (a.task.state, a.priority, a.labels, a.task.packet) == (
            b.task.state, b.priority, b.labels, b.task.packet)


def test_one_bad_task_refuses_the_whole_batch_naming_its_place(hive: Hive,
                                                               snap: Snap) -> None:
    own = hive.handoff(OWNER, **request(0)).number
    batch = [request(1), request(2), request(3, packet=packet(task="x")), request(4)]
    err = refused(snap, InvalidInput, "invalid_handoff", lambda: hive.handoff_many(OWNER, batch))
    assert err.extra["index"] == 2 and err.message.startswith("task 3 of the batch: ")
    assert [t.number for t in hive.list(limit=10).items] == [own]


def test_an_agent_hands_off_only_as_itself_in_a_batch_too(hive: Hive, snap: Snap) -> None:
    batch = [request(0), request(1, requester="ana/lead")]
    err = refused(snap, ForbiddenRight, "not_requester",
                  lambda: hive.handoff_many(PLANNER, batch))
    assert err.extra["index"] == 1
    assert [r.state.value for r in hive.handoff_many(PLANNER, [request(0)])] == ["routed"]


class Boom:
    """A gate that fails on the third task it is asked about."""

    def __init__(self) -> None:
        self.asked = 0

    @hookimpl
    def hivelite_permission_gate(self, task: Any, hive: Any) -> str:
        self.asked += 1
        if self.asked == 3:
            raise RuntimeError("the gate broke")
        return "allow"


def test_a_failing_gate_refuses_the_batch(open_hive: OpenHive, snap: Snap) -> None:
    hive = open_hive(plugins=[Boom()])
    before = snap()
    with pytest.raises(PluginError) as err:
        hive.handoff_many(OWNER, [request(n) for n in range(5)])
    assert err.value.extra["index"] == 2
    assert snap() == before


def test_a_task_may_depend_on_an_earlier_one_of_the_batch(hive: Hive) -> None:
    receipts = hive.handoff_many(OWNER, [
        request(0, id="first"), request(1, packet=packet(depends_on=["first"]))])
    later = hive.get(receipts[1].number)
    assert [d.number for d in later.depends_on] == [receipts[0].number]
    assert later.blocked_by == [receipts[0].number]


def test_a_batch_task_may_name_its_dependencies_beside_its_packet(hive: Hive) -> None:
    """A task's ``depends_on`` as numbers or ids, beside its packet or in it (issue 46);
    a refusal names it where it was given, and the task's place."""
    receipts = hive.handoff_many(OWNER, [
        request(0, id="first"), request(1, depends_on=[1]),
        request(2, depends_on=["first", 2]), request(3, packet=packet(depends_on=[2]))])
    assert [hive.get(r.number).blocked_by for r in receipts] == [[], [1], [1, 2], [2]]
    assert hive.get(3).task.packet.depends_on == ["first", receipts[1].id]
    with pytest.raises(InvalidInput) as err:
        hive.handoff_many(OWNER, [request(0), request(1, depends_on=[0])])
    assert err.value.message == (
        "task 2 of the batch: invalid handoff: the tasks it depends on (depends_on), item 1:"
        " task numbers start at 1; not 0")
    assert len(hive.list().items) == 4


def test_a_batch_is_read_once_and_may_stream(hive: Hive) -> None:
    read: list[int] = []

    def stream() -> Iterator[dict[str, Any]]:
        for n in range(3):
            read.append(n)
            yield request(n)
    assert len(hive.handoff_many(OWNER, stream())) == 3
    assert read == [0, 1, 2]
    with pytest.raises(InvalidInput) as err:
        hive.handoff_many(OWNER, iter(()))
    assert err.value.reason == "empty_batch"


def test_a_retry_of_a_batch_of_named_tasks_answers_with_them(hive: Hive, snap: Snap) -> None:
    batch = [request(n, id=f"named-{n}") for n in range(3)]
    first = hive.handoff_many(OWNER, batch)
    before = snap()
    again = hive.handoff_many(OWNER, batch)
    assert [(r.number, r.id, r.state) for r in again] == [
        (r.number, r.id, r.state) for r in first]
    assert snap() == before


def test_a_stopped_agent_hands_off_nothing_in_bulk(hive: Hive, snap: Snap) -> None:
    hive.stop(OWNER, agent=PLANNER.name)
    refused(snap, ForbiddenRight, "vetoed", lambda: hive.handoff_many(PLANNER, [request(0)]))
    assert hive.handoff_many(Caller.agent("ana/lead", "desktop"), [
        request(0, requester="ana/lead")])[0].state.value == "routed"


# -- the CLI ---------------------------------------------------------------------------


def run(db: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*hivelite_command(), "--db", str(db), *args], input=stdin,
                          capture_output=True, text=True, timeout=HANG_S,
                          env={"PATH": "/usr/bin:/bin", "HIVELITE_LOAD_PLUGINS": "",
                               "HIVELITE_NOW": START, "HIVELITE_OWNER": "ana"})


def test_the_cli_hands_off_a_jsonl_file_in_one_go(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    assert run(db, "init", "--owner", "ana").returncode == 0
    lines = [json.dumps(request(n)) for n in range(50)]
    file = tmp_path / "tasks.jsonl"
    file.write_text("\n".join(lines[:25]) + "\n\n" + "\n".join(lines[25:]) + "\n")
    done = run(db, "--json", "handoff", "--from-jsonl", str(file))
    assert done.returncode == 0, done.stderr
    assert [r["number"] for r in json.loads(done.stdout)] == list(range(1, 51))
    told = run(db, "handoff", "--from-jsonl", "-", stdin=lines[0])
    assert told.stdout.startswith("handed off 1 tasks (#51 to #51): 1 routed")


@pytest.mark.parametrize(("text", "reason", "code"), [
    ('{"requester": "ana/planner"}', "invalid_handoff", 6),
    ("not json", "invalid_json", 6),
    ("[1, 2]", "invalid_task", 6),
])
def test_a_bad_line_changes_nothing_and_says_where(tmp_path: Path, text: str, reason: str,
                                                   code: int) -> None:
    db = tmp_path / "store.db"
    run(db, "init", "--owner", "ana")
    good = json.dumps(request(0))
    failed = run(db, "--json", "handoff", "--from-jsonl", "-",
                 stdin="\n".join([good, good, text, good]) + "\n")
    assert failed.returncode == code, failed.stderr
    error = json.loads(failed.stdout)["error"]
    assert (error["reason"], error["index"]) == (reason, 2)
    assert json.loads(run(db, "--json", "list").stdout)["items"] == []


def test_from_jsonl_takes_no_task_options(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    run(db, "init", "--owner", "ana")
    mixed = run(db, "handoff", "--from-jsonl", "-", "--assignee", "ana/coder", stdin="")
    assert mixed.returncode == 2 and "drop --assignee" in mixed.stderr
    missing = run(db, "handoff", "--requester", "ana/planner", "--task", "Write it down")
    assert missing.returncode == 2 and "--assignee" in missing.stderr


class Heard:
    """Records every transition it is told of."""

    def __init__(self) -> None:
        self.moves: list[tuple[int, str]] = []

    @hookimpl
    def hivelite_on_transition(self, task: Any, move: Any, actor: str, hive: Any,
                               entry: Any) -> None:
        self.moves.append((entry.number, entry.to_state))


def test_every_move_of_a_batch_is_told_a_window_at_a_time(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    """Transition plugins hear each move once, in order, though the journal is read a
    window of rows at a time (here 3, so a batch spans several windows)."""
    from hivelite.verbs import base

    monkeypatch.setattr(base, "NOTIFY_WINDOW", 3)
    heard = Heard()
    hive = open_hive(plugins=[heard])
    receipts = hive.handoff_many(OWNER, [request(n) for n in range(7)])
    assert heard.moves == [(r.number, "routed") for r in receipts]
