"""Turn a store file back into an older schema, as an older release would have left it.

Tests write data with today's code, then take the schema back to ``version`` (objects
the later migrations added are dropped, objects they replaced restored, columns they
added removed), so that opening the file runs the later migrations on real data.
"""

from __future__ import annotations

import apsw

from hivelite.store import MIGRATIONS

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
