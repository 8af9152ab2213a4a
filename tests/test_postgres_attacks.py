"""Raw SQL against a PostgreSQL store (issue 20, point 2): what the SQLite triggers refuse,
the PL/pgSQL ones refuse too, with the same ``code:reason``, and the rewrites only
PostgreSQL has (``TRUNCATE``, ``INSERT … ON CONFLICT DO UPDATE``, another
``search_path``) are refused or change nothing. Each refusal leaves every row as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hivelite import Caller, Hive, ManualClock

from . import pg
from .conftest import CODER, REVIEWER, START, own_task
from .test_attacks import attacked

pytestmark = pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
KEPT = ("meta", "moves", "tasks", "packets", "checkpoints", "results", "confirmations",
        "updates", "journal", "deps", "policy", "required_plugins", "controls", "budgets",
        "tokens")


class Raw:
    """A plain connection to one store's schema, with no hivelite in between."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.conn = pg.connect()
        self.conn.execute(f"SET search_path = {schema}")

    def snapshot(self) -> dict[str, list[tuple[object, ...]]]:
        return pg.snapshot(self.schema)

    def refused(self, expected: str, sql: str, args: Any = ()) -> None:
        """``sql`` fails with ``expected`` in its message and changes nothing."""
        import psycopg

        before = self.snapshot()
        with pytest.raises(psycopg.Error) as info:
            self.conn.execute(sql, args)
        assert expected in str(info.value), f"expected {expected!r}, got {info.value!r}"
        assert self.snapshot() == before

    def value(self, sql: str, args: Any = ()) -> Any:
        row = self.conn.execute(sql, args).fetchone()
        return None if row is None else row[0]


@pytest.fixture
def store() -> Iterator[tuple[Raw, dict[str, int]]]:
    """A store the library made: a completed task, one in approval, a claimed one."""
    schema = pg.new_schema()
    with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
        numbers = attacked(hive)
        numbers["routed"] = own_task(hive)
    raw = Raw(schema)
    yield raw, numbers
    raw.conn.close()
    pg.drop(schema)


@pytest.mark.parametrize("table", KEPT)
def test_truncate_is_refused_on_every_kept_table(store: tuple[Raw, dict[str, int]],
                                                 table: str) -> None:
    raw, _ = store
    raw.refused("forbidden_right:", f"TRUNCATE {table} CASCADE")


def test_an_upsert_cannot_rewrite_a_task(store: tuple[Raw, dict[str, int]]) -> None:
    """PostgreSQL's ``REPLACE``: the insert trigger refuses the existing key first."""
    raw, n = store
    raw.refused("forbidden_right:rows_are_kept",
                "INSERT INTO tasks(number, id, state, project, requester, assignee, created_at,"
                " updated_at) SELECT number, id, 'requested', project, requester, assignee,"
                " created_at, updated_at FROM tasks WHERE number = %s"
                " ON CONFLICT (number) DO UPDATE SET state = 'completed'", (n["claimed"],))


@pytest.mark.parametrize(("table", "key"), [
    ("journal", "seq"), ("packets", "task"), ("results", "task"), ("meta", "key"),
    ("confirmations", "task, version, reviewer")])
def test_an_upsert_cannot_rewrite_a_kept_row(store: tuple[Raw, dict[str, int]], table: str,
                                             key: str) -> None:
    raw, _ = store
    names = [r[0] for r in raw.conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s"
        " AND table_name = %s ORDER BY ordinal_position", (raw.schema, table))]
    listed = ", ".join(f'"{c}"' for c in names)
    target = next(c for c in names if c not in key.split(", "))
    raw.refused("forbidden_right:", f"INSERT INTO {table}({listed}) SELECT {listed}"
                f" FROM {table} ON CONFLICT ({key}) DO UPDATE SET \"{target}\" ="
                f" excluded.\"{target}\"")


def test_the_protocol_holds_against_raw_updates(store: tuple[Raw, dict[str, int]]) -> None:
    raw, n = store
    raw.refused("invalid_state:no_such_move",
                "UPDATE tasks SET state = 'completed' WHERE number = %s", (n["routed"],))
    raw.refused("invalid_state:task_closed",
                "UPDATE tasks SET state = 'routed' WHERE number = %s", (n["completed"],))
    raw.refused("invalid_state:fencing_token",
                "UPDATE tasks SET lease_token = 0 WHERE number = %s", (n["claimed"],))
    raw.refused("forbidden_right:lease_by_claim_only",
                "UPDATE tasks SET state = 'accepted', lease_id = 'Lx', lease_token = 1,"
                " lease_holder = 'guest/scout', lease_instance = 'x',"
                " lease_expires = '2026-12-02T09:10:00.000Z',"
                " updated_at = '2026-12-02T09:00:00.000Z'"
                " WHERE number = %s", (n["routed"],))
    raw.refused("forbidden_right:not_decided",
                "UPDATE tasks SET state = 'completed', actor = 'ana/coder' WHERE number = %s",
                (n["approval"],))
    raw.refused("invalid_input:immutable_field",
                "UPDATE tasks SET assignee = 'guest/scout' WHERE number = %s", (n["routed"],))
    raw.refused("invalid_input:lease_length",
                "UPDATE tasks SET lease_expires = '2026-12-03T09:00:00.000Z' WHERE number = %s",
                (n["claimed"],))
    raw.refused("forbidden_right:tasks_are_kept", "DELETE FROM tasks WHERE number = %s",
                (n["routed"],))


def test_the_journal_cannot_be_forged_or_changed(store: tuple[Raw, dict[str, int]]) -> None:
    raw, n = store
    raw.refused("forbidden_right:journal_forged",
                "INSERT INTO journal(task, at, actor, from_state, to_state)"
                " VALUES (%s, '2026-12-02T09:00:00.000Z', 'ana', 'routed', 'completed')",
                (n["routed"],))
    raw.refused("forbidden_right:append_only", "UPDATE journal SET actor = 'x'")
    raw.refused("forbidden_right:append_only", "DELETE FROM journal")
    raw.refused("forbidden_right:owner_fixed", "UPDATE meta SET value = 'mallory'"
                " WHERE key = 'owner'")
    raw.refused("forbidden_right:identity_fixed", "UPDATE meta SET value = 'x'"
                " WHERE key = 'store_id'")


def test_results_and_verdicts_keep_their_rules(store: tuple[Raw, dict[str, int]]) -> None:
    raw, n = store
    raw.refused("forbidden_right:result_by_holder_only",
                "INSERT INTO results(task, body, worker, instance) VALUES (%s, '{}',"
                " 'guest/scout', 'x')", (n["claimed"],))
    raw.refused("invalid_state:reviewer_not_independent",
                "INSERT INTO confirmations(task, version, reviewer, instance, verdict, at,"
                " counted) VALUES (%s, 1, 'ana/coder', 'laptop', 'accept',"
                " '2026-12-02T09:00:00.000Z', 1)", (n["approval"],))
    raw.refused("invalid_input:uncounted_needs_why",
                "INSERT INTO confirmations(task, version, reviewer, instance, verdict, at,"
                " counted) VALUES (%s, 1, 'ana/tester', 'tablet', 'accept',"
                " '2026-12-02T09:00:00.000Z', 0)", (n["approval"],))
    raw.refused("forbidden_right:results_are_kept", "DELETE FROM results")


def test_the_moves_table_is_fixed(store: tuple[Raw, dict[str, int]]) -> None:
    raw, _ = store
    raw.refused("forbidden_right:protocol_fixed",
                "INSERT INTO moves VALUES (99, 'shortcut', 'routed', NULL, 'completed', NULL)")
    raw.refused("forbidden_right:protocol_fixed", "DELETE FROM moves")


def test_another_search_path_does_not_change_what_a_rule_reads(
        store: tuple[Raw, dict[str, int]]) -> None:
    """A session that puts a schema of its own first, with a ``moves`` table allowing any
    move, still meets the store's rules: each rule reads the store's own tables."""
    raw, n = store
    raw.conn.execute("CREATE SCHEMA IF NOT EXISTS mallory")
    raw.conn.execute("CREATE TABLE IF NOT EXISTS mallory.moves AS SELECT * FROM moves")
    raw.conn.execute("INSERT INTO mallory.moves VALUES (99, 'shortcut', 'routed', NULL,"
                     " 'completed', NULL)")
    try:
        raw.conn.execute(f"SET search_path = mallory, {raw.schema}")
        raw.refused("invalid_state:no_such_move",
                    f"UPDATE {raw.schema}.tasks SET state = 'completed' WHERE number = %s",
                    (n["routed"],))
    finally:
        raw.conn.execute(f"SET search_path = {raw.schema}")
        raw.conn.execute("DROP SCHEMA mallory CASCADE")


def test_the_library_reports_a_raw_refusal_as_its_own_error() -> None:
    """A trigger's refusal reaches the caller as the same hivelite error on either engine
    (a claim by someone the owner stopped, refused by the store itself)."""
    from hivelite import ForbiddenRight

    schema = pg.new_schema()
    try:
        with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
            number = own_task(hive)
            raw = Raw(schema)
            raw.conn.execute("INSERT INTO controls(kind, agent, at, by)"
                             " VALUES ('stop', 'ana/coder', '2026-12-02T09:00:00.000Z', 'ana')")
            raw.conn.close()
            with pytest.raises(ForbiddenRight) as err:
                hive.claim(Caller.agent("ana/coder", "laptop"), number)
            assert err.value.reason in ("vetoed", "stopped")
    finally:
        pg.drop(schema)


def test_a_temporary_table_does_not_change_what_a_rule_reads(
        store: tuple[Raw, dict[str, int]]) -> None:
    """PostgreSQL looks in a session's temporary schema first unless told otherwise: a
    temporary ``moves`` (or ``results``) table must not open a move the store refuses."""
    raw, n = store
    raw.conn.execute("CREATE TEMP TABLE moves AS SELECT * FROM moves")
    raw.conn.execute("INSERT INTO pg_temp.moves VALUES (99, 'shortcut', 'routed', NULL,"
                     " 'completed', NULL)")
    raw.conn.execute("CREATE TEMP TABLE results AS SELECT * FROM results")
    raw.conn.execute("INSERT INTO pg_temp.results(task, body, worker, instance, threshold)"
                     " VALUES (%s, '{}', 'ana/coder', 'laptop', 0)", (n["routed"],))
    try:
        raw.refused("invalid_state:no_such_move",
                    f"UPDATE {raw.schema}.tasks SET state = 'completed' WHERE number = %s",
                    (n["routed"],))
    finally:
        raw.conn.execute("DROP TABLE pg_temp.moves, pg_temp.results")


PARITY = [
    ("INSERT INTO results(task, body, worker, instance) VALUES (2, '{}', 'guest/scout', 'x')",
     "forbidden_right:result_by_holder_only"),
    ("INSERT INTO confirmations(task, version, reviewer, instance, verdict, at, counted, why)"
     " VALUES (3, 1, 'ana/reviewer', 'desktop', 'accept', '2026-12-02T09:00:00.000Z', 1, 'x')",
     "invalid_input:uncounted_needs_why"),
    ("UPDATE checkpoints SET task = 3 WHERE task = 1", "forbidden_right:rows_are_kept"),
    ("UPDATE meta SET key = 'x' WHERE key = 'store_id'", "forbidden_right:identity_fixed"),
    ("INSERT INTO deps(task, on_task) VALUES (4, 3)", "invalid_input:dependency_fixed"),
    ("UPDATE tasks SET state = 'completed' WHERE number = 3", "invalid_state:no_such_move"),
    ("INSERT INTO journal(seq, task, at, actor, from_state, to_state)"
     " VALUES (1, 3, '2026-12-02T09:00:00.000Z', 'ana', 'routed', 'completed')",
     "forbidden_right:rows_are_kept"),
    ("UPDATE tasks SET state = 'routed', lease_token = 0 WHERE number = 1",
     "invalid_state:task_closed"),
]
"""Raw writes that break two rules at once, each with the rule SQLite names first."""


def _scenario(hive: Hive) -> None:
    """The same four tasks on either engine: 1 completed (with a checkpoint), 2 waiting
    for a verdict, 3 routed, 4 routed and depending on 3."""
    first = own_task(hive)
    lease = hive.claim(CODER, first)
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    hive.checkpoint(CODER, first, progress="half way", **fence)
    hive.submit(CODER, first, summary="done", evidence=EVIDENCE, **fence)
    hive.verify(REVIEWER, first, verdict="accept")
    second = own_task(hive)
    lease = hive.claim(CODER, second)
    hive.submit(CODER, second, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    third = own_task(hive)
    own_task(hive, packet={"task": "After the third", "deliverable_type": "code",
                           "acceptance_criteria": ["ok"],
                           "depends_on": [hive.get(third).task.id]})


@pytest.mark.parametrize(("sql", "expected"), PARITY, ids=[e for _, e in PARITY])
def test_a_write_breaking_two_rules_is_refused_for_the_same_one_on_both_engines(
        tmp_path: Any, sql: str, expected: str) -> None:
    import apsw

    from . import rawsql

    with Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START)) as hive:
        _scenario(hive)
    conn = rawsql.connect(tmp_path / "s.db")
    try:
        with pytest.raises(apsw.Error) as on_sqlite:
            conn.execute(sql)
    finally:
        conn.close()
    assert expected in str(on_sqlite.value)
    schema = pg.new_schema()
    try:
        with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
            _scenario(hive)
        raw = Raw(schema)
        try:
            raw.refused(expected, sql)
        finally:
            raw.conn.close()
    finally:
        pg.drop(schema)
