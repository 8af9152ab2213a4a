"""Raw access to a PostgreSQL store's kept tables (``hivelite export`` and ``import``),
and what doctor reads there: the rules in the catalogs, the rows copied to a scratch
SQLite store (:func:`.doctor.diagnose`). Kept apart from :mod:`.postgres`, which hands
these out and never needs them itself (as :mod:`.transfer` is for an SQLite file)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

import psycopg

from ..core.errors import InvalidInput
from ..core.progress import Progress
from .chain import CONTENT, TASKS_FROM, global_link, link
from .doctor import Finding, diagnose
from .pg_guard import problems
from .pg_migrations import SCHEMA_VERSION
from .pg_schema import PG_ONLY_COLUMNS, RETURNS_BACKFILL
from .sqlite import SqliteStore
from .transfer import TABLES, Tables, export_lines, import_lines


class PostgresStore(Protocol):
    """What these read of a :class:`.postgres.PostgresStore` (named here, not imported:
    the store hands its tables out, and they never need the rest of it)."""

    @property
    def conn(self) -> psycopg.Connection[Any]: ...
    @property
    def schema_version(self) -> int: ...
    schema: str
    def read(self) -> AbstractContextManager[Any]: ...
    def alone(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...


def _quoted(name: str) -> str:
    """A column name as SQL (``by`` is a keyword on PostgreSQL)."""
    return f'"{name}"' if name == "by" else name


def rules_finding(store: PostgresStore) -> Finding:
    """Doctor's finding on the store's rules, read from the catalogs."""
    version = store.schema_version
    if version != SCHEMA_VERSION:  # (a version lowered by hand must not skip the check)
        return Finding("schema", False, f"the store is at version {version}, not this"
                       f" hivelite's {SCHEMA_VERSION}: its rules are checked at this"
                       " version only. Open it once with this hivelite (it upgrades), then"
                       " run doctor again")
    found = problems(store.conn, store.schema)
    return Finding("schema", not found, f"every trigger and rule function is migration"
                   f" {version}'s, each trigger enabled" if not found else "; ".join(found))


def rows_findings(tables: Tables, *, head: str | None = None, older_copy: bool = False,
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


class PostgresTables:
    """Raw access to the kept tables of a PostgreSQL store, for export and import
    (``transfer.Tables``)."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.conn = store.conn

    def schema_version(self) -> int:
        return self.store.schema_version

    def columns(self, table: str) -> list[str]:
        return [str(r[0]) for r in self.conn.execute(  # (each row's global link is
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s"
            " AND table_name = %s ORDER BY ordinal_position", (self.store.schema, table))
            if (table, str(r[0])) not in PG_ONLY_COLUMNS]  # computed again on import)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        with self.store.read():
            yield

    def count(self, table: str) -> int:
        ((rows,),) = self.conn.execute(f"SELECT count(*) FROM ONLY {table}").fetchall()
        return int(rows)

    def rows(self, table: str, names: list[str], order: str) -> Iterable[Sequence[Any]]:
        text = {str(r[0]) for r in self.conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s"
            " AND table_name = %s AND data_type = 'text'", (self.store.schema, table))}
        keys = ", ".join(f'{k} COLLATE "C"' if k in text else k  # byte order, as SQLite's
                         for k in (part.strip() for part in order.split(",")))
        return self.conn.execute(  # (ONLY: a table inheriting from it adds no row)
            f"SELECT {', '.join(_quoted(n) for n in names)} FROM ONLY {table} ORDER BY {keys}")

    @contextmanager
    def bulk(self, check: Callable[[], bool] | None = None) -> Iterator[None]:
        """The import's transaction, under the write lock; each table's own triggers are
        disabled inside it (``ALTER TABLE … DISABLE TRIGGER USER``, transactional: a
        rollback restores them) and enabled again before it commits."""
        store = self.store
        try:
            with store.alone():
                for table in TABLES:
                    self.conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
                if self.is_empty():  # where its chains per task begin: the export says
                    self.conn.execute("DELETE FROM meta WHERE key = %s", (TASKS_FROM,))
                yield
                self._link_globally()
                for table in TABLES:
                    self.conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
                if check is not None:
                    check()
        except psycopg.Error as exc:
            raise InvalidInput("invalid_export", f"the export does not fit this store:"
                               f" {exc}", field="file") from None

    def _link_globally(self) -> None:
        """After the rows are in: an export from an SQLite store (one chain) is chained per
        task from its next row on (``meta.tasks_chained_from``); each task's chain head
        is its newest row's hash; each row chained per task gets its global link again,
        as the rule that numbers it would have given it (:func:`.chain.global_link`)."""
        conn = self.conn
        conn.execute("INSERT INTO meta(key, value) SELECT %s, (coalesce(max(seq), 0) + 1)::text"
                     " FROM journal WHERE NOT EXISTS (SELECT 1 FROM meta WHERE key = %s)",
                     (TASKS_FROM, TASKS_FROM))
        conn.execute("UPDATE tasks SET chain = h.hash FROM (SELECT DISTINCT ON (task) task,"
                     " hash FROM journal WHERE task IS NOT NULL ORDER BY task, seq DESC) h"
                     " WHERE tasks.number = h.task AND tasks.chain IS DISTINCT FROM h.hash")
        split = int(conn.execute("SELECT value FROM meta WHERE key = %s",
                                 (TASKS_FROM,)).fetchone()[0])  # type: ignore[index]
        identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
        before = conn.execute("SELECT hash FROM journal WHERE seq = %s - 1",
                              (split,)).fetchone()
        glink = (str(before[0]) if before and before[0] is not None
                 else str(identity[0]) if identity else "")
        links = []
        for seq, stored in conn.execute("SELECT seq, hash FROM journal WHERE seq >= %s"
                                        " ORDER BY seq", (split,)).fetchall():
            glink = global_link(glink, int(seq), stored)
            links.append((glink, seq))
        with conn.cursor() as cursor:
            cursor.executemany("UPDATE journal SET glink = %s WHERE seq = %s", links)

    def problems(self) -> list[str]:
        """What doctor finds, read in the import's transaction (its rules back in place):
        the rules in the catalogs, the rows as on a file. The import's gate."""
        return [f"{f.check}: {f.detail}" for f in [
            rules_finding(self.store), *rows_findings(self, older_copy=True)] if not f.ok]

    def head(self) -> tuple[str | None, str | None]:
        identity = self.conn.execute("SELECT value FROM meta WHERE key = 'store_id'"
                                     ).fetchone()
        row = self.conn.execute("SELECT seq, coalesce(glink, hash) FROM journal"
                                " ORDER BY seq DESC LIMIT 1").fetchone()
        return (identity[0] if identity else None,
                None if row is None else f"{row[0]}:{row[1]}")

    def is_empty(self) -> bool:
        found = self.conn.execute(
            "SELECT EXISTS (SELECT 1 FROM tasks) OR EXISTS (SELECT 1 FROM journal)"
            " OR EXISTS (SELECT 1 FROM meta WHERE key NOT IN ('store_id', %s))",
            (TASKS_FROM,)).fetchone()
        return found is not None and not found[0]

    def insert(self, table: str, row: dict[str, Any]) -> None:
        names = ", ".join(_quoted(n) for n in row)
        marks = ", ".join(["%s"] * len(row))
        self.conn.execute(f"INSERT INTO {table}({names}) VALUES ({marks})", tuple(row.values()))

    def drop_identity(self) -> None:
        self.conn.execute("DELETE FROM meta WHERE key = 'store_id'")

    def chain_all(self) -> None:
        identity = self.conn.execute("SELECT value FROM meta WHERE key = 'store_id'"
                                     ).fetchone()
        before = identity[0] if identity else None
        for seq, *content in self.conn.execute(
                f"SELECT seq, {CONTENT} FROM journal ORDER BY seq").fetchall():
            before = link(before, content)
            self.conn.execute("UPDATE journal SET hash = %s WHERE seq = %s", (before, seq))

    def derive_queue(self) -> None:
        raise InvalidInput("old_export", "this export comes from before the work queue"
                           " (schema 5): import it into an SQLite store first, then export"
                           " that and import it here", field="schema_version")

    def derive_returns(self) -> None:
        self.conn.execute(RETURNS_BACKFILL)




__all__ = ["PostgresTables", "rows_findings", "rules_finding"]
