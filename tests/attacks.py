"""The raw-SQL attack suite's machinery: one store per engine, reached through a plain
connection with no hivelite in between, and one case at a time run inside a transaction
that is rolled back, so every case meets the same rows (``tests/test_attacks.py``).

A case is a statement, the ``code:reason`` its refusal names (or ``None``: the write
stands, and ``then`` says what it left), the statements run first, and the engines it
runs on. A statement is one text for both engines, or one per engine (``{"sqlite": …,
"postgres": …}``) where the dialect forces it. ``{name}`` in a text is the number of the
scenario's task of that name (``{{`` and ``}}`` are braces).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive, ManualClock
from hivelite.core.errors import from_trigger
from hivelite.core.protocol import State, WaitingOn

from . import pg, rawsql
from .conftest import CODER, OWNER, REVIEWER, START, held_task, own_task

ENGINES = ("sqlite", "postgres")
SQLITE = ("sqlite",)
POSTGRES = ("postgres",)
EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
AT = "2026-12-02T10:00:00.000Z"
"""When the attacks say they happen (an hour after the scenario)."""

Sql = str | dict[str, str]
"""One statement: the same text on both engines, or each engine's own."""


@dataclass(frozen=True)
class Case:
    """One raw write and what the store makes of it."""

    id: str
    sql: Sql
    expected: str | None
    """``code:reason`` of the refusal; ``None``: the write stands."""
    before: tuple[Sql, ...] = ()
    """Statements run first (each must stand), in the same transaction."""
    then: tuple[tuple[str, object], ...] = ()
    """Queries of one value and that value, read after the write."""
    engines: tuple[str, ...] = ENGINES


def case(id: str, sql: Sql, expected: str | None, *before: Sql,
         then: Iterable[tuple[str, object]] = (), engines: tuple[str, ...] = ENGINES) -> Case:
    return Case(id, sql, expected, tuple(before), tuple(then), engines)


def params(cases: Iterable[Case]) -> list[Any]:
    """One test per case and engine it runs on, named ``engine-case``."""
    made = [pytest.param(engine, c, id=f"{engine}-{c.id}")
            for c in cases for engine in c.engines]
    ids = [p.id for p in made]
    assert len(ids) == len(set(ids)), "two cases of one name"
    return made


def text(sql: Sql, engine: str, numbers: dict[str, Any]) -> str:
    """The statement as ``engine`` runs it, the scenario's numbers filled in."""
    chosen = sql if isinstance(sql, str) else sql[engine]
    return chosen.format(**numbers)


def literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


class Raw:
    """A plain connection to one store on either engine, no hivelite in between."""

    def __init__(self, engine: str, where: str) -> None:
        self.engine = engine
        self.where = where
        """The SQLite file, or the PostgreSQL schema that holds the store."""
        if engine == "sqlite":
            self.conn: Any = rawsql.connect(Path(where))
            self.schema = "main"
        else:
            self.conn = pg.connect()
            self.conn.execute(f"SET search_path = {where}")
            self.schema = where

    def execute(self, sql: str) -> None:
        self.conn.execute(sql)

    def value(self, sql: str) -> Any:
        row = self.conn.execute(sql).fetchone()
        return None if row is None else row[0]

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        return [tuple(r) for r in self.conn.execute(sql).fetchall()]

    def tables(self) -> list[str]:
        if self.engine == "sqlite":
            return [str(r[0]) for r in self.rows(
                "SELECT name FROM main.sqlite_schema WHERE type = 'table' ORDER BY name")]
        return [str(r[0]) for r in self.rows(
            "SELECT table_name FROM information_schema.tables"
            f" WHERE table_schema = '{self.schema}' AND table_type = 'BASE TABLE'"
            " ORDER BY table_name")]

    def snapshot(self) -> dict[str, list[tuple[object, ...]]]:
        """Every row of every table of the store, as this connection sees it (the store's
        own tables, whatever a session put first in its way)."""
        return {t: self.rows(f"SELECT * FROM {self.schema}.{t} ORDER BY 1")
                for t in self.tables()}

    def refused(self, expected: str, sql: str) -> BaseException:
        """``sql`` fails with ``expected`` (``code:reason``), which the library reports as
        its own error, and leaves every row as it was."""
        before = self.snapshot()
        error: BaseException | None = None
        if self.engine == "postgres":
            self.execute("SAVEPOINT attack")  # a failed statement spoils its transaction
        try:
            self.conn.execute(sql)
        except Exception as exc:
            error = exc
        if self.engine == "postgres":
            self.execute("ROLLBACK TO SAVEPOINT attack")
        assert error is not None, f"the store took it: {sql}"
        assert expected in str(error), f"expected {expected!r}, got {error!r}"
        mapped = from_trigger(error)
        code, reason = expected.split(":")
        assert mapped is not None and (mapped.code, mapped.reason) == (code, reason)
        assert self.snapshot() == before
        return error

    def close(self) -> None:
        self.conn.close()


# -- the scenario: what the attacks aim at ---------------------------------------------


def made_by_the_library(hive: Hive) -> dict[str, int]:
    """Tasks and rows the library makes: a routed task, a claimed one, one held for the
    owner, one awaiting a decision (no verdict yet), a completed one with no merge yet, a
    cancelled one with a result, updates and a checkpoint, one paused on a person, a
    dependency awaiting its decision and its routed dependant, a live control (``live``:
    a veto of another agent than the assignee's, which binds no lease of the attacks), a
    lifted one (``lifted``), the enrolment of an agent that holds no lease (``ana/tester``,
    in the project demo and the role writer), an agent's token, and a routed task that
    needs the role writer (``role``)."""
    n: dict[str, int] = {"routed": own_task(hive)}
    n["claimed"] = own_task(hive)
    hive.claim(CODER, n["claimed"])
    n["held"] = held_task(hive)
    for name in ("approval", "completed", "dep_on"):
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
        hive.checkpoint(CODER, number, progress="half way", **fence)
        hive.submit(CODER, number, summary="done", evidence=EVIDENCE, **fence)
        n[name] = number
    hive.verify(REVIEWER, n["completed"], verdict="accept")
    n["dependant"] = own_task(hive, packet={
        "task": "After the dependency", "deliverable_type": "code",
        "acceptance_criteria": ["ok"], "depends_on": [hive.get(n["dep_on"]).task.id]})
    n["cancelled"] = own_task(hive)
    lease = hive.claim(CODER, n["cancelled"])
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    hive.update(CODER, n["cancelled"], summary="half", tokens=5, **fence)
    hive.checkpoint(CODER, n["cancelled"], progress="half way", **fence)
    hive.submit(CODER, n["cancelled"], summary="could not", evidence=EVIDENCE,
                outcome="failed", **fence)
    hive.cancel(OWNER, n["cancelled"], reason="not needed")
    n["paused"] = own_task(hive)
    lease = hive.claim(CODER, n["paused"])
    hive.pause(CODER, n["paused"], lease_id=lease.lease_id, token=lease.fencing_token,
               on="human", reason="which parser?")
    n["live"] = hive.veto(OWNER, n["routed"], agent="ana/tester").id
    n["lifted"] = hive.hold(OWNER, agent="ana/reviewer").id
    hive.lift(OWNER, n["lifted"])
    hive.enrol(OWNER, "ana/tester", projects=["demo"], roles=["writer"])
    hive.add_token(OWNER, "ana/tester", instance="tablet")
    n["role"] = own_task(hive, role="writer")
    n["counted"] = own_task(hive)  # a day's count of a budgeted agent's claims (SQLite)
    hive.set_budget(OWNER, "ana/coder", tasks=50)
    hive.claim(CODER, n["counted"])
    hive.watch(CODER, "handoff", number=n["routed"])  # a watch, unanswered
    for name, state in (("approval", State.approval), ("completed", State.completed),
                        ("dep_on", State.approval), ("cancelled", State.cancelled),
                        ("paused", State.waiting), ("held", State.waiting)):
        assert hive.get(n[name]).task.state is state, name
    for name in ("dependant", "role"):
        assert hive.get(n[name]).task.state is State.routed, name
    assert hive.get(n["counted"]).task.state is State.accepted
    return n


# The legal path from `requested` to each (state, waiting_on), and a name for each.
WALKED: dict[str, tuple[State, WaitingOn | None]] = {
    "r_requested": (State.requested, None), "r_routed": (State.routed, None),
    "r_owner_approval": (State.waiting, WaitingOn.owner_approval),
    "r_rejected": (State.rejected, None), "r_cancelled": (State.cancelled, None),
    "r_accepted": (State.accepted, None), "r_working": (State.working, None),
    "r_human": (State.waiting, WaitingOn.human), "r_agent": (State.waiting, WaitingOn.agent),
    "r_verifying": (State.verifying, None), "r_approval": (State.approval, None),
    "r_completed": (State.completed, None),
}
RAW_AT = "2026-12-02T09:00:00.000Z"
CLAIMED_BY_CODER = ("lease_holder = 'ana/coder', lease_instance = 'laptop',"
                    f" updated_at = '{RAW_AT}', lease_expires = '2026-12-02T09:10:00.000Z'")
"""The rest of a claim as the store insists on it: the assignee's, for ten minutes."""


def insert_task(raw: Raw, task_id: str) -> int:
    """A new task in ``requested``, as raw SQL makes it (with its packet); its number."""
    raw.execute(
        "INSERT INTO tasks(number, id, state, project, requester, assignee, created_at,"
        f" updated_at) VALUES ((SELECT coalesce(max(number), 0) + 1 FROM tasks),"
        f" {literal(task_id)}, 'requested', 'demo', 'ana/planner', 'ana/coder',"
        f" '{RAW_AT}', '{RAW_AT}')")
    number = int(raw.value(f"SELECT number FROM tasks WHERE id = {literal(task_id)}"))
    body = {"task": "Raw task", "deliverable_type": "other", "acceptance_criteria": ["x"],
            "context": "", "files": [], "depends_on": []}
    raw.execute(f"INSERT INTO packets(task, body) VALUES ({number},"
                f" {literal(json.dumps(body))})")
    return number


def set_state(raw: Raw, number: int, state: State, waiting_on: WaitingOn | None = None) -> None:
    """One raw UPDATE of the state, as ``rawsql.set_state`` makes it, on either engine."""
    current = raw.value(f"SELECT state FROM tasks WHERE number = {number}")
    if state in (State.verifying, State.approval, State.completed) and current == "working":
        raw.execute(
            "INSERT INTO results(task, body, worker, instance, threshold)"
            f" VALUES ({number}, {literal(json.dumps(rawsql.RESULT))}, 'ana/coder',"
            " 'laptop', 0)")
    leased = (State.accepted.value, State.working.value)
    lease = ""
    if state.value in leased and current not in leased:
        lease = (", lease_token = lease_token + 1, lease_id = 'Lraw' || (lease_token + 1), "
                 + CLAIMED_BY_CODER)
    elif state.value not in leased:
        lease = (", lease_id = NULL, lease_holder = NULL, lease_instance = NULL,"
                 " lease_session = NULL, lease_expires = NULL")
    decided = any(m.source.value == current and m.target is state
                  for m in rawsql.OWNER_DECIDES)
    actor = "(SELECT value FROM meta WHERE key = 'owner')" if decided else "'raw'"
    raw.execute(f"UPDATE tasks SET state = '{state.value}', waiting_on ="
                f" {literal(waiting_on.value if waiting_on else None)}, actor = {actor},"
                f" reason = 'raw sql'{lease} WHERE number = {number}")


def walk(raw: Raw, task_id: str, state: State, waiting_on: WaitingOn | None = None) -> int:
    """A new task walked along legal moves into (state, waiting_on) by raw SQL."""
    number = insert_task(raw, task_id)
    for step_state, step_waiting in rawsql.PATHS[(state, waiting_on)]:
        set_state(raw, number, step_state, step_waiting)
    return number


def leased(raw: Raw, task_id: str, state: State) -> int:
    """A task in ``state`` (accepted or working) holding lease ``l1`` with token 3, its
    third claim."""
    number = walk(raw, task_id, State.routed)
    for token in (1, 2, 3):
        raw.execute(f"UPDATE tasks SET state = 'accepted', lease_id ="
                    f" '{'l1' if token == 3 else f'l0{token}'}', lease_token = {token},"
                    f" {CLAIMED_BY_CODER} WHERE number = {number}")
        if token < 3:
            raw.execute("UPDATE tasks SET state = 'routed', lease_id = NULL, lease_holder ="
                        " NULL, lease_instance = NULL, lease_expires = NULL"
                        f" WHERE number = {number}")
    if state is State.working:
        raw.execute(f"UPDATE tasks SET state = 'working' WHERE number = {number}")
    return number


def made_by_raw_sql(raw: Raw) -> dict[str, int]:
    """Tasks raw SQL walks along legal moves: one in each (state, waiting_on)
    (``r_<state>``, ``r_human``, …), and two on their third lease (``l_accepted``,
    ``l_working``)."""
    n = {name: walk(raw, name, *at) for name, at in WALKED.items()}
    n["l_accepted"] = leased(raw, "l_accepted", State.accepted)
    n["l_working"] = leased(raw, "l_working", State.working)
    return n


@dataclass
class Stores:
    """The scenario's store on each engine, made on first use, for a whole module."""

    folder: Path
    made: dict[str, tuple[Raw, dict[str, Any]]] = field(default_factory=dict)

    def __call__(self, engine: str) -> tuple[Raw, dict[str, Any]]:
        if engine not in self.made:
            if engine == "postgres" and not pg.available():
                pytest.skip("no PostgreSQL server")
            where = (str(self.folder / "attacked.db") if engine == "sqlite"
                     else pg.new_schema())
            target = where if engine == "sqlite" else pg.store_url(where)
            with Hive.open(target, owner="ana", clock=ManualClock(START)) as hive:
                numbers: dict[str, Any] = made_by_the_library(hive)
            raw = Raw(engine, where)
            numbers.update(made_by_raw_sql(raw))
            numbers["schema"] = raw.schema
            self.made[engine] = (raw, numbers)
        return self.made[engine]

    def close(self) -> None:
        for raw, _ in self.made.values():
            raw.close()
            if raw.engine == "postgres":
                pg.drop(raw.where)


@cache
def columns(table: str) -> tuple[str, ...]:
    """A table's columns, in order, that both engines have (SQLite's links of a task's
    journal are its own: ``schema.SQLITE_ONLY``)."""
    import apsw

    from hivelite.store.migrations import MIGRATIONS
    from hivelite.store.schema import SQLITE_ONLY

    conn = apsw.Connection(":memory:")
    try:
        for migration in MIGRATIONS:
            migration.apply(conn)
        return tuple(str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")
                     if (table, str(r[1])) not in SQLITE_ONLY.columns)
    finally:
        conn.close()


@dataclass
class Run:
    """One case run in a transaction that is rolled back afterwards."""

    raw: Raw
    numbers: dict[str, Any]

    def __call__(self, c: Case) -> None:
        raw, engine = self.raw, self.raw.engine
        raw.execute("BEGIN")
        try:
            for statement in c.before:
                raw.execute(text(statement, engine, self.numbers))
            sql = text(c.sql, engine, self.numbers)
            if c.expected is None:
                raw.execute(sql)
            else:
                raw.refused(c.expected, sql)
            for query, value in c.then:
                got = raw.value(query.format(**self.numbers))
                assert got == value, f"{query}: {got!r}, not {value!r}"
        finally:
            raw.execute("ROLLBACK")

