"""Turn a store file back into an older schema, as an older release would have left it.

Tests write data with today's code, then take the schema back to ``version`` (objects
the later migrations added are dropped, objects they replaced restored, columns they
added removed), so that opening the file runs the later migrations on real data.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import apsw
import pytest

from hivelite.core.models import Receipt, made
from hivelite.core.protocol import State
from hivelite.store import MIGRATIONS, TaskRow
from hivelite.store.columns import JUDGE, SUBMIT_REASON, returned_reason
from hivelite.verbs import results
from hivelite.verbs.unit import Unit

QUERY = ("SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'"
         " AND sql IS NOT NULL")


def schema_at(version: int) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    for migration in MIGRATIONS:
        if migration.version <= version:
            conn.execute(migration.sql).fetchall()
    return conn


def _objects(conn: apsw.Connection) -> dict[str, tuple[str, str]]:
    return {str(name): (str(kind), str(sql)) for kind, name, sql in conn.execute(QUERY)}


def _columns(conn: apsw.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def _keyed_by(conn: apsw.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in sorted(conn.execute(f"PRAGMA table_info({table})"),
                                      key=lambda r: r[5]) if r[5]]


def _rebuild(conn: apsw.Connection, table: str, sql: str, columns: list[str]) -> None:
    """A table whose key a later migration changed (no column of a key can be dropped):
    made again as it was, with its rows."""
    names = ", ".join(columns)
    conn.execute(f"CREATE TEMP TABLE downgraded AS SELECT {names} FROM {table}")
    conn.execute(f"DROP TABLE {table}")
    conn.execute(sql)
    conn.execute(f"INSERT INTO {table}({names}) SELECT {names} FROM temp.downgraded")
    conn.execute("DROP TABLE temp.downgraded")


def to_version(conn: apsw.Connection, version: int) -> None:
    """Inside the caller's transaction: the schema of ``version``, keeping the rows."""
    old = schema_at(version)
    want, have = _objects(old), _objects(conn)
    changed = [n for n, (kind, sql) in have.items() if want.get(n) != (kind, sql)]
    for name in changed:  # views, triggers and indexes first, then tables
        kind = have[name][0]
        if kind in ("view", "trigger", "index") and want.get(name, (kind,))[0] == kind:
            conn.execute(f"DROP {kind.upper()} {name}")
    for name in changed:
        kind = have[name][0]
        if kind == "table" and name not in want:
            conn.execute(f"DROP TABLE {name}")
        elif kind == "table" and _keyed_by(conn, name) != _keyed_by(old, name):
            _rebuild(conn, name, want[name][1], _columns(old, name))
        elif kind == "table":
            for column in set(_columns(conn, name)) - set(_columns(old, name)):
                conn.execute(f"ALTER TABLE {name} DROP COLUMN {column}")
    for name in [*changed, *(want.keys() - have.keys())]:  # replaced, or dropped later
        if name in want and want[name][0] in ("view", "trigger", "index"):
            conn.execute(want[name][1])
    conn.execute(f"PRAGMA user_version = {version}")


@contextmanager
def submitted_in_three_moves() -> Iterator[None]:
    """Submissions written as releases before migration 19 wrote them: moves 7 (from
    ``accepted``), 12 and the judgement's, one journal row each. A store's rules still take
    them (each is a move), and the backfills of older migrations read only them."""
    def returned(tx: Any, held: Any, holder: str, instance: str, at: str, *, kept: str,
                 outcome: str, threshold: int | None, drafted: str | None,
                 receipts: str | None, sealed: dict[str, Any],
                 judged: tuple[State, str, dict[str, Any]]) -> Receipt:
        target, reason, detail = judged
        tx.put_result(held.number, results.returned_at(kept, at), worker=holder,
                      instance=instance, session=held.session, outcome=outcome,
                      threshold=threshold, draft=drafted, receipts=receipts)
        if held.state == State.accepted.value:
            tx.move(held.number, held.state, State.working.value, at=at, actor=holder,
                    reason=SUBMIT_REASON)
        tx.move(held.number, State.working.value, State.verifying.value, at=at, actor=holder,
                reason=returned_reason(outcome), detail=sealed, end_lease=True)
        tx.move(held.number, State.verifying.value, target.value, at=at, actor=JUDGE,
                reason=reason, detail=detail)
        return made(Receipt, {"number": held.number, "id": held.id, "state": target,
                              "waiting_on": None, "at": at, "seq": None})

    def submission(unit: Unit, row: TaskRow, target: State, *, actor: str, reason: str,
                   sealed: dict[str, Any], judged: dict[str, Any]) -> TaskRow:
        if row.state == State.accepted.value:
            row = unit.move(row, State.working, actor=actor, reason=SUBMIT_REASON)
        outcome = "failed" if judged.get("outcome") == "failed" else "completed"
        row = unit.move(row, State.verifying, actor=actor, reason=returned_reason(outcome),
                        detail=sealed, end_lease=True)
        return unit.move(row, target, actor=JUDGE, reason=reason, detail=judged)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(results, "_returned", returned)
        patch.setattr(Unit, "submission", submission)
        yield
