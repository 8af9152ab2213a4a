from __future__ import annotations

import json
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

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

from .conftest import GUEST, HANG_S, OWNER, PLANNER, held_task, own_task, packet
from .docblocks import blocks
from .test_discovery import clean_env, hivelite_script

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


# -- depends_on: numbers or ids, in the packet or beside it (issue 46, item 4) --------------

SEED_TASK = Draft202012Validator(json.loads(resources.files("hivelite").joinpath(
    "data/task.schema.json").read_text(encoding="utf-8")), format_checker=FormatChecker())


def three(hive: Hive) -> list[str]:
    """Three routed tasks (numbers 1 to 3); their ids."""
    return [hive.get(own_task(hive, id=f"dep-{n}")).task.id for n in (1, 2, 3)]


def depending(hive: Hive, where: str, refs: list[Any]) -> int:
    """A handoff that names ``refs`` as its dependencies ``where`` (``packet`` or
    ``beside``); its number."""
    if where == "packet":
        return hive.handoff(OWNER, **fields(packet=packet(depends_on=refs))).number
    return hive.handoff(OWNER, **fields(), depends_on=refs).number


@pytest.mark.parametrize("where", ["packet", "beside"])
@pytest.mark.parametrize("refs", [[1, 3], ["1", "3"], [1, "dep-3"], ("dep-1", "3")],
                         ids=["ints", "strings", "int-and-id", "tuple-id-and-string"])
def test_depends_on_takes_numbers_and_ids_where_the_caller_puts_them(
        hive: Hive, where: str, refs: list[Any]) -> None:
    ids = three(hive)
    number = depending(hive, where, list(refs))
    view = hive.get(number)
    assert view.task.packet.depends_on == [ids[0], ids[2]]  # stored as ids, as the seed has it
    assert [d.number for d in view.depends_on] == [1, 3]
    assert view.blocked_by == [1, 3]
    assert list(SEED_TASK.iter_errors(view.task.model_dump(mode="json"))) == []


def test_a_task_named_twice_is_one_dependency(hive: Hive) -> None:
    ids = three(hive)
    number = depending(hive, "beside", [2, "2", "dep-2", 1])
    assert hive.get(number).task.packet.depends_on == [ids[1], ids[0]]
    assert hive.get(number).blocked_by == [1, 2]


def test_an_empty_packet_list_leaves_room_for_depends_on_beside(hive: Hive) -> None:
    three(hive)
    number = hive.handoff(OWNER, **fields(packet=packet(depends_on=[])), depends_on=[2]).number
    assert hive.get(number).blocked_by == [2]


PY_REFUSALS = [
    ([True], "item 1: a bool is not a task number: a task number like 2 or a task id like"
             " fix-login-42"),
    ([2, 0], "item 2: task numbers start at 1; not 0"),
    ([-4], "item 1: task numbers start at 1; not -4"),
    ([1.5], "item 1: a task number like 2 or a task id like fix-login-42; not 1.5"),
    (["dep 1"], "item 1: a task number like 2 or a task id like fix-login-42; not 'dep 1'"),
    (["d" * 65], "item 1: task ids are at most 64 characters; not 65"),
    ([str(n) for n in range(1, 22)], "at most 20 items; not"),
]


@pytest.mark.parametrize(("refs", "said"), PY_REFUSALS,
                         ids=["bool", "zero", "negative", "float", "not-an-id", "id-too-long",
                              "21-tasks"])
@pytest.mark.parametrize("where", ["packet", "beside"])
def test_a_bad_dependency_is_refused_naming_the_python_argument(
        hive: Hive, where: str, refs: list[Any], said: str) -> None:
    three(hive)
    before = len(hive.journal())
    with pytest.raises(InvalidInput) as err:
        depending(hive, where, refs)
    named = 'packet["depends_on"]' if where == "packet" else "depends_on"
    assert err.value.reason == "invalid_handoff"
    assert err.value.message.startswith(
        f"invalid handoff: the tasks it depends on ({named}), {said}"
        if said.startswith("item") else f"invalid handoff: the tasks it depends on ({named}):"
        f" {said}"), err.value.message
    assert "--depends-on" not in err.value.message
    assert err.value.extra["field"].startswith(
        "packet.depends_on" if where == "packet" else "depends_on")
    assert len(hive.journal()) == before


@pytest.mark.parametrize("where", ["packet", "beside"])
def test_an_unknown_dependency_names_the_python_argument(hive: Hive, where: str) -> None:
    three(hive)
    with pytest.raises(InvalidInput) as err:
        depending(hive, where, [1, 9, "no-such-task"])
    named = 'packet["depends_on"]' if where == "packet" else "depends_on"
    assert (err.value.reason, err.value.message) == (
        "unknown_dependency",
        f"the tasks it depends on ({named}): this store has no task 9, no-such-task")
    assert err.value.extra["field"] == ("packet.depends_on" if where == "packet"
                                        else "depends_on")
    assert len(hive.journal()) == 6  # the three tasks, each made and routed


def test_depends_on_in_both_places_is_refused(hive: Hive) -> None:
    three(hive)
    with pytest.raises(InvalidInput) as err:
        hive.handoff(OWNER, **fields(packet=packet(depends_on=[1])), depends_on=[2])
    assert err.value.message == (
        'invalid handoff: the tasks it depends on are given twice, as depends_on and as'
        ' packet["depends_on"]; give them in one place')
    assert err.value.extra["field"] == "depends_on"
    assert len(hive.journal()) == 6


def test_the_api_page_example_runs(hive: Hive) -> None:
    """The Python example under ``handoff`` in docs/api.md (generated from the docstring)
    runs, with the ``hive`` and ``ana`` of the page's opening example."""
    page = (Path(__file__).parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    section = page.split("### `handoff`\n", 1)[1].split("\n### ", 1)[0]
    (example,) = [b.body for b in blocks(section) if "depends_on=" in b.body]
    exec(example, {"hive": hive, "ana": OWNER})
    (first, second) = hive.list().items
    assert hive.get(second.number).blocked_by == [first.number]


# -- the CLI names its option -------------------------------------------------------------


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(hivelite_script()), "--db", str(tmp_path / "s.db"), *args],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                          timeout=HANG_S)


HANDOFF = ("handoff", "--requester", "ana/planner", "--assignee", "ana/coder", "--project",
           "demo", "--task", "Write the parser", "--type", "code", "--accept", "tests pass")


def test_the_cli_names_depends_on_as_its_option(tmp_path: Path) -> None:
    assert cli(tmp_path, "init", "--owner", "ana").returncode == 0
    assert cli(tmp_path, *HANDOFF, "--id", "dep-1").returncode == 0
    made = cli(tmp_path, "--json", *HANDOFF, "--depends-on", "1", "--depends-on", "dep-1")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["task"]["packet"]["depends_on"] == ["dep-1"]
    bad = cli(tmp_path, *HANDOFF, "--depends-on", "1", "--depends-on", "dep 1")
    assert (bad.returncode, bad.stderr.strip()) == (6, (
        "error: invalid_input/invalid_handoff: invalid handoff: the tasks it depends on"
        " (--depends-on), item 2: a task number like 2 or a task id like fix-login-42;"
        " not 'dep 1'"))
    unknown = cli(tmp_path, *HANDOFF, "--depends-on", "9")
    assert (unknown.returncode, unknown.stderr.strip()) == (6, (
        "error: invalid_input/unknown_dependency: the tasks it depends on (--depends-on):"
        " this store has no task 9"))
    short = cli(tmp_path, *HANDOFF[:-6], "--task", "Fix", "--accept", "ok")
    assert "the task's text (--task): at least 5 characters" in short.stderr
    # a packet from a file is named by its key, as the file spells it
    (tmp_path / "p.json").write_text(json.dumps(packet(depends_on=[1, 0])))
    from_file = cli(tmp_path, *HANDOFF[:7], "--packet", "p.json")
    assert 'the tasks it depends on (packet["depends_on"]), item 2: task numbers start at 1' \
        in from_file.stderr
