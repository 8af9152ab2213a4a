"""Raw SQL on a store file through a second connection, bypassing the library.

Used to prove that the triggers alone enforce the protocol, and to put a task
into any state along legal moves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
import pytest

from hivelite.core.protocol import State, WaitingOn
from hivelite.store.schema import OWNER_DECIDES

RESULT = {
    "summary": "done",
    "evidence": [{"kind": "note", "summary": "checked by hand"}],
    "provenance": "agent_generated",
    "returned_by": "ana/coder",
    "returned_at": "2026-12-02T09:00:00.000Z",
}

# The legal path from `requested` to each (state, waiting_on).
PATHS: dict[tuple[State, WaitingOn | None], list[tuple[State, WaitingOn | None]]] = {
    (State.requested, None): [],
    (State.routed, None): [(State.routed, None)],
    (State.waiting, WaitingOn.owner_approval): [(State.waiting, WaitingOn.owner_approval)],
    (State.rejected, None): [(State.rejected, None)],
    (State.cancelled, None): [(State.cancelled, None)],
    (State.accepted, None): [(State.routed, None), (State.accepted, None)],
    (State.working, None): [(State.routed, None), (State.accepted, None), (State.working, None)],
}
for _on in (WaitingOn.human, WaitingOn.agent):
    PATHS[(State.waiting, _on)] = [*PATHS[(State.working, None)], (State.waiting, _on)]
PATHS[(State.verifying, None)] = [*PATHS[(State.working, None)], (State.verifying, None)]
PATHS[(State.approval, None)] = [*PATHS[(State.verifying, None)], (State.approval, None)]
PATHS[(State.completed, None)] = [*PATHS[(State.verifying, None)], (State.completed, None)]

# One representative (state, waiting_on) per state, for the 10x10 matrix.
REPRESENTATIVE: dict[State, tuple[State, WaitingOn | None]] = {
    s: (s, WaitingOn.human if s is State.waiting else None) for s in State
}


def connect(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(5000)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def insert_task(conn: apsw.Connection, task_id: str) -> int:
    """A new task in `requested`, as raw SQL would make it; returns its number."""
    conn.execute(
        "INSERT INTO tasks(id, state, project, requester, assignee, created_at, updated_at)"
        " VALUES (?, 'requested', 'demo', 'ana/planner', 'ana/coder', ?, ?)",
        (task_id, "2026-12-02T09:00:00.000Z", "2026-12-02T09:00:00.000Z"),
    )
    number = conn.last_insert_rowid()
    packet = {"task": "Raw task", "deliverable_type": "other", "acceptance_criteria": ["x"],
              "context": "", "files": [], "depends_on": []}
    conn.execute("INSERT INTO packets(task, body) VALUES (?, ?)", (number, json.dumps(packet)))
    return int(number)


def set_state(conn: apsw.Connection, number: int, state: State,
              waiting_on: WaitingOn | None = None) -> None:
    """One raw UPDATE of the state (the triggers decide whether it stands)."""
    if state in (State.verifying, State.approval, State.completed) and conn.execute(
            "SELECT state FROM tasks WHERE number = ?", (number,)).get == "working":
        conn.execute(  # (once, from the holder; a closed task takes none)
            "INSERT INTO results(task, body, worker, instance, threshold)"
            " SELECT ?, ?, ?, ?, 0"
            " WHERE (SELECT state FROM tasks WHERE number = ?)"
            " NOT IN ('completed', 'rejected', 'cancelled')"
            " AND NOT EXISTS (SELECT 1 FROM results WHERE task = ?)",
            (number, json.dumps(RESULT), "ana/coder", "laptop", number, number),
        )
    # A claimed state carries a live lease (the triggers insist): start one on the way
    # in (the assignee's, the next token, ten minutes), end it on the way out, as the
    # library does. The result above has threshold 0, so verifying -> completed is decided.
    current = conn.execute("SELECT state FROM tasks WHERE number = ?", (number,)).get
    leased = (State.accepted.value, State.working.value)
    lease = ""
    if state.value in leased and current not in leased:
        lease = (", lease_token = lease_token + 1, lease_id = 'Lraw' || (lease_token + 1),"
                 " lease_holder = 'ana/coder', lease_instance = 'laptop',"
                 " updated_at = '2026-12-02T09:00:00.000Z',"
                 " lease_expires = '2026-12-02T09:10:00.000Z'")
    elif state.value not in leased:
        lease = (", lease_id = NULL, lease_holder = NULL, lease_instance = NULL,"
                 " lease_session = NULL, lease_expires = NULL")
    # The owner's own moves (cancel, approve, deny) name the owner, as the store insists.
    decided = any(m.source.value == current and m.target is state for m in OWNER_DECIDES)
    actor = "(SELECT value FROM meta WHERE key = 'owner')" if decided else "'raw'"
    conn.execute(
        f"UPDATE tasks SET state = ?, waiting_on = ?, actor = {actor}, reason = 'raw sql'"
        f"{lease} WHERE number = ?",
        (state.value, waiting_on.value if waiting_on else None, number),
    )


def put_in(conn: apsw.Connection, task_id: str, state: State,
           waiting_on: WaitingOn | None = None) -> int:
    """A new task walked along legal moves into (state, waiting_on); returns its number."""
    number = insert_task(conn, task_id)
    for step_state, step_waiting in PATHS[(state, waiting_on)]:
        set_state(conn, number, step_state, step_waiting)
    return number


def snapshot_file(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """:func:`snapshot` of a store file, through a connection of its own."""
    conn = connect(path)
    try:
        return snapshot(conn)
    finally:
        conn.close()


def refused(conn: apsw.Connection, expected: str, sql: str, args: Any = ()) -> None:
    """``sql`` aborts with ``expected`` (``code:reason``) and changes nothing."""
    before = snapshot(conn)
    with pytest.raises(apsw.Error) as info:
        conn.execute(sql, args)
    assert expected in str(info.value), f"expected {expected!r}, got {info.value!r}"
    assert snapshot(conn) == before


def snapshot(conn: apsw.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, to prove a refused write changed nothing."""
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")]
    return {t: list(conn.execute(f"SELECT * FROM {t} ORDER BY 1")) for t in tables}


def without_tokens(rows: dict[str, list[tuple[object, ...]]], issued: frozenset[str],
                   ) -> dict[str, list[tuple[object, ...]]]:
    """A :func:`snapshot` less the ``issued`` access tokens and the journal rows that
    issued them: what a test compares when its transport issues a token for each caller
    as it first calls (any other token, and any other row, is compared)."""
    def issuing(row: tuple[object, ...]) -> bool:  # journal: seq, task, at, actor, from,
        if row[7] != "token add" or not isinstance(row[8], str):  # to, waiting, reason,
            return False                                           # detail, hash
        return json.loads(row[8]).get("token") in issued

    kept = dict(rows)
    kept["tokens"] = [row for row in rows.get("tokens", []) if row[0] not in issued]
    kept["journal"] = [row for row in rows.get("journal", []) if not issuing(row)]
    return kept
