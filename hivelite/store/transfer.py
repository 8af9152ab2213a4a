"""Copies of a store: an online backup, and export/import as versioned JSON Lines.

**Backup** uses SQLite's online backup: one consistent snapshot even while other
processes write, written to a new file (mode 0600) that is a complete store.

**Export** writes a header line (format, version, schema version), then every row of every
kept table in a fixed order, one JSON object per line: the store's facts, tasks, packets,
checkpoints, results, verdicts, updates, the whole journal (which holds the claim
history) and the owner's policy, controls, budgets, tokens and enrolments. **Import**
reads that into a new, empty store, keys and all, so exporting the imported store gives
the same lines again. The rows are written with the triggers set
aside inside the import's one transaction and restored, byte for byte, before it commits:
the rows already obey the rules (``doctor`` checks the result, the journal's hash chain
included), and replaying them through the triggers would need the clock and leases of the
day they were written.
"""

from __future__ import annotations

import errno
import hmac
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol, TextIO

import apsw

from ..core.clock import format_ts, system_clock
from ..core.errors import InvalidInput, StoreError, StoreFull
from ..core.jsontext import loads_bounded
from ..core.progress import STEP, Progress, counted, lines_in
from .chain import TASKS_FROM, chain_all
from .doctor import CHAIN_SINCE, UNSIGNED, links_at, tasks_from
from .keys import RESTORED, key_path, load_key, witness
from .schema import QUEUE_BACKFILL, RETURNS_BACKFILL

FORMAT = "hivelite-export"
FORMAT_VERSION = 1
KEYS = {"meta": "key", "tasks": "number", "deps": "task, on_task", "packets": "task",
        "checkpoints": "task", "results": "task", "confirmations": "task, version, reviewer",
        "updates": "seq", "journal": "seq", "policy": "key", "required_plugins": "name",
        "controls": "id", "budgets": "agent", "tokens": "id", "enrolments": "agent"}
"""The kept tables with their keys, in the order an import can insert them (a row's task
first). Each table's columns are read from the store, so a task's role and the enrolment
its lease was taken under (``lease_scope``) travel with its row."""
TABLES = tuple(KEYS)
QUEUE_SINCE = 5
"""The schema version that keeps dependencies as rows (and counts attempts)."""
RETURNS_SINCE = 18
"""The schema version that counts every result that came back as an attempt."""
IDENTITY = "store_id"
"""The meta row naming the store (its journal's chain starts from it): an import keeps the
exported store's, so the copy's chain verifies; an export from before the chain gets the
new store's, and its journal is chained on import."""


LINKS = {"tasks": "last_seq", "journal": "prev"}
"""SQLite's links from a task to its newest journal row and from each row to the task's row
before it (migration 13): derived from the journal, so an export leaves them out (a
PostgreSQL store has none) and an import links the rows it wrote."""
LINK_HEADS = """
UPDATE journal SET prev = p.prev FROM (
    SELECT seq, lag(seq) OVER (PARTITION BY task ORDER BY seq) AS prev
    FROM journal WHERE task IS NOT NULL) p
WHERE journal.seq = p.seq;
UPDATE tasks SET last_seq = h.seq FROM (
    SELECT task, max(seq) AS seq FROM journal WHERE task IS NOT NULL GROUP BY task) h
WHERE tasks.number = h.task;
"""

BACKUP_STEP = 1024
"""Pages copied between two calls of a backup's progress (4 MiB of 4 KiB pages)."""


def backup(conn: apsw.Connection, dest: Path, progress: Progress | None = None
           ) -> str | None:
    """A consistent copy of the store behind ``conn`` at ``dest``, which must not exist;
    ``progress`` hears the pages copied. Returns the copy's journal head (``seq:hash``),
    which is witnessed beside the owner's key: a later doctor holds the store to it.

    The copy is taken in steps inside one read transaction on ``conn``: the snapshot it
    reads stays the same from the first page to the last while others write (SQLite's
    backup would otherwise start over at each write made between two steps)."""
    try:
        fd = os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        raise InvalidInput("backup_exists", f"{dest} exists; a backup goes to a new file",
                           field="dest") from None
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise copy_full(dest, exc.strerror) from None
        raise InvalidInput("backup_unwritable", f"cannot create {dest}: {exc.strerror}",
                           field="dest") from None
    os.close(fd)
    try:
        target = apsw.Connection(str(dest))
        try:
            conn.execute("BEGIN")
            try:
                try:
                    identity, head = SqliteTables(conn).head()  # the snapshot starts
                except apsw.SQLError:  # a schema not hivelite's: copied as it is, unwitnessed
                    identity, head = None, None
                with target.backup("main", conn, "main") as copy:
                    while not copy.done:
                        copy.step(BACKUP_STEP)
                        if progress:
                            progress(copy.page_count - copy.remaining, copy.page_count)
            finally:
                conn.execute("COMMIT")
            target.execute("PRAGMA journal_mode = WAL")
        except apsw.IOError as exc:  # the copy's disk, when its errno says so
            if _errno(target) in NO_SPACE:
                raise copy_full(dest, f"{exc}, {os.strerror(_errno(target))}") from exc
            raise
        finally:
            target.close()
    except BaseException as exc:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{dest}{suffix}").unlink(missing_ok=True)
        if isinstance(exc, apsw.FullError):  # only the copy is written
            raise copy_full(dest, os.strerror(errno.ENOSPC)) from exc
        raise
    return _witnessed(identity, head, f"backup {dest}")


NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def _errno(conn: apsw.Connection) -> int:
    """The OS error behind the connection's last I/O error (0: none known)."""
    try:
        return int(conn.system_errno)
    except apsw.Error:
        return 0


def copy_full(dest: Path | str, why: str | None, *, removed: bool = True) -> StoreFull:
    """A copy (backup, export) that did not fit on its disk; ``removed``: nothing of it is
    left (a file this process made), else what was written stays, incomplete (standard
    output, which the caller opened)."""
    left = ("the copy was not made and nothing of it is left" if removed
            else "what was written there is incomplete: remove it")
    return StoreFull("disk_full", f"the disk holding {dest} is full ({why}); {left}. Free"
                     " some space, or copy to another disk, and try again; the store is"
                     " unchanged")


def _witnessed(identity: str | None, head: str | None, by: str) -> str | None:
    """Witness a copy's head beside the owner's key (:func:`.keys.witness`); the head."""
    if identity is not None and head is not None:
        witness(identity, head, format_ts(system_clock()), by)
    return head


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
    def bulk(self, check: Callable[[], bool] | None = None) -> AbstractContextManager[None]:
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
    def head(self) -> tuple[str | None, str | None]:
        """The store's identity and its journal's head (``seq:hash``; None: empty)."""
        ...
    def insert(self, table: str, row: dict[str, Any]) -> None: ...
    def drop_identity(self) -> None:
        """Remove the new store's identity (the export brings its own)."""
        ...
    def chain_all(self) -> None: ...
    def derive_queue(self) -> None:
        """Migration 5's rows for tasks made before the queue (:data:`QUEUE_BACKFILL`)."""
        ...
    def derive_returns(self) -> None:
        """Migration 18's attempts for tasks made before it (:data:`RETURNS_BACKFILL`)."""
        ...


class SqliteTables:
    """:class:`Tables` of an SQLite store, through an apsw connection."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._triggers: list[tuple[str, str]] = []

    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").get)

    def columns(self, table: str) -> list[str]:
        derived = LINKS.get(table)
        return [str(r[1]) for r in self.conn.execute(f"PRAGMA table_info({table})")
                if r[1] != derived]

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
    def bulk(self, check: Callable[[], bool] | None = None) -> Iterator[None]:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            triggers = list(conn.execute(
                "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY rowid"))
            for name, _ in triggers:
                conn.execute(f'DROP TRIGGER "{name}"')
            yield
            if "last_seq" in {r[1] for r in conn.execute("PRAGMA table_info(tasks)")}:
                conn.execute(LINK_HEADS).fetchall()
            for _, sql in triggers:  # exactly as they were: the schema is unchanged
                conn.execute(sql)
            sound = check() if check is not None else False
            chained = one_chain(conn, triggers) if sound else None
        except apsw.Error as exc:
            conn.execute("ROLLBACK")
            raise InvalidInput("invalid_export", f"the export does not fit this store: {exc}",
                               field="file") from None
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        if chained is not None:  # the heads witnessed of the chains per task are history
            identity, head = self.head()
            if identity is not None and head is not None:
                witness(identity, head, format_ts(system_clock()), RESTORED)

    def problems(self) -> list[str]:
        from .doctor import diagnose

        return [f"{f.check}: {f.detail}" for f in diagnose(self.conn, older_copy=True)
                if not f.ok]  # an export is a copy taken then: later heads are no loss

    def is_empty(self) -> bool:
        return not self.conn.execute(
            "SELECT EXISTS (SELECT 1 FROM tasks) OR EXISTS (SELECT 1 FROM journal)"
            " OR EXISTS (SELECT 1 FROM meta WHERE key IS NOT 'store_id')").get

    def head(self) -> tuple[str | None, str | None]:
        identity = self.conn.execute("SELECT value FROM meta WHERE key = ?", (IDENTITY,)).get
        row = self.conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
                                ).fetchone()
        if row is None:
            return identity, None
        return identity, f"{row[0]}:{links_at(self.conn, (row[0],)).get(row[0], row[1])}"

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

    def derive_returns(self) -> None:
        self.conn.execute(RETURNS_BACKFILL).fetchall()


def one_chain(conn: apsw.Connection, triggers: list[tuple[str, str]]) -> int | None:
    """An import into an SQLite store of a journal chained per task (a PostgreSQL
    store's, checked as it was written): chained again as one chain, sealed with the
    owner's key as SQLite seals it, since an SQLite store has one writer at a time and
    links each row to the one before; the rows and their seals rows stay as history. The
    first row that had been chained per task, or None when the journal was one chain."""
    split = tasks_from(conn)
    if split is None:
        return None
    kept = [(name, sql) for name, sql in triggers if name in ("journal_no_update", "meta_kept")]
    for name, _ in kept:
        conn.execute(f'DROP TRIGGER "{name}"')
    conn.execute("DELETE FROM meta WHERE key = ?", (TASKS_FROM,))
    linked = conn.execute("SELECT 1 FROM journal WHERE seq >= ? LIMIT 1", (split,)).get
    if linked:
        identity = conn.execute("SELECT value FROM meta WHERE key = ?", (IDENTITY,)).get
        chain_all(conn, load_key(str(identity)) if identity is not None else None)
    for _, sql in kept:
        conn.execute(sql)
    return split if linked else None


def _tables(store: apsw.Connection | Tables) -> Tables:
    return SqliteTables(store) if isinstance(store, apsw.Connection) else store


def export_lines(store: apsw.Connection | Tables, progress: Progress | None = None, *,
                 witnessed: bool = True) -> Iterator[str]:
    """The store as JSON Lines, read in one snapshot (an apsw connection is an SQLite
    store's); ``progress`` hears the rows written of the snapshot's rows. The head it
    ends at is ``witnessed`` beside the owner's key (not for a copy doctor reads)."""
    tables = _tables(store)
    version = tables.schema_version()
    with tables.snapshot():
        identity, head = tables.head() if version >= CHAIN_SINCE else (None, None)
        key = load_key(identity) if identity is not None and head is not None else None
        yield json.dumps({"format": FORMAT, "version": FORMAT_VERSION,
                          "schema_version": version, "head": head,
                          "head_seal": None if key is None else key.mac(f"head {head}"),
                          "signed_checkpoint": signed(identity, head)},
                         sort_keys=True)
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
    if witnessed:
        _witnessed(identity, head, "export")


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
                 progress: Progress | None = None, *, keep_failed: bool = False,
                 gate: bool = True, unsigned: bool = False) -> int:
    """Read an export into the empty store (an apsw connection is an SQLite store's);
    returns the rows imported. ``progress`` hears the lines read (of the file's lines,
    when ``lines`` is a file).

    An import is a gate: the rows as written are checked as ``doctor`` checks a store
    (the hash chain, the replay, the actors…) before the transaction commits, and an
    export that fails is refused (``import_unsound``) with nothing written, unless
    ``keep_failed``, when the rows are committed for a look and refused all the same.
    Without the ``gate`` the rows are not checked (a copy doctor checks itself).

    The export must carry a checkpoint of the head its rows end at, signed by a key this
    machine knows (:mod:`.notes`): else it is refused (``import_unsigned``), unless
    ``unsigned``, when the store records that it was imported so (``meta``'s
    ``imported_unsigned``, which no write removes) and ``info`` and ``doctor`` say so.

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

    def check() -> bool:
        failed.extend(tables.problems())
        failed.extend(_head_problems(tables, header))
        if failed and not keep_failed:
            raise _unsound(failed)
        if not failed:  # sound: then whether a known key vouches for it
            vouched()
        return not failed

    def vouched() -> None:
        unvouched = _signature_problem(tables, header)
        if unvouched is not None and not unsigned:
            raise InvalidInput("import_unsigned", f"{unvouched}. Import it with --unsigned"
                               " only if you trust where it came from: the store then says"
                               " for good that no signature vouched for it; nothing was"
                               " imported", field="file")
        if unvouched is not None:
            tables.insert("meta", {"key": UNSIGNED, "value": json.dumps(
                {"at": format_ts(system_clock()), "why": unvouched})})

    with tables.bulk(check if gate else None):
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
        if header["schema_version"] < RETURNS_SINCE:  # before every return counted
            tables.derive_returns()
    if failed:  # kept, as asked, for a look: still no store to trust
        raise _unsound(failed, kept=True)
    return count


def _head_problems(tables: Tables, header: dict[str, Any]) -> list[str]:
    """An export names the journal's head it was taken at, sealed with the owner's key:
    rows dropped from its end (each one left is sealed, so the chain alone cannot tell),
    or a head edited to fit, show here when the key is at hand."""
    identity, head = tables.head()
    named, seal = header.get("head"), header.get("head_seal")
    key = load_key(identity) if identity is not None and head is not None else None
    if named is not None and named != head:
        return [f"head: the export names the journal's head {named}; its rows end at"
                f" {head} (rows were dropped or changed)"]
    if key is None and seal is not None and head is not None:
        return [f"head: the export's head is sealed with the owner's chain key, which is not"
                f" at {key_path(str(identity))}: it cannot be told from a cut export here."
                " Copy the store's key file there, then import"]
    if key is None or int(str(head).partition(":")[0]) < key.keyed_from:
        return []
    if not isinstance(seal, str) or not hmac.compare_digest(seal, key.mac(f"head {head}")):
        return [f"head: the export's head {head} is not sealed with the owner's key (rows"
                " were dropped from its end, or its header was edited)"]
    return []


def signed(identity: str | None, head: str | None) -> str | None:
    """The head of store ``identity`` as a checkpoint signed by this machine's key (made
    the first time), or None when there is no head, or no key can be made here."""
    if identity is None or head is None:
        return None
    try:
        from .notes import sign_head

        return sign_head(identity, head)
    except (StoreError, ImportError):
        return None


def _signature_problem(tables: Tables, header: dict[str, Any]) -> str | None:
    """Why the export's checkpoint does not vouch for the rows imported (None: it does):
    none, none a known key signed, or one of another store or head."""
    from .notes import known_keys, read_checkpoint

    identity, head = tables.head()
    note = header.get("signed_checkpoint")
    if not isinstance(note, str) or identity is None or head is None:
        return "the export carries no signed checkpoint of its journal"
    found = read_checkpoint(note, known_keys())
    if found is None:
        return ("the export's checkpoint is not signed by a key this machine knows (its own,"
                " or one in trusted.vkeys beside the keys)")
    seq, _, value = head.partition(":")
    if (found.store_id, found.size, found.hash) != (identity, int(seq), value):
        return (f"the export's signed checkpoint is of store {found.store_id[:64]} at"
                f" {found.size}:{found.hash[:64]}, not of its rows ({identity} at {head})")
    return None


def _unsound(problems: list[str], *, kept: bool = False) -> InvalidInput:
    shown = "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)"
                                       if len(problems) > 3 else "")
    then = ("the store was kept for a look (--keep-failed): do not serve it" if kept
            else "nothing was imported")
    return InvalidInput("import_unsound", f"the export fails doctor: {shown}; {then}",
                        field="file", problems=problems, kept=kept)
