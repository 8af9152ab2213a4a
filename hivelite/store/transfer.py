"""Copies of a store: an online backup, and export/import as versioned JSON Lines.

**Backup** uses SQLite's online backup: one consistent snapshot even while other
processes write, written to a new file (mode 0600) that is a complete store.

**Export** writes a header line (format, version, schema version), then every row of every
kept table in a fixed order, one JSON object per line: the store's facts, tasks, packets,
checkpoints, results, verdicts, updates and the whole journal (which holds the claim
history). **Import** reads that into a new, empty store, keys and all, so exporting the
imported store gives the same lines again. The rows are written with the triggers set
aside inside the import's one transaction and restored, byte for byte, before it commits:
the rows already obey the rules (``doctor`` checks the result, the journal's hash chain
included), and replaying them through the triggers would need the clock and leases of the
day they were written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol, TextIO

import apsw

from ..core.errors import InvalidInput, StoreError
from ..core.jsontext import loads_bounded
from ..core.progress import STEP, Progress, counted, lines_in
from .chain import chain_all
from .doctor import CHAIN_SINCE
from .schema import QUEUE_BACKFILL

FORMAT = "hivelite-export"
FORMAT_VERSION = 1
KEYS = {"meta": "key", "tasks": "number", "deps": "task, on_task", "packets": "task",
        "checkpoints": "task", "results": "task", "confirmations": "task, version, reviewer",
        "updates": "seq", "journal": "seq", "policy": "key", "required_plugins": "name",
        "controls": "id", "budgets": "agent", "tokens": "id"}
"""The kept tables with their keys, in the order an import can insert them (a row's task
first)."""
TABLES = tuple(KEYS)
QUEUE_SINCE = 5
"""The schema version that keeps dependencies as rows (and counts attempts)."""
IDENTITY = "store_id"
"""The meta row naming the store (its journal's chain starts from it): an import keeps the
exported store's, so the copy's chain verifies; an export from before the chain gets the
new store's, and its journal is chained on import."""


BACKUP_STEP = 1024
"""Pages copied between two calls of a backup's progress (4 MiB of 4 KiB pages)."""


def backup(conn: apsw.Connection, dest: Path, progress: Progress | None = None) -> None:
    """A consistent copy of the store behind ``conn`` at ``dest``, which must not exist;
    ``progress`` hears the pages copied.

    The copy is taken in steps inside one read transaction on ``conn``: the snapshot it
    reads stays the same from the first page to the last while others write (SQLite's
    backup would otherwise start over at each write made between two steps)."""
    try:
        fd = os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        raise InvalidInput("backup_exists", f"{dest} exists; a backup goes to a new file",
                           field="dest") from None
    except OSError as exc:
        raise InvalidInput("backup_unwritable", f"cannot create {dest}: {exc.strerror}",
                           field="dest") from None
    os.close(fd)
    try:
        target = apsw.Connection(str(dest))
        try:
            conn.execute("BEGIN")
            try:
                conn.execute("SELECT count(*) FROM meta").fetchall()  # the snapshot starts
                with target.backup("main", conn, "main") as copy:
                    while not copy.done:
                        copy.step(BACKUP_STEP)
                        if progress:
                            progress(copy.page_count - copy.remaining, copy.page_count)
            finally:
                conn.execute("COMMIT")
            target.execute("PRAGMA journal_mode = WAL")
        finally:
            target.close()
    except BaseException:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{dest}{suffix}").unlink(missing_ok=True)
        raise


class Tables(Protocol):
    """An engine's raw access to a store's kept tables, for export and import."""

    def schema_version(self) -> int: ...
    def columns(self, table: str) -> list[str]:
        """The table's columns ([] for a table the store's schema does not have)."""
        ...
    def snapshot(self) -> AbstractContextManager[None]:
        """One consistent read of every table (an export)."""
        ...
    def count(self, table: str) -> int:
        """The table's rows (in the snapshot)."""
        ...
    def rows(self, table: str, names: list[str], order: str) -> Iterable[Sequence[Any]]: ...
    def bulk(self, check: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        """One write transaction with the store's triggers set aside, and restored exactly
        before it commits (an import), then ``check`` run on the rows as written, before
        the commit; any error (``check``'s too) rolls all of it back."""
        ...
    def problems(self) -> list[str]:
        """What a doctor finds wrong with the store as this connection sees it (inside
        the import's transaction, its rules restored)."""
        ...
    def is_empty(self) -> bool:
        """No task, no journal row, no fact but the store's identity."""
        ...
    def insert(self, table: str, row: dict[str, Any]) -> None: ...
    def drop_identity(self) -> None:
        """Remove the new store's identity (the export brings its own)."""
        ...
    def chain_all(self) -> None: ...
    def derive_queue(self) -> None:
        """Migration 5's rows for tasks made before the queue (:data:`QUEUE_BACKFILL`)."""
        ...


class SqliteTables:
    """:class:`Tables` of an SQLite store, through an apsw connection."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._triggers: list[tuple[str, str]] = []

    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").get)

    def columns(self, table: str) -> list[str]:
        return [str(r[1]) for r in self.conn.execute(f"PRAGMA table_info({table})")]

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            if self.conn.in_transaction:
                self.conn.execute("COMMIT")

    def count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT count(*) FROM {table}").get)

    def rows(self, table: str, names: list[str], order: str) -> Iterable[Sequence[Any]]:
        return self.conn.execute(f"SELECT {', '.join(names)} FROM {table} ORDER BY {order}")

    @contextmanager
    def bulk(self, check: Callable[[], None] | None = None) -> Iterator[None]:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            triggers = list(conn.execute(
                "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY rowid"))
            for name, _ in triggers:
                conn.execute(f'DROP TRIGGER "{name}"')
            yield
            for _, sql in triggers:  # exactly as they were: the schema is unchanged
                conn.execute(sql)
            if check is not None:
                check()
        except apsw.Error as exc:
            conn.execute("ROLLBACK")
            raise InvalidInput("invalid_export", f"the export does not fit this store: {exc}",
                               field="file") from None
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def problems(self) -> list[str]:
        from .doctor import diagnose

        return [f"{f.check}: {f.detail}" for f in diagnose(self.conn) if not f.ok]

    def is_empty(self) -> bool:
        return not self.conn.execute(
            "SELECT EXISTS (SELECT 1 FROM tasks) OR EXISTS (SELECT 1 FROM journal)"
            " OR EXISTS (SELECT 1 FROM meta WHERE key IS NOT 'store_id')").get

    def insert(self, table: str, row: dict[str, Any]) -> None:
        names = ", ".join(row)
        marks = ", ".join("?" * len(row))
        self.conn.execute(f"INSERT INTO {table}({names}) VALUES ({marks})", tuple(row.values()))

    def drop_identity(self) -> None:
        self.conn.execute("DELETE FROM meta WHERE key = ?", (IDENTITY,))

    def chain_all(self) -> None:
        chain_all(self.conn)

    def derive_queue(self) -> None:
        self.conn.execute(QUEUE_BACKFILL).fetchall()


def _tables(store: apsw.Connection | Tables) -> Tables:
    return SqliteTables(store) if isinstance(store, apsw.Connection) else store


def export_lines(store: apsw.Connection | Tables, progress: Progress | None = None
                 ) -> Iterator[str]:
    """The store as JSON Lines, read in one snapshot (an apsw connection is an SQLite
    store's); ``progress`` hears the rows written of the snapshot's rows."""
    tables = _tables(store)
    version = tables.schema_version()
    with tables.snapshot():
        yield json.dumps({"format": FORMAT, "version": FORMAT_VERSION,
                          "schema_version": version}, sort_keys=True)
        present = [(table, names) for table in TABLES if (names := tables.columns(table))]
        # (a table missing is one of a schema from before it)
        total = sum(tables.count(table) for table, _ in present) if progress else None
        done = 0
        if progress:
            progress(0, total)
        for table, names in present:
            for values in tables.rows(table, names, KEYS[table]):
                done += 1
                if progress and not done % STEP:
                    progress(done, total, table)
                row = dict(zip(names, values, strict=True))
                yield json.dumps({"table": table, "row": row}, sort_keys=True,
                                 ensure_ascii=False)
        if progress:
            progress(done, done)


def export(store: apsw.Connection | Tables, out: TextIO,
           progress: Progress | None = None) -> int:
    """Write the store to ``out``; returns how many rows were written."""
    lines = 0
    for line in export_lines(store, progress):
        out.write(line + "\n")
        lines += 1
    return lines - 1  # the header is no row


def _parse(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = loads_bounded(line, f"line {number}")
        except (ValueError, InvalidInput) as exc:
            raise InvalidInput("invalid_export", f"line {number} is not an export line:"
                               f" {getattr(exc, 'message', exc)}",
                               field=f"line {number}") from None
        if not isinstance(item, dict):
            raise InvalidInput("invalid_export", f"line {number} is not an export line",
                               field=f"line {number}")
        yield number, item


def import_lines(store: apsw.Connection | Tables, lines: Iterable[str],
                 progress: Progress | None = None, *, keep_failed: bool = False) -> int:
    """Read an export into the empty store (an apsw connection is an SQLite store's);
    returns the rows imported. ``progress`` hears the lines read (of the file's lines,
    when ``lines`` is a file).

    An import is a gate: the rows as written are checked as ``doctor`` checks a store
    (the hash chain, the replay, the actors…) before the transaction commits, and an
    export that fails is refused (``import_unsound``) with nothing written, unless
    ``keep_failed``, when the rows are committed for a look and refused all the same.

    Refused, with nothing written: a store that has a task or a journal row, a file that is
    no hivelite export, a newer export format or a newer schema than this store's.
    """
    tables = _tables(store)
    rows = _parse(counted(lines, progress, lines_in(lines) if progress else None))
    first = next(rows, None)
    if first is None or first[1].get("format") != FORMAT:
        raise InvalidInput("invalid_export", "the file is not a hivelite export (its first"
                           " line names no hivelite-export format)", field="line 1")
    header = first[1]
    if not isinstance(header.get("version"), int) or header["version"] > FORMAT_VERSION:
        raise InvalidInput("newer_export", f"export format {header.get('version')!r} is newer"
                           f" than this hivelite reads ({FORMAT_VERSION}); upgrade hivelite",
                           field="version")
    schema = tables.schema_version()
    if not isinstance(header.get("schema_version"), int) or header["schema_version"] > schema:
        raise InvalidInput("newer_export", f"the export comes from schema"
                           f" {header.get('schema_version')!r}, newer than this store's"
                           f" ({schema}); upgrade hivelite", field="schema_version")
    failed: list[str] = []

    def check() -> None:
        failed.extend(tables.problems())
        if failed and not keep_failed:
            raise _unsound(failed)

    with tables.bulk(check):
        if not tables.is_empty():
            raise StoreError("store_not_empty", "import goes into a new, empty store; this"
                             " one has tasks, journal rows or an owner")
        columns = {table: set(tables.columns(table)) for table in TABLES}
        count = 0
        for number, item in rows:
            table, row = item.get("table"), item.get("row")
            if table not in columns or not isinstance(row, dict) or not row or not set(
                    row) <= columns[str(table)]:
                raise InvalidInput("invalid_export", f"line {number} is not a row of a"
                                   " hivelite table", field=f"line {number}")
            if table == "meta" and row.get("key") == IDENTITY:  # the exported store's
                tables.drop_identity()
            tables.insert(str(table), row)
            count += 1
        if header["schema_version"] < CHAIN_SINCE:  # an export from before the chain
            tables.chain_all()
        if header["schema_version"] < QUEUE_SINCE:  # before the queue: derive its rows
            tables.derive_queue()
    if failed:  # kept, as asked, for a look: still no store to trust
        raise _unsound(failed, kept=True)
    return count


def _unsound(problems: list[str], *, kept: bool = False) -> InvalidInput:
    shown = "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)"
                                       if len(problems) > 3 else "")
    then = ("the store was kept for a look (--keep-failed): do not serve it" if kept
            else "nothing was imported")
    return InvalidInput("import_unsound", f"the export fails doctor: {shown}; {then}",
                        field="file", problems=problems, kept=kept)
