"""The PostgreSQL server the tests use, and a fresh store (a schema) per test store.

``.ci/run`` starts a throwaway server (``.ci/postgres start``) and names it in
``$HIVELITE_TEST_POSTGRES`` (a libpq connection string); without it the PostgreSQL
side of the suite is skipped, unless ``$HIVELITE_NEED_POSTGRES`` is set (as on CI), when
it fails. The tests' stores share one database, each in a schema of its own
(``?schema=NAME``): making a schema costs tens of milliseconds, a database hundreds.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest

SERVER = os.environ.get("HIVELITE_TEST_POSTGRES", "")
NEEDED = bool(os.environ.get("HIVELITE_NEED_POSTGRES"))
DATABASE = f"hivelite_tests_{os.getpid()}"
_numbers = itertools.count(1)
_made = False
_pool: list[str] = []
"""Stores the contract tests gave back, emptied again before the next test takes one."""
KEPT_TABLES = ("meta", "tasks", "packets", "checkpoints", "results", "confirmations",
               "updates", "journal", "deps", "requests", "policy", "required_plugins",
               "controls", "budgets", "tokens", "enrolments", "watches")
"""Every table a store fills (``moves`` and ``schema_versions`` are the schema's own)."""


def available() -> bool:
    """Whether the PostgreSQL side of the suite runs."""
    if SERVER:
        return True
    if NEEDED:
        raise RuntimeError("$HIVELITE_NEED_POSTGRES is set but $HIVELITE_TEST_POSTGRES names"
                           " no server: start one with `eval \"$(.ci/postgres start)\"`")
    return False


def admin() -> Any:
    """A connection to the server's maintenance database, outside any transaction."""
    import psycopg

    return psycopg.connect(SERVER, autocommit=True)


def url(database: str, schema: str | None = None) -> str:
    """A ``postgresql://`` URL for ``database`` on the test server (a unix socket)."""
    params = dict(item.split("=", 1) for item in SERVER.split())
    tail = f"&schema={schema}" if schema else ""
    return (f"postgresql://{params.get('user', 'postgres')}@/{database}"
            f"?host={params['host']}{tail}")


def database() -> str:
    """The tests' shared database (made on first use, dropped when the tests end)."""
    global _made
    if not available():
        pytest.skip("no PostgreSQL server: $HIVELITE_TEST_POSTGRES is not set")
    if not _made:
        with admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {DATABASE}")
        _made = True
    return DATABASE


def new_schema() -> str:
    """A name for a new store in the shared database (nothing is made yet)."""
    database()
    return f"s{next(_numbers)}"


def reused_schema() -> str:
    """A store for a contract test: one an earlier test gave back, emptied to what a new
    store holds (its moves and a new identity), else a new name. Emptying takes a few
    milliseconds where building a store's schema takes about a hundred."""
    if not _pool:
        return new_schema()
    schema = _pool.pop()
    with connect() as conn:
        conn.execute("SET session_replication_role = replica")  # the store's rules aside
        conn.execute(f"TRUNCATE {', '.join(f'{schema}.{t}' for t in KEPT_TABLES)}")
        conn.execute(f"INSERT INTO {schema}.meta(key, value) VALUES ('store_id',"
                     " replace(gen_random_uuid()::text, '-', ''))")
    return schema


def give_back(schema: str) -> None:
    """A contract test is done with its store: the next one may reuse it."""
    _pool.append(schema)


def store_url(schema: str) -> str:
    return url(database(), schema)


def drop(schema: str) -> None:
    """Remove one store of the shared database."""
    with connect() as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def drop_database() -> None:
    if _made:
        with admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


def connect() -> Any:
    """A raw connection to the shared database, outside any transaction."""
    import psycopg

    return psycopg.connect(url(database()), autocommit=True)


def snapshot(schema: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of one store, as ``rawsql.snapshot`` reads a file."""
    with connect() as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
            " AND table_type = 'BASE TABLE' ORDER BY table_name", (schema,))]
        return {t: list(conn.execute(f"SELECT * FROM {schema}.{t} ORDER BY 1"))
                for t in tables}
