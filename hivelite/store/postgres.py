"""The PostgreSQL store: the store contract on a PostgreSQL database (psycopg 3).

A store is a schema of one database, named by a URL: ``postgresql://user@host/dbname``
(schema ``hivelite``), or ``…/dbname?schema=NAME`` for one of several stores in a
database. Its tables and rules are SQLite's, in PL/pgSQL
(``pg_schema``), built by frozen migrations.

**Writers side by side, the journal in commit order.** A write holds the store's
advisory lock shared from its ``BEGIN`` (alone for a write of store-wide rows: the
owner's controls, policy, budgets, enrolments, tokens, the meta rows), so what it reads
of those stays as read. The rows a write changes are taken with ``SELECT … FOR UPDATE``
(``next`` and the expiry sweep: ``SKIP LOCKED``), and each journal row links to the row
before it of its own task (:mod:`.chain`: chains per task), which the task's row, held
to the commit, names: writes on different tasks never wait for each other. The rule that
numbers a journal row takes the numbers lock and holds it to the commit, so the journal
is numbered in commit order with no gap, and every reader of it (the outbox, ``doctor``)
sees it grow only at its end; a write takes that lock at its first journal row, which is
among its last statements. Readers never wait: a read is a ``REPEATABLE READ``
snapshot.

**Time is passed in**: no statement reads the server's clock.

**Threads**: each thread has its own connection, made on first use.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from ..core.errors import (
    HiveliteError,
    InvalidInput,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreReadonly,
    UnexpectedError,
    from_trigger,
)
from .chain import (
    CONTENT,
    SEAL,
    TASKS_FROM,
    TOKEN_EVENTS,
    broken_links,
    link,
    seal_what_came_before,
)
from .columns import (
    DECISION_OF,
    DECISIONS,
    ENROLMENT,
    JOURNAL,
    MINE,
    PRUNE_BATCH,
    QUESTION,
    SELECT_TASK,
    SUBMITTED_OF,
    TASK_COLUMNS,
    TOKEN,
    VIEW,
    WATCH,
    ViewRows,
    dump,
    journal_row,
    journal_rows,
    pick_where,
    usage_sum,
)
from .contract import STATEMENTS, STORE_WIDE, Pick, binds, vetoed_tasks
from .keys import (
    META_KEY,
    ChainKey,
    key_for_writes,
    load_key,
    named_key,
    read_watch,
    record_keyed,
    sealed_digest,
    unsealed,
    watch_seal,
)
from .pg_guard import Guard
from .pg_migrations import MIGRATIONS, SCHEMA_VERSION
from .pg_schema import RANK, READY, SCHEMA, instance_key
from .rows import (
    Bodies,
    BudgetRow,
    ConfirmationRow,
    ControlRow,
    Dependency,
    EnrolmentRow,
    Expiry,
    Held,
    JournalRow,
    Lease,
    LinkRow,
    ListFilter,
    NewTask,
    RequestRow,
    RequiredPlugin,
    ResultMeta,
    Spend,
    Taken,
    TaskRow,
    TokenRow,
    UpdateRow,
    ViewRow,
    WatchRow,
    task_key,
)
from .urls import is_url, shown

VIA = ("CASE WHEN jsonb_typeof(hl_json(j.detail) -> 'via') = 'array'"
       " THEN hl_json(j.detail) -> 'via' END")
"""A journal row's via (migration 19), as PostgreSQL reads it."""
DECISION = DECISION_OF.format(mine=MINE, via=VIA).format(p="%s")
SUBMITTED = SUBMITTED_OF.format(mine=MINE, via=VIA).format(p="%s")

if TYPE_CHECKING:
    from .pg_tables import PostgresTables

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def write_lock(schema: str) -> int:
    """The store's own advisory lock (advisory locks are per database; two stores in one
    database lock apart): every write holds it shared; a write of the store-wide rows
    (the owner's controls, policy, budgets, enrolments, tokens, the meta rows), an
    upgrade and an import hold it alone."""
    return _lock_key(f"hivelite:{schema}")


def numbers_lock(schema: str) -> int:
    """The numbers lock (``pg_schema.NUMBERS_LOCK``, the same key): the rule numbering a
    journal or usage row takes it, and a handoff for its task's number; held to the
    commit, so numbers are one more than the last, in commit order."""
    return _lock_key(f"hivelite-chain:{schema}")


def agent_lock(schema: str, agent: str) -> int:
    """The advisory lock a write holds while it counts an agent's claims for a daily
    budget (two claims of one budgeted agent take turns)."""
    return _lock_key(f"hivelite-agent:{schema}:{agent}")


def _lock_key(text: str) -> int:
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def split_url(url: str) -> tuple[str, str, str | None]:
    """The connection URL libpq reads, the store's schema (``?schema=NAME``, else
    ``hivelite``) and the role to act as once connected (``?role=NAME``: the role that
    owns the tables, for the one who installs, upgrades or imports; docs/postgres.md)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [v for k, v in query if k == "schema"]
    schema = named[-1] if named else SCHEMA
    if not SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise StoreError("invalid_schema", f"schema={schema!r} in {shown(url)} is not a"
                         " schema name a store can have (lowercase letters, digits and _, at"
                         " most 63, not starting pg_)")
    roles = [v for k, v in query if k == "role"]
    role = roles[-1] if roles else None
    if role is not None and not SCHEMA_NAME.fullmatch(role):
        raise StoreError("invalid_role", f"role={role!r} in {shown(url)} is not a role name"
                         " hivelite takes (lowercase letters, digits and _, at most 63)")
    rest = urlencode([(k, v) for k, v in query if k not in ("schema", "role")],
                     quote_via=quote)
    return urlunsplit(parts._replace(query=rest)), schema, role


def grants(schema: str, role: str) -> list[str]:
    """What hivelite's own role needs on a store whose tables another role owns (a role
    nobody logs in as): to read and write rows, and nothing that changes a rule. The rules
    then stay out of its reach: it cannot disable a trigger, drop or replace a function,
    or add one. docs/postgres.md shows these for ``hivelite`` and ``hive_app``."""
    for name in (schema, role):
        if not SCHEMA_NAME.fullmatch(name):
            raise StoreError("invalid_role", f"{name!r} is not a name hivelite grants to")
    return [f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}";',
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}"'
            f' TO "{role}";',
            f'REVOKE INSERT, UPDATE, DELETE ON "{schema}".schema_versions FROM "{role}";',
            f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}";']


T = TypeVar("T")

CONNECT_TIMEOUT_S = 10
MAX_KEY = (1 << 63) - 1
"""The largest bigint: a cursor beyond it names no task."""
DatabaseError = psycopg.Error
"""PostgreSQL's own failures that no hivelite error stands for."""


def _lost(exc: BaseException, where: str) -> StoreBusy:
    """A connection that failed or went away: the write did not happen, or is unknown."""
    return StoreBusy("connection_lost", f"the connection to {where} failed ({exc}); nothing"
                     " was written, or the write's outcome is unknown: try again (a verb"
                     " given a request id answers a retry with its first answer)")


def _failure(exc: psycopg.Error, where: str) -> HiveliteError | None:
    """What a PostgreSQL failure means for this store, if hivelite has a word for it (the
    specific kinds first: most of them are kinds of ``OperationalError`` too)."""
    mapped = from_trigger(exc) if isinstance(exc, pg_errors.RaiseException) else None
    if mapped is not None:
        return mapped
    if isinstance(exc, pg_errors.DeadlockDetected | pg_errors.SerializationFailure):
        return StoreBusy("busy", f"{where} is busy ({str(exc).strip()}); nothing was"
                         " written. Try again", retry=True)  # (the library tries again)
    if isinstance(exc, pg_errors.LockNotAvailable | pg_errors.QueryCanceled):
        return StoreBusy("busy", f"{where} is busy ({str(exc).strip()}); nothing was"
                         " written. Try again")
    if isinstance(exc, pg_errors.UndefinedTable | pg_errors.UndefinedColumn
                  | pg_errors.UndefinedFunction):
        return StoreError("schema_tampered", f"{where} does not have the tables hivelite"
                          f" made ({str(exc).strip().splitlines()[0]}); nothing was written."
                          " Run: hivelite doctor")
    if isinstance(exc, pg_errors.DiskFull):
        return StoreFull("disk_full", f"the server of {where} is out of disk space"
                         f" ({str(exc).strip()}); nothing was written")
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return StoreReadonly(f"{where} is read-only here (a standby server?):"
                             f" {str(exc).strip()}; nothing was written")
    if isinstance(exc, psycopg.DataError) and "NUL" in str(exc):
        return InvalidInput("invalid_text", "PostgreSQL cannot keep text with a NUL"
                            " character (\\x00) in it; nothing was written", field="text")
    if isinstance(exc, psycopg.OperationalError):  # the connection failed or went away
        return _lost(exc, where)
    return None


_MISSING = (pg_errors.UndefinedTable, pg_errors.UndefinedColumn, pg_errors.UndefinedFunction)


def _task_key(ref: str | int) -> tuple[str | None, str | int]:
    """``rows.task_key``, and no task for an id with a NUL in it (as on SQLite, where no id
    has one; PostgreSQL refuses such text outright)."""
    where, key = task_key(ref)
    return (None, key) if isinstance(key, str) and "\x00" in key else (where, key)


def _reraise(failure: HiveliteError | None, exc: BaseException) -> NoReturn:
    if failure is None:
        raise exc
    raise failure from exc


_CONTROLS = ("SELECT id, kind, agent, instance, task, at, by, reason, lifted_at, lifted_by"
             " FROM controls")
_REQUIRED = ("SELECT name, kind, digest, settings, at, by FROM required_plugins"
             " ORDER BY name COLLATE \"C\"")
_BUDGETS = ("SELECT agent, tasks, tokens, usd_micros, at, by FROM budgets"
            " ORDER BY agent COLLATE \"C\"")


def _rows_json(columns: str, table: str, where: str = "", order: str = "") -> str:
    """A subquery giving a table's rows as one JSON array of arrays (text and bigint
    columns only: JSON gives them back as they are)."""
    by = f" ORDER BY {order}" if order else ""
    return (f"(SELECT coalesce(json_agg(json_build_array({columns}){by}), '[]') FROM {table}"
            f"{' WHERE ' + where if where else ''})")


OVERDUE = (f"{SELECT_TASK} WHERE lease_id IS NOT NULL AND lease_expires COLLATE \"C\" <= %s"
           " ORDER BY lease_expires COLLATE \"C\", number")
"""The live leases run out by a time, oldest first: compared and ordered byte by byte
(RFC 3339 text), as the live-lease index is kept, so the sweep reads that index."""
STAMP_WIDTH = 7
"""The columns of the guard's stamp (``pg_guard.stamp_sql``), first in :func:`first_sql`."""
AHEAD_TABLES = ("meta", "policy", "controls", "required_plugins", "enrolments", "budgets")
AHEAD = ("SELECT " + ", ".join((
    _rows_json("key, value", "meta"),
    _rows_json("key, value", "policy"),
    _rows_json("id, kind, agent, instance, task, at, by, reason, lifted_at, lifted_by",
               "controls", "lifted_at IS NULL", "id"),
    _rows_json("name, kind, digest, settings, at, by", "required_plugins", "",
               'name COLLATE "C"'),
    _rows_json(ENROLMENT, "enrolments", "", 'agent COLLATE "C"'),
    _rows_json("agent, tasks, tokens, usd_micros, at, by", "budgets", "",
               'agent COLLATE "C"'),
    "(SELECT min(lease_expires COLLATE \"C\") FROM tasks WHERE lease_id IS NOT NULL)")))
"""What every write reads with its BEGIN: one row (one JSON array per table of
:data:`AHEAD_TABLES`, then the earliest live lease's end); the queries they replace are
the ones each read method sends otherwise."""


@functools.lru_cache(maxsize=8)
def first_sql(stamp: str) -> str:
    """A write's first statement, after its lock (:meth:`PostgresTx.first`): the guard's
    ``stamp`` (:data:`STAMP_WIDTH` columns), then :data:`AHEAD`."""
    return f"SELECT * FROM ({stamp}) stamp CROSS JOIN ({AHEAD}) ahead"


LOCKED = f"SELECT {', '.join(TASK_COLUMNS)}, chain FROM tasks"
"""A task row as a write takes it (``FOR UPDATE``): its columns, then its chain's head
(the hash of its newest journal row), which the row lock keeps as read until the commit.
A row taken after a wait is the newest, head included: the head must be a column of the
row, never a subquery (which would read the statement's older snapshot)."""
OVERDUE_HELD = OVERDUE.replace(SELECT_TASK, LOCKED) + " FOR UPDATE SKIP LOCKED"
"""The sweep's take of the overdue leases: each row with its head, none another write
holds (:meth:`PostgresTx.lock_overdue`)."""
SEAL_EVERY = 256
"""A write whose rows reach a multiple of this many journal rows seals the journal after
its commit (:meth:`PostgresStore.seal`)."""


SEARCH = ("(strpos(lower(t.assignee), %s) > 0 OR EXISTS (SELECT 1 FROM packets p"
          " WHERE p.task = t.number AND strpos(lower(hl_json(p.body) ->> 'task'), %s) > 0)"
          " OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE WHEN"
          " jsonb_typeof(hl_json(t.labels)) = 'array' THEN hl_json(t.labels) ELSE '[]'"
          " END) AS l(label) WHERE strpos(lower(l.label), %s) > 0))")
"""A listing's ``search``: the text in the title, the assignee or a label (as SQLite's)."""


def _pick(assignee: str, project: str | None, label: str | None, skip: Sequence[int],
          projects: Sequence[str] | None, roles: Sequence[str]) -> tuple[str, list[object]]:
    """``next``'s pick: the best ready task for ``assignee`` that no other write holds
    (``SKIP LOCKED``: passed over, never waited for), as SQL and its arguments."""
    clauses, args = pick_where("%s", READY, assignee, project, projects, roles)
    if skip:
        clauses.append("number <> ALL(%s)")
        args.append(list(skip))
    if label is not None:
        clauses.append("hl_json(labels) @> jsonb_build_array(%s::text)")
        args.append(label)
    return (f"{LOCKED} WHERE {' AND '.join(clauses)} ORDER BY assignee, {RANK}, number"
            " LIMIT 1 FOR UPDATE SKIP LOCKED", args)


class PostgresTx(ViewRows):
    """One transaction (or snapshot) on one connection: the contract's reads and writes."""

    __slots__ = ("_ahead", "_ends", "_first", "_taken", "conn", "heads", "key", "linked",
                 "locks", "routed", "wide")

    def __init__(self, conn: psycopg.Connection[Any], key: ChainKey | None = None,
                 locks: tuple[str, int, int] | None = None, *, wide: bool = False) -> None:
        self.conn = conn
        self.heads: dict[int | None, str] = {}
        """In a write: the head of each task's chain (the hash of its newest journal row;
        None: the rows about no task) as this write holds it, from the task's row taken
        ``FOR UPDATE``; each link this write adds moves it on."""
        self.linked = 0
        """In a write: how many journal rows it has added (each one link)."""
        self._ends: tuple[int, Callable[[], tuple[int, int]]] | None = None
        """In a write: :meth:`journal_end`'s answer, with the rows added when it was asked
        (the write path and the store's seal both ask; one statement serves both)."""
        self.locks = locks
        """In a write: the store's schema, its own lock and the numbers lock (None: a
        read)."""
        self.wide = wide
        """Whether this write holds the store's own lock alone (store-wide rows)."""
        self.key = key
        """The owner's key that seals each journal row a write adds (and each kept
        answer, which a read checks with it)."""
        self.routed: set[int] = set()
        """The tasks this write moved to ``routed`` (ready to claim): its commit wakes the
        workers waiting for work (:meth:`PostgresStore.wait_for_work`)."""
        self._taken: tuple[str | int | Pick, psycopg.Cursor[Any]] | None = None
        """In a write: the task it takes first, sent with its BEGIN (:meth:`take_first`),
        and the cursor of that row, until :meth:`lock_task` asks for it or another
        statement changes a task (the lock stays held; the row is read again)."""
        self._ahead: dict[str, Any] = {}
        """In a write: the reads sent with its BEGIN (:meth:`first`), by table (their rows,
        once the first answer is read); a write to the table marks it to read afresh."""
        self._first: psycopg.Cursor[Any] | tuple[Any, ...] | None = None
        """In a write: the answer of its first statement (:data:`FIRST`): a cursor, then
        its row."""

    def first(self, sent: psycopg.Cursor[Any]) -> None:
        """The write's first statement was sent (:data:`FIRST`): the guard's stamp and the
        reads nearly every write makes before its body (the store's meta rows, the owner's
        live controls, the required plugins, the enrolments and budgets, the earliest live
        lease's end). It travels with the BEGIN and the lock, in one round trip. The tables
        are small (one row an agent, a control or a plugin), and under the store's lock
        (shared by every write, held alone by a write that changes them) they stay as read
        until this write changes them."""
        self._first, self._ahead = sent, {"": None}

    def _first_row(self) -> tuple[Any, ...]:
        """The first statement's row, read once (the first ask waits for it)."""
        first = self._first
        if first is None:
            raise AssertionError("no first statement was sent")
        if not isinstance(first, tuple):
            found = first.fetchone()
            if found is None:
                raise AssertionError("the first statement gave no row")
            first = self._first = tuple(found)
        return first

    def stamp(self) -> tuple[Any, ...]:
        """The guard's stamp of the store's rules, as the first statement read it."""
        return self._first_row()[:STAMP_WIDTH]

    def take_first(self, about: str | int | Pick) -> None:
        """Queue, with the BEGIN, the row lock of the task this write is about (the verb
        knows it before the write), or of the best ready task of a pick with no veto and
        no enrolment: the body's ``lock_task`` or ``next_ready`` then needs no round trip
        of its own (when the agent has a veto or an enrolment, its pick is made again: the
        row taken first stays locked to the commit, unused). Taken before the expiry
        sweep, so that the sweep, which passes over rows other writes hold, expires this
        task's lease too when it has run out."""
        if isinstance(about, Pick):
            self._taken = (about, self.conn.execute(*_pick(
                about.assignee, about.project, about.label, about.skip, None, ())))
            return
        where, key = _task_key(about)
        if where is not None:
            self._taken = (about, self.conn.execute(
                f"{LOCKED} WHERE {where} = %s FOR UPDATE", (key,), prepare=True))

    def _held(self, row: Sequence[Any] | None) -> TaskRow | None:
        """A task row taken ``FOR UPDATE`` (:data:`LOCKED`): its head noted, the row."""
        if row is None:
            return None
        self.heads.setdefault(row[0], row[-1])
        return TaskRow(*row[:-1])

    def _tasks_changed(self) -> None:
        """A statement changes tasks: a row taken first, not read yet, may be stale."""
        self._taken = None

    def _read_ahead(self, name: str) -> list[tuple[Any, ...]] | None:
        """The rows of a read sent ahead (None: not sent, or a write changed its table)."""
        if "" in self._ahead:  # the first ask reads them all (a table changed since keeps
            del self._ahead[""]  # its mark: it is read afresh)
            found = self._first_row()[STAMP_WIDTH:STAMP_WIDTH + len(AHEAD_TABLES) + 1]
            for table, rows in zip(AHEAD_TABLES, found[:-1], strict=True):
                self._ahead.setdefault(table, [tuple(r) for r in rows])
            self._ahead.setdefault("overdue", [(found[-1],)])
        return self._ahead.get(name)

    def _changed(self, table: str) -> None:
        """This write changes ``table``: its rows read ahead no longer hold (None: read
        it afresh, whether or not the rows sent ahead have arrived yet)."""
        self._ahead[table] = None

    def _one(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        return self.conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, args).fetchall()

    def _value(self, sql: str, args: Sequence[Any] = ()) -> Any:
        row = self._one(sql, args)
        return None if row is None else row[0]

    def _store_wide(self) -> None:
        """This write changes a store-wide row: it must hold the store's lock alone. A write
        the owner's authority runs took it with its BEGIN; any other takes it now (it waits
        for the writes under way to end)."""
        if self.locks is not None and not self.wide:
            self.conn.execute(f"SELECT pg_advisory_xact_lock({self.locks[1]})")
            self.wide = True

    def _link(self, task: int | None, *content: Any) -> str:
        """The hash of the journal row about to be written about ``task`` (None: about no
        task), which becomes the new head of that task's chain: each link is one journal
        row (:mod:`.chain`, chains per task)."""
        before = self._head(task)
        after = link(before, (task, *content))
        if self.key is not None:
            after = self.key.seal_task(task, after)
        self.heads[task] = after
        self.linked += 1
        return after

    def _head(self, task: int | None, *, alone: bool = True) -> str:
        """The head of ``task``'s chain as this write holds it: from the task's row taken
        ``FOR UPDATE`` (taken now when it was not: a task's rows are added only by the
        write that holds its row), or for the rows about no task, read under the store's
        lock held alone (every write that adds one holds it; a seal, ``alone`` False,
        holds the seals' lock instead, which store-wide writes' lock keeps out)."""
        head = self.heads.get(task)
        if head is None:
            if task is None:
                if alone:
                    self._store_wide()
                head = self._value("SELECT hash FROM journal WHERE task IS NULL"
                                   " ORDER BY seq DESC LIMIT 1")
            else:
                head = self._value("SELECT chain FROM tasks WHERE number = %s FOR UPDATE",
                                   (task,))
            head = self.heads[task] = str(head) if head is not None else (
                self.meta("store_id") or "")
        return head

    # -- reading -------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        ahead = self._read_ahead("meta")
        if ahead is not None:
            return next((None if v is None else str(v) for k, v in ahead if k == key), None)
        value = self._value("SELECT value FROM meta WHERE key = %s", (key,))
        return None if value is None else str(value)

    def task(self, ref: str | int) -> TaskRow | None:
        where, key = _task_key(ref)
        if where is None:
            return None
        row = self._one(f"{SELECT_TASK} WHERE {where} = %s", (key,))
        return TaskRow(*row) if row else None

    def bodies(self, number: int) -> Bodies:
        row = self._one(
            "SELECT p.body, r.body, c.body FROM packets p"
            " LEFT JOIN results r ON r.task = p.task"
            " LEFT JOIN checkpoints c ON c.task = p.task WHERE p.task = %s", (number,))
        if row is None:
            raise LookupError(f"task {number} has no packet")
        return Bodies(row[0], row[1], row[2])

    def task_with_bodies(self, ref: str | int) -> tuple[TaskRow, Bodies] | None:
        where, key = _task_key(ref)
        if where is None:
            return None
        row = self._one(
            f"SELECT {', '.join('t.' + c for c in TASK_COLUMNS)}, p.body, r.body, c.body"
            " FROM tasks t LEFT JOIN packets p ON p.task = t.number"
            " LEFT JOIN results r ON r.task = t.number"
            f" LEFT JOIN checkpoints c ON c.task = t.number WHERE t.{where} = %s", (key,))
        if row is None:
            return None
        width = len(TASK_COLUMNS)
        if row[width] is None:
            raise LookupError(f"task {row[0]} has no packet")
        return TaskRow(*row[:width]), Bodies(*row[width:])

    def dependencies(self, number: int) -> list[Dependency]:
        return [Dependency(*r) for r in self._all(
            "SELECT t.number, t.id, t.state FROM deps d JOIN tasks t ON t.number = d.on_task"
            " WHERE d.task = %s ORDER BY d.on_task", (number,))]

    def numbers_of(self, refs: Sequence[str]) -> dict[str, tuple[int, str]]:
        found: dict[str, tuple[int, str]] = {}
        for ref in refs:
            if "\x00" in ref:  # no id holds one (and PostgreSQL takes no NUL in text)
                continue
            row = self._one("SELECT number, id FROM tasks WHERE id = %s", (ref,))
            if row is None and ref.isascii() and ref.isdigit() and len(ref) <= 18:
                row = self._one("SELECT number, id FROM tasks WHERE number = %s", (int(ref),))
            if row is not None:
                found[ref] = (int(row[0]), str(row[1]))
        return found

    def next_ready(self, assignee: str, *, project: str | None = None,
                   label: str | None = None, skip: Sequence[int] = (),
                   projects: Sequence[str] | None = None,
                   roles: Sequence[str] = ()) -> TaskRow | None:
        taken, self._taken = self._taken, None
        if (taken is not None and projects is None and not roles  # sent with the BEGIN
                and taken[0] == Pick(assignee, project, label, tuple(skip))):
            row = taken[1].fetchone()  # (no veto, no enrolment: the same pick)
        else:
            row = self._one(*_pick(assignee, project, label, skip, projects, roles))
        return self._held(row)

    def take_next(self, lease: Lease, *, at: str, project: str | None = None,
                  label: str | None = None, skip: Sequence[int] = ()) -> Taken | None:
        vetoed = vetoed_tasks(self.controls(), lease.holder)  # (read with the BEGIN)
        return self._take(self.next_ready(lease.holder, project=project, label=label,
                                          skip=[*vetoed, *skip], projects=lease.projects,
                                          roles=lease.roles), lease, at)

    def take_task(self, ref: str | int, lease: Lease, *, at: str) -> Taken | None:
        # the rules refuse a task not ready, or not the holder's (its state, its
        # assignee, its role): the full run then says which
        return self._take(self.lock_task(ref), lease, at)  # (taken with the BEGIN)

    def take_paused(self, ref: str | int, lease: Lease, *, at: str) -> Taken | None:
        row = self.lock_task(ref)  # (taken with the BEGIN)
        if row is None or row.state != "waiting":  # (a claimed task's holder moves it
            return None  # to working too; the rules refuse one paused on the owner, or
        return self._take(row, lease, at, resume=True)  # not the holder's)

    def _take(self, row: TaskRow | None, lease: Lease, at: str, *,
              resume: bool = False) -> Taken | None:
        """The claim of a ready task ``row``, taken ``FOR UPDATE``:
        routed -> accepted under ``lease`` (``resume``: a paused one, waiting -> working),
        the move from the state the row is in, which the rules refuse when it is not that
        verb's. Its seq is known at the commit (the write path names it on the receipt)."""
        if row is None:
            return None
        token = row.lease_token + 1
        target, reason = ("working", "resumed") if resume else ("accepted", "claimed")
        self.start_lease(row.number, row.state, target, lease_id=lease.lease_id,
                         token=token, holder=lease.holder, instance=lease.instance,
                         session=lease.session, expires=lease.expires, at=at,
                         reason=reason,
                         detail={"fencing_token": token, "instance": lease.instance,
                                 "session": lease.session, "expires_at": lease.expires},
                         scope=lease.scope)
        return Taken(row.number, row.id, token, 0)

    def _in_scope(self, row: TaskRow) -> bool:
        """A live claim still under its holder's enrolment (``sqlite.HELD_IN_SCOPE``)."""
        enrolled = self.enrolments(row.lease_holder or "")
        return row.lease_scope == (enrolled[0].seq if enrolled and enrolled[0].active
                                   else None)

    def held(self, ref: str | int, *, lease_id: str, token: int, holder: str,
             instance: str, at: str, scoped: bool = True) -> Held | None:
        row = self.lock_task(ref)  # (taken with the BEGIN: no round trip)
        if (row is None or row.lease_id != lease_id or row.lease_token != token
                or row.lease_holder != holder or row.lease_instance != instance
                or (row.lease_expires or "") <= at or (scoped and not self._in_scope(row))
                or any(binds(c, holder, instance, row.number) for c in self.controls())):
            return None  # (a live lease is the holder's state's: the rules hold it)
        return Held(row.number, row.id, row.state, row.lease_session, row.project)

    def overdue(self, at: str) -> list[TaskRow]:
        return [TaskRow(*r) for r in self._all(
            OVERDUE, (at,))]

    def result_meta(self, number: int) -> ResultMeta | None:
        row = self._one(
            "SELECT worker, instance, session, outcome, version, threshold, merge_commit,"
            " merged_by FROM results WHERE task = %s", (number,))
        return ResultMeta(*row) if row else None

    def confirmations(self, number: int, version: int) -> list[ConfirmationRow]:
        return [ConfirmationRow(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7])
                for r in self._all(
                    "SELECT reviewer, instance, session, verdict, reason, at, counted, why"
                    " FROM confirmations WHERE task = %s AND version = %s"
                    " ORDER BY at, reviewer COLLATE \"C\"", (number, version))]

    def views(self, where: ListFilter, *, after: int | None, limit: int) -> list[ViewRow]:
        clauses: list[str] = []
        args: list[Any] = []
        if where.ready:
            clauses.append(READY)
        if where.blocked:
            clauses.append("t.waits > 0 AND t.state NOT IN ('cancelled', 'completed',"
                           " 'rejected')")
        for label in where.labels:
            clauses.append("hl_json(t.labels) @> jsonb_build_array(%s::text)")
            args.append(label)
        if where.search:
            clauses.append(SEARCH)
            args.extend([where.search] * 3)
        for column, values in (("priority", where.priorities), ("state", where.states)):
            if values:
                clauses.append(f"t.{column} = ANY(%s)")
                args.append(list(values))
        for column, value in (("assignee", where.assignee), ("requester", where.requester),
                              ("project", where.project), ("role", where.role)):
            if value is not None:
                clauses.append(f"t.{column} = %s")
                args.append(value)
        if after is not None and after >= MAX_KEY:
            return []  # no task comes after it, and the server takes no larger integer
        if where.sort == "age":
            if after is not None:
                clauses.append("t.number > %s")
                args.append(max(after, 0))
            page = "ORDER BY t.number LIMIT %s"
            args.append(limit)
        else:  # the cursor counts the rows already shown
            order = (f"ORDER BY {RANK}, t.number" if where.sort == "priority"
                     else "ORDER BY t.updated_at DESC, t.number DESC")
            page = f"{order} LIMIT %s OFFSET %s"
            args.extend((limit, max(after or 0, 0)))
        filtered = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        numbers = [int(r[0]) for r in self._all(
            f"SELECT t.number FROM tasks t{filtered} {page}", args)]
        if not numbers:
            return []
        found = {v.task.number: v for v in self._views("t.number = ANY(%s)", (numbers,))}
        return [found[n] for n in numbers if n in found]

    def view(self, ref: str | int) -> ViewRow | None:
        where, key = _task_key(ref)
        if where is None:
            return None
        rows = self._views(f"t.{where} = %s", (key,))
        return rows[0] if rows else None

    def _views(self, where: str, args: Sequence[Any]) -> list[ViewRow]:
        """Tasks with their bodies, current verdicts, last updates and usage totals."""
        sql = "SELECT " + VIEW.format(columns=", ".join(f"t.{c}" for c in TASK_COLUMNS))
        return self._view_rows(self._all(sql + " WHERE " + where, args))

    def _recent_updates(self, number: int, limit: int) -> list[UpdateRow]:
        return [UpdateRow(*u) for u in self._all(
            "SELECT at, actor, summary, tokens, usd_micros FROM updates WHERE task = %s"
            " ORDER BY seq DESC LIMIT %s", (number, limit))]

    def _usage_total(self, number: int) -> tuple[int, int]:
        """A task's usage over all its updates (PostgreSQL sums bigints exactly)."""
        total = self._one("SELECT coalesce(sum(tokens), 0), coalesce(sum(usd_micros), 0)"
                          " FROM updates WHERE task = %s", (number,)) or (0, 0)
        return int(total[0]), int(total[1])

    def journal(self, number: int | None = None) -> list[JournalRow]:
        if number is None:
            return journal_rows(self._all(JOURNAL + " ORDER BY j.seq"))
        return journal_rows(self._all(JOURNAL + " WHERE j.task = %s ORDER BY j.seq",
                                      (number,)))

    def question(self, number: int) -> list[JournalRow]:
        return [journal_row(v) for v in self._all(QUESTION.format(p="%s"), (number, number))]

    def decision(self, number: int) -> JournalRow | None:
        found = journal_rows(self._all(DECISION, (number,)))
        return found[-1] if found and found[-1].move in DECISIONS else None

    def submitted(self, number: int) -> int | None:
        found = self._value(SUBMITTED, (number,))
        return int(found) if found is not None else None

    def journal_after(self, seq: int, *, upto: int | None = None) -> list[JournalRow]:
        bound = (1 << 63) - 1 if upto is None else upto
        return journal_rows(self._all(
            JOURNAL + " WHERE j.seq > %s AND j.seq <= %s ORDER BY j.seq", (seq, bound)))

    def last_seq(self) -> int:
        return int(self._value("SELECT coalesce(max(seq), 0) FROM journal"))

    def journal_end(self) -> Callable[[], tuple[int, int]]:
        """This write's journal rows as ``(seq before the first, seq of the last)``, asked
        now and known once the answer comes (at the commit at the latest: no round trip
        of its own). Its rows are numbered one after another under the numbers lock, which
        the first one took, so the last row in the journal is this write's last."""
        asked = self._ends
        if asked is not None and asked[0] == self.linked:  # asked already, no row since
            return asked[1]
        sent = self.conn.execute("SELECT coalesce(max(seq), 0) FROM journal")
        linked = self.linked
        known: list[tuple[int, int]] = []

        def ends() -> tuple[int, int]:
            if not known:
                row = sent.fetchone()
                last = int(row[0]) if row is not None else 0
                known.append((last - linked, last))
            return known[0]
        self._ends = (linked, ends)
        return ends

    def request(self, caller: str, request_id: str, *, since: str) -> RequestRow | None:
        if self.locks is not None:  # a write: a retry racing its first call waits for it
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(
                f"hivelite-request:{self.locks[0]}:{caller}:{request_id}"),))
        row = self._one("SELECT caller, id, verb, digest, answer, at FROM requests"
                        " WHERE caller = %s AND id = %s", (caller, request_id))
        if not row:
            return None
        digest, sealed = unsealed(self.key, *(str(v) for v in row))
        return RequestRow(str(row[0]), str(row[1]), str(row[2]), digest, str(row[4]),
                          str(row[5]), sealed)

    def last_expiry(self, number: int) -> Expiry | None:
        row = self._one(
            "SELECT hl_json(detail) ->> 'expired_at', hl_json(detail) ->> 'fencing_token'"
            " FROM journal WHERE task = %s AND actor = 'clock' AND reason = 'expired'"
            " ORDER BY seq DESC LIMIT 1", (number,))
        return Expiry(str(row[0]), int(row[1])) if row and row[1] is not None else None

    def head(self) -> str | None:
        row = self._one("SELECT seq, coalesce(glink, hash) FROM journal"
                        " ORDER BY seq DESC LIMIT 1")
        return None if row is None else f"{row[0]}:{row[1]}"

    def journal_tail(self) -> str | None:
        value = self._value("SELECT at FROM journal ORDER BY seq DESC LIMIT 1")
        return None if value is None else str(value)

    def policy(self) -> dict[str, str]:
        rows = self._read_ahead("policy")
        return {str(k): str(v) for k, v in (
            self._all("SELECT key, value FROM policy") if rows is None else rows)}

    def required_plugins(self) -> list[RequiredPlugin]:
        rows = self._read_ahead("required_plugins")
        return [RequiredPlugin(*r) for r in (self._all(_REQUIRED) if rows is None else rows)]

    def controls(self, *, live: bool = True) -> list[ControlRow]:
        rows = self._read_ahead("controls") if live else None
        if rows is None:
            where = " WHERE lifted_at IS NULL" if live else ""
            rows = self._all(f"{_CONTROLS}{where} ORDER BY id")
        return [ControlRow(*r) for r in rows]

    def budgets(self, agent: str | None = None) -> list[BudgetRow]:
        rows = self._read_ahead("budgets")
        if rows is not None:  # ordered by agent, byte by byte
            return [BudgetRow(*r) for r in rows if agent is None or r[0] == agent]
        if agent is None:
            return [BudgetRow(*r) for r in self._all(_BUDGETS)]
        return [BudgetRow(*r) for r in self._all(
            "SELECT agent, tasks, tokens, usd_micros, at, by FROM budgets WHERE agent = %s",
            (agent,))]

    def enrolments(self, agent: str | None = None) -> list[EnrolmentRow]:
        sql = f"SELECT {ENROLMENT} FROM enrolments"
        rows = self._read_ahead("enrolments")
        if rows is not None:
            return [EnrolmentRow(*r) for r in rows if agent is None or r[0] == agent]
        if agent is None:
            return [EnrolmentRow(*r) for r in self._all(sql + " ORDER BY agent COLLATE \"C\"")]
        return [EnrolmentRow(*r) for r in self._all(sql + " WHERE agent = %s", (agent,))]

    def spend(self, agent: str, start: str, end: str) -> Spend:
        if self.locks is not None:  # a write counts under the agent's lock, to its commit
            self.conn.execute(f"SELECT pg_advisory_xact_lock({agent_lock(self.locks[0], agent)})")
        claims = int(self._value(
            "SELECT count(*) FROM journal WHERE actor = %s AND at >= %s AND at < %s"
            " AND from_state = 'routed' AND to_state = 'accepted'", (agent, start, end)))
        tokens, usd = usage_sum(self._all(
            "SELECT tokens, usd_micros FROM updates WHERE actor = %s AND at >= %s AND at < %s"
            " AND (tokens IS NOT NULL OR usd_micros IS NOT NULL)", (agent, start, end)))
        return Spend(claims, tokens, usd)

    def state_counts(self) -> dict[str, int]:
        return {str(state): int(n) for state, n in self._all(
            "SELECT state, count(*) FROM tasks GROUP BY state")}

    def token(self, token_id: str) -> TokenRow | None:
        row = self._one(f"SELECT {TOKEN} FROM tokens WHERE id = %s", (token_id,))
        return TokenRow(*row) if row else None

    def token_journal(self, token_id: str) -> list[LinkRow]:
        found = []
        split = self.tasks_from()
        for seq, stored, *content in self._all(
                f"SELECT seq, hash, {CONTENT} FROM journal WHERE task IS NULL AND reason IN"
                f" {TOKEN_EVENTS} AND strpos(detail, %s) > 0 ORDER BY seq", (token_id,)):
            by_task = split is not None and seq >= split  # the row before it about no task
            before = self._value("SELECT hash FROM journal WHERE seq < %s"
                                 + (" AND task IS NULL" if by_task else "")
                                 + " ORDER BY seq DESC LIMIT 1", (seq,))
            found.append(LinkRow(int(seq), stored,
                                 self.meta("store_id") if before is None else str(before),
                                 tuple(content), by_task))
        return found

    def tasks_from(self) -> int | None:
        """The first journal row chained per task (``meta.tasks_chained_from``)."""
        value = self.meta(TASKS_FROM)
        return int(value) if value is not None and value.isdigit() else None

    def tokens(self) -> list[TokenRow]:
        return [TokenRow(*r) for r in self._all(
            f"SELECT {TOKEN} FROM tokens ORDER BY created_at, id COLLATE \"C\"")]

    def watch(self, watch_id: str) -> WatchRow | None:
        row = self._one(f"SELECT {WATCH}, seal FROM watches WHERE id = %s", (watch_id,))
        return read_watch(row, self.key) if row else None

    # -- writing: the rows a write changes are taken first ---------------------

    def lock_task(self, ref: str | int) -> TaskRow | None:
        where, key = _task_key(ref)
        if where is None:
            return None
        taken, self._taken = self._taken, None
        if taken is not None and taken[0] == ref:  # sent with the BEGIN
            row = taken[1].fetchone()
        else:
            row = self._one(f"{LOCKED} WHERE {where} = %s FOR UPDATE", (key,))
        return self._held(row)

    def lock_overdue(self, at: str) -> list[TaskRow]:
        ahead = self._read_ahead("overdue")  # the earliest live lease's end, read ahead:
        if ahead is not None and (not ahead or ahead[0][0] is None  # none runs out by
                                  or str(ahead[0][0]) > at):  # ``at`` (RFC 3339 text,
            return []  # compared byte by byte, as COLLATE "C" does)
        held = [self._held(r) for r in self._all(OVERDUE_HELD, (at,))]
        return [r for r in held if r is not None]  # (a lease another write holds: its own
        # sweep, or the next write's, expires it)

    def set_meta(self, key: str, value: str) -> None:
        self._store_wide()
        self._changed("meta")
        self.conn.execute("INSERT INTO meta(key, value) VALUES (%s, %s)", (key, value))

    def insert_task(self, task: NewTask, *, actor: str, reason: str | None) -> int:
        if self.locks is not None:  # numbers are given under the numbers lock
            self.conn.execute(f"SELECT pg_advisory_xact_lock({self.locks[2]})")
        number = int(self._value("SELECT coalesce(max(number), 0) + 1 FROM tasks"))
        self.heads[number] = self.meta("store_id") or ""  # a task's first row
        chain = self._link(number, task.at, actor, None, "requested", None, reason, None)
        waits = 0
        if task.depends_on:
            waits = int(self._value(
                "SELECT count(*) FROM tasks WHERE number = ANY(%s)"
                " AND state IS DISTINCT FROM 'completed'", (list(task.depends_on),)))
        self.conn.execute(
            "INSERT INTO tasks(number, id, state, project, requester, assignee, created_at,"
            " updated_at, priority, labels, depends, actor, reason, chain, waits,"
            " attempt_limit, role) VALUES (%s, %s, 'requested', %s, %s, %s, %s, %s, %s, %s, %s, %s,"
            " %s, %s, %s, %s, %s)",
            (number, task.id, task.project, task.requester, task.assignee, task.at, task.at,
             task.priority, task.labels, task.depends, actor, reason, chain, waits,
             task.attempt_limit, task.role))
        for on in sorted(set(task.depends_on)):
            self.conn.execute("INSERT INTO deps(task, on_task) VALUES (%s, %s)", (number, on))
        self.conn.execute("INSERT INTO packets(task, body) VALUES (%s, %s)",
                          (number, task.packet))
        return number

    def move(self, number: int, from_state: str, to_state: str, *, at: str, actor: str,
             reason: str | None, detail: dict[str, Any] | None = None,
             waiting_on: str | None = None, end_lease: bool = False) -> None:
        self._changed("overdue")
        self._tasks_changed()
        lease = (", lease_id = NULL, lease_holder = NULL, lease_instance = NULL,"
                 " lease_session = NULL, lease_expires = NULL") if end_lease else ""
        text = dump(detail)
        chain = self._link(number, at, actor, from_state, to_state, waiting_on, reason, text)
        if to_state == "routed":
            self.routed.add(number)
        self.conn.execute(
            "UPDATE tasks SET state = %s, waiting_on = %s, updated_at = %s, actor = %s,"
            f" reason = %s, detail = %s, chain = %s{lease} WHERE number = %s",
            (to_state, waiting_on, at, actor, reason, text, chain, number))

    def start_lease(self, number: int, from_state: str, to_state: str, *, lease_id: str,
                    token: int, holder: str, instance: str, session: str | None, expires: str,
                    at: str, reason: str, detail: dict[str, Any],
                    scope: int | None = None) -> None:
        self._changed("overdue")
        self._tasks_changed()
        text = dump(detail)
        chain = self._link(number, at, holder, from_state, to_state, None, reason, text)
        self.conn.execute(
            "UPDATE tasks SET state = %s, waiting_on = NULL, lease_id = %s, lease_token = %s,"
            " lease_holder = %s, lease_instance = %s, lease_session = %s, lease_expires = %s,"
            " updated_at = %s, actor = %s, reason = %s, detail = %s, chain = %s,"
            " lease_scope = %s"
            " WHERE number = %s",
            (to_state, lease_id, token, holder, instance, session, expires, at, holder, reason,
             text, chain, scope, number))

    def set_fields(self, number: int, *, priority: str, labels: str, attempt_limit: int,
                   version: int) -> None:
        self._tasks_changed()
        self.conn.execute(
            "UPDATE tasks SET priority = %s, labels = %s, attempt_limit = %s,"
            " fields_version = %s WHERE number = %s",
            (priority, labels, attempt_limit, version, number))

    def extend_lease(self, number: int, expires: str, *, at: str) -> None:
        self._changed("overdue")
        self._tasks_changed()
        self.conn.execute("UPDATE tasks SET lease_expires = %s, updated_at = %s"
                          " WHERE number = %s", (expires, at, number))

    def touch(self, number: int, at: str) -> None:
        self._tasks_changed()
        self.conn.execute("UPDATE tasks SET updated_at = %s WHERE number = %s", (at, number))

    def set_checkpoint(self, number: int, body: str) -> None:
        self.conn.execute(  # one statement, no answer awaited: it travels with the next
            "WITH kept AS (UPDATE checkpoints SET body = %s WHERE task = %s RETURNING task)"
            " INSERT INTO checkpoints(task, body) SELECT %s::bigint, %s::text"
            " WHERE NOT EXISTS (SELECT 1 FROM kept)", (body, number, number, body))

    def add_update(self, number: int, *, at: str, actor: str, summary: str,
                   tokens: int | None, usd_micros: int | None) -> None:
        self.conn.execute(  # numbered by its rule, under the numbers lock
            "INSERT INTO updates(task, at, actor, summary, tokens, usd_micros)"
            " VALUES (%s, %s, %s, %s, %s, %s)", (number, at, actor, summary, tokens, usd_micros))

    def put_result(self, number: int, body: str, *, worker: str, instance: str,
                   session: str | None, outcome: str, threshold: int | None,
                   draft: str | None = None, receipts: str | None = None) -> None:
        self.conn.execute(  # one statement, no answer awaited: it travels with the next
            "WITH kept AS (UPDATE results SET body = %(body)s, worker = %(worker)s,"
            " instance = %(instance)s, session = %(session)s, outcome = %(outcome)s,"
            " threshold = %(threshold)s, version = version + 1, merge_commit = NULL,"
            " merged_by = NULL, draft = %(draft)s, receipts = %(receipts)s"
            " WHERE task = %(task)s RETURNING task)"
            " INSERT INTO results(task, body, worker, instance, session, outcome, threshold,"
            " draft, receipts) SELECT %(task)s::bigint, %(body)s::text, %(worker)s::text,"
            " %(instance)s::text, %(session)s::text, %(outcome)s::text,"
            " %(threshold)s::bigint, %(draft)s::text, %(receipts)s::text"
            " WHERE NOT EXISTS (SELECT 1 FROM kept)",
            {"task": number, "body": body, "worker": worker, "instance": instance,
             "session": session, "outcome": outcome, "threshold": threshold, "draft": draft,
             "receipts": receipts})

    def amend_result(self, number: int, body: str, receipts: str | None = None) -> int:
        return int(self._value("UPDATE results SET body = %s, version = version + 1,"
                               " receipts = %s WHERE task = %s RETURNING version",
                               (body, receipts, number)))

    def receipts(self, number: int) -> str | None:
        found = self._value("SELECT receipts FROM results WHERE task = %s", (number,))
        return None if found is None else str(found)

    def record_merge(self, number: int, commit: str, by: str) -> None:
        self.conn.execute("UPDATE results SET merge_commit = %s, merged_by = %s"
                          " WHERE task = %s", (commit, by, number))

    def add_confirmation(self, number: int, version: int, row: ConfirmationRow) -> None:
        self.conn.execute(
            "INSERT INTO confirmations(task, version, reviewer, instance, session, verdict,"
            " reason, at, counted, why) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (number, version, row.reviewer, row.instance, row.session, row.verdict, row.reason,
             row.at, int(row.counted), row.why))

    def reseal_requests(self, key: ChainKey) -> None:
        """Seal every kept first answer with ``key`` (a store taking its key)."""
        self._store_wide()
        rows = self._all("SELECT caller, id, verb, digest, answer, at FROM requests")
        for c, i, v, d, a, t in rows:
            self.conn.execute(
                "UPDATE requests SET digest = %s WHERE caller = %s AND id = %s",
                (sealed_digest(key, c, i, v, str(d).partition(".")[0], a, t), c, i))

    def save_request(self, row: RequestRow, *, prune_before: str) -> None:
        self.conn.execute("DELETE FROM requests WHERE at < %s", (prune_before,))
        self.conn.execute(
            "INSERT INTO requests(caller, id, verb, digest, answer, at)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (caller, id) DO UPDATE SET"
            " verb = excluded.verb, digest = excluded.digest, answer = excluded.answer,"
            " at = excluded.at",
            (row.caller, row.id, row.verb, sealed_digest(self.key, row.caller, row.id,
                                                         row.verb, row.digest, row.answer,
                                                         row.at), row.answer, row.at))

    def seal(self, seq: int, lock: int) -> None:
        """Journal a ``seal`` of row ``seq`` (:meth:`PostgresStore.seal`), under ``lock``
        (seals take turns), with the store's lock shared: the rows about no task are
        otherwise written by store-wide writes alone, which this lock keeps out."""
        self.conn.execute(f"SELECT pg_advisory_xact_lock({lock})")
        found = self._one("SELECT glink, (SELECT max(at) FROM journal) FROM journal"
                          " WHERE seq = %s", (seq,))
        if found is None or found[0] is None:
            return
        self._head(None, alone=False)
        self._event(None, str(found[1]), "guard", None, SEAL, {"seq": seq,
                                                               "link": str(found[0])})

    def record_event(self, number: int | None, *, at: str, actor: str, state: str | None,
                     reason: str, detail: dict[str, Any] | None = None) -> None:
        if number is None:  # a store-wide event
            self._store_wide()
        self._event(number, at, actor, state, reason, detail)

    def _event(self, number: int | None, at: str, actor: str, state: str | None,
               reason: str, detail: dict[str, Any] | None) -> None:
        """Journal an event about a task (or about none), linked to its chain."""
        text = dump(detail)
        chain = self._link(number, at, actor, state, state, None, reason, text)
        self.conn.execute(
            "INSERT INTO journal(task, at, actor, from_state, to_state, reason, detail, hash)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (number, at, actor, state, state, reason, text, chain))
        if number is not None:  # the task's head moves with it
            self._tasks_changed()
            self.conn.execute("UPDATE tasks SET chain = %s WHERE number = %s", (chain, number))

    def set_policy(self, key: str, value: str | None, *, at: str, by: str) -> None:
        self._store_wide()
        self._changed("policy")
        self.conn.execute("DELETE FROM policy WHERE key = %s", (key,))
        if value is not None:
            self.conn.execute("INSERT INTO policy(key, value, at, by) VALUES (%s, %s, %s, %s)",
                              (key, value, at, by))

    def require_plugin(self, row: RequiredPlugin) -> None:
        self._store_wide()
        self._changed("required_plugins")
        self.conn.execute("DELETE FROM required_plugins WHERE name = %s", (row.name,))
        self.conn.execute(
            "INSERT INTO required_plugins(name, kind, digest, settings, at, by)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (row.name, row.kind, row.digest, row.settings, row.at, row.by))

    def unrequire_plugin(self, name: str) -> bool:
        self._store_wide()
        self._changed("required_plugins")
        return self._one("DELETE FROM required_plugins WHERE name = %s RETURNING name",
                         (name,)) is not None

    def add_control(self, row: ControlRow) -> int:
        self._store_wide()
        self._changed("controls")
        return int(self._value(
            "INSERT INTO controls(kind, agent, instance, task, at, by, reason)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (row.kind, row.agent, row.instance, row.task, row.at, row.by, row.reason)))

    def lift_control(self, control: int, *, at: str, by: str) -> None:
        self._store_wide()
        self._changed("controls")
        self.conn.execute("UPDATE controls SET lifted_at = %s, lifted_by = %s WHERE id = %s",
                          (at, by, control))

    def lock_leases(self, *, agent: str | None = None, instance: str | None = None,
                    task: int | None = None) -> list[TaskRow]:
        clauses, args = ["lease_id IS NOT NULL"], []
        for clause, value in (("lease_holder = %s", agent),
                              (f"{instance_key('lease_instance')} = %s", instance),
                              ("number = %s", task)):
            if value is not None:
                clauses.append(clause)
                args.append(value)
        held = [self._held(r) for r in self._all(
            f"{LOCKED} WHERE {' AND '.join(clauses)} ORDER BY number FOR UPDATE", args)]
        return [r for r in held if r is not None]

    def set_enrolment(self, row: EnrolmentRow) -> None:
        self._store_wide()
        self._changed("enrolments")
        self.conn.execute("DELETE FROM enrolments WHERE agent = %s", (row.agent,))
        self.conn.execute(
            f"INSERT INTO enrolments({ENROLMENT}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (row.agent, row.projects, row.roles, row.rights, row.active, row.seq, row.at,
             row.by))

    def set_budget(self, row: BudgetRow | None, *, agent: str) -> None:
        self._store_wide()
        self._changed("budgets")
        self.conn.execute("DELETE FROM budgets WHERE agent = %s", (agent,))
        if row is not None:
            self.conn.execute(
                "INSERT INTO budgets(agent, tasks, tokens, usd_micros, at, by)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (row.agent, row.tasks, row.tokens, row.usd_micros, row.at, row.by))

    def add_token(self, row: TokenRow) -> None:
        self._store_wide()
        self.conn.execute(
            f"INSERT INTO tokens({TOKEN}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (row.id, row.agent, row.instance, row.rights, row.hash, row.created_at,
             row.expires_at, row.revoked_at, row.by))

    def revoke_token(self, token_id: str, at: str) -> None:
        self._store_wide()
        self.conn.execute("UPDATE tokens SET revoked_at = %s WHERE id = %s", (at, token_id))

    def add_watch(self, row: WatchRow, *, prune_before: str) -> None:
        self.conn.execute(  # a batch of the expired, oldest first, from the expiry index
            "DELETE FROM watches WHERE id IN (SELECT id FROM watches"
            ' WHERE expires_at COLLATE "C" < %s ORDER BY expires_at COLLATE "C" LIMIT %s)',
            (prune_before, PRUNE_BATCH))
        self.conn.execute(
            f"INSERT INTO watches({WATCH}, seal)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (row.id, row.caller, row.token, row.verb, row.number, row.asked, row.answer,
             row.created_at, row.updated_at, row.expires_at, row.poll_ms, row.cancelled_at,
             watch_seal(self.key, row)))

    def settle_watch(self, watch_id: str, *, at: str, answer: str | None = None,
                     cancelled: bool = False) -> None:
        settled = self._one(
            "UPDATE watches SET answer = CASE WHEN cancelled_at IS NULL"
            " THEN coalesce(%s, answer) ELSE answer END, updated_at = %s,"
            " cancelled_at = CASE WHEN %s AND cancelled_at IS NULL THEN %s"
            f" ELSE cancelled_at END WHERE id = %s RETURNING {WATCH}",
            (answer, at, cancelled, at, watch_id))
        if settled is not None:  # sealed as it now is
            self.conn.execute("UPDATE watches SET seal = %s WHERE id = %s",
                              (watch_seal(self.key, WatchRow(*settled)), watch_id))


def one_line(text: str) -> str:
    """libpq's text on one line: its lines (a hint is a line of its own, after a tab) joined
    by ``;``, runs of blanks as one, psycopg's ``connection failed:`` dropped."""
    said = "; ".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
    for prefix in ("connection failed: ", "connection is bad: "):
        said = said.removeprefix(prefix)
    return said


_NAMED = re.compile(r'(role|database|user) "([^"]*)"')
UNREACHABLE_WORDS = ("Connection refused", "No such file or directory", "timeout expired",
                     "could not translate host name", "failed to resolve host",
                     "Name or service not known", "Network is unreachable",
                     "No route to host", "could not connect to server")
"""libpq's words for a server that did not answer at all (its socket file is missing, its
port refuses, its host has no address, or it did not answer in time)."""
ACCESS_WORDS = ("no pg_hba.conf entry", "pg_hba.conf rejects", "is not permitted to log in",
                "permission denied for database", "does not have CONNECT privilege")
PASSWORD_WORDS = ("password authentication failed", "no password supplied",
                  "SCRAM authentication failed")


def connect_failure(exc: psycopg.Error, where: str) -> HiveliteError:
    """What a connection to ``where`` that failed means, in words, with a reason of its own:
    ``unreachable`` (no server answered: try again once it runs; ``503``), and for what
    only a change of the URL, the credentials or the server fixes (``422``):
    ``unknown_role``, ``unknown_database``, ``password_refused``, ``access_refused``. By
    the SQLSTATE when psycopg has one, else by libpq's text (a refused connection carries
    none: the server says why in words only); the text folded onto one line."""
    said = one_line(str(exc))
    state = getattr(exc, "sqlstate", None) or ""
    named = {kind: name for kind, name in _NAMED.findall(said)}
    role = named.get("role") or named.get("user")
    who = f"role {role!r}" if role else "the role the URL names"
    if state == "3D000" or ("database" in named and "does not exist" in said):
        database = named.get("database")
        what = f"database {database!r}" if database else "the database the URL names"
        return StoreError("unknown_database", f"the PostgreSQL server of {where} has no"
                          f" {what}: check the database in the URL, or create it"
                          f" (createdb NAME); nothing was written (server: {said})")
    if state == "28P01" or any(w in said for w in PASSWORD_WORDS):
        if "no password supplied" in said:
            words = f"asks a password of {who} and none was given"
        else:  # (a server that asks a password says so of a role it does not have, too)
            words = f"refused the password given for {who} (or has no such role)"
        return StoreError("password_refused", f"the PostgreSQL server of {where} {words}:"
                          " check the password in ~/.pgpass, $PGPASSWORD or the URL; nothing"
                          f" was written (server: {said})")
    if "role" in named and "does not exist" in said:
        return StoreError("unknown_role", f"the PostgreSQL server of {where} has no {who}:"
                          " check the user in the URL (postgresql://USER@HOST/DBNAME), or"
                          f" create the role (CREATE ROLE NAME LOGIN); nothing was written"
                          f" (server: {said})")
    if state in ("28000", "42501") or any(w in said for w in ACCESS_WORDS):
        return StoreError("access_refused", f"the PostgreSQL server of {where} does not let"
                          f" {who} connect (its pg_hba.conf, the role's LOGIN or the"
                          " database's CONNECT privilege): ask its administrator; nothing"
                          f" was written (server: {said})")
    if any(w in said for w in UNREACHABLE_WORDS):
        return StoreBusy("unreachable", f"no PostgreSQL server answers for {where}: is it"
                         " running, and do the URL's host and port (or ?host= for a unix"
                         f" socket's folder) name it? Nothing was written (libpq: {said})")
    return StoreBusy("unreachable", f"cannot connect to {where} ({said}); nothing was"
                     " written")


class PostgresStore:
    """One hivelite store in a PostgreSQL database; a connection per thread."""

    statements: frozenset[str] = STATEMENTS

    def __init__(self, url: str, *, create: bool = True, upgrade: bool = True) -> None:
        if not is_url(url):
            raise StoreError("not_a_url", f"a PostgreSQL store is named by a URL"
                             f" (postgresql://user@host/dbname), not {url!r}")
        self.url = url
        self._where = shown(url)
        self._libpq, self.schema, self._role = split_url(url)
        self._write_lock = write_lock(self.schema)
        self._numbers_lock = numbers_lock(self.schema)
        self._seal_lock = _lock_key(f"hivelite-seal:{self.schema}")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: weakref.WeakSet[_Conn] = weakref.WeakSet()
        self._closed = False
        self._created = False
        self.tampered: str | None = None
        """What differs between the store's rules in the catalogs and the code's
        (:mod:`.pg_guard`); writes are refused."""
        self.guard = Guard(self.schema)
        self.key: ChainKey | None = None
        """The owner's key that seals the journal: found (or made) by the first write, or
        by :meth:`chain_key`."""
        self._key_named = False
        """Whether this store names :attr:`key` (a write has checked, or recorded, it)."""
        conn = self.conn
        version = self._version(conn)
        if version is None:
            if not create:
                raise StoreError("no_store", f"no hivelite store in {self._where}; create it"
                                 f" first: hivelite --db {self._where} init --owner NAME")
            self._created = self._install(conn)
        elif version > SCHEMA_VERSION:
            raise StoreError("newer_schema", f"{self._where} has schema version {version},"
                             f" newer than this hivelite understands ({SCHEMA_VERSION});"
                             " upgrade hivelite. Left it untouched")
        elif version < SCHEMA_VERSION:
            if not upgrade:  # a look at the store as it is (doctor): no guard to hold
                return  # an older version's rules to
            self._upgrade(conn)
        try:
            self.tampered = self.guard.check(conn)
        except psycopg.Error as exc:
            _reraise(_failure(exc, self._where), exc)

    # -- the contract's properties --------------------------------------------

    @property
    def location(self) -> str:
        return self._where

    @property
    def place(self) -> str:
        """Where the store lives, as its place record names it (server, database and
        schema; no password, no role)."""
        return f"{shown(self._libpq)}#{self.schema}"

    @property
    def created(self) -> bool:
        return self._created

    @property
    def schema_version(self) -> int:
        return int(self._version(self.conn) or 0)

    def tables(self) -> PostgresTables:
        """Raw access to the kept tables, for ``hivelite export`` and ``import``
        (``pg_tables.PostgresTables``)."""
        from .pg_tables import PostgresTables

        return PostgresTables(self)

    def chain_sound(self) -> bool:
        """Whether every journal row follows from the one before it (the hash chain)."""
        with self.read() as tx:
            identity = tx.meta("store_id")
            rows = tx._all(f"SELECT seq, hash, {CONTENT} FROM journal ORDER BY seq")
            split = tx.tasks_from()
        key = load_key(identity) if identity else None
        return next(iter(broken_links(identity, rows, key, split)), None) is None

    # -- connections -------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self._libpq, autocommit=True,
                                   connect_timeout=CONNECT_TIMEOUT_S, application_name="hivelite")
        except psycopg.Error as exc:
            raise connect_failure(exc, self._where) from None
        if self._role is not None:  # the tables' owner, for installing and upgrading
            try:
                conn.execute(f'SET ROLE "{self._role}"')
            except psycopg.Error as exc:
                conn.close()
                raise StoreError("role_refused", f"{self._where}: cannot act as role"
                                 f" {self._role} ({one_line(str(exc))})") from None
        conn.execute(f'SET search_path = "{self.schema}", pg_temp')
        return conn

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """This thread's connection (made on the thread's first use, or again after the
        last one was lost)."""
        if self._closed:
            raise StoreError("store_closed", f"the store {self._where} has been closed")
        held: _Conn | None = getattr(self._local, "conn", None)
        if held is None or held.conn.closed or held.conn.broken:
            held = _Conn(self._connect())
            weakref.finalize(held, _close_quietly, held.conn)
            with self._lock:
                self._conns.add(held)
            self._local.conn = held
        return held.conn

    def _version(self, conn: psycopg.Connection[Any]) -> int | None:
        """The store's schema version, or None when the database holds no store."""
        try:
            row = conn.execute(
                "SELECT max(version) FROM schema_versions"
                if self._installed(conn) else "SELECT NULL").fetchone()
        except psycopg.Error as exc:
            _reraise(_failure(exc, self._where), exc)
        return None if row is None or row[0] is None else int(row[0])

    def _installed(self, conn: psycopg.Connection[Any]) -> bool:
        return conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                            (f'"{self.schema}".schema_versions',)).fetchone() == (True,)

    def _install(self, conn: psycopg.Connection[Any]) -> bool:
        """Make the store's schema; False when another opener made it meanwhile."""
        with self._transaction(conn):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._write_lock,))
            if self._installed(conn):
                return False
            if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                            (self.schema,)).fetchone() is not None:
                raise StoreError("schema_taken", f"{self._where}: schema {self.schema} exists"
                                 " and holds no hivelite store; name another (?schema=NAME)")
            conn.execute(f'CREATE SCHEMA "{self.schema}"')
            # each rule function keeps this path (SET search_path FROM CURRENT): the store's
            # schema, and a session's temporary tables last, never first
            conn.execute(f'SET LOCAL search_path = "{self.schema}", pg_temp')
            conn.execute("CREATE TABLE schema_versions(version bigint PRIMARY KEY,"
                         " name text NOT NULL)")
            for migration in MIGRATIONS:
                self._apply(conn, migration.version, migration.name, migration.sql)
        return True

    def _upgrade(self, conn: psycopg.Connection[Any]) -> None:
        try:
            with self._transaction(conn):
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._write_lock,))
                current = self._version(conn) or 0
                for migration in MIGRATIONS:
                    if migration.version > current:
                        self._apply(conn, migration.version, migration.name, migration.sql)
        except psycopg.Error as exc:  # a schema not as its recorded version says
            raise StoreError("upgrade_failed", f"{self._where} could not be upgraded to"
                             f" version {SCHEMA_VERSION}: {str(exc).strip().splitlines()[0]};"
                             " nothing was changed. Its schema is not what its recorded"
                             " version says: run hivelite doctor") from None

    @staticmethod
    def _apply(conn: psycopg.Connection[Any], version: int, name: str, sql: str) -> None:
        conn.execute(sql.encode("utf-8"))  # bytes: a script, no parameters
        conn.execute("INSERT INTO schema_versions(version, name) VALUES (%s, %s)",
                     (version, name))

    # -- waking the workers that wait for work ------------------------------------

    @property
    def channel(self) -> str:
        """The channel a write that makes tasks ready notifies (``LISTEN``/``NOTIFY``;
        one per store: a channel name is at most 63 bytes, a schema name may be 63)."""
        return "hivelite_" + hashlib.sha256(self.schema.encode()).hexdigest()[:16]

    def listen(self) -> None:
        """Start listening on this thread (its own connection, beside the one it writes
        with) for the store's notifications; call it before looking for work, so nothing
        routed after the look is missed. The notifications this thread received before
        (while it worked, say) are dropped: the look that follows sees their tasks."""
        conn = self._listener()
        try:
            for _ in conn.notifies(timeout=0):
                pass
        except psycopg.Error as exc:
            _reraise(_failure(exc, self._where), exc)

    def unlisten(self) -> None:
        """Stop listening on this thread: its listening connection is closed (a thread
        that no longer waits would otherwise keep every notification unread, holding the
        server's notification queue back)."""
        held: _Conn | None = getattr(self._local, "listener", None)
        self._local.listener = None
        if held is not None:
            with self._lock:
                self._conns.discard(held)
            _close_quietly(held.conn)

    def _listener(self) -> psycopg.Connection[Any]:
        """This thread's listening connection (made, and ``LISTEN`` sent, on first use)."""
        held: _Conn | None = getattr(self._local, "listener", None)
        if held is not None and not held.conn.closed and not held.conn.broken:
            return held.conn
        held = _Conn(self._connect())
        weakref.finalize(held, _close_quietly, held.conn)
        with self._lock:
            self._conns.add(held)
        held.conn.execute(f'LISTEN "{self.channel}"')
        self._local.listener = held
        return held.conn

    def wait_for_work(self, timeout: float) -> bool:
        """Wait until a write commits that makes a task ready (a move to ``routed``), or
        ``timeout`` seconds pass: True when woken (some task became ready since
        :meth:`listen`, maybe not one this caller may claim: look again), False on the
        timeout. A worker whose queue is empty waits here instead of polling; the
        notification comes with the commit (``pg_notify`` in the write's transaction)."""
        conn = self._listener()
        try:
            for _ in conn.notifies(timeout=max(0.0, timeout), stop_after=1):
                return True
        except psycopg.Error as exc:
            _reraise(_failure(exc, self._where), exc)
        return False

    def close(self) -> None:
        self._closed = True
        with self._lock:
            held, self._conns = list(self._conns), weakref.WeakSet()
        for item in held:
            _close_quietly(item.conn)

    def chain_key(self) -> ChainKey | None:
        """The owner's key that seals the journal: the one the writes use, else the key
        the store names (:func:`.keys.named_key`; None: it names none, and there is none
        here)."""
        if self.key is not None:
            return self.key
        with self.read() as tx:
            identity, named = tx.meta("store_id"), tx.meta(META_KEY)
        self.key = named_key(identity, named, self._where, self.place)
        return self.key  # the reads check kept answers with it from now on

    def discard(self) -> None:
        """Remove the store this opener has just made (its schema), then close."""
        if self._created and not self._closed:
            with suppress(psycopg.Error):
                self.conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        self.close()

    # -- transactions --------------------------------------------------------

    @contextmanager
    def alone(self) -> Iterator[psycopg.Connection[Any]]:
        """A transaction under the store's own lock, held alone (no write runs beside
        it): an import's (:meth:`.pg_tables.PostgresTables.bulk`)."""
        with self._transaction(self.conn):
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._write_lock,))
            yield self.conn

    @contextmanager
    def _transaction(self, conn: psycopg.Connection[Any],
                     begin: str = "BEGIN") -> Iterator[psycopg.Cursor[Any]]:
        """A transaction begun with ``begin`` (one round trip: it may hold several
        statements); yields the cursor of their results."""
        try:
            began = conn.execute(begin)
        except psycopg.Error as exc:  # the lock may have failed after BEGIN: end it too
            mapped = _failure(exc, self._where)
            _rollback(conn)
            _reraise(mapped, exc)
        try:
            yield began
        except psycopg.Error as exc:
            mapped = _failure(exc, self._where)
            _rollback(conn)
            _reraise(mapped, exc)
        except BaseException:
            _rollback(conn)
            raise
        else:
            try:
                conn.execute("COMMIT")
            except psycopg.Error as exc:
                mapped = _failure(exc, self._where)
                _rollback(conn)
                _reraise(mapped, exc)

    def transact(self, job: Callable[[PostgresTx], T], *,
                 about: str | int | Pick | None = None) -> T:
        """``job`` in one :meth:`write` of its own: writes on different tasks run side by
        side here, each on its thread's connection (no group commit)."""
        with self.write(about=about) as tx:
            return job(tx)

    @contextmanager
    def write(self, *, about: str | int | Pick | None = None) -> Iterator[PostgresTx]:
        """One write transaction: commit on success, roll back on any error; a trigger's
        ``code:reason`` comes out as the matching hivelite error.

        **Locks.** The write holds the store's own lock shared from its ``BEGIN`` (alone,
        for a write of store-wide rows: :data:`.contract.STORE_WIDE`, and the store's
        first writes, which name its owner and its key), the rows it changes ``FOR
        UPDATE`` (each task's row holds its chain's head), and from its first journal or
        usage row to its commit the numbers lock, which the rule numbering the row takes.
        Writes on different tasks never wait for each other (docs/postgres.md,
        "Concurrency, round trips and the chain"). A write ``about`` a task its verb
        names takes that task's row with its ``BEGIN``, in the same round trip.

        The transaction runs in psycopg's pipeline mode: a statement whose answer the
        write does not need (an ``UPDATE``, an ``INSERT``) is sent with the next one
        whose answer it needs, or with the ``COMMIT``; a failure of either comes out at
        that point, and ends the write as before (docs/postgres.md, "Round trips")."""
        conn = self.conn
        if conn.info.transaction_status != TransactionStatus.IDLE or getattr(
                self._local, "writing", False):
            raise UnexpectedError("nested_write", f"a write to {self._where} began inside"
                                  " another read or write of this thread")
        begun = False
        self._local.writing = True
        tx: PostgresTx | None = None
        try:
            with conn.pipeline():
                tx = self._begin(conn, wide=STORE_WIDE.get(), about=about)
                if not tx.wide and not self._key_named and (
                        tx.meta(META_KEY) is None or tx.meta("owner") is None):
                    conn.execute("ROLLBACK")  # the store's first writes: store-wide rows
                    tx = self._begin(conn, wide=True, about=about)
                named = self._key_named or tx.meta(META_KEY) is not None
                key = tx.key = self.key if self._key_named and self.key else key_for_writes(
                    tx.meta("store_id"), tx.meta(META_KEY), tx.last_seq(),
                    lambda fingerprint: tx.set_meta(META_KEY, fingerprint), self._where,
                    self.place)
                if not named:  # the store takes its key now
                    seal_what_came_before(tx, key)
                begun = True
                yield tx
                ends = tx.journal_end() if tx.linked else None  # (for the seal: no round
                if tx.routed:  # delivered at the commit, never before (and never on a
                    conn.execute("SELECT pg_notify(%s, %s)",  # rollback); no round trip:
                                 (self.channel, ",".join(map(str, sorted(tx.routed)))))
                conn.execute("COMMIT")  # it travels with the COMMIT
        except psycopg.Error as exc:
            mapped = _failure(exc, self._where)
            _rollback(conn)
            if not begun and isinstance(exc, _MISSING):  # a read sent ahead met a table
                # no longer there: the guard names what changed
                mapped = self._tampered(exc) or mapped
            _reraise(mapped, exc)
        except BaseException:
            _rollback(conn)
            raise
        finally:
            self._local.writing = False
        if not self._key_named:  # (the write that named it, or this process's first)
            record_keyed(key)
        self.key, self._key_named = key, True  # named in the store now: every write seals
        if ends is not None:
            first, last = ends()
            if last // SEAL_EVERY > first // SEAL_EVERY:
                self.seal(last)

    def seal(self, seq: int) -> None:
        """Journal a ``seal`` of row ``seq`` (:mod:`.chain`): a row about no task naming
        the row's seq and global link, sealed with the owner's key as every row is. A
        write whose rows pass a multiple of :data:`SEAL_EVERY` makes one after its commit:
        with the key, a row changed, added or removed anywhere before it disagrees with
        it. Seals take turns with each other and with store-wide writes (the rows about
        no task are one chain); a seal that cannot be written now is left to the next."""
        try:
            with self.write() as tx:
                tx.seal(seq, self._seal_lock)
        except (StoreBusy, StoreError):
            return

    def _begin(self, conn: psycopg.Connection[Any], *, wide: bool,
               about: str | int | Pick | None = None) -> PostgresTx:
        """Begin a write: one round trip with the BEGIN, the store's lock (shared, or alone
        when ``wide``; a literal integer, no parameter), the stamp of the store's rules
        (prepared: planning it would cost more than running it), which the guard holds to
        its last full check, the reads nearly every write makes first, and the row of the
        task the write is ``about`` (when its verb knows it)."""
        conn.execute("BEGIN")
        conn.execute(f"SELECT pg_advisory_xact_lock{'' if wide else '_shared'}"
                     f"({self._write_lock})")
        tx = PostgresTx(conn, locks=(self.schema, self._write_lock, self._numbers_lock),
                        wide=wide)
        tx.first(conn.execute(first_sql(self.guard.sql), prepare=True))
        if about is not None:
            tx.take_first(about)
        problem = self.guard.before_write(conn, tx.stamp())
        if problem is not None:
            self.tampered = problem
            raise StoreError("schema_tampered", f"{self._where} does not have the rules"
                             f" hivelite made ({problem}); writes are refused until it is"
                             " repaired. Run: hivelite doctor")
        self.tampered = None
        return tx

    def _tampered(self, met: psycopg.Error) -> StoreError | None:
        """The guard's full check, after a write met a missing table or column (``met``:
        what the database said, which names it)."""
        try:
            problem = self.tampered = self.guard.check(self.conn)
        except psycopg.Error:
            return None
        if problem is None:
            return None
        said = met.diag.message_primary or str(met)
        return StoreError("schema_tampered", f"{self._where} does not have the rules"
                          f" hivelite made ({problem}; the database said: {said});"
                          " writes are refused until it is repaired. Run: hivelite doctor")

    @contextmanager
    def read(self) -> Iterator[PostgresTx]:
        """A consistent snapshot for several reads (joins this thread's open write)."""
        conn = self.conn
        if (getattr(self._local, "writing", False)  # (its pipeline may not be in sync)
                or conn.info.transaction_status == TransactionStatus.INTRANS):
            yield PostgresTx(conn, self.key)
            return
        _rollback(conn)  # a transaction an error left behind is over
        # pipeline mode: the BEGIN travels with the snapshot's first query
        self._local.writing = True  # (a read inside it joins it, as inside a write)
        try:
            with conn.pipeline():
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield PostgresTx(conn, self.key)
                conn.execute("COMMIT")
        except psycopg.Error as exc:
            mapped = _failure(exc, self._where)
            _rollback(conn)
            _reraise(mapped, exc)
        except BaseException:
            _rollback(conn)
            raise
        finally:
            self._local.writing = False


class _Conn:
    """Holds one thread's connection; dropped with the thread's locals when it ends."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn


def _close_quietly(conn: psycopg.Connection[Any]) -> None:
    with suppress(psycopg.Error):
        conn.close()


def _rollback(conn: psycopg.Connection[Any]) -> None:
    if conn.closed or conn.broken:
        return
    with suppress(psycopg.Error):
        if conn.info.transaction_status != TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
