"""Each task's journal as a list linked from its task row (migration 13): a task's history
is read by walking back from ``tasks.last_seq`` along ``journal.prev``, and the store's
rules keep the links true whoever writes, hivelite or raw SQL."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from hivelite import Hive
from hivelite.core.clock import ManualClock
from hivelite.store.doctor import diagnose
from hivelite.store.schema import TASK_COLUMNS_BUT_HEAD
from hivelite.store.sqlite import SqliteStore
from hivelite.store.transfer import export_lines, import_lines

from . import rawsql
from .conftest import CODER, OWNER, REVIEWER, START, own_task

EVIDENCE = [{"kind": "note", "summary": "checked"}]


def busy(path: Path) -> list[int]:
    """Tasks whose journal rows interleave: claims, a question, an expiry, an amend, a
    merge on a closed task, a cancel."""
    clock = ManualClock(START)
    with Hive.open(path, owner="ana", clock=clock) as hive:
        numbers = [own_task(hive) for _ in range(4)]
        first = hive.claim(CODER, numbers[0])
        hive.claim(CODER, numbers[1])
        hive.checkpoint(CODER, numbers[0], lease_id=first.lease_id, token=first.fencing_token,
                        progress="half way")
        hive.submit(CODER, numbers[0], lease_id=first.lease_id, token=first.fencing_token,
                    summary="done", evidence=EVIDENCE)
        hive.cancel(OWNER, numbers[2], reason="not needed")
        hive.verify(REVIEWER, numbers[0])
        hive.amend(CODER, numbers[0], merge_commit="abc1234")  # a row about a closed task
        clock.advance(minutes=30)  # the second claim expires
        again = hive.claim(CODER, numbers[1])
        hive.submit(CODER, numbers[1], lease_id=again.lease_id, token=again.fencing_token,
                    summary="done", evidence=EVIDENCE)
        hive.amend(CODER, numbers[1], summary="done, better")
        hive.verify(REVIEWER, numbers[1])
    return numbers


def test_the_head_rule_covers_every_column_but_the_head(tmp_path: Path) -> None:
    Hive.open(tmp_path / "s.db", owner="ana").close()
    conn = apsw.Connection(str(tmp_path / "s.db"))
    columns = [str(r[1]) for r in conn.execute("PRAGMA table_info(tasks)")]
    assert [c for c in columns if c != "last_seq"] == list(TASK_COLUMNS_BUT_HEAD)


def test_a_tasks_history_is_its_own_rows_through_the_links(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    numbers = busy(path)
    with Hive.open(path) as hive:
        with hive.store.read() as reader:
            every = reader.journal()
        for number in numbers:
            mine = [e.seq for e in every if e.number == number]
            assert [e.seq for e in hive.history(number)] == mine
            assert len(mine) >= 2
        assert [e.reason for e in hive.history(numbers[0])][-1] == "merge_recorded"
    conn = apsw.Connection(str(path))
    assert "journal_by_task" not in {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_schema")}
    for number in numbers:
        seqs = [r[0] for r in conn.execute(
            "SELECT seq FROM journal WHERE task = ? ORDER BY seq", (number,))]
        assert conn.execute("SELECT last_seq FROM tasks WHERE number = ?",
                            (number,)).get == seqs[-1]
        assert [r[0] for r in conn.execute(
            "SELECT prev FROM journal WHERE task = ? ORDER BY seq", (number,))] == [
                None, *seqs[:-1]]
    assert all(f.ok for f in diagnose(conn)), [f for f in diagnose(conn) if not f.ok]


def newest(conn: apsw.Connection) -> int:
    return int(conn.execute("SELECT max(seq) FROM journal").get)


@pytest.mark.parametrize(("statement", "reason"), [
    ("UPDATE tasks SET last_seq = 1 WHERE number = 2", "journal_head"),
    ("UPDATE tasks SET last_seq = (SELECT max(seq) + 1 FROM journal) WHERE number = 1",
     "journal_head"),
    ("UPDATE tasks SET last_seq = NULL WHERE number = 1", "journal_head"),
    ("INSERT INTO journal(task, at, actor, from_state, to_state, reason, prev)"
     " SELECT number, updated_at, 'ana', state, state, 'note', last_seq - 1 FROM tasks"
     " WHERE number = 1", "journal_forged"),
    ("INSERT INTO journal(task, at, actor, from_state, to_state, reason)"
     " SELECT number, updated_at, 'ana', state, state, 'note' FROM tasks"
     " WHERE number = 1", "journal_forged"),
    ("INSERT INTO journal(seq, task, at, actor, from_state, to_state, reason, prev)"
     " SELECT (SELECT max(seq) + 2 FROM journal), number, updated_at, 'ana', state, state,"
     " 'note', last_seq FROM tasks WHERE number = 1", "journal_forged"),
    ("INSERT INTO journal(task, at, actor, reason, prev) VALUES (NULL, '2026-12-02', 'ana',"
     " 'note', 1)", "journal_forged"),
])
def test_raw_sql_cannot_break_the_links(tmp_path: Path, statement: str, reason: str) -> None:
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
        own_task(hive)
    conn = rawsql.connect(path)
    before = list(conn.execute("SELECT * FROM journal")), list(conn.execute(
        "SELECT * FROM tasks"))
    with pytest.raises(apsw.ConstraintError, match=reason):
        conn.execute(statement)
    assert (list(conn.execute("SELECT * FROM journal")),
            list(conn.execute("SELECT * FROM tasks"))) == before


def test_a_legal_raw_move_and_event_keep_the_links(tmp_path: Path) -> None:
    """Raw SQL that moves a task without naming a seq, or journals an event that links to
    the task's head, is linked by the store itself (the chain still shows it as written
    outside hivelite)."""
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
    conn = rawsql.connect(path)
    conn.execute("INSERT INTO journal(task, at, actor, from_state, to_state, reason, prev)"
                 " SELECT number, updated_at, 'ana', state, state, 'note', last_seq"
                 " FROM tasks WHERE number = ?", (number,))
    conn.execute("UPDATE tasks SET state = 'cancelled', actor = 'ana', reason = 'raw'"
                 " WHERE number = ?", (number,))
    assert conn.execute("SELECT last_seq FROM tasks WHERE number = ?",
                        (number,)).get == newest(conn)
    found = {f.check: f for f in diagnose(conn)}
    assert found["replay"].ok, found["replay"].detail
    assert not found["hash chain"].ok
    with Hive.open(path) as hive:
        assert [e.reason for e in hive.history(number)][-2:] == ["note", "raw"]


@pytest.mark.parametrize("damage", [
    "UPDATE journal SET prev = NULL WHERE seq = (SELECT last_seq FROM tasks WHERE number = 1)",
    "UPDATE tasks SET last_seq = (SELECT prev FROM journal WHERE seq = tasks.last_seq)"
    " WHERE number = 1",
])
def test_doctor_finds_a_link_changed_behind_the_rules(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "s.db"
    busy(path)
    conn = apsw.Connection(str(path))
    with conn:
        triggers = list(conn.execute(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'"
            " AND name IN ('journal_no_update', 'task_head')"))
        for name, _ in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute(damage)
        for _, sql in triggers:
            conn.execute(sql)
    found = {f.check: f for f in diagnose(conn)}
    assert not found["replay"].ok
    assert "task 1" in found["replay"].detail


def test_an_export_leaves_the_links_out_and_an_import_makes_them(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    numbers = busy(path)
    conn = apsw.Connection(str(path))
    lines = list(export_lines(conn))
    conn.close()
    rows = [json.loads(line)["row"] for line in lines[1:]]
    assert not any("last_seq" in row or "prev" in row for row in rows)
    store = SqliteStore(tmp_path / "copy.db")
    try:
        import_lines(store.conn, lines)  # gated: doctor's replay checks the links
    finally:
        store.close()
    with Hive.open(path) as hive:
        want = {n: [e.seq for e in hive.history(n)] for n in numbers}
    with Hive.open(tmp_path / "copy.db") as hive:
        assert {n: [e.seq for e in hive.history(n)] for n in numbers} == want


def counts(path: Path) -> list[tuple[object, ...]]:
    conn = apsw.Connection(str(path))
    try:
        return [tuple(r) for r in conn.execute("SELECT * FROM claim_counts ORDER BY agent")]
    finally:
        conn.close()


def test_a_claim_is_counted_only_for_an_agent_with_a_budget(tmp_path: Path) -> None:
    """Without a budget a claim writes no count; with one, the day's row counts each claim
    (the first read from the journal), and a new time zone counts again from it."""
    path = tmp_path / "s.db"
    clock = ManualClock(START)
    with Hive.open(path, owner="ana", clock=clock) as hive:
        hive.claim(CODER, own_task(hive))
        assert counts(path) == []
        assert hive.set_budget(OWNER, CODER.name, tasks=5).used_tasks == 1
        hive.claim(CODER, own_task(hive))
        assert counts(path) == [(CODER.name, "2026-12-02T00:00:00.000Z", 2)]
        hive.claim(CODER, own_task(hive))
        assert counts(path)[0][2] == 3
        hive.set_policy(OWNER, "timezone", "Asia/Tokyo")  # its day began at 15:00 UTC
        assert counts(path) == []
        assert hive.budgets()[0].used_tasks == 3
        hive.claim(CODER, own_task(hive))
        assert counts(path) == [(CODER.name, "2026-12-01T15:00:00.000Z", 4)]
        clock.advance(hours=24)  # a new day: nothing claimed in it yet
        assert hive.budgets()[0].used_tasks == 0
        hive.claim(CODER, own_task(hive))
        assert counts(path) == [(CODER.name, "2026-12-02T15:00:00.000Z", 1)]
        hive.clear_budget(OWNER, CODER.name)  # no budget: no count
        assert counts(path) == []
    conn = apsw.Connection(str(path))
    assert all(f.ok for f in diagnose(conn))


def test_doctor_finds_a_count_behind_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        hive.set_budget(OWNER, CODER.name, tasks=5)
        hive.claim(CODER, own_task(hive))
        hive.claim(CODER, own_task(hive))
    conn = apsw.Connection(str(path))  # the count's rule set aside (migration 22)
    kept = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'claim_counts_grown'").get
    conn.execute("DROP TRIGGER claim_counts_grown")
    conn.execute("UPDATE claim_counts SET claims = 0")
    conn.execute(kept)
    found = {f.check: f for f in diagnose(conn)}
    assert not found["usage"].ok
    assert "counted as 0; the journal has 2" in found["usage"].detail
