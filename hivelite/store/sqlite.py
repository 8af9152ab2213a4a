"""The SQLite store: opening a file safely, migrations, transactions and every query.

All SQL of the library lives in this package, so a second backend can stand
beside it later.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import apsw

from ..errors import InvalidInput, StoreBusy, StoreError, from_trigger
from .schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 10_000
Synchronous = Literal["NORMAL", "FULL"]

TASK_COLUMNS = (
    "number", "id", "state", "waiting_on", "project", "requester", "assignee",
    "created_at", "updated_at", "lease_id", "lease_token", "lease_holder", "lease_instance",
    "lease_session", "lease_expires", "priority", "labels", "fields_version", "reason",
    "depends",
)
_SELECT_TASK = f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks"


@dataclass(slots=True)
class TaskRow:
    """The narrow, hot row of a task as the store holds it."""

    number: int
    id: str
    state: str
    waiting_on: str | None
    project: str
    requester: str
    assignee: str
    created_at: str
    updated_at: str
    lease_id: str | None
    lease_token: int
    lease_holder: str | None
    lease_instance: str | None
    lease_session: str | None
    lease_expires: str | None
    priority: str
    labels: str
    fields_version: int
    reason: str | None
    depends: int = 0
    """How many tasks ``packet.depends_on`` names (a claim checks them only when any)."""


@dataclass(slots=True)
class ResultMeta:
    """Who returned a task's result, from where, and what became of it."""

    worker: str
    instance: str
    session: str | None
    outcome: str
    version: int
    threshold: int | None
    merge_commit: str | None
    merged_by: str | None


@dataclass(slots=True)
class ViewRow:
    """Everything a task view shows, as one statement read it."""

    task: TaskRow
    packet: str
    result: str | None
    checkpoint: str | None
    meta: ResultMeta | None
    confirmations: list[list[Any]]
    updates: list[list[Any]]
    usage: list[int]


def _key(ref: str | int) -> tuple[str | None, str | int]:
    """How to find a task: by ``number`` (an int, or ASCII digits) or by ``id``;
    (None, ref) when no task can have it (0, or a number beyond SQLite's integers)."""
    if isinstance(ref, str) and not (ref.isascii() and ref.isdigit()):
        return "id", ref
    if isinstance(ref, bool) or not isinstance(ref, int | str):
        return None, ref
    number = int(ref)
    return ("number", number) if 0 < number < 2**63 else (None, ref)


def _check_header(path: Path) -> None:
    """Refuse a file that is not SQLite before SQLite ever opens it (it stays untouched)."""
    with path.open("rb") as handle:
        head = handle.read(len(SQLITE_HEADER))
    if head and head != SQLITE_HEADER:
        raise StoreError("not_a_store", f"{path} is not an SQLite database; left it untouched")


def _create_private(path: Path) -> bool:
    """Create the store file readable by its owner only; False if another opener won."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class Store:
    """One hivelite store file, opened with WAL, a generous busy timeout and our schema."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 synchronous: Synchronous = "NORMAL") -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise InvalidInput("invalid_synchronous", f"synchronous is NORMAL or FULL, not"
                               f" {synchronous!r}", field="synchronous")
        self.path = Path(path)
        self.created = False
        """True when this opener made the file (so it may take it away again)."""
        if self.path.exists():
            if self.path.is_dir():
                raise StoreError("not_a_store", f"{self.path} is a directory")
            _check_header(self.path)
        elif not create:
            raise StoreError(
                "no_store",
                f"no store at {self.path}; create it first (hivelite --db {self.path} init,"
                " or Hive.open(path))",
            )
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.created = _create_private(self.path)
        self.conn = apsw.Connection(str(self.path))
        # The busy timeout comes first, before anything else touches the file.
        self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        try:
            self._check_identity()
            self._configure(synchronous)
            self._migrate()
        except (apsw.NotADBError, apsw.CorruptError) as exc:
            self.conn.close()
            raise StoreError("not_a_store", f"{self.path} is damaged or not a database"
                             f" ({exc}); left it untouched") from exc
        except BaseException:
            self.conn.close()
            raise

    # -- opening -----------------------------------------------------------

    def _pragma(self, name: str) -> Any:
        return self.conn.execute(f"PRAGMA {name}").get

    def _check_identity(self) -> None:
        with self.read():  # one snapshot: another opener may be initialising the file
            app_id = self._pragma("application_id")
            version = self._pragma("user_version")
            has_tables = self.conn.execute(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"
            ).get
        if app_id == 0 and version == 0 and not has_tables:
            return  # a new, empty file: ours to initialise
        if app_id != APPLICATION_ID:
            raise StoreError(
                "foreign_database",
                f"{self.path} is an SQLite database of another program; left it untouched",
            )
        if version > SCHEMA_VERSION:
            raise StoreError(
                "newer_schema",
                f"{self.path} has schema version {version}, newer than this hivelite "
                f"understands ({SCHEMA_VERSION}); upgrade hivelite. Left it untouched",
            )

    def _configure(self, synchronous: Synchronous) -> None:
        self.conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
        self.conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
        self._wal()
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA recursive_triggers = ON")
        self.conn.execute("PRAGMA wal_autocheckpoint = 4000")

    def _wal(self) -> None:
        """Switch to WAL; on a new file another opener may hold the lock, so wait for it."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                return
            except apsw.BusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _migrate(self) -> None:
        if self._pragma("user_version") >= SCHEMA_VERSION:
            return
        with self.write():
            current = self._pragma("user_version")  # re-read under the write lock
            if current == 0:
                self.conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            for migration in MIGRATIONS:
                if migration.version > current:
                    migration.apply(self.conn)
                    self.conn.execute(f"PRAGMA user_version = {migration.version}")

    @property
    def schema_version(self) -> int:
        return int(self._pragma("user_version"))

    def close(self) -> None:
        self.conn.close()

    def discard(self) -> None:
        """Close and remove a store this opener has just created (and its WAL files)."""
        self.conn.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    # -- transactions ------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: commit on success, roll back on any error.

        A trigger's ``code:reason`` abort comes out as the matching hivelite error.
        """
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except apsw.BusyError as exc:
            raise StoreBusy("busy", f"another writer held the store for more than"
                            f" {BUSY_TIMEOUT_MS // 1000} s: {exc}") from exc
        try:
            yield self.conn
        except apsw.Error as exc:
            self._rollback()
            mapped = from_trigger(exc)
            if mapped is not None:
                raise mapped from exc
            raise
        except BaseException:
            self._rollback()
            raise
        else:
            self.conn.execute("COMMIT")

    def _rollback(self) -> None:
        if self.conn.in_transaction:  # SQLite may have rolled back already (disk full, ...)
            self.conn.execute("ROLLBACK")

    @contextmanager
    def read(self) -> Iterator[apsw.Connection]:
        """A consistent snapshot for several reads (joins a write already open)."""
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")
        else:
            yield self.conn

    def meta(self, key: str) -> str | None:
        value = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).get
        return None if value is None else str(value)

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- tasks -------------------------------------------------------------

    def task(self, ref: str | int) -> TaskRow | None:
        """The task with this id or number (a number may come as text)."""
        where, key = _key(ref)
        if where is None:
            return None
        row = self.conn.execute(f"{_SELECT_TASK} WHERE {where} = ?", (key,)).fetchone()
        return TaskRow(*row) if row else None

    def insert_task(self, row: TaskRow, packet_json: str, *, actor: str,
                    reason: str | None, detail: dict[str, Any] | None) -> int:
        """Insert a new ``requested`` task and its packet; returns its number."""
        self.conn.execute(
            "INSERT INTO tasks(id, state, project, requester, assignee, created_at, updated_at,"
            " priority, labels, depends, actor, reason, detail)"
            " VALUES (?, 'requested', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row.id, row.project, row.requester, row.assignee, row.created_at,
             row.updated_at, row.priority, row.labels, row.depends, actor, reason,
             _dump(detail)),
        )
        number = self.conn.last_insert_rowid()
        self.conn.execute("INSERT INTO packets(task, body) VALUES (?, ?)", (number, packet_json))
        return int(number)

    def move(self, number: int, to_state: str, *, at: str, actor: str,
             reason: str | None = None, detail: dict[str, Any] | None = None,
             waiting_on: str | None = None, end_lease: bool = False) -> None:
        """Change a task's state; the triggers check the move and write the journal row."""
        lease = (", lease_id = NULL, lease_holder = NULL, lease_instance = NULL,"
                 " lease_session = NULL, lease_expires = NULL") if end_lease else ""
        self.conn.execute(
            "UPDATE tasks SET state = ?, waiting_on = ?, updated_at = ?, actor = ?, reason = ?,"
            f" detail = ?{lease} WHERE number = ?",
            (to_state, waiting_on, at, actor, reason, _dump(detail), number),
        )

    def bodies(self, number: int) -> tuple[str, str | None, str | None]:
        """Packet, result and checkpoint JSON of one task."""
        row = self.conn.execute(
            "SELECT p.body, r.body, c.body FROM packets p"
            " LEFT JOIN results r ON r.task = p.task"
            " LEFT JOIN checkpoints c ON c.task = p.task WHERE p.task = ?",
            (number,),
        ).fetchone()
        if row is None:
            raise LookupError(f"task {number} has no packet")
        return row[0], row[1], row[2]

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        marks = ", ".join("?" * len(ids))
        return {r[0] for r in self.conn.execute(
            f"SELECT id FROM tasks WHERE id IN ({marks})", tuple(ids))}

    def list_views(self, *, state: Sequence[str] = (), assignee: str | None = None,
                   requester: str | None = None, project: str | None = None,
                   ready: bool = False, after: int | None = None,
                   limit: int = 50) -> list[ViewRow]:
        """Tasks in number order (which is creation order), filtered, one page, as views.

        ``ready``: routed tasks whose ``depends_on`` tasks are all completed.
        """
        where: list[str] = []
        args: list[Any] = []
        if ready:
            where.append(
                "t.state = 'routed' AND (t.depends = 0 OR NOT EXISTS ("
                "SELECT 1 FROM packets dp, json_each(dp.body, '$.depends_on') d"
                " LEFT JOIN tasks dep ON dep.id = d.value"
                " WHERE dp.task = t.number AND dep.state IS NOT 'completed'))")
        if state:
            where.append(f"t.state IN ({', '.join('?' * len(state))})")
            args.extend(state)
        for column, value in (("assignee", assignee), ("requester", requester),
                              ("project", project)):
            if value is not None:
                where.append(f"t.{column} = ?")
                args.append(value)
        if after is not None:
            where.append("t.number > ?")
            args.append(after)
        args.append(limit)
        return self.views(" AND ".join(where), args, order_limit="ORDER BY t.number LIMIT ?")

    def dependencies_open(self, number: int) -> list[str]:
        """The ids in a task's ``packet.depends_on`` whose tasks are not completed."""
        return [r[0] for r in self.conn.execute(
            "SELECT d.value FROM packets p, json_each(p.body, '$.depends_on') d"
            " LEFT JOIN tasks t ON t.id = d.value"
            " WHERE p.task = ? AND t.state IS NOT 'completed'", (number,))]

    # -- leases --------------------------------------------------------------

    def overdue(self, now: str) -> list[TaskRow]:
        """Tasks whose live lease expired at or before ``now`` (reads the partial index)."""
        return [TaskRow(*r) for r in self.conn.execute(
            f"{_SELECT_TASK} WHERE lease_id IS NOT NULL AND lease_expires <= ?", (now,))]

    def start_lease(self, number: int, to_state: str, *, lease_id: str, token: int,
                    holder: str, instance: str, session: str | None, expires: str, at: str,
                    reason: str, detail: dict[str, Any]) -> None:
        """Move into ``accepted``/``working`` under a new lease (claim or resume)."""
        self.conn.execute(
            "UPDATE tasks SET state = ?, waiting_on = NULL, lease_id = ?, lease_token = ?,"
            " lease_holder = ?, lease_instance = ?, lease_session = ?, lease_expires = ?,"
            " updated_at = ?, actor = ?, reason = ?, detail = ? WHERE number = ?",
            (to_state, lease_id, token, holder, instance, session, expires, at, holder, reason,
             _dump(detail), number),
        )

    def extend_lease(self, number: int, expires: str) -> None:
        self.conn.execute("UPDATE tasks SET lease_expires = ? WHERE number = ?",
                          (expires, number))

    def touch(self, number: int, at: str) -> None:
        self.conn.execute("UPDATE tasks SET updated_at = ? WHERE number = ?", (at, number))

    # -- progress ------------------------------------------------------------

    def set_checkpoint(self, number: int, body: str) -> None:
        self.conn.execute(
            "INSERT INTO checkpoints(task, body) VALUES (?, ?)"
            " ON CONFLICT(task) DO UPDATE SET body = excluded.body",
            (number, body),
        )

    def add_update(self, number: int, *, at: str, actor: str, summary: str,
                   tokens: int | None, usd_micros: int | None) -> None:
        self.conn.execute(
            "INSERT INTO updates(task, at, actor, summary, tokens, usd_micros)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (number, at, actor, summary, tokens, usd_micros),
        )

    def put_result(self, number: int, body: str, *, worker: str, instance: str,
                   session: str | None, outcome: str, threshold: int | None) -> int:
        """Store the task's (new) result; returns its version (1, 2, ... per task)."""
        return int(self.conn.execute(
            "INSERT INTO results(task, body, worker, instance, session, outcome, threshold)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(task) DO UPDATE SET"
            " body = excluded.body, worker = excluded.worker, instance = excluded.instance,"
            " session = excluded.session, outcome = excluded.outcome,"
            " threshold = excluded.threshold, version = results.version + 1,"
            " merge_commit = NULL, merged_by = NULL RETURNING version",
            (number, body, worker, instance, session, outcome, threshold),
        ).get)

    def result_meta(self, number: int) -> ResultMeta | None:
        row = self.conn.execute(
            "SELECT worker, instance, session, outcome, version, threshold, merge_commit,"
            " merged_by FROM results WHERE task = ?", (number,)).fetchone()
        return ResultMeta(*row) if row else None

    def amend_result(self, number: int, body: str) -> int:
        """Replace the result's body; its version moves on, so earlier verdicts no longer count."""
        self.conn.execute(
            "UPDATE results SET body = ?, version = version + 1 WHERE task = ?", (body, number))
        return int(self.conn.execute(
            "SELECT version FROM results WHERE task = ?", (number,)).get)

    def record_merge(self, number: int, commit: str, by: str) -> None:
        self.conn.execute("UPDATE results SET merge_commit = ?, merged_by = ? WHERE task = ?",
                          (commit, by, number))

    def add_confirmation(self, number: int, version: int, *, reviewer: str, instance: str,
                         session: str | None, verdict: str, reason: str | None, at: str,
                         counted: bool) -> None:
        self.conn.execute(
            "INSERT INTO confirmations(task, version, reviewer, instance, session, verdict,"
            " reason, at, counted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (number, version, reviewer, instance, session, verdict, reason, at, int(counted)),
        )

    def confirmations(self, number: int, version: int) -> list[tuple[Any, ...]]:
        """Verdicts on one version of a task's result, in the order given."""
        rows = list(self.conn.execute(
            "SELECT reviewer, instance, session, verdict, reason, at, counted"
            " FROM confirmations WHERE task = ? AND version = ?", (number, version)))
        rows.sort(key=lambda r: (r[5], r[0]))  # in Python: no temporary b-tree in SQL
        return rows

    # -- views: a task and everything its view shows, in one statement --------------------

    def views(self, where: str = "", args: Sequence[Any] = (), *, order_limit: str = "",
              updates: int = 20) -> list[ViewRow]:
        """Tasks with their packet, result, checkpoint, current verdicts, last ``updates``
        updates and usage totals. Call it inside ``read()`` for one snapshot.

        (One SELECT with correlated subqueries for all of it measured slower here than
        these few simple statements.)"""
        columns = ", ".join(f"t.{c}" for c in TASK_COLUMNS)
        sql = (
            f"SELECT {columns}, p.body, r.body, c.body, r.worker, r.instance, r.session,"
            " r.outcome, r.version, r.threshold, r.merge_commit, r.merged_by"
            " FROM tasks t JOIN packets p ON p.task = t.number"
            " LEFT JOIN results r ON r.task = t.number"
            " LEFT JOIN checkpoints c ON c.task = t.number"
        )
        if where:
            sql += " WHERE " + where
        sql += " " + order_limit
        out = []
        n = len(TASK_COLUMNS)
        for values in list(self.conn.execute(sql, tuple(args))):
            task = TaskRow(*values[:n])
            meta = ResultMeta(*values[n + 3:n + 11]) if values[n + 1] is not None else None
            verdicts = self.confirmations(task.number, meta.version) if meta else []
            recent = list(self.conn.execute(
                "SELECT at, actor, summary, tokens, usd_micros FROM updates WHERE task = ?"
                " ORDER BY seq DESC LIMIT ?", (task.number, updates + 1)))
            if len(recent) <= updates:  # all of them: sum here rather than ask again
                usage = [sum(r[3] or 0 for r in recent), sum(r[4] or 0 for r in recent)]
            else:
                recent = recent[:updates]
                total = self.conn.execute(
                    "SELECT coalesce(sum(tokens), 0), coalesce(sum(usd_micros), 0)"
                    " FROM updates WHERE task = ?", (task.number,)).fetchone() or (0, 0)
                usage = [int(total[0]), int(total[1])]
            out.append(ViewRow(task, values[n], values[n + 1], values[n + 2], meta,
                               [list(v) for v in verdicts], [list(u) for u in recent], usage))
        return out

    def view(self, ref: str | int) -> ViewRow | None:
        """One task's view row, by id or number."""
        where, key = _key(ref)
        if where is None:
            return None
        rows = self.views(f"t.{where} = ?", (key,))
        return rows[0] if rows else None

    # -- journal -----------------------------------------------------------

    def journal(self, number: int | None = None) -> list[dict[str, Any]]:
        """Journal rows (all, or one task's), oldest first, with the task's id and move number."""
        sql = (
            "SELECT j.seq, t.id, j.task, j.at, j.actor, j.from_state, j.to_state, j.waiting_on,"
            " m.number, j.reason, j.detail FROM journal j"
            " LEFT JOIN tasks t ON t.number = j.task"
            " LEFT JOIN moves m ON m.from_state = j.from_state AND m.to_state = j.to_state"
        )
        args: tuple[Any, ...] = ()
        if number is not None:
            sql += " WHERE j.task = ?"
            args = (number,)
        sql += " ORDER BY j.seq"
        keys = ("seq", "task", "number", "at", "actor", "from_state", "to_state",
                "waiting_on", "move", "reason", "detail")
        rows = []
        for values in self.conn.execute(sql, args):
            row = dict(zip(keys, values, strict=True))
            row["detail"] = json.loads(row["detail"]) if row["detail"] else None
            rows.append(row)
        return rows

    def journal_moves(self, number: int, count: int) -> list[dict[str, Any]]:
        """The last ``count`` moves of one task, oldest first (as ``journal`` gives rows)."""
        seqs = [r[0] for r in self.conn.execute(
            "SELECT seq FROM journal WHERE task = ? AND from_state IS NOT to_state"
            " ORDER BY seq DESC LIMIT ?", (number, count))]
        return [row for row in self.journal(number) if row["seq"] in seqs] if seqs else []

    def last_expiry(self, number: int) -> tuple[str, int] | None:
        """When the clock last ended a claim on this task, and that claim's token."""
        row = self.conn.execute(
            "SELECT json_extract(detail, '$.expired_at'), json_extract(detail, '$.fencing_token')"
            " FROM journal WHERE task = ? AND actor = 'clock' AND reason = 'expired'"
            " ORDER BY seq DESC LIMIT 1", (number,)).fetchone()
        return (str(row[0]), int(row[1])) if row and row[1] is not None else None

    def journal_tail(self) -> str | None:
        """The time of the newest journal row, if any."""
        value = self.conn.execute("SELECT at FROM journal ORDER BY seq DESC LIMIT 1").get
        return None if value is None else str(value)

    def record_event(self, number: int | None, *, at: str, actor: str, state: str | None,
                     reason: str, detail: dict[str, Any] | None = None) -> None:
        """Journal something that is not a move (from and to are the same state)."""
        self.conn.execute(
            "INSERT INTO journal(task, at, actor, from_state, to_state, reason, detail)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (number, at, actor, state, state, reason, _dump(detail)),
        )


def _dump(detail: dict[str, Any] | None) -> str | None:
    return json.dumps(detail, separators=(",", ":"), sort_keys=True) if detail else None
