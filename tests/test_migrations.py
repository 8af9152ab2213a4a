"""Frozen, numbered migrations (issue 13): each released migration is a fixed snapshot;
running them all in order gives exactly the schema the code defines; a store made by the
previous release opens, upgrades, and keeps working.
"""

from __future__ import annotations

import hashlib
import shutil
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import apsw
import pytest

from hivelite import Caller, Hive, ManualClock, State
from hivelite.core.protocol import MOVES, Move
from hivelite.store import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from hivelite.store.doctor import diagnose
from hivelite.store.schema import insert_moves_sql, target_sql

DATA = Path(__file__).parent / "data"
RELEASED = {
    1: "e10a42ccc8a56fef063d9334ef4ca7d0e1af053a2bba6d3ea44a72f90589156a",
    2: "c627d35d24bec4640434ca3b1f962442522274057307d9b15420994d9a6c8db6",
    3: "a929d87a2c8940affad168b61de5e12335cdb21e89dc2ce1a593fda4d92227f3",
    4: "a6881b8d8dde7255efc18e7682c03a83383c797cc4cc0d43d98673cb798786cd",
    5: "de23d2da96b6cc977623d064103eac31a1f2c3af8727c185054ead26e4555efc",
    6: "bb5338d9bb22336098a0b12a37de9a31d94ca867d52147ffe49f07e25cf68877",
    7: "11a2b07de05257a1569af98b64d8f20d5e52e31408a888acd8a1c1be0f7cba5a",
    8: "0083738f10b3ce6c3f340025e00ff8df0a16f59a6562b61e0e5698ea2230e53a",
    9: "ab436ae9c3c117ca487ca64ac9794eb4a7cb8e38b81b4fc8ce10960fa22691a9",
    10: "8a2a0333d10d8d9e9de19bc562ca82ec6e88e260d545357a290550e69537ed18",
    11: "5622084a1b65ce426f401d40bf30eb6c02174081b646577c11bf60acb8d38da4",
    12: "8a3cbe271702c8b1e75d7ed428488f6381772b57873c7faaa3f961c06b993ec1",
    13: "3d8e33ee9603d79b03e77bb847db274ae836dd4d655a63e07e63d3ff8fc3e5eb",
    14: "68e54adbbe88271a0821b59576cb6434e7cc27cdd7f090c40f281d69f3df197b",
    15: "76e1b3e4277b299a8d3c753a925189402a225b2950d796cc03327d5d13b84468",
    16: "b1f1d28b45b2c5676c07e1bfd23ea13595d51090aad67dc40733ffaf173f6b85",
    17: "a6448e8f81a3cd523c9e968fe05b19574aeafb93e120e88c7f7da059ff385314",
    18: "3cd9c93d6fcbd271a2f67294f648359d7b90340172383b078f0074e4f4f848f4",
    19: "bc6757ffc35a239f8c13d98e5eb63c84e18ea08846cd6a7cea0e3fa95942f77e",
    20: "cc6bada86b9090e72bc9423ee7ec8dc341cf5a999381a9c6fb7848cc191c2898",
    21: "753e219d179da74d6caa73415d38fa6142756472ed3e6112e1624d9961cd99d2",
    22: "d431438e6af82ca6daceb2f5112601b6ea83968e26897f0a93e0b6e1a062ef88",
}
"""sha256 of every migration a release has shipped. A released migration is never edited:
change the schema with a new file, and add its hash here when it ships."""

SCHEMA_QUERY = "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'"


def schema_of(conn: apsw.Connection) -> tuple[set[tuple[object, ...]], list[tuple[object, ...]]]:
    """Every table, index and trigger with its SQL text, and the ``moves`` rows."""
    return (set(conn.execute(SCHEMA_QUERY)),
            list(conn.execute("SELECT * FROM moves ORDER BY number")))


def by_migrations(upto: int = SCHEMA_VERSION) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    for migration in MIGRATIONS:
        if migration.version <= upto:
            migration.apply(conn)
    return conn


def test_migrations_are_numbered_from_one_without_gaps() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert SCHEMA_VERSION == MIGRATIONS[-1].version == 22


def test_released_migrations_are_frozen() -> None:
    for migration in MIGRATIONS:
        digest = hashlib.sha256(migration.sql.encode("utf-8")).hexdigest()
        assert RELEASED.get(migration.version) == digest, (
            f"migration {migration.version} ({migration.name}) differs from what was"
            " released; add a new migration instead of editing it")


def test_running_every_migration_gives_the_schema_the_code_defines() -> None:
    target = apsw.Connection(":memory:")
    target.execute(target_sql())
    assert schema_of(by_migrations()) == schema_of(target)


def test_a_fresh_store_has_exactly_that_schema(tmp_path: Path) -> None:
    Hive.open(tmp_path / "s.db", owner="ana").close()
    conn = apsw.Connection(str(tmp_path / "s.db"))
    target = apsw.Connection(":memory:")
    target.execute(target_sql())
    assert schema_of(conn) == schema_of(target)
    assert conn.execute("PRAGMA user_version").get == SCHEMA_VERSION
    assert conn.execute("PRAGMA application_id").get == APPLICATION_ID


def test_a_new_move_in_the_code_needs_a_migration() -> None:
    """The test above fails the day the protocol changes without a migration: the moves
    table the code would write then differs from what the migrations leave."""
    extra = Move(23, "extra", State.waiting, State.completed, "test", ())
    changed = apsw.Connection(":memory:")
    changed.execute(target_sql().replace(insert_moves_sql(), insert_moves_sql((*MOVES, extra))))
    assert schema_of(changed) != schema_of(by_migrations())


def test_the_journal_index_arrives_with_migration_2() -> None:
    names = {row[1] for row in by_migrations(1).execute(SCHEMA_QUERY)}
    assert "journal_by_task" not in names
    assert "journal_by_task" in {row[1] for row in by_migrations(2).execute(SCHEMA_QUERY)}
    assert "journal_by_task" in {row[1] for row in by_migrations(12).execute(SCHEMA_QUERY)}
    assert "journal_by_task" not in {row[1] for row in by_migrations(13).execute(SCHEMA_QUERY)}


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    """A copy of a store the previous release (schema 1) made: ``hivelite demo``, then a
    held handoff and a claimed task, owner ``root``."""
    path = tmp_path / "old.db"
    shutil.copyfile(DATA / "store-schema1.db", path)
    return path


def test_a_store_of_the_previous_release_opens_and_upgrades(old_store: Path) -> None:
    before = apsw.Connection(str(old_store))
    assert before.execute("PRAGMA user_version").get == 1
    journal = list(before.execute("SELECT * FROM journal ORDER BY seq"))
    tasks = list(before.execute("SELECT number, id, state, waiting_on FROM tasks"))
    before.close()

    clock = ManualClock("2026-11-30T11:01:00Z")  # the claim on task 4 is still live
    with Hive.open(old_store, clock=clock) as hive:
        assert hive.owner == "root"
        assert hive.store.schema_version == SCHEMA_VERSION
        after = hive.store.conn  # type: ignore[attr-defined]
        upgraded = list(after.execute("SELECT * FROM journal ORDER BY seq"))
        width = len(journal[0])  # the old columns; then the hash, then the link (13)
        journal_reason = [c[1] for c in after.execute("PRAGMA table_info(journal)")].index(
            "reason")
        assert [row[:width] for row in upgraded[:len(journal)]] == journal  # now chained
        assert all(row[width] for row in upgraded)
        told = upgraded[len(journal):]  # the first open's plugins notice, cleared
        assert [row[journal_reason] for row in told] == ["policy"]
        assert all(f.ok for f in diagnose(after)), diagnose(after)
        assert list(after.execute("SELECT number, id, state, waiting_on FROM tasks")) == tasks
        target = apsw.Connection(":memory:")
        target.execute(target_sql())
        assert schema_of(after) == schema_of(target)
        # and it keeps working: the held task is approved, the live claim is honoured
        owner = hive.as_owner()
        assert hive.approve(owner, 3).state is State.routed
        assert [t.number for t in hive.list(state="accepted").items] == [4]
        assert hive.get(4).claim is not None
        clock.advance(minutes=30)
        reopened = hive.expire(owner)
        assert [(r.number, r.holder) for r in reopened] == [(4, "root/coder")]
        lease = hive.claim(Caller.agent("root/coder", "laptop"), 4)
        assert lease.fencing_token == 2
        assert [e.to_state for e in hive.history(4)][-3:] == [
            State.accepted, State.routed, State.accepted]


def test_an_upgrade_is_one_transaction(old_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A migration that fails leaves the store at its old version, untouched."""
    from hivelite.store import migrations, sqlite

    broken = (*MIGRATIONS[:-1], migrations.Migration(2, "broken",
                                                      MIGRATIONS[-1].sql + "\nNOT SQL;"))
    monkeypatch.setattr(sqlite, "MIGRATIONS", broken)
    data = old_store.read_bytes()
    with pytest.raises(apsw.SQLError):
        Hive.open(old_store)
    assert old_store.read_bytes() == data
    conn = apsw.Connection(str(old_store))
    assert conn.execute("PRAGMA user_version").get == 1


def test_every_data_file_of_the_package_ships_with_it() -> None:
    """The migrations are .sql files: a wheel without them could not open any store."""
    root = Path(__file__).parent.parent
    config = tomllib.loads((root / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["hivelite"]
    package = root / "hivelite"
    data = [p.relative_to(package).as_posix() for p in package.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert any(name.endswith(".sql") for name in data)
    assert [name for name in data if not any(fnmatch(name, g) for g in globs)] == []


def test_the_schema_fingerprint_is_the_migrations() -> None:
    """Every open compares the store's schema with this fingerprint."""
    from hivelite.store.doctor import digest, expected_schema
    from hivelite.store.migrations import SCHEMA_DIGEST

    assert digest(expected_schema(SCHEMA_VERSION)) == SCHEMA_DIGEST


def test_a_migration_runs_every_statement_even_after_one_that_returns_rows() -> None:
    from hivelite.store.migrations import Migration

    conn = apsw.Connection(":memory:")
    Migration(9, "mixed", "CREATE TABLE a(x); SELECT 1; CREATE TABLE b(y);").apply(conn)
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_schema")} == {"a", "b"}


def test_the_queue_backfill_is_migration_5s_own_text() -> None:
    """An import of an export from before the queue derives its rows with exactly the
    statements migration 5 ran."""
    from hivelite.store.schema import QUEUE_BACKFILL
    assert QUEUE_BACKFILL.strip() in MIGRATIONS[4].sql


def test_a_store_from_before_the_owners_authority_upgrades_and_obeys_it(
        tmp_path: Path) -> None:
    """A schema-6 store with claims, verdicts and usage gets migration 7: its old verdicts
    keep counting, its live lease can be stopped, a budget counts the day's claims it
    already had, and doctor finds it sound."""
    from hivelite.core.errors import ForbiddenRight, RateLimited

    from .conftest import CODER, OWNER, REVIEWER, own_task
    from .downgrade import to_version

    path = tmp_path / "old.db"
    clock = ManualClock("2026-12-02T09:00:00.000Z")
    with Hive.open(path, owner="ana", clock=clock) as hive:
        done = own_task(hive)
        lease = hive.claim(CODER, done)
        hive.submit(CODER, done, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=[{"kind": "note", "summary": "checked"}])
        hive.verify(REVIEWER, done)
        busy = own_task(hive)
        hive.claim(CODER, busy)
    conn = apsw.Connection(str(path))
    with conn:
        to_version(conn, 6)
    conn.close()
    with Hive.open(path, clock=clock) as hive:
        assert hive.store.schema_version == SCHEMA_VERSION
        assert [(c.counted, c.why) for c in hive.get(done).confirmations] == [(True, None)]
        assert hive.stop(OWNER, agent=CODER.name).ended == [busy]
        hive.lift(OWNER, agent=CODER.name)
        assert hive.set_budget(OWNER, CODER.name, tasks=2).used_tasks == 2
        with pytest.raises(RateLimited):
            hive.claim(CODER, busy)
        with pytest.raises(ForbiddenRight):
            hive.set_budget(CODER, CODER.name, tasks=9)
    conn = apsw.Connection(str(path))
    assert all(f.ok for f in diagnose(conn)), diagnose(conn)
    conn.close()


def test_migration_18s_statements_are_the_code_s_own_text_on_both_engines() -> None:
    """The recount an import of an older export runs, and the notice's mark, are exactly
    what migration 18 ran, on each engine (a frozen file holds them verbatim)."""
    from hivelite.store import pg_schema, schema
    from hivelite.store.pg_migrations import MIGRATIONS as PG_MIGRATIONS

    (sqlite18,) = [m for m in MIGRATIONS if m.version == 18]
    (pg18,) = [m for m in PG_MIGRATIONS if m.version == 18]
    for text in (schema.RETURNS_BACKFILL, schema.PLUGINS_NOTICE, schema.policy_values_sql()):
        assert text.strip() in sqlite18.sql
    for text in (pg_schema.RETURNS_BACKFILL, pg_schema.PLUGINS_NOTICE):
        assert text.strip() in pg18.sql


def migration_19_sql() -> str:
    """Migration 19's statements as the code defines them: the rules it changes, and every
    later rule of their tables made again in the order a store at version 18 has them."""
    from hivelite.store import schema

    target = apsw.Connection(":memory:")
    target.execute(target_sql())
    made = dict(target.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'"))
    before = list(by_migrations(18).execute(
        "SELECT name, tbl_name FROM sqlite_schema WHERE type = 'trigger' ORDER BY rowid"))
    return schema.remade_in_order(before, made, (n for n, _ in schema.ONE_ROW_SUBMISSIONS))


def test_migration_19_makes_its_rules_as_the_code_does_in_the_order_they_fire() -> None:
    """Migration 19's rules are the code's own text (a frozen file holds them verbatim), and
    every rule of the tables it touches fires in the order it did before it."""
    (sqlite19,) = [m for m in MIGRATIONS if m.version == 19]
    assert sqlite19.sql.endswith(migration_19_sql())
    order = ("SELECT name FROM sqlite_schema WHERE type = 'trigger'"
             " AND tbl_name IN ('tasks', 'journal') ORDER BY rowid")
    assert list(by_migrations(18).execute(order)) == list(by_migrations(19).execute(order))


@pytest.mark.parametrize(("version", "rule", "made", "first_remade"), [
    (20, "journal_answered", "ANSWERS", "journal_insert"),
    (21, "journal_enrolled", "ENROLLED", "journal_answered"),
])
def test_a_new_journal_rule_is_the_code_s_and_the_journal_s_rules_still_fire_first(
        version: int, rule: str, made: str, first_remade: str) -> None:
    """Migrations 20 and 21 each make a rule on the journal: its text is the code's own, and
    the journal's rules are made again after it in the order they were (from
    ``first_remade``): each still fires as it did, and before it."""
    from hivelite.store import schema

    (migration,) = [m for m in MIGRATIONS if m.version == version]
    text = getattr(schema, made).lstrip("\n")
    assert text[text.index("CREATE TRIGGER"):] + ";\n" in migration.sql
    earlier = by_migrations(version - 1)
    before = list(earlier.execute(
        "SELECT name, tbl_name FROM sqlite_schema WHERE type = 'trigger' ORDER BY rowid"))
    rules = dict(earlier.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'"))
    assert migration.sql.endswith(schema.remade_in_order(before, rules, [first_remade]))
    order = ("SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'journal'"
             " ORDER BY rowid")
    assert [r[0] for r in by_migrations(version).execute(order)] == [rule] + [
        r[0] for r in earlier.execute(order)]


def test_migration_22_makes_the_kept_tables_rules_as_the_code_does() -> None:
    """Migration 22's rules (a day's claim count, a watch) are the code's own text; they
    are the first rules of their tables, so nothing else is made again."""
    from hivelite.store import schema

    (migration,) = [m for m in MIGRATIONS if m.version == 22]
    assert migration.sql.endswith(schema.KEPT_COUNTS.lstrip("\n") + ";\n\n"
                                  + schema.KEPT_WATCHES.lstrip("\n") + ";\n")
    made = {r[0] for r in by_migrations(22).execute(
        "SELECT name FROM sqlite_schema WHERE type = 'trigger'"
        " AND tbl_name IN ('claim_counts', 'watches')")}
    assert made == {"claim_counts_started", "claim_counts_grown", "watches_made",
                    "watches_kept"}
