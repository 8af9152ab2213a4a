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
