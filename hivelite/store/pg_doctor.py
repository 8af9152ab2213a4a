"""``doctor`` on a PostgreSQL store: the same checks as on an SQLite file.

The store's rules are checked in the server's catalogs (:mod:`.pg_guard`: every trigger
present and enabled, every function's body hivelite's). Every other check reads the
rows: they are copied, in one snapshot, into a scratch SQLite store that nobody else
sees, and :func:`.doctor.diagnose` runs there, so both engines answer to one set of
checks (the hash chain with the owner's key, the replay, the actors, the tokens, leases,
queue, controls, policy, results, usage, kept answers, and the heads witnessed). Nothing
is written to the store; its pages are the server's to check (``pg_amcheck``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import psycopg

from ..core.errors import InvalidInput
from ..core.progress import Progress
from .doctor import Finding, diagnose, witness_sound
from .keys import RESTORED, witness
from .pg_guard import problems
from .pg_migrations import SCHEMA_VERSION
from .postgres import PostgresStore, PostgresTables
from .sqlite import SqliteStore
from .transfer import Tables, export_lines, import_lines


def _rules(store: PostgresStore) -> Finding:
    version = store.schema_version
    if version != SCHEMA_VERSION:  # (a version lowered by hand must not skip the check)
        return Finding("schema", False, f"the store is at version {version}, not this"
                       f" hivelite's {SCHEMA_VERSION}: its rules are checked at this"
                       " version only. Open it once with this hivelite (it upgrades), then"
                       " run doctor again")
    found = problems(store.conn, store.schema)
    return Finding("schema", not found, f"every trigger and rule function is migration"
                   f" {version}'s, each trigger enabled" if not found else "; ".join(found))


def _rows(tables: Tables, *, head: str | None = None, older_copy: bool = False,
          progress: Progress | None = None, place: str | None = None) -> list[Finding]:
    """:func:`.doctor.diagnose` on the rows ``tables`` reads (in its snapshot), copied to
    a scratch SQLite store; its own pages and schema are not the store's, so their
    findings are left out."""
    with tempfile.TemporaryDirectory(prefix="hivelite-doctor-") as folder:
        scratch = SqliteStore(Path(folder) / "rows.db")
        try:
            try:
                import_lines(scratch.conn, export_lines(tables, witnessed=False), gate=False)
            except InvalidInput as exc:  # rows no hivelite table takes
                return [Finding("rows", False, exc.message)]
            except psycopg.Error as exc:  # a table renamed, a column dropped, ...
                return [Finding("rows", False, f"the rows cannot be read: {str(exc).strip()}")]
            found = diagnose(scratch.conn, head=head, older_copy=older_copy,
                             progress=progress, place=place)
        finally:
            scratch.close()
    return [f for f in found if f.check not in ("integrity_check", "quick_check", "schema")]


def diagnose_url(url: str, *, head: str | None = None, older_copy: bool = False,
                 progress: Progress | None = None, at: str | None = None,
                 restored: bool = False) -> list[Finding]:
    """Every check of :func:`.doctor.diagnose` on the PostgreSQL store at ``url``; a
    sound store's head is witnessed (at ``at``) beside the owner's key."""
    store = PostgresStore(url, create=False, upgrade=False)
    try:
        if restored:  # the owner says so: the journal as it stands is the yardstick
            with store.read() as reader:
                identity, tip = reader.meta("store_id"), reader.head()
            if identity is not None and tip is not None:
                witness(identity, tip, at or "", RESTORED)
        findings = [_rules(store), *_rows(store.tables(), head=head, older_copy=older_copy,
                                          progress=progress, place=store.place)]
    finally:
        store.close()
    witness_sound(findings, at)
    return findings


def problems_of(tables: PostgresTables) -> list[str]:
    """What doctor finds wrong with a store being imported, read inside the import's
    transaction (its rules back in place): the import's gate on PostgreSQL."""
    return [f"{f.check}: {f.detail}" for f in [_rules(tables.store),
                                                *_rows(tables, older_copy=True)] if not f.ok]


__all__ = ["diagnose_url", "problems_of"]
