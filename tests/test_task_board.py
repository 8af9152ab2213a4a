"""The ``task_board`` view (migration 9, issue 19 point 7): what the ``sqlite3`` shell,
datasette or any other SQLite tool sees of the tasks: titles, states, parties, the claim's
holder, and never a lease id or a fencing token. It is read, never written."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import apsw
import pytest

from hivelite import Hive, ManualClock

from . import rawsql
from .conftest import CODER, HANG_S, START, own_task, packet

COLUMNS = ["number", "title", "state", "waiting_on", "assignee", "requester",
           "project", "priority", "labels", "holder", "instance", "claim_expires",
           "created_at", "updated_at"]


@pytest.fixture
def board_store(tmp_path: Path) -> tuple[Path, str]:
    """Three tasks, one claimed; returns the file and the claim's lease id."""
    path = tmp_path / "store.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive, packet=packet(task="Write the parser"), labels=["parser"])
        claimed = own_task(hive, packet=packet(task="Fix the login bug"), priority="high")
        own_task(hive, packet=packet(task="Document the API"))
        lease = hive.claim(CODER, claimed).lease_id
    return path, lease


def test_another_tool_sees_each_task_with_its_title(board_store: tuple[Path, str]) -> None:
    path, lease = board_store
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)  # not hivelite's own driver
    try:
        cursor = conn.execute("SELECT * FROM task_board ORDER BY number")
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        conn.close()
    assert names == COLUMNS
    assert [(r["number"], r["title"], r["state"], r["priority"], r["holder"]) for r in rows] == [
        (1, "Write the parser", "routed", "normal", None),
        (2, "Fix the login bug", "accepted", "high", "ana/coder"),
        (3, "Document the API", "routed", "normal", None)]
    assert json.loads(rows[0]["labels"]) == ["parser"]
    assert rows[1]["instance"] == "laptop" and rows[1]["claim_expires"] > START
    assert not any(lease in str(value) for row in rows for value in row.values())
    assert not {"lease_id", "lease_token", "lease_session"} & set(names)


@pytest.mark.parametrize("statement", [
    "INSERT INTO task_board(number, title) VALUES (9, 'x')",
    "UPDATE task_board SET state = 'completed'",
    "DELETE FROM task_board"])
def test_the_board_cannot_be_written(board_store: tuple[Path, str], statement: str) -> None:
    path, _ = board_store
    conn = rawsql.connect(path)
    try:
        before = rawsql.snapshot(conn)
        with pytest.raises(apsw.SQLError, match="task_board"):
            conn.execute(statement)
        assert rawsql.snapshot(conn) == before
    finally:
        conn.close()


def test_the_sqlite3_shell_reads_it(board_store: tuple[Path, str]) -> None:
    shell = shutil.which("sqlite3")
    if shell is None:
        if os.environ.get("HIVELITE_NEED_SQLITE3") == "1":
            pytest.fail("the sqlite3 shell is not installed (.ci/run installs it)")
        pytest.skip("the sqlite3 shell is not installed")
    path, _ = board_store
    ran = subprocess.run([shell, "-readonly", str(path),
                          "SELECT number, title, state, holder FROM task_board"],
                         capture_output=True, text=True, timeout=HANG_S, check=True)
    assert ran.stdout.splitlines() == ["1|Write the parser|routed|",
                                       "2|Fix the login bug|accepted|ana/coder",
                                       "3|Document the API|routed|"]
