"""Frozen, numbered migrations of a PostgreSQL store: ``NNNN_name.sql``, run in order, once.

A version means the same contract on both engines: a PostgreSQL store at version N keeps
exactly the rules of an SQLite store at version N. The first PostgreSQL migration is
version 9 (the whole contract as it stood, generated then by ``pg_schema``); a later
change to the schema is a pair of new files, one per engine, with the same number.
``pg_schema`` generates today's schema, and ``tests/test_postgres_schema.py`` holds the
migrations to it on a real server, as ``tests/test_migrations.py`` does SQLite's.
"""

from __future__ import annotations

import re
from importlib import resources

from ..migrations import Migration

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
FIRST = 9
"""The contract version the first PostgreSQL migration brings a new store to."""


def _load() -> tuple[Migration, ...]:
    found = []
    for entry in resources.files(__name__).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if not found or [m.version for m in found] != list(range(FIRST, FIRST + len(found))):
        raise RuntimeError("PostgreSQL migrations must be numbered from 9 without gaps:"
                           f" {[m.version for m in found]}")
    return tuple(found)


MIGRATIONS: tuple[Migration, ...] = _load()
SCHEMA_VERSION = MIGRATIONS[-1].version

__all__ = ["FIRST", "MIGRATIONS", "SCHEMA_VERSION"]
