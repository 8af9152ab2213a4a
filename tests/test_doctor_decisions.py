"""``doctor`` on what decides (issue 30, part 3): a result at the version its submissions
and amends made it, each merge journaled and by its worker or the owner, usage within its
bounds, each move by one who may make it. Each bad row is planted with the store's rules
set aside and put back byte for byte (as an import or a hand with the file can), so the
schema check passes and only the check that looks for the damage fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivelite import Hive, ManualClock
from hivelite.core.protocol import MAX_USAGE

from . import rawsql
from .attacks import AT
from .attacks import made_by_the_library as scenario
from .conftest import CODER, OWNER, START, held_task
from .test_doctor import findings


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """The attacks' scenario, its result in approval amended once by the library."""
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        numbers = scenario(hive)
        hive.amend(CODER, numbers["approval"], summary="done, and checked twice")
    return path, numbers


def behind_the_rules(path: Path, *statements: str) -> None:
    """Run ``statements`` with every trigger set aside, then put them back as they were."""
    conn = rawsql.connect(path)
    try:
        with conn:
            triggers = list(conn.execute("SELECT name, sql FROM sqlite_schema"
                                         " WHERE type = 'trigger' ORDER BY rowid"))
            for name, _ in triggers:
                conn.execute(f'DROP TRIGGER "{name}"')
            for statement in statements:
                conn.execute(statement)
            for _, sql in triggers:
                conn.execute(sql)
    finally:
        conn.close()


def failed(path: Path, check: str) -> str:
    """``check``'s finding, which must fail while the schema check passes."""
    found = findings(path)
    assert found["schema"][0], found["schema"]
    ok, detail = found[check]
    assert not ok, detail
    return detail


def test_the_library_leaves_every_new_check_sound(store: tuple[Path, dict[str, int]]) -> None:
    path, _ = store
    found = findings(path)
    for check in ("results", "usage", "actors"):
        assert found[check][0], found[check]
    assert "each merge journaled" in found["results"][1]


def test_a_swapped_result_is_found(store: tuple[Path, dict[str, int]]) -> None:
    path, n = store
    behind_the_rules(path, "UPDATE results SET body = json_set(body, '$.summary', 'swapped'),"
                     f" version = version + 1 WHERE task = {n['approval']}")
    assert (f"task {n['approval']}'s result is version 3; its journal has 2 submission(s)"
            " and amend(s)") in failed(path, "results")


def test_an_amend_journaled_by_another_does_not_count(
        store: tuple[Path, dict[str, int]]) -> None:
    path, n = store
    behind_the_rules(
        path, "INSERT INTO journal(task, at, actor, from_state, to_state, reason, detail)"
        f" VALUES ({n['approval']}, '{AT}', 'ana/reviewer', 'approval', 'approval',"
        " 'amended', '{\"version\": 3}')",
        f"UPDATE results SET version = 3 WHERE task = {n['approval']}")
    assert f"task {n['approval']}'s result is version 3" in failed(path, "results")


@pytest.mark.parametrize(("task", "by", "journaled", "found"), [
    ("completed", "ana", False, "the merge abc1234 of task {task} has no journal row"),
    ("completed", "ana/reviewer", True,
     "the merge of task {task} was recorded by ana/reviewer, neither its worker nor the"
     " owner"),
    ("cancelled", "ana", True, "task {task} is cancelled, yet its result has a merge record"),
])
def test_a_merge_recorded_behind_the_verbs_back_is_found(
        store: tuple[Path, dict[str, int]], task: str, by: str, journaled: bool,
        found: str) -> None:
    path, n = store
    state = "cancelled" if task == "cancelled" else "completed"
    row = ("INSERT INTO journal(task, at, actor, from_state, to_state, reason, detail)"
           f" VALUES ({n[task]}, '{AT}', '{by}', '{state}', '{state}', 'merge_recorded',"
           " '{\"merge_commit\": \"abc1234\"}')")
    merge = (f"UPDATE results SET merge_commit = 'abc1234', merged_by = '{by}'"
             f" WHERE task = {n[task]}")
    behind_the_rules(path, *([row] if journaled else []), merge)
    assert found.format(task=n[task]) in failed(path, "results")


def test_a_journaled_merge_missing_from_its_result_is_found(
        store: tuple[Path, dict[str, int]]) -> None:
    """The store takes a merge's journal row alone (an event on a completed task); doctor
    notices the result never got the merge it names."""
    path, n = store
    conn = rawsql.connect(path)
    conn.execute("INSERT INTO journal(task, at, actor, from_state, to_state, reason, detail,"
                 f" prev) VALUES ({n['completed']}, '{AT}', 'ana', 'completed', 'completed',"
                 " 'merge_recorded', '{\"merge_commit\": \"abc1234\"}', (SELECT last_seq"
                 f" FROM tasks WHERE number = {n['completed']}))")
    seq = conn.last_insert_rowid()
    conn.close()
    assert (f"journal row {seq} records merge abc1234 of task {n['completed']}, which its"
            " result does not have") in failed(path, "results")


@pytest.mark.parametrize(("tokens", "usd"), [
    (-5, "NULL"), ("NULL", -1), (MAX_USAGE["tokens"] + 1, "NULL"), ("NULL", 2**62),
    ("1.5", "NULL")])
def test_usage_out_of_bounds_is_found(store: tuple[Path, dict[str, int]], tokens: object,
                                      usd: object) -> None:
    path, n = store
    behind_the_rules(path, "INSERT INTO updates(seq, task, at, actor, summary, tokens,"
                     f" usd_micros) VALUES (900, {n['claimed']}, '{AT}', 'ana/coder', 'x',"
                     f" {tokens}, {usd})")
    detail = failed(path, "usage")
    assert f"update 900 of task {n['claimed']} reports" in detail


@pytest.mark.parametrize(("task", "sql", "move"), [
    ("routed", "state = 'cancelled', actor = 'ana/coder'", "cancel_routed"),
    ("held", "state = 'routed', waiting_on = NULL, actor = 'guest/scout'", "approve"),
    ("approval", "state = 'routed', actor = 'ana/coder'", "decline"),
])
def test_an_owners_move_made_by_another_is_found(
        store: tuple[Path, dict[str, int]], task: str, sql: str, move: str) -> None:
    """What the store now refuses, doctor's replay names when it was written anyway."""
    path, n = store
    behind_the_rules(path, f"UPDATE tasks SET {sql} WHERE number = {n[task]}",
                     "INSERT INTO journal(task, at, actor, from_state, to_state, waiting_on,"
                     " reason) SELECT number, updated_at, actor, (SELECT to_state FROM"
                     " journal WHERE task = number ORDER BY seq DESC LIMIT 1), state,"
                     f" waiting_on, 'raw' FROM tasks WHERE number = {n[task]}")
    assert f"(task {n[task]}, {move}) was made by" in failed(path, "actors")


def test_a_submissions_one_row_made_by_another_is_found(
        store: tuple[Path, dict[str, int]]) -> None:
    """A submission's one row (migration 19) is read as the seed moves it stands for: one
    written by an agent other than the assignee names the holder's first move it made."""
    path, n = store
    behind_the_rules(
        path, "UPDATE tasks SET state = 'approval', actor = 'ana/reviewer', lease_id = NULL,"
        " lease_holder = NULL, lease_instance = NULL, lease_session = NULL,"
        " lease_expires = NULL, detail = '{\"via\":[\"working\",\"verifying\"]}'"
        f" WHERE number = {n['claimed']}",
        "INSERT INTO journal(task, at, actor, from_state, to_state, reason, detail)"
        " SELECT number, updated_at, actor, 'accepted', state, 'raw', detail FROM tasks"
        f" WHERE number = {n['claimed']}")
    detail = failed(path, "actors")
    assert f"(task {n['claimed']}, start) was made by ana/reviewer" in detail
    assert f"(task {n['claimed']}, submit) was made by ana/reviewer" in detail


def journaled(task: int) -> str:
    """The journal row of ``task``'s last move, as the store's trigger writes it (set
    aside with the rest by :func:`behind_the_rules`)."""
    return ("INSERT INTO journal(task, at, actor, from_state, to_state, waiting_on, reason)"
            " SELECT number, updated_at, actor, (SELECT to_state FROM journal WHERE task ="
            " number ORDER BY seq DESC LIMIT 1), state, waiting_on, reason FROM tasks"
            f" WHERE number = {task}")


CANCEL_HELD = ("UPDATE tasks SET state = 'cancelled', waiting_on = NULL, actor = '{actor}',"
               " reason = 'withdrawn' WHERE number = {task}")
"""A cancel by ``actor`` (of the guest's held task, requested by guest/scout, unless
another is named)."""


def team(path: Path) -> None:
    with Hive.open(path, clock=ManualClock(START)) as hive:
        hive.set_policy(OWNER, "mode", "team")


def test_in_team_mode_a_guests_own_request_withdrawn_by_its_owners_agent_is_sound(
        store: tuple[Path, dict[str, int]]) -> None:
    """As the store's rule has it: the store takes the raw cancel, and doctor too."""
    path, n = store
    team(path)
    conn = rawsql.connect(path)
    conn.execute(CANCEL_HELD.format(actor="guest/planner", task=n["held"]))
    conn.close()
    found = findings(path)
    assert found["actors"][0], found["actors"]
    assert found["replay"][0] and found["policy"][0]


@pytest.mark.parametrize(("actor", "mode", "task"), [
    ("guest/planner", None, "held"),  # personal mode: the owner's alone
    ("guest/planner", "personal", "held"),  # team mode, ended
    ("bob/planner", "team", "held"),  # another owner's agent
    ("ana/planner", "team", "held"),  # the store owner's agent
    ("guest", "team", "held"),  # the guest's owner by name: not an agent
    ("ana/coder", "team", "routed"),  # the store owner's own request: the owner's
])
def test_a_cancel_the_guests_owner_may_not_make_is_found(
        store: tuple[Path, dict[str, int]], actor: str, mode: str | None, task: str) -> None:
    path, n = store
    if mode is not None:
        with Hive.open(path, clock=ManualClock(START)) as hive:
            hive.set_policy(OWNER, "mode", "team")
            if mode != "team":
                hive.set_policy(OWNER, "mode", mode)
    behind_the_rules(path, CANCEL_HELD.format(actor=actor, task=n[task]), journaled(n[task]))
    move = "cancel_waiting" if task == "held" else "cancel_routed"
    assert (f"(task {n[task]}, {move}) was made by {actor}, who may not make"
            " it") in failed(path, "actors")


def test_the_mode_is_the_one_when_the_cancel_was_made(
        store: tuple[Path, dict[str, int]]) -> None:
    """A cancel made in personal mode stays the owner's to make after the mode turns to
    team; one made in team mode stays sound after it turns back."""
    path, n = store
    behind_the_rules(path, CANCEL_HELD.format(actor="guest/planner", task=n["held"]),
                     journaled(n["held"]))
    team(path)
    assert f"(task {n['held']}, cancel_waiting) was made by" in failed(path, "actors")
    with Hive.open(path, clock=ManualClock(START)) as hive:
        later = held_task(hive)
    conn = rawsql.connect(path)
    conn.execute(CANCEL_HELD.format(actor="guest/other", task=later))
    conn.close()
    with Hive.open(path, clock=ManualClock(START)) as hive:
        hive.set_policy(OWNER, "mode", "personal")
    detail = failed(path, "actors")
    assert f"task {later}," not in detail and f"task {n['held']}," in detail


def test_a_cancel_by_a_name_with_no_owner_part_is_found(
        store: tuple[Path, dict[str, int]]) -> None:
    """A request named by no ``owner/agent`` (raw SQL can make one) is withdrawn by no
    agent of its owner: ``outsider`` is no agent, whatever the mode."""
    path, _ = store
    team(path)
    conn = rawsql.connect(path)
    conn.execute("INSERT INTO tasks(number, id, state, project, requester, assignee,"
                 " created_at, updated_at) VALUES ((SELECT max(number) + 1 FROM tasks),"
                 f" 't-new', 'requested', 'demo', 'planner', 'ana/coder', '{AT}', '{AT}')")
    number = conn.execute("SELECT number FROM tasks WHERE id = 't-new'").get
    conn.close()
    behind_the_rules(path, "UPDATE tasks SET state = 'cancelled', actor = 'outsider',"
                     f" reason = 'withdrawn' WHERE number = {number}", journaled(number))
    assert (f"(task {number}, cancel_requested) was made by outsider, who may not make"
            " it") in failed(path, "actors")
