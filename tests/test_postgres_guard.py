"""PostgreSQL guards its own rules (issue 30, part 4): the role that owns the tables can
switch the triggers off, drop a rule function or replace its body; hivelite then refuses
to write (``schema_tampered``), as it does on SQLite, instead of writing with no rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hivelite import Hive, ManualClock
from hivelite.core.errors import StoreError
from hivelite.store import pg_guard

from . import pg
from .conftest import CODER, START, own_task

pytestmark = pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")


@pytest.fixture
def store() -> Iterator[tuple[str, Any]]:
    """A store with a task, and a raw connection to its schema as the tables' owner."""
    schema = pg.new_schema()
    with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
    raw = pg.connect()
    raw.execute(f"SET search_path = {schema}")
    yield schema, raw
    raw.close()


def journal(raw: Any) -> int:
    return int(raw.execute("SELECT count(*) FROM journal").fetchone()[0])


TAMPERING = {
    "every trigger switched off": (
        "ALTER TABLE tasks DISABLE TRIGGER USER", "is disabled (DISABLE TRIGGER)"),
    "a rule function dropped, its trigger with it": (
        "DROP FUNCTION {lease_rule}() CASCADE", "is missing (its function dropped?)"),
    "a rule function's body replaced": (
        "CREATE OR REPLACE FUNCTION {lease_rule}() RETURNS trigger LANGUAGE plpgsql AS"
        " $$BEGIN RETURN NEW; END $$", "body is not the one hivelite made"),
    "a trigger only a replica fires": (
        "ALTER TABLE tasks ENABLE REPLICA TRIGGER {lease_rule}", "ENABLE REPLICA TRIGGER"),
    "a trigger of someone else's": (
        "CREATE FUNCTION sneak() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW;"
        " END $$; CREATE TRIGGER a_sneak BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE"
        " FUNCTION sneak()", "trigger a_sneak on tasks is not hivelite's"),
    "a table renamed": ("ALTER TABLE budgets RENAME TO budgets_old", "table budgets is missing"),
    "a column renamed": ("ALTER TABLE tasks RENAME COLUMN lease_holder TO holder",
                         "lease_holder"),
    "a rule made to fire never": (
        "DROP TRIGGER {decided} ON tasks; CREATE TRIGGER {decided} BEFORE UPDATE OF state"
        " ON tasks FOR EACH ROW WHEN (false) EXECUTE FUNCTION {decided}()",
        "is not defined as hivelite made it"),
    "a rule's WHEN taken away": (
        "DROP TRIGGER {completion} ON tasks; CREATE TRIGGER {completion} BEFORE UPDATE OF"
        " state ON tasks FOR EACH ROW EXECUTE FUNCTION {completion}()",
        "is not defined as hivelite made it"),
    "a rule's WHEN narrowed": (
        "DROP TRIGGER {completion} ON tasks; CREATE TRIGGER {completion} BEFORE UPDATE OF"
        " state ON tasks FOR EACH ROW WHEN (NEW.state = 'completed' AND OLD.state ="
        " 'approval' AND NEW.actor IS NULL) EXECUTE FUNCTION {completion}()",
        "is not defined as hivelite made it"),
    "a rule function reading another schema's tables": (
        "ALTER FUNCTION {decided}() SET search_path = public", "does not run as hivelite"),
    "a rewrite that swallows the journal": (
        "CREATE RULE swallow AS ON INSERT TO journal DO INSTEAD NOTHING",
        "swallow on journal is not hivelite's"),
    "row security switched on": (
        "ALTER TABLE tasks ENABLE ROW LEVEL SECURITY", "row security on tasks"),
    "a primary key dropped": (
        "ALTER TABLE budgets DROP CONSTRAINT budgets_pkey", "the tables are not the ones"),
    "the journal made unlogged": (
        "ALTER TABLE journal SET UNLOGGED", "table journal is unlogged"),
    "a table inheriting from tasks, elsewhere": (
        "CREATE SCHEMA {schema}_evil; CREATE TABLE {schema}_evil.t () INHERITS (tasks)",
        "table tasks has tables inheriting from it ({schema}_evil.t)"),
    "a rule function made security definer": (
        "ALTER FUNCTION {decided}() SECURITY DEFINER", "security definer"),
    "a rule helper made strict": (
        "ALTER FUNCTION hl_json(text) STRICT", "function hl_json does not run as hivelite"),
    "a rule function made immutable": (
        "ALTER FUNCTION {decided}() IMMUTABLE", "immutable"),
}


def decided() -> str:
    return next(name for name in pg_guard.expected().triggers
                if name.endswith("_task_decided_by"))


def completion() -> str:
    return next(name for name in pg_guard.expected().triggers
                if name.endswith("_task_completion_decided"))


PERIODIC = ("a primary key dropped",)
"""What leaves the stamp alone (a constraint's own row): found by the full check a writing
store runs at most a second apart, and by every open. A function's own row is in the
stamp: its body, settings and kind changed are found by the next write."""


def lease_rule() -> str:
    return next(name for name in pg_guard.expected().triggers
                if name.endswith("_task_lease_taken"))


@pytest.mark.parametrize("tampering", TAMPERING)
def test_the_next_write_after_a_rule_is_switched_off_is_refused(
        store: tuple[str, Any], tampering: str, monkeypatch: pytest.MonkeyPatch) -> None:
    schema, raw = store
    statement, named = TAMPERING[tampering]
    with Hive.open(pg.store_url(schema), clock=ManualClock(START)) as hive:
        number = own_task(hive)  # a writing store: its guard has checked and stamped
        raw.execute(statement.format(lease_rule=lease_rule(), decided=decided(),
                                     completion=completion(), schema=schema))
        before = journal(raw)
        # the stamp read with every write's lock finds the rest at once; a replaced body
        # leaves it alone, and is found by the full check, which a writing store runs at
        # most a second apart (here at once)
        monkeypatch.setattr(pg_guard, "FULL_EVERY_S",
                            0.0 if tampering in PERIODIC else 3600.0)
        with pytest.raises(StoreError) as refused:
            hive.claim(CODER, number)
        assert refused.value.reason == "schema_tampered"
        assert named.format(schema=schema) in refused.value.message, refused.value.message
        assert journal(raw) == before  # nothing written: not the move, not its journal
    with pytest.raises(StoreError) as reopened, \
            Hive.open(pg.store_url(schema), clock=ManualClock(START)) as hive:
        own_task(hive)  # a new opener finds it too
    assert reopened.value.reason == "schema_tampered"


class Ticks:
    """The guard's clock (``time.monotonic``), moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_switching_the_triggers_off_and_on_again_costs_one_full_check(
        store: tuple[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    schema, raw = store
    ticks = Ticks()
    monkeypatch.setattr(pg_guard, "time", ticks)
    with Hive.open(pg.store_url(schema), clock=ManualClock(START)) as hive:
        own_task(hive)
        guard = hive.store.guard  # type: ignore[attr-defined]
        stamp, checked = guard.stamp, guard.checked_at
        own_task(hive)
        assert guard.checked_at == checked  # the stamp held: no full check
        raw.execute("ALTER TABLE tasks DISABLE TRIGGER USER")
        raw.execute("ALTER TABLE tasks ENABLE TRIGGER USER")
        ticks.now += 0.1
        hive.claim(CODER, own_task(hive))  # the rules are back: writes go on
        assert guard.stamp != stamp and guard.checked_at == ticks.now  # one full check
        ticks.now += 0.1
        own_task(hive)
        assert guard.checked_at == ticks.now - 0.1  # and then the stamp holds again


def test_a_body_replaced_and_put_back_within_the_second_lets_no_write_through(
        store: tuple[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A function's catalog row is in the stamp: the write after its body is replaced is
    refused at once, not at the next full check a second later; once the body is put
    back, writes go on."""
    schema, raw = store
    ticks = Ticks()
    monkeypatch.setattr(pg_guard, "time", ticks)
    with Hive.open(pg.store_url(schema), clock=ManualClock(START)) as hive:
        own_task(hive)
        body = raw.execute("SELECT pg_get_functiondef(%s::regproc)",
                           (lease_rule(),)).fetchone()[0]
        raw.execute(f"CREATE OR REPLACE FUNCTION {lease_rule()}() RETURNS trigger"
                    " LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END $$")
        ticks.now += 0.1  # within the second
        before = journal(raw)
        with pytest.raises(StoreError) as refused:
            own_task(hive)
        assert refused.value.reason == "schema_tampered"
        assert journal(raw) == before
        raw.execute(body)  # put back as it was
        ticks.now += 0.1
        hive.claim(CODER, own_task(hive))


def test_the_guard_knows_every_rule_of_a_new_store(store: tuple[str, Any]) -> None:
    schema, raw = store
    assert pg_guard.problems(raw, schema) == []
    assert len(pg_guard.expected().triggers) > 50 and pg_guard.expected().helpers
    assert pg_guard.shape_digest(raw, schema) == pg_guard.SHAPE_DIGEST, (
        "a migration changed the tables (columns, constraints, indexes): set"
        f" pg_guard.SHAPE_DIGEST to {pg_guard.shape_digest(raw, schema)}")


def doctor(schema: str, **given: Any) -> dict[str, Any]:
    from hivelite.store.pg_doctor import diagnose_url

    return {f.check: f for f in diagnose_url(pg.store_url(schema), **given)}


def test_doctor_on_a_postgresql_store_runs_every_check(store: tuple[str, Any]) -> None:
    schema, _ = store
    found = doctor(schema, at=START)
    assert all(f.ok for f in found.values()), [f for f in found.values() if not f.ok]
    assert {"schema", "hash chain", "replay", "actors", "fencing tokens", "controls",
            "policy", "kept answers", "witnesses"} <= set(found)
    assert "sealed with the owner's key" in found["hash chain"].detail


def test_doctor_on_postgresql_finds_rules_switched_off_and_forged_rows(
        store: tuple[str, Any]) -> None:
    from hivelite.store.chain import CONTENT, link

    schema, raw = store
    raw.execute("ALTER TABLE tasks DISABLE TRIGGER USER")
    raw.execute("UPDATE tasks SET state = 'cancelled', actor = 'ana/coder',"
                " reason = 'mine now' WHERE number = 1")  # no rule stops it now, no journal
    found = doctor(schema)
    assert not found["schema"].ok and "is disabled" in found["schema"].detail
    assert not found["replay"].ok  # the move has no journal row
    raw.execute("ALTER TABLE tasks ENABLE TRIGGER USER")
    before = raw.execute(  # the head of the rows about no task (chains per task)
        "SELECT coalesce((SELECT hash FROM journal WHERE task IS NULL ORDER BY seq DESC"
        " LIMIT 1), (SELECT value FROM meta WHERE key = 'store_id'))").fetchone()[0]
    content = [None, START, "ana", None, None, None, "budget",
               '{"agent": "ana/coder", "cleared": true}']
    raw.execute(f"INSERT INTO journal({CONTENT}, hash) VALUES"
                " (%s, %s, %s, %s, %s, %s, %s, %s, %s)", (*content, link(before, content)))
    found = doctor(schema)
    assert not found["hash chain"].ok
    assert "is not sealed with the owner's key" in found["hash chain"].detail


def test_a_table_inheriting_from_tasks_is_named_by_doctor_and_adds_nothing_to_an_export(
        store: tuple[str, Any]) -> None:
    """A task in a table that inherits from ``tasks`` (no rule guards it, no journal row
    tells of it): doctor names the table, and an export, read ``FROM ONLY``, leaves the
    task out, so no import makes it real."""
    from hivelite.store.postgres import PostgresStore
    from hivelite.store.transfer import export_lines

    schema, raw = store
    raw.execute(f"CREATE SCHEMA {schema}_kid")
    raw.execute(f"CREATE TABLE {schema}_kid.t () INHERITS (tasks)")
    raw.execute(f"INSERT INTO {schema}_kid.t SELECT * FROM ONLY tasks WHERE number = 1")
    raw.execute(f"UPDATE {schema}_kid.t SET number = 99, id = 'T-forged'")
    found = doctor(schema)
    assert not found["schema"].ok
    assert f"table tasks has tables inheriting from it ({schema}_kid.t)" in (
        found["schema"].detail)
    opened = PostgresStore(pg.store_url(schema), create=False, upgrade=False)
    try:
        lines = "\n".join(export_lines(opened.tables(), witnessed=False))
    finally:
        opened.close()
    assert '"number": 1' in lines or '"number":1' in lines
    assert "T-forged" not in lines


@pytest.mark.parametrize("change", ["ALTER TABLE tasks RENAME TO tasks_old",
                                    "ALTER TABLE journal RENAME COLUMN actor TO who"])
def test_doctor_on_postgresql_names_a_table_it_cannot_read(store: tuple[str, Any],
                                                           change: str) -> None:
    schema, raw = store
    raw.execute(change)
    found = doctor(schema)
    assert not found["schema"].ok, found["schema"]
    assert not all(f.ok for f in found.values())


def test_an_import_into_postgresql_is_a_gate(tmp_path: Any) -> None:
    """A tampered export (another owner, every hash recomputed) is refused with every
    check doctor has, and the new store the import made is gone."""
    import apsw

    from hivelite.core.errors import InvalidInput
    from hivelite.store.postgres import PostgresStore
    from hivelite.store.transfer import export_lines, import_lines

    from .test_chain import owner_changed
    from .test_doctor import busy_store

    source = tmp_path / "source.db"
    busy_store(source)
    lines = owner_changed(list(export_lines(apsw.Connection(str(source)))))
    schema = pg.new_schema()
    store = PostgresStore(pg.store_url(schema))
    try:
        with pytest.raises(InvalidInput) as refused:
            import_lines(store.tables(), lines)
        assert refused.value.reason == "import_unsound"
        problems = refused.value.extra["problems"]
        assert any(p.startswith("actors: ") for p in problems), problems
        assert any(p.startswith("hash chain: ") for p in problems), problems
    finally:
        store.discard()
    with pg.connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                            (schema,)).fetchone() == (0,)


@pytest.fixture
def roles() -> Iterator[tuple[str, str]]:
    """A role that owns the tables and that nobody logs in as, and hivelite's own."""
    import os

    owner, app = f"hive_owner_{os.getpid()}", f"hive_app_{os.getpid()}"
    with pg.connect() as conn:
        conn.execute(f"CREATE ROLE {owner} NOLOGIN")
        conn.execute(f"CREATE ROLE {app} LOGIN")
        conn.execute(f"GRANT CREATE ON DATABASE {pg.database()} TO {owner}")
    yield owner, app
    with pg.connect() as conn:
        for role in (app, owner):
            conn.execute(f"DROP OWNED BY {role} CASCADE")
            conn.execute(f"DROP ROLE {role}")


def test_tables_owned_by_a_role_nobody_logs_in_as_keep_the_rules_out_of_reach(
        roles: tuple[str, str]) -> None:
    import psycopg

    from hivelite.store.postgres import grants

    owner, app = roles
    schema = pg.new_schema()
    admin_url = pg.store_url(schema) + f"&role={owner}"  # the admin installs, as the owner
    with Hive.open(admin_url, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
    with pg.connect() as conn:
        assert conn.execute("SELECT tableowner FROM pg_tables WHERE schemaname = %s"
                            " AND tablename = 'tasks'", (schema,)).fetchone() == (owner,)
        for statement in grants(schema, app):
            conn.execute(statement)
    app_url = pg.store_url(schema).replace("postgresql://postgres@", f"postgresql://{app}@")
    with Hive.open(app_url, clock=ManualClock(START)) as hive:  # hivelite as its own role
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.checkpoint(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                        progress="half")
        assert hive.get(number).task.state == "working"
    from hivelite.store.pg_doctor import diagnose_url

    assert all(f.ok for f in diagnose_url(app_url))
    raw = psycopg.connect(app_url.partition("?")[0] + "?" + "&".join(
        p for p in app_url.partition("?")[2].split("&") if not p.startswith("schema=")),
        autocommit=True)
    raw.execute(f"SET search_path = {schema}")
    for statement in ("ALTER TABLE tasks DISABLE TRIGGER USER",
                      f"DROP FUNCTION {lease_rule()}() CASCADE",
                      f"CREATE OR REPLACE FUNCTION {lease_rule()}() RETURNS trigger"
                      " LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END $$",
                      "CREATE FUNCTION sneak() RETURNS trigger LANGUAGE plpgsql AS"
                      " $$BEGIN RETURN NEW; END $$",
                      "ALTER TABLE budgets RENAME TO budgets_old",
                      "DELETE FROM schema_versions"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            raw.execute(statement)
    with pytest.raises(psycopg.errors.RaiseException, match="no_such_move"):
        raw.execute("UPDATE tasks SET state = 'completed' WHERE number = 1")
    raw.close()


def test_the_grants_docs_postgres_shows_are_the_ones_the_code_gives() -> None:
    from pathlib import Path

    from hivelite.store.postgres import grants

    page = (Path(__file__).parent.parent / "docs" / "postgres.md").read_text()
    for statement in grants("hivelite", "hive_app"):
        assert f"-c '{statement}'" in page, statement


def test_a_version_lowered_by_hand_skips_no_check(store: tuple[str, Any]) -> None:
    """Rules switched off, then the recorded version lowered so that they would be
    checked "at the next upgrade": doctor fails, and opening is a documented error."""
    schema, raw = store
    raw.execute("ALTER TABLE tasks DISABLE TRIGGER USER")
    raw.execute("DELETE FROM schema_versions WHERE version >= 12")  # (13 changes nothing)
    found = doctor(schema)
    assert not found["schema"].ok and "not this hivelite's" in found["schema"].detail
    with pytest.raises(StoreError) as refused, \
            Hive.open(pg.store_url(schema), clock=ManualClock(START)):
        pass
    assert refused.value.reason == "upgrade_failed"


def test_the_first_rule_switched_off_is_named_as_every_other(store: tuple[str, Any]) -> None:
    """The guard's walk over the rules starts at the first (a deliberate bug once skipped
    it)."""
    schema, raw = store
    name, (table, _, _) = sorted(pg_guard.expected().triggers.items())[0]
    raw.execute(f"ALTER TABLE {table} DISABLE TRIGGER {name}")
    assert f"trigger {name} is disabled (DISABLE TRIGGER)" in pg_guard.problems(raw, schema)
