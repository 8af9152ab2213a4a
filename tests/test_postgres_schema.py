"""The PostgreSQL schema: frozen, generated from the same sources as SQLite's, and built
into a real server's database (issue 20, point 2)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from hivelite.core.protocol import MOVES
from hivelite.store import pg_schema
from hivelite.store.pg_migrations import FIRST, MIGRATIONS, SCHEMA_VERSION
from hivelite.store.schema import REFUSALS, SQLITE_ONLY, move_rows

from . import pg

RELEASED = {
    9: "05342c99308982d6d3382de27c08be705b72a75b237b19b1e636de3d7d64d96c",
    10: "542565f5114886d02017db7758bdfd7b8453a7a1452a0dd170ef8822e28c509f",
    11: "9ccffbb766cb20518cb7c45af166aa838536c3a72fc6b708db688105cdc32d62",
    12: "218afe48d8e420872abddacf668d5fd760c41f4d4997600ca4321af938d31c30",
    13: "639ca6d0c2d4adece988fa356de3642fe49261a4c6f9e146d32413bcd4492fcd",
    14: "718e91badbf5360d27ebbffb8d1e3fa1e1524ce9a54fadbaa81a5be86fa86cf8",
    15: "8c548763bed4451420f60cb5c241935cb0e071449ac7ac635ebefe90af7772ec",
    16: "833335bcb8ae9a014914798cf10258d29b8c4dd87c90172b9fd210f6efbd6152",
    17: "7eba69ca3cd9c2ac176d706d5f6ee0027674ed352a93cbce113f2ab63366c77d",
    18: "69920557f1c3f4f5c95fc4d87d90d7246fbb0c88e2f71fa2ac2eefd8173b8094",
    19: "8139bcdb3d9f673e9c92e96383c79dff650290d0d24668de3baa080bd8cd0009",
    20: "bc42bf93d3a4124fe431cf30b806ae03f6a3ede00dbb788b7ac62c64c0bae077",
    21: "a822332fedf2d608c37046c3f68af7aae6ae90c6501a2cf0195b7dfdf6f767e8",
    22: "d63512b31669c12a8a9dc5915233d1d59eee4fe527a4cc87db42ffb7eb9f0242",
}
"""sha256 of every PostgreSQL migration released: never edited once shipped."""

HEADER_LINES = 3


def test_the_first_migration_is_migration_nine() -> None:
    (first, *_) = MIGRATIONS
    assert first.version == FIRST == 9
    assert first.sql.startswith("-- The PostgreSQL schema at contract version 9")


def catalog(conn: Any, schema: str) -> dict[str, list[tuple[object, ...]]]:
    """What a store's schema is made of, its own name taken out: columns (of tables and
    views), views, indexes, constraints, triggers, functions with their settings, and the
    moves."""
    def rows(sql: str) -> list[tuple[object, ...]]:
        found = conn.execute(sql, {"s": schema}).fetchall()
        return sorted(tuple(str(v).replace(f'"{schema}"', "S").replace(schema, "S")
                            if v is not None else None for v in row) for row in found)

    return {
        "columns": rows("SELECT table_name, column_name, ordinal_position, data_type,"
                        " is_nullable, column_default FROM information_schema.columns"
                        " WHERE table_schema = %(s)s AND table_name <> 'schema_versions'"),
        "views": rows("SELECT c.relname, pg_get_viewdef(c.oid) FROM pg_class c JOIN"
                      " pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(s)s"
                      " AND c.relkind = 'v'"),
        "indexes": rows("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(s)s"
                        " AND tablename <> 'schema_versions'"),
        "constraints": rows("SELECT c.conname, c.conrelid::regclass::text,"
                            " pg_get_constraintdef(c.oid) FROM pg_constraint c JOIN"
                            " pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = %(s)s"
                            " AND c.conrelid::regclass::text NOT LIKE '%%schema_versions'"),
        "triggers": rows("SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN"
                         " pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON"
                         " n.oid = c.relnamespace WHERE n.nspname = %(s)s AND NOT t.tgisinternal"),
        "functions": rows("SELECT p.proname, p.prosrc, p.proconfig::text FROM pg_proc p JOIN"
                          " pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(s)s"),
        "moves": rows(f"SELECT * FROM {schema}.moves"),
    }


@pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")
def test_the_migrations_build_the_schema_the_code_generates() -> None:
    """A store made by the frozen migrations, one after another, is exactly the schema
    ``pg_schema`` generates today, on a real server (as SQLite's migration test)."""
    from hivelite.store.postgres import PostgresStore

    migrated, generated = pg.new_schema(), pg.new_schema()
    PostgresStore(pg.store_url(migrated)).close()
    try:
        with pg.connect() as conn:
            with conn.transaction():
                conn.execute(f'CREATE SCHEMA "{generated}"')
                conn.execute(f'SET LOCAL search_path = "{generated}", pg_temp')
                conn.execute(pg_schema.target_sql().encode("utf-8"))
            made, wanted = catalog(conn, migrated), catalog(conn, generated)
        assert made["views"] and made["triggers"] and made["functions"]
        for part, items in wanted.items():
            assert made[part] == items, f"the migrations build other {part}"
    finally:
        pg.drop(migrated)
        pg.drop(generated)


def test_released_migrations_are_never_edited() -> None:
    for migration in MIGRATIONS:
        digest = hashlib.sha256(migration.sql.encode("utf-8")).hexdigest()
        assert RELEASED.get(migration.version) == digest, (
            f"migration {migration.version} differs from what was released")


def test_both_engines_are_at_the_same_contract_version() -> None:
    from hivelite.store.migrations import SCHEMA_VERSION as SQLITE_VERSION

    assert SCHEMA_VERSION == SQLITE_VERSION == MIGRATIONS[-1].version == 22


def test_migration_19_makes_each_rule_of_one_row_submissions_as_the_code_does() -> None:
    """Migration 19's statements are the code's own text (a frozen file holds them
    verbatim): the five rules SQLite's changes, each replaced as ``pg_schema`` writes it,
    and every rule renamed to the place SQLite's order at 19 gives it; nothing else."""
    (pg19,) = [m for m in MIGRATIONS if m.version == 19]
    assert pg19.sql.endswith(pg_schema.one_row_submissions_sql())
    made = {rule.name: name for name, rule, _ in pg_schema.rule_functions(
        pg_schema._in_firing_order(pg_schema.rules(), 19))}
    replaced = {line.split()[4][:-2] for line in pg19.sql.splitlines()
                if line.startswith("CREATE OR REPLACE FUNCTION")}
    assert replaced == {made[name] for name in pg_schema.ONE_ROW_SUBMISSIONS}
    rules = ("task_move", "journal_insert", "task_completion_decided", "task_attempt_failed",
             "task_holder_enrolled")
    assert frozenset(rules) == pg_schema.ONE_ROW_SUBMISSIONS


@pytest.mark.parametrize(("version", "rule"), [(20, "journal_answered"),
                                               (21, "journal_enrolled")])
def test_a_new_journal_rule_is_made_as_the_code_does(version: int, rule: str) -> None:
    """Migrations 20 and 21 are the code's own text: the new rule on the journal made in
    its place, every other rule renamed to the place SQLite's order at that version gives
    it; no rule replaced."""
    (migration,) = [m for m in MIGRATIONS if m.version == version]
    assert migration.sql.endswith(pg_schema.new_rule_sql(version))
    assert "CREATE OR REPLACE" not in migration.sql
    functions = [line.split()[2][:-2] for line in migration.sql.splitlines()
                 if line.startswith("CREATE FUNCTION")]
    assert functions == [name for name, found, _ in pg_schema.rule_functions(
        pg_schema._in_firing_order(pg_schema.rules(), version)) if found.name == rule]


def test_migration_22_makes_the_watches_rules_as_the_code_does() -> None:
    """Migration 22 on PostgreSQL: a watch's seal column and its two rules, made in their
    places, every other rule renamed to its place; no rule replaced (a day's claim count
    is SQLite's alone)."""
    (migration,) = [m for m in MIGRATIONS if m.version == 22]
    assert migration.sql.endswith(pg_schema.WATCH_SEAL + pg_schema.new_rule_sql(22))
    assert "CREATE OR REPLACE" not in migration.sql
    functions = [line.split()[2][:-2] for line in migration.sql.splitlines()
                 if line.startswith("CREATE FUNCTION")]
    assert sorted(name.split("_", 1)[1] for name in functions) == ["watches_kept",
                                                                  "watches_made"]


def test_every_move_and_every_refusal_comes_from_the_same_sources() -> None:
    sql = pg_schema.target_sql()
    for row in move_rows(MOVES):
        assert f"({row[0]}, '{row[1]}'" in sql
    missing = {message for _, _, _, message, _ in REFUSALS
               if f"RAISE EXCEPTION '{message}'" not in sql}
    assert missing == set(), f"refusals of the SQLite schema missing on PostgreSQL: {missing}"


@pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")
def test_a_new_store_holds_the_moves_and_its_identity() -> None:
    from hivelite.store.postgres import PostgresStore

    schema = pg.new_schema()
    store = PostgresStore(pg.store_url(schema))
    try:
        assert store.created and store.schema_version == SCHEMA_VERSION
        with pg.connect() as conn:
            moves = conn.execute(f"SELECT number, name, from_state, from_waiting, to_state,"
                                 f" to_waiting FROM {schema}.moves ORDER BY number").fetchall()
            identity = conn.execute(f"SELECT value FROM {schema}.meta"
                                    " WHERE key = 'store_id'").fetchone()
        assert moves == move_rows(MOVES)
        assert identity is not None and len(identity[0]) == 32
        again = PostgresStore(pg.store_url(schema))
        assert not again.created  # opened, not made again
        again.close()
    finally:
        store.close()
        pg.drop(schema)


def test_every_sqlite_trigger_is_a_rule_of_the_same_name() -> None:
    """One rule for each SQLite trigger, named alike, and nothing else but the numbering
    and ``TRUNCATE`` rules SQLite has no need for."""
    names = {rule.name for rule in pg_schema.rules()}
    sqlite = set(pg_schema.sqlite_triggers()) - SQLITE_ONLY.triggers
    assert sqlite - names == set(), "SQLite triggers with no PostgreSQL rule"
    extra = {n for n in names - sqlite if not n.endswith(pg_schema.PG_ONLY)}
    assert extra == set(), f"PostgreSQL rules SQLite does not have: {extra}"


def test_rules_run_in_sqlites_order() -> None:
    """A table's rules run in the reverse of the order SQLite's migrations made them."""
    made = pg_schema.sqlite_triggers()
    ran = [r.name for r in pg_schema.rules() if r.name in made]
    assert ran == sorted(ran, key=lambda name: -made.index(name))


@pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")
def test_every_table_has_the_same_columns_on_both_engines() -> None:
    """The PostgreSQL tables are written out beside SQLite's: the same tables, the same
    columns in the same order, the same NOT NULLs, defaults and primary keys."""
    import apsw

    from hivelite.store.migrations import MIGRATIONS
    from hivelite.store.postgres import PostgresStore

    conn = apsw.Connection(":memory:")
    for migration in MIGRATIONS:
        migration.apply(conn)
    sqlite: dict[str, list[tuple[object, ...]]] = {}
    for (table,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'"):
        sqlite[table] = [(name, kind.lower().replace("integer", "bigint"), bool(notnull),
                          None if default is None else str(default).strip("'"), pk > 0)
                         for _, name, kind, notnull, default, pk in conn.execute(
                             f"PRAGMA table_info({table})")]
    conn.close()
    schema = pg.new_schema()
    PostgresStore(pg.store_url(schema)).close()
    try:
        with pg.connect() as server:
            keys = {(t, c) for t, c in server.execute(
                "SELECT k.table_name, k.column_name FROM information_schema.key_column_usage k"
                " JOIN information_schema.table_constraints c USING (constraint_name,"
                " table_schema) WHERE c.constraint_type = 'PRIMARY KEY'"
                " AND k.table_schema = %s", (schema,))}
            found: dict[str, list[tuple[object, ...]]] = {}
            for table, name, kind, nullable, default in server.execute(
                    "SELECT table_name, column_name, data_type, is_nullable, column_default"
                    " FROM information_schema.columns WHERE table_schema = %s"
                    " ORDER BY table_name, ordinal_position", (schema,)):
                if table in ("schema_versions", "task_board") or (
                        table, name) in pg_schema.PG_ONLY_COLUMNS:
                    continue
                found.setdefault(table, []).append(
                    (name, kind, nullable == "NO" or (table, name) in keys,
                     None if default is None else default.split("::")[0].strip("'"),
                     (table, name) in keys))
    finally:
        pg.drop(schema)
    for table, columns in sqlite.items():  # SQLite's primary keys say nothing of NOT NULL
        sqlite[table] = [(n, k, notnull or pk, d, pk) for n, k, notnull, d, pk in columns
                         if (table, n) not in SQLITE_ONLY.columns]
    for table in SQLITE_ONLY.tables:
        del sqlite[table]
    assert found == sqlite


@pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")
def test_a_store_at_contract_nine_upgrades_when_it_opens() -> None:
    """A store the first release made (migration 9 alone) opens at today's version, its
    rows kept, with exactly the schema a new store gets."""
    from hivelite import Caller, Hive
    from hivelite.store.postgres import PostgresStore

    old, new = pg.new_schema(), pg.new_schema()
    PostgresStore(pg.store_url(new)).close()
    try:
        with pg.connect() as conn, conn.transaction():
            conn.execute(f'CREATE SCHEMA "{old}"')
            conn.execute(f'SET LOCAL search_path = "{old}", pg_temp')
            conn.execute("CREATE TABLE schema_versions(version bigint PRIMARY KEY,"
                         " name text NOT NULL)")
            conn.execute(MIGRATIONS[0].sql.encode("utf-8"))
            conn.execute("INSERT INTO schema_versions VALUES (9, 'contract')")
        with Hive.open(pg.store_url(old), owner="ana") as hive:
            number = hive.handoff(Caller.owner("ana"), requester="ana/planner",
                                  assignee="ana/coder", project="demo", packet={
                                      "task": "Carry on", "deliverable_type": "code",
                                      "acceptance_criteria": ["ok"]}).number
            assert hive.store.schema_version == SCHEMA_VERSION  # type: ignore[attr-defined]
        with pg.connect() as conn:
            assert conn.execute(f"SELECT number, title FROM {old}.task_board").fetchall() == [
                (number, "Carry on")]
            assert catalog(conn, old) == catalog(conn, new)
    finally:
        pg.drop(old)
        pg.drop(new)


def test_a_guard_is_what_its_condition_implies_without_a_subquery() -> None:
    """``pg_schema.guard``: of a conjunction, the first conjunct with no subquery (nor a
    call of the store's own helpers); a disjunction kept only when every disjunct keeps a
    guard; nothing cut inside a ``BETWEEN`` or a quoted string."""
    guard = pg_schema.guard
    assert guard("EXISTS (SELECT 1 FROM t) AND NEW.a = 1 AND OLD.b IS NULL") == "NEW.a = 1"
    assert guard("NEW.a = 1 OR NOT EXISTS (SELECT 1 FROM t)") is None
    assert guard("((SELECT 2) = 2 AND NEW.a = 1) OR NEW.b = 'x AND y' OR NEW.a = 1") == (
        "(NEW.a = 1) OR (NEW.b = 'x AND y')")
    assert guard("NOT (NEW.a = 1 AND (SELECT 2) = 2)") is None
    assert guard("NEW.a BETWEEN 1 AND 2") == "NEW.a BETWEEN 1 AND 2"
    assert guard("hl_json(NEW.b) IS NULL AND NEW.a = 1") == "NEW.a = 1"
    assert guard("(SELECT state FROM tasks WHERE number = NEW.task) = 'routed'") is None


def test_the_rules_a_move_cannot_break_are_not_called_for_it() -> None:
    """The rules of a task's update that most moves cannot break carry their guard as a
    ``WHEN``; the ones that write (the journal, the numbering) fire always, and so do
    those whose guard would pass nearly every move; no ``WHEN`` reads a row its event
    does not have, or anything but the row."""
    whens = {rule.name: rule.when for rule in pg_schema.rules()}
    assert {name for name, when in whens.items() if when} == pg_schema.FILTERED
    assert whens["task_completion_decided"] == "NEW.state = 'completed'"
    assert whens["task_claim_ready"] == "OLD.state = 'routed'"
    assert whens["task_decided_by"] == "NEW.state IN ('cancelled', 'rejected', 'routed')"
    for name in ("task_journal", "task_created", "journal_number", "updates_number",
                 "controls_number", "task_delete", "task_update", "task_move"):
        assert whens[name] is None, name
    for rule in pg_schema.rules():
        assert rule.when is None or (
            ("OLD." not in rule.when or rule.event != "INSERT")
            and ("NEW." not in rule.when or rule.event != "DELETE")
            and rule.each == "ROW" and "SELECT" not in rule.when
            and "hl_" not in rule.when), rule.name


@pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")
def test_the_oldest_live_lease_is_read_from_its_index() -> None:
    """The read every write makes (``min(lease_expires COLLATE "C")`` of the live leases)
    and the sweep's order are in the "C" collation: the index is too, so the server reads
    the oldest lease as the index's first entry instead of scanning every task (half of
    these 5,000 hold a lease)."""
    from hivelite.store.postgres import OVERDUE, PostgresStore

    schema = pg.new_schema()
    PostgresStore(pg.store_url(schema)).close()
    try:
        with pg.connect() as conn, conn.transaction():
            conn.execute(f'SET LOCAL search_path = "{schema}"')
            conn.execute("SET LOCAL session_replication_role = replica")  # rows, not moves
            conn.execute(
                "INSERT INTO tasks(number, id, state, project, requester, assignee,"
                " created_at, updated_at, lease_id, lease_holder, lease_expires)"
                " SELECT n, 't' || n, CASE WHEN n % 2 = 0 THEN 'accepted' ELSE 'routed' END,"
                " 'demo', 'ana', 'ana/coder', '2026-12-01T09:00:00Z', '2026-12-01T09:00:00Z',"
                " CASE WHEN n % 2 = 0 THEN 'l' || n END, CASE WHEN n % 2 = 0"
                " THEN 'ana/coder' END, CASE WHEN n % 2 = 0 THEN '2026-12-01T09:'"
                " || lpad((n % 60)::text, 2, '0') || ':00Z' END"
                " FROM generate_series(1, 5000) n")
            conn.execute("ANALYZE tasks")
            plan = "\n".join(str(r[0]) for r in conn.execute(
                'EXPLAIN SELECT min(lease_expires COLLATE "C") FROM tasks'
                " WHERE lease_id IS NOT NULL").fetchall())
            assert "Seq Scan" not in plan, plan  # (the index in the default collation:
            assert "Limit" in plan and "tasks_live_leases" in plan, plan  # every task read)
            assert conn.execute('SELECT min(lease_expires COLLATE "C") FROM tasks'
                                " WHERE lease_id IS NOT NULL").fetchone() == (
                "2026-12-01T09:00:00Z",)
            swept = "\n".join(str(r[0]) for r in conn.execute(  # the sweep's read too
                "EXPLAIN " + OVERDUE.replace("%s", "'2026-12-01T09:00:05Z'")).fetchall())
            assert "Seq Scan" not in swept and "tasks_live_leases" in swept, swept
            conn.execute("SET LOCAL session_replication_role = origin")
    finally:
        pg.drop(schema)
