"""Raw SQL against a real store (issue 14): the attacks that used to get through, each now
refused by the store itself, through a plain connection with no hivelite settings (no
``recursive_triggers``), and each leaving every row as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from hivelite import Caller, Hive, ManualClock, State

from . import rawsql
from .conftest import CODER, OWNER, REVIEWER, START, own_task

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]


def attacked(hive: Hive) -> dict[str, int]:
    """The tasks the attacks aim at, made by the library: a completed one, one in approval
    (the verdict completes only the first), a claimed one."""
    numbers: dict[str, int] = {}
    for name in ("completed", "approval"):
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
        numbers[name] = number
    hive.verify(REVIEWER, numbers["completed"], verdict="accept")
    numbers["claimed"] = own_task(hive)
    hive.claim(CODER, numbers["claimed"])
    assert hive.get(numbers["completed"]).task.state is State.completed
    assert hive.get(numbers["approval"]).task.state is State.approval
    return numbers


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[apsw.Connection, dict[str, int]]]:
    """A store the library made: a completed task, one in approval (the verdict completes
    only the first), a claimed one."""
    path = tmp_path / "attacked.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        numbers = attacked(hive)
    conn = rawsql.connect(path)
    assert conn.execute("PRAGMA recursive_triggers").get == 0  # a plain connection
    yield conn, numbers
    conn.close()


def columns(conn: apsw.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def replace_row(conn: apsw.Connection, table: str, where: str) -> str:
    """``INSERT OR REPLACE`` of an existing row of ``table`` with itself."""
    names = ", ".join(columns(conn, table))
    return f"INSERT OR REPLACE INTO {table}({names}) SELECT {names} FROM {table} WHERE {where}"


def test_the_issues_reproducer_is_refused(store: tuple[apsw.Connection, dict[str, int]]) -> None:
    conn, n = store
    rawsql.refused(
        conn, "forbidden_right:rows_are_kept",
        "INSERT OR REPLACE INTO tasks(number,id,state,project,requester,assignee,created_at,"
        "updated_at) SELECT number,id,'requested',project,requester,'ana/thief',created_at,"
        f"updated_at FROM tasks WHERE number={n['completed']}")


@pytest.mark.parametrize(("table", "where"), [
    ("tasks", "number = {completed}"),
    ("packets", "task = {completed}"),
    ("results", "task = {completed}"),
    ("confirmations", "task = {completed}"),
    ("journal", "task = {completed}"),
    ("meta", "key = 'owner'"),
])
@pytest.mark.parametrize("verb", ["INSERT OR REPLACE", "REPLACE", "INSERT OR IGNORE",
                                  "INSERT"])
def test_no_kept_row_is_replaced_or_inserted_twice(
        store: tuple[apsw.Connection, dict[str, int]], table: str, where: str,
        verb: str) -> None:
    conn, n = store
    sql = replace_row(conn, table, where.format(**n)).replace("INSERT OR REPLACE", verb, 1)
    rawsql.refused(conn, "forbidden_right:rows_are_kept", sql)


def test_updates_and_checkpoints_are_kept_too(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.checkpoint(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                        progress="half")
        hive.update(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="more", tokens=5)
    conn = rawsql.connect(path)
    for table in ("updates", "checkpoints"):
        rawsql.refused(conn, "forbidden_right:rows_are_kept", replace_row(conn, table, "1"))
    rawsql.refused(conn, "forbidden_right:rows_are_kept",
                   "UPDATE checkpoints SET task = task + 100")


def test_a_completion_must_be_decided(store: tuple[apsw.Connection, dict[str, int]]) -> None:
    """approval -> completed needs the owner's sign-off or enough counted confirmations."""
    conn, n = store
    rawsql.refused(conn, "forbidden_right:not_decided",
                   f"UPDATE tasks SET state = 'completed' WHERE number = {n['approval']}")
    rawsql.refused(conn, "forbidden_right:not_decided",
                   "UPDATE tasks SET state = 'completed', actor = 'ana/coder'"
                   f" WHERE number = {n['approval']}")
    # naming the owner is a sign-off: raw SQL with the file can impersonate the owner,
    # and the journal then says so
    conn.execute("UPDATE tasks SET state = 'completed', actor = 'ana', reason = 'raw'"
                 f" WHERE number = {n['approval']}")
    last = conn.execute("SELECT actor, to_state FROM journal ORDER BY seq DESC LIMIT 1")
    assert last.fetchone() == ("ana", "completed")


def test_a_counted_verdict_must_be_independent(
        store: tuple[apsw.Connection, dict[str, int]]) -> None:
    conn, n = store
    insert = ("INSERT INTO confirmations(task, version, reviewer, instance, verdict, at,"
              " counted) VALUES (?, ?, ?, ?, 'accept', '2026-12-02T09:00:00.000Z', ?)")
    task = n["approval"]
    for reviewer, instance, version in (("ana/coder", "desktop", 1),  # the worker
                                        ("ana/other", "laptop", 1),   # its instance
                                        ("ana/other", "LAPTOP", 1),   # in capitals
                                        ("ana/other", "desktop", 7)):  # another version
        rawsql.refused(conn, "invalid_state:reviewer_not_independent", insert,
                       (task, version, reviewer, instance, 1))
    keep = insert.replace("counted)", "counted, why)").replace("?)", "?, ?)")
    conn.execute(keep, (task, 1, "ana/coder", "laptop", 0, "the worker's own"))  # kept


def test_a_result_keeps_its_worker(store: tuple[apsw.Connection, dict[str, int]]) -> None:
    conn, n = store
    task = n["approval"]
    for change in ("worker = 'ana/reviewer'", "instance = 'desktop'", "session = 's9'",
                   "threshold = 0", "outcome = 'failed'", "task = task + 100",
                   "worker = 'ana/reviewer', version = version + 1"):
        rawsql.refused(conn, "forbidden_right:result_fixed",
                       f"UPDATE results SET {change} WHERE task = {task}")
    rawsql.refused(conn, "forbidden_right:result_fixed",
                   f"UPDATE results SET merge_commit = 'abc1234' WHERE task = {task}")
    rawsql.refused(conn, "forbidden_right:result_by_holder_only",
                   "INSERT INTO results(task, body, worker, instance)"
                   f" VALUES ({n['claimed']}, '{{}}', 'ana/reviewer', 'desktop')")


@pytest.mark.parametrize("expires", ["9999-12-31T23:59:59.999Z", "2026-12-02T09:16:00.000Z",
                                     "2026-12-02T09:04:00.000Z", "2026-12-02T08:00:00.000Z"])
def test_a_lease_lasts_five_to_fifteen_minutes(
        store: tuple[apsw.Connection, dict[str, int]], expires: str) -> None:
    conn, n = store
    rawsql.refused(conn, "invalid_input:lease_length",
                   "UPDATE tasks SET lease_expires = ? WHERE number = ?",
                   (expires, n["claimed"]))


def test_a_lease_is_taken_only_by_a_claim(
        store: tuple[apsw.Connection, dict[str, int]]) -> None:
    conn, n = store
    task = n["claimed"]
    for change in ("lease_holder = 'ana/thief'", "lease_instance = 'elsewhere'",
                   "lease_id = 'Lforged', lease_token = lease_token + 1",
                   "lease_token = lease_token + 5"):
        rawsql.refused(conn, "forbidden_right:lease_by_claim_only",
                       f"UPDATE tasks SET {change} WHERE number = {task}")
    conn.execute(f"UPDATE tasks SET state = 'routed', lease_id = NULL, lease_holder = NULL,"
                 f" lease_instance = NULL, lease_expires = NULL WHERE number = {task}")
    # a claim by someone who is not the assignee, or skipping a token, is no claim
    claim = ("UPDATE tasks SET state = 'accepted', lease_id = 'L2', lease_token = {token},"
             " lease_holder = '{holder}', lease_instance = 'laptop',"
             " updated_at = '2026-12-02T09:00:00.000Z',"
             " lease_expires = '2026-12-02T09:10:00.000Z' WHERE number = {task}")
    rawsql.refused(conn, "forbidden_right:lease_by_claim_only",
                   claim.format(token=2, holder="ana/thief", task=task))
    rawsql.refused(conn, "forbidden_right:lease_by_claim_only",
                   claim.format(token=5, holder="ana/coder", task=task))
    conn.execute(claim.format(token=2, holder="ana/coder", task=task))  # a real claim


@pytest.mark.parametrize("sql", [
    "UPDATE meta SET value = 'mallory' WHERE key = 'owner'",
    "DELETE FROM meta WHERE key = 'owner'",
    "UPDATE meta SET key = 'former-owner' WHERE key = 'owner'",
    "INSERT OR REPLACE INTO meta(key, value) VALUES ('owner', 'mallory')",
])
def test_the_owner_is_fixed(store: tuple[apsw.Connection, dict[str, int]], sql: str) -> None:
    conn, _ = store
    expected = ("forbidden_right:rows_are_kept" if sql.startswith("INSERT")
                else "forbidden_right:owner_fixed")
    rawsql.refused(conn, expected, sql)


def test_the_library_still_does_everything(tmp_path: Path) -> None:
    """Resubmission after a failure, amendment, renewal and the merge record all pass the
    new rules."""
    clock = ManualClock(START)
    with Hive.open(tmp_path / "s.db", owner="ana", clock=clock) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
        clock.advance(minutes=8)
        hive.renew(CODER, number, minutes=15, **fence)
        hive.submit(CODER, number, summary="no", evidence=EVIDENCE, outcome="failed", **fence)
        again = hive.claim(Caller.agent("ana/coder", "desktop"), number)
        hive.submit(Caller.agent("ana/coder", "desktop"), number, lease_id=again.lease_id,
                    token=again.fencing_token, summary="yes", evidence=EVIDENCE)
        hive.amend(Caller.agent("ana/coder", "desktop"), number, summary="yes, really")
        hive.verify(Caller.agent("ana/reviewer", "laptop"), number, verdict="accept")
        hive.amend(OWNER, number, merge_commit="3f2a9c1")
        view = hive.get(number)
        assert view.task.state is State.completed and view.merge is not None
