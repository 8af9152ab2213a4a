"""Frozen, numbered migrations: ``NNNN_name.sql`` files run in order, each exactly once.

A migration is a fixed snapshot of SQL: it is never edited once released, so a
store built today and one upgraded from any earlier release end with the same
schema (``tests/test_migrations.py`` holds them to ``schema.target_sql()``). A
change to the schema or to the protocol's moves is a new file here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..chain import chain_existing_journal

APPLICATION_ID = 0x48495645  # "HIVE": marks the file as a hivelite store.
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One numbered schema step; ``user_version`` records the last one run."""

    version: int
    name: str
    sql: str
    step: Callable[[Any], None] | None = None
    """What SQL alone cannot do (hashing), run after the SQL in the same transaction;
    frozen like the SQL once released."""

    def apply(self, conn: Any) -> None:
        """Run every statement of the migration on ``conn`` (an apsw connection runs a
        script only as far as its cursor is read), then its step."""
        conn.execute(self.sql).fetchall()
        if self.step is not None:
            self.step(conn)


STEPS: dict[int, Callable[[Any], None]] = {4: chain_existing_journal}


def _load() -> tuple[Migration, ...]:
    """The files beside this module (read as files, not through ``importlib.resources``,
    whose import every CLI call would pay: each opens a store)."""
    found = []
    for entry in Path(__file__).parent.iterdir():
        match = _NAME.match(entry.name)
        if match:
            version = int(match[1])
            found.append(Migration(version, match[2], entry.read_text(encoding="utf-8"),
                                   STEPS.get(version)))
    found.sort(key=lambda m: m.version)
    if not found:
        raise RuntimeError("no migrations found beside hivelite/store/migrations/__init__.py:"
                           " the package was installed without its .sql files")
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps: {found!r}")
    return tuple(found)


MIGRATIONS: tuple[Migration, ...] = _load()
SCHEMA_VERSION = MIGRATIONS[-1].version
SCHEMA_DIGEST = "1ea368c70b80279adc9d52852e42cb21ed13cf37f9b5ea2ff810468a85e2a546"
"""The fingerprint of the schema these migrations build (``doctor.digest``): a store's own
schema is compared with it at every open, so a dropped or edited trigger is noticed.
``tests/test_migrations.py`` holds it to the migrations; update it with a new migration."""

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_DIGEST", "SCHEMA_VERSION", "Migration"]
