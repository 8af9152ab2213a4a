"""Frozen, numbered migrations: ``NNNN_name.sql`` files run in order, each exactly once.

A migration is a fixed snapshot of SQL: it is never edited once released, so a
store built today and one upgraded from any earlier release end with the same
schema (``tests/test_migrations.py`` holds them to ``schema.target_sql()``). A
change to the schema or to the protocol's moves is a new file here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

APPLICATION_ID = 0x48495645  # "HIVE": marks the file as a hivelite store.
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One numbered schema step; ``user_version`` records the last one run."""

    version: int
    name: str
    sql: str

    def apply(self, conn: Any) -> None:
        """Run every statement of the migration on ``conn`` (an apsw connection runs a
        script only as far as its cursor is read)."""
        conn.execute(self.sql).fetchall()


def _load() -> tuple[Migration, ...]:
    found = []
    for entry in resources.files(__name__).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if not found:
        raise RuntimeError("no migrations found beside hivelite/store/migrations/__init__.py:"
                           " the package was installed without its .sql files")
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps: {found!r}")
    return tuple(found)


MIGRATIONS: tuple[Migration, ...] = _load()
SCHEMA_VERSION = MIGRATIONS[-1].version
SCHEMA_DIGEST = "e0d72a989de5c050d93edc208a6cc64208e94b80b5bc5548fd5a7da677b802fb"
"""The fingerprint of the schema these migrations build (``doctor.digest``): a store's own
schema is compared with it at every open, so a dropped or edited trigger is noticed.
``tests/test_migrations.py`` holds it to the migrations; update it with a new migration."""

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_DIGEST", "SCHEMA_VERSION", "Migration"]
