"""The SQLite store: opening a file safely, frozen migrations, transactions and every query.

Each thread gets its own connection (made on first use, configured the same
way), so a ``Hive`` shared by threads never mixes one thread's transaction
into another's.
"""

from __future__ import annotations

import errno
import heapq
import itertools
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar

import apsw

from ..core.errors import (
    HiveliteError,
    InvalidInput,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreReadonly,
    UnexpectedError,
    from_trigger,
)
from ..core.protocol import PRIORITIES
from . import mounts, quickcheck
from .chain import CONTENT, TOKEN_EVENTS, link, seal_what_came_before
from .columns import (
    DECISION_OF,
    DECISIONS,
    ENROLMENT,
    JOURNAL,
    PRUNE_BATCH,
    QUESTION_OF,
    SELECT_TASK,
    SUBMITTED_OF,
    TASK_COLUMNS,
    TOKEN,
    VIEW_OF,
    WATCH,
    ViewRows,
    dump,
    journal_row,
    journal_rows,
    pick_where,
    usage_sum,
)
from .contract import STATEMENTS
from .doctor import schema_problem
from .group import Group, Turn
from .keys import (
    META_KEY,
    ChainKey,
    key_for_writes,
    named_key,
    read_watch,
    record_keyed,
    sealed_digest,
    unsealed,
    watch_seal,
)
from .known import NO_LEASE, Known
from .migrations import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from .mounts import network_filesystem
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
from .schema import RANK, READY, instance_key, via

if TYPE_CHECKING:
    from .contract import Pick
    from .transfer import SqliteTables

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 10_000
T = TypeVar("T")

POLL_FIRST, POLL_MOST = 0.05, 1.0
"""How long a worker waiting for work sleeps before it looks again: first, and at most
(seconds; :meth:`SqliteStore.wait_for_work`)."""
MAX_ROWID = (1 << 63) - 1
EPOCH_DAY = date(1970, 1, 1).toordinal()


def day_of(at: str) -> int:
    """The UTC day (days since 1970-01-01) of a stored time (``format_ts``): what keys a
    kept answer (migration 14)."""
    return date.fromisoformat(at[:10]).toordinal() - EPOCH_DAY
DatabaseError = apsw.Error
"""SQLite's own failures that no hivelite error stands for (the CLI's last net)."""
Synchronous = Literal["NORMAL", "FULL"]


HISTORY = ("WITH RECURSIVE history(seq) AS (SELECT last_seq FROM tasks WHERE number = {task}"
           " UNION ALL SELECT j.prev FROM journal j JOIN history h ON j.seq = h.seq"
           " WHERE j.prev IS NOT NULL) ")
"""A task's journal rows (their seqs), walked back from its head along each row's link to
the task's row before it (migration 13): a task's history costs its own rows, and a move
keeps no index on ``journal(task, seq)`` up to date."""
LINKED = "j.seq IN history"
"""A task's journal rows (``j``) as :data:`HISTORY` finds them."""
VIA = via("j", "j.from_state")
"""A journal row's via (migration 19), as SQLite reads it."""
TASK_JOURNAL = HISTORY.format(task="?") + JOURNAL + f" WHERE {LINKED} ORDER BY j.seq"
QUESTION = HISTORY.format(task="?") + QUESTION_OF.format(mine=LINKED)
DECISION = HISTORY.format(task="?") + DECISION_OF.format(mine=LINKED, via=VIA)
SUBMITTED = HISTORY.format(task="?") + SUBMITTED_OF.format(mine=LINKED, via=VIA)
EXPIRED = (HISTORY.format(task="?") + "SELECT json_extract(j.detail, '$.expired_at'),"
           " json_extract(j.detail, '$.fencing_token') FROM journal j WHERE"
           f" {LINKED} AND j.actor = 'clock' AND j.reason = 'expired' ORDER BY j.seq DESC"
           " LIMIT 1")
"""A task's last expired claim."""
TASK_VIEW = VIEW_OF.format(columns="{columns}", creator=(
    "(" + HISTORY.format(task="t.number") + "SELECT actor FROM journal"
    " WHERE seq = (SELECT min(seq) FROM history))"))
"""``columns.VIEW`` with the task's creator found through the links."""

UNVETOED = ("NOT EXISTS (SELECT 1 FROM controls WHERE lifted_at IS NULL AND kind = 'veto'"
            " AND agent = ? AND task = tasks.number)")
"""No live veto of the assignee (its one ``?``) on the task: ``next`` passes over the tasks
the owner vetoed it on (the rules refuse every other lease a control forbids)."""
UNBOUND = ("NOT EXISTS (SELECT 1 FROM controls WHERE lifted_at IS NULL"
           " AND (agent = ? OR instance = ? OR (agent IS NULL AND instance IS NULL))"
           " AND (kind != 'veto' OR task = tasks.number))")
"""No live control binds the holder (its two ``?``: the holder and its instance) on the
task: no stop or hold of it, of its instance or of everyone, no veto of it on this task (a
veto elsewhere leaves its claims here alone). Outside it the full run refuses, in words."""
HELD_IN_SCOPE = "lease_scope IS (SELECT seq FROM enrolments WHERE agent = ? AND active)"
"""A live claim still under its holder's enrolment (its one ``?``: the holder): taken under
the one in force and active, or under none when the holder has none (a changed or ended
enrolment: the full run says which, and lets the claim be given back)."""


_OUR_TABLES = frozenset({"meta", "moves", "tasks", "packets", "journal"})


def _check_header(path: Path) -> None:
    """Refuse a file that is not SQLite before SQLite ever opens it (it stays untouched)."""
    with path.open("rb") as handle:
        head = handle.read(len(SQLITE_HEADER))
    if head and head != SQLITE_HEADER:
        raise StoreError("not_a_store", f"{path} is not an SQLite database; left it untouched")


def _create_private(path: Path, parents: bool = False) -> bool:
    """Create the store file readable by its owner only; False if another opener won.
    Its folder must exist unless ``parents`` (a mistyped path is an error, not a new tree
    of folders).

    Through a symlink whose target does not exist yet, the target is created (0600 too):
    ``O_EXCL`` refuses any symlink, and SQLite would otherwise make it with the umask's
    mode."""
    target = Path(os.path.realpath(path))
    if parents:
        target.parent.mkdir(parents=True, exist_ok=True)
    elif not target.parent.is_dir():
        raise StoreError("no_folder", f"no folder {target.parent} for the store {path}: check"
                         " the path, or have it made (hivelite --db PATH init --parents, or"
                         " Hive.open(path, parents=True))")
    try:
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
_NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def _readonly_message(path: Path) -> str:
    """Which part of the store cannot be written: the file, or the folder where SQLite
    keeps the ``-wal`` and ``-shm`` files beside it."""
    folder = path.absolute().parent
    if path.exists() and not os.access(path, os.W_OK):
        what = f"{path} is read-only (the file or its filesystem)"
    elif not os.access(folder, os.W_OK):
        what = (f"the folder {folder} is read-only (the folder or its filesystem); SQLite"
                f" keeps {path.name}-wal and {path.name}-shm beside the store")
    else:
        what = f"{path} cannot be written"
    return f"{what}; nothing was written"


def _os_failure(exc: OSError, path: Path) -> HiveliteError | None:
    """A refused file operation on the store's path as the hivelite error it stands for."""
    if exc.errno in _NO_SPACE:
        return StoreFull("disk_full", f"the disk holding {path} is full ({exc.strerror});"
                         " nothing was written. Free some space and try again")
    if exc.errno in _NOT_WRITABLE:
        return StoreReadonly(f"cannot create {exc.filename or path} ({exc.strerror});"
                             " nothing was written")
    return None


def _reraise(failure: HiveliteError | None, exc: BaseException) -> NoReturn:
    """Raise the hivelite error ``exc`` stands for (caused by it), else ``exc`` itself."""
    if failure is None:
        raise exc
    raise failure from exc


def _sqlite_failure(exc: apsw.Error, path: Path, conn: apsw.Connection | None = None
                    ) -> HiveliteError | None:
    """An SQLite failure of the file itself (not of a statement) as a hivelite error:
    busy, full, read-only, damaged, or an I/O error; None for anything else."""
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StoreBusy("busy", f"another program holds {path} locked, for more than"
                         f" {BUSY_TIMEOUT_MS // 1000} s ({exc}); try again")
    os_errno = 0
    if isinstance(exc, apsw.IOError) and conn is not None:
        with suppress(apsw.Error):
            os_errno = int(conn.system_errno)
    if isinstance(exc, apsw.FullError) or os_errno in _NO_SPACE:
        return StoreFull("disk_full", f"the disk holding {path} is full ({exc}); nothing was"
                         " written. Free some space and try again")
    if isinstance(exc, apsw.ReadOnlyError):
        return StoreReadonly(f"{_readonly_message(path)} ({exc})")
    if isinstance(exc, apsw.CantOpenError):
        folder = path.absolute().parent
        if not (os.access(path, os.W_OK) and os.access(folder, os.W_OK)):
            return StoreReadonly(f"{_readonly_message(path)} ({exc})")
        return StoreError("cant_open", f"SQLite cannot open {path} ({exc})")
    if isinstance(exc, apsw.CorruptError | apsw.NotADBError):
        return StoreCorrupt(f"{path} is damaged ({exc}); left it untouched")
    if isinstance(exc, apsw.IOError):
        return UnexpectedError("io_error", f"reading or writing {path} failed ({exc}"
                               + (f", {os.strerror(os_errno)}" if os_errno else "") + ")")
    return None


SEARCH = ("(instr(lower(t.assignee), ?) > 0 OR EXISTS (SELECT 1 FROM packets p"
          " WHERE p.task = t.number AND json_valid(p.body)"
          " AND instr(lower(json_extract(p.body, '$.task')), ?) > 0)"
          " OR EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(t.labels) THEN t.labels"
          " END) WHERE instr(lower(value), ?) > 0))")
"""A listing's ``search``: the text in the title, the assignee or a label (a packet or
labels that are not JSON match on the assignee alone, never fail the page)."""


class SqliteTx(ViewRows):
    """One transaction (or snapshot) on one connection: the contract's reads and writes."""

    __slots__ = ("_start", "conn", "key", "known")

    def __init__(self, conn: apsw.Connection, known: Known | None = None,
                 key: ChainKey | None = None) -> None:
        self.conn = conn
        self.known = known
        """In a write: what the file held when this write began, as far as this
        connection knows it (see :mod:`.known`); filled in as the write reads."""
        self.key = key
        """In a write: the owner's key that seals each journal row it adds."""
        self._start: int | None = None
        """In a write: the journal's last seq before its first row (None: none yet)."""

    def _tip(self) -> tuple[int, str]:
        """The journal's newest row (seq and hash), or (0, the store's identity)."""
        known = self.known
        if known is not None and known.tip is not None:
            return known.tip
        row = self.conn.execute(
            "SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
        tip = ((int(row[0]), row[1] or "") if row is not None
               else (0, self.meta("store_id") or ""))
        if known is not None:
            known.tip = tip
        return tip

    def _link(self, *content: Any) -> tuple[int, str]:
        """The seq and hash of the journal row about to be written with ``content``
        (``CONTENT``'s columns), which becomes the chain's new tip. Under the write lock:
        nobody else writes the journal until this transaction ends, and each link is one
        row. The seq is named to the store with the row (a move's head: migration 13)."""
        seq, before = self._tip()
        if self._start is None:
            self._start = seq
        after = link(before, content)
        if self.key is not None:
            after = self.key.seal(seq + 1, after)
        if self.known is not None:
            self.known.tip = (seq + 1, after)
        return seq + 1, after

    # -- reading -------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        value = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).get
        return None if value is None else str(value)

    def task(self, ref: str | int) -> TaskRow | None:
        where, key = task_key(ref)
        if where is None:
            return None
        row = self.conn.execute(f"{SELECT_TASK} WHERE {where} = ?", (key,)).fetchone()
        return TaskRow(*row) if row else None

    def bodies(self, number: int) -> Bodies:
        row = self.conn.execute(
            "SELECT p.body, r.body, c.body FROM packets p"
            " LEFT JOIN results r ON r.task = p.task"
            " LEFT JOIN checkpoints c ON c.task = p.task WHERE p.task = ?",
            (number,),
        ).fetchone()
        if row is None:
            raise LookupError(f"task {number} has no packet")
        return Bodies(row[0], row[1], row[2])

    def task_with_bodies(self, ref: str | int) -> tuple[TaskRow, Bodies] | None:
        row = self.task(ref)
        return None if row is None else (row, self.bodies(row.number))

    def dependencies(self, number: int) -> list[Dependency]:
        return [Dependency(*r) for r in self.conn.execute(
            "SELECT t.number, t.id, t.state FROM deps d JOIN tasks t ON t.number = d.on_task"
            " WHERE d.task = ? ORDER BY d.on_task", (number,))]

    def numbers_of(self, refs: Sequence[str]) -> dict[str, tuple[int, str]]:
        found: dict[str, tuple[int, str]] = {}
        for ref in refs:
            for number, task_id in self.conn.execute(
                    "SELECT number, id FROM tasks WHERE id = ?1"
                    " OR (?1 GLOB '[0-9]*' AND ?1 NOT GLOB '*[^0-9]*' AND length(?1) <= 18"
                    " AND number = CAST(?1 AS INTEGER)) ORDER BY id = ?1 DESC LIMIT 1",
                    (ref,)):
                found[ref] = (int(number), str(task_id))
        return found

    def next_ready(self, assignee: str, *, project: str | None = None,
                   label: str | None = None, skip: Sequence[int] = (),
                   projects: Sequence[str] | None = None,
                   roles: Sequence[str] = ()) -> TaskRow | None:
        number = self.conn.execute(  # from the queue index alone: no row read but the one
            *_queue_pick("number", assignee, project, label, skip, projects, roles)).get
        return None if number is None else self.task(int(number))

    def take_next(self, lease: Lease, *, at: str, project: str | None = None,
                  label: str | None = None, skip: Sequence[int] = ()) -> Taken | None:
        sql, args = _queue_pick("number, id, lease_token", lease.holder, project, label,
                                skip, lease.projects, lease.roles, unvetoed=True)
        return self._take(self.conn.execute(sql, args).fetchone(), lease, at)

    def take_task(self, ref: str | int, lease: Lease, *, at: str) -> Taken | None:
        where, key = task_key(ref)
        if where is None:
            return None
        # a task's role: an enrolled holder's the rules decide; one with none takes none
        roles = "" if lease.scope is not None else " AND role IS NULL"
        return self._take(self.conn.execute(
            f"SELECT number, id, lease_token FROM tasks WHERE {where} = ? AND assignee = ?"
            f" AND {READY}{roles}", (key, lease.holder)).fetchone(), lease, at)

    def take_paused(self, ref: str | int, lease: Lease, *, at: str) -> Taken | None:
        where, key = task_key(ref)
        if where is None:
            return None
        # the update takes a waiting task alone; the rules refuse one that is not the
        # holder's or waits on the owner (the full run then says which)
        return self._take(self.conn.execute(
            f"SELECT number, id, lease_token FROM tasks WHERE {where} = ?", (key,)
        ).fetchone(), lease, at, source="waiting")

    def _take(self, picked: tuple[Any, ...] | None, lease: Lease, at: str, *,
              source: str = "routed") -> Taken | None:
        """The claim of a ready task ``picked`` (its number, id and token): routed ->
        accepted under ``lease``, journaled and chained (the rules refuse a lease the
        owner's controls or the holder's enrolment forbid);
        or, ``source`` waiting (a paused task), its resumption: waiting -> working."""
        if picked is None:
            return None
        number, task_id, token = int(picked[0]), str(picked[1]), int(picked[2]) + 1
        target, reason = ("accepted", "claimed") if source == "routed" else (
            "working", "resumed")
        detail = dump({"fencing_token": token, "instance": lease.instance,
                       "session": lease.session, "expires_at": lease.expires})
        seq, chain = self._link(number, at, lease.holder, source, target, None, reason,
                                detail)
        if source == "routed" and self.budgets(lease.holder):  # a claim of the day, counted
            self.conn.execute("UPDATE claim_counts SET claims = claims + 1 WHERE agent = ?",
                              (lease.holder,))  # (its row begun by the charge's spend)
        if self.conn.execute(
                "UPDATE tasks SET state = ?, waiting_on = NULL, lease_id = ?,"
                " lease_token = ?, lease_holder = ?, lease_instance = ?, lease_session = ?,"
                " lease_expires = ?, updated_at = ?, actor = ?, reason = ?,"
                " detail = ?, chain = ?, lease_scope = ?, last_seq = ?"
                " WHERE number = ? AND state = ? RETURNING number",
                (target, lease.lease_id, token, lease.holder, lease.instance, lease.session,
                 lease.expires, at, lease.holder, reason, detail, chain, lease.scope, seq,
                 number, source)).fetchone() is None:
            return None  # moved since it was picked: the write path undoes the link
        if self.known is not None:
            self.known.lease_until(lease.expires)
        return Taken(number, task_id, token, seq)

    def held(self, ref: str | int, *, lease_id: str, token: int, holder: str,
             instance: str, at: str, scoped: bool = True) -> Held | None:
        where, key = task_key(ref)
        if where is None:
            return None
        scope, args = (f" AND {HELD_IN_SCOPE}", (holder,)) if scoped else ("", ())
        row = self.conn.execute(
            f"SELECT number, id, state, lease_session, project FROM tasks WHERE {where} = ?"
            " AND lease_id = ? AND lease_token = ? AND lease_holder = ? AND lease_instance = ?"
            f" AND lease_expires > ? AND state IN ('accepted', 'working') AND {UNBOUND}"
            f"{scope}", (key, lease_id, token, holder, instance, at, holder, instance, *args)
        ).fetchone()
        return None if row is None else Held(int(row[0]), str(row[1]), str(row[2]), row[3],
                                             str(row[4]))

    def overdue(self, at: str) -> list[TaskRow]:
        # reads the partial index of live leases, not the table
        # in the index's order: by expiry, then number (PostgreSQL's store sorts alike)
        return [TaskRow(*r) for r in self.conn.execute(
            f"{SELECT_TASK} WHERE lease_id IS NOT NULL AND lease_expires <= ?", (at,))]

    def _leases_from(self, at: str) -> str:
        """When the first live lease still running at ``at`` expires (:data:`NO_LEASE`:
        none does)."""
        first = self.conn.execute("SELECT min(lease_expires) FROM tasks"
                                  " WHERE lease_id IS NOT NULL AND lease_expires > ?",
                                  (at,)).get
        return NO_LEASE if first is None else str(first)

    def result_meta(self, number: int) -> ResultMeta | None:
        row = self.conn.execute(
            "SELECT worker, instance, session, outcome, version, threshold, merge_commit,"
            " merged_by FROM results WHERE task = ?", (number,)).fetchone()
        return ResultMeta(*row) if row else None

    def confirmations(self, number: int, version: int) -> list[ConfirmationRow]:
        rows = [ConfirmationRow(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7])
                for r in self.conn.execute(
                    "SELECT reviewer, instance, session, verdict, reason, at, counted, why"
                    " FROM confirmations WHERE task = ? AND version = ?", (number, version))]
        rows.sort(key=lambda r: (r.at, r.reviewer))  # in Python: no temporary b-tree in SQL
        return rows

    def views(self, where: ListFilter, *, after: int | None, limit: int) -> list[ViewRow]:
        clauses: list[str] = []
        args: list[Any] = []
        indexed = ""
        if where.ready:
            clauses.append(READY)  # unqualified: only tasks has these columns
            # the ready tasks alone, sorted, whatever the order asked: never a walk of
            # every task by number until enough of them are ready
            indexed = " INDEXED BY tasks_queue"
        if where.blocked:
            clauses.append("t.waits > 0 AND t.state NOT IN ('cancelled', 'completed',"
                           " 'rejected')")
        for label in where.labels:
            clauses.append("EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(t.labels)"
                           " THEN t.labels END) WHERE value = ?)")
            args.append(label)
        if where.search:
            clauses.append(SEARCH)
            args.extend([where.search] * 3)
        if where.priorities:
            clauses.append(f"t.priority IN ({', '.join('?' * len(where.priorities))})")
            args.extend(where.priorities)
        if where.states:
            clauses.append(f"t.state IN ({', '.join('?' * len(where.states))})")
            args.extend(where.states)
        for column, value in (("assignee", where.assignee), ("requester", where.requester),
                              ("project", where.project), ("role", where.role)):
            if value is not None:
                clauses.append(f"t.{column} = ?")
                args.append(value)
        if where.ready and where.sort in ("age", "priority"):
            numbers = self._ready_page(clauses, args, where.sort, after, limit)
        else:
            numbers = self._page(clauses, args, indexed, where.sort, after, limit)
        if not numbers:
            return []
        found = {v.task.number: v for v in self._views(
            f"t.number IN ({', '.join('?' * len(numbers))})", numbers)}
        return [found[n] for n in numbers if n in found]

    def _page(self, clauses: list[str], args: list[Any], indexed: str, sort: str,
              after: int | None, limit: int) -> list[int]:
        """One page of the numbers that pass ``clauses``, in the order asked."""
        if sort != "age":  # the cursor counts the rows already shown
            order = (f"ORDER BY {RANK}, t.number" if sort == "priority"
                     else "ORDER BY t.updated_at DESC, t.number DESC")
            args.extend((limit, min(max(after or 0, 0), MAX_ROWID)))
            page = f"{order} LIMIT ? OFFSET ?"
        else:
            if after is not None:
                if after >= MAX_ROWID:  # no task comes after it (SQLite takes no larger int)
                    return []
                clauses.append("t.number > ?")
                args.append(max(after, 0))
            args.append(limit)
            page = "ORDER BY t.number LIMIT ?"
        # The page's numbers first, from the task rows (and an index) alone; only those
        # rows are then joined with their bodies, results and checkpoints.
        filtered = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        return [int(r[0]) for r in self.conn.execute(
            f"SELECT t.number FROM tasks t{indexed}{filtered} {page}", tuple(args))]

    def _ready_page(self, clauses: list[str], args: list[Any], sort: str,
                    after: int | None, limit: int) -> list[int]:
        """A page of ready tasks by number (``age``) or by rank, then number (``priority``),
        without sorting every ready task: the queue index holds them by (assignee, rank,
        number), so each (assignee, rank) group is already in number order. Each group
        gives at most a page, read from the index, and the groups are merged. The
        assignees are found by skipping through the index, one lookup each."""
        filtered = " AND ".join(clauses)
        groups: list[Iterable[int]] = []
        skip = 0
        if sort == "age":
            start = [] if after is None else ["t.number > ?"]
            bound = [] if after is None else [max(after, 0)]
            if after is not None and after >= MAX_ROWID:
                return []
        else:  # the cursor counts the rows already shown
            start, bound, skip = [], [], min(max(after or 0, 0), MAX_ROWID)
        for assignee in self._ready_assignees():
            for rank in range(len(PRIORITIES)):
                groups.append([int(r[0]) for r in self.conn.execute(
                    f"SELECT t.number FROM tasks t INDEXED BY tasks_queue WHERE {filtered}"
                    f" AND t.assignee = ? AND {RANK} = ? {' AND '.join(['', *start])}"
                    " ORDER BY t.number LIMIT ?",
                    (*args, assignee, rank, *bound, skip + limit))])
        if sort == "age":
            merged: Iterable[int] = heapq.merge(*groups)
        else:  # the groups come rank by rank: merge each rank's, one rank after the other
            width = len(PRIORITIES)
            merged = itertools.chain.from_iterable(
                heapq.merge(*groups[rank::width]) for rank in range(width))
        return list(itertools.islice(merged, skip, skip + limit))

    def _ready_assignees(self) -> list[str]:
        """Every assignee with a ready task, from the queue index (a lookup each)."""
        found: list[str] = []
        sql = f"SELECT min(assignee) FROM tasks INDEXED BY tasks_queue WHERE {READY}"
        name = self.conn.execute(sql).get
        while name is not None:
            found.append(str(name))
            name = self.conn.execute(sql + " AND assignee > ?", (name,)).get
        return found

    def view(self, ref: str | int) -> ViewRow | None:
        where, key = task_key(ref)
        if where is None:
            return None
        rows = self._views(f"t.{where} = ?", (key,))
        return rows[0] if rows else None

    def _views(self, where: str, args: Sequence[Any]) -> list[ViewRow]:
        """Tasks with their bodies, current verdicts, last updates and usage totals.

        (One SELECT with correlated subqueries for all of it measured slower here than
        these few simple statements.)"""
        sql = "SELECT " + TASK_VIEW.format(columns=", ".join(f"t.{c}" for c in TASK_COLUMNS))
        if where:
            sql += " WHERE " + where
        return self._view_rows(list(self.conn.execute(sql, tuple(args))))

    def _recent_updates(self, number: int, limit: int) -> list[UpdateRow]:
        return [UpdateRow(*u) for u in self.conn.execute(
            "SELECT at, actor, summary, tokens, usd_micros FROM updates WHERE task = ?"
            " ORDER BY seq DESC LIMIT ?", (number, limit))]

    def _usage_total(self, number: int) -> tuple[int, int]:
        """A task's usage over all its updates: SQLite's sum, or (when it overflows 64 bits,
        which only raw SQL can bring about) Python's exact one."""
        with suppress(apsw.SQLError):  # "integer overflow": Python sums it below
            total = self.conn.execute(
                "SELECT coalesce(sum(tokens), 0), coalesce(sum(usd_micros), 0)"
                " FROM updates WHERE task = ?", (number,)).fetchone() or (0, 0)
            if all(isinstance(t, int) for t in total):
                return int(total[0]), int(total[1])
        return usage_sum(self.conn.execute(
            "SELECT tokens, usd_micros FROM updates WHERE task = ?", (number,)))

    def journal(self, number: int | None = None) -> list[JournalRow]:
        if number is None:
            return journal_rows(self.conn.execute(JOURNAL + " ORDER BY j.seq"))
        return journal_rows(self.conn.execute(TASK_JOURNAL, (number,)))

    def question(self, number: int) -> list[JournalRow]:
        return [journal_row(v) for v in self.conn.execute(QUESTION, (number,))]

    def decision(self, number: int) -> JournalRow | None:
        found = journal_rows(self.conn.execute(DECISION, (number,)))
        return found[-1] if found and found[-1].move in DECISIONS else None

    def submitted(self, number: int) -> int | None:
        found = self.conn.execute(SUBMITTED, (number,)).get
        return int(found) if found is not None else None

    def journal_after(self, seq: int, *, upto: int | None = None) -> list[JournalRow]:
        bound = (1 << 63) - 1 if upto is None else upto
        return journal_rows(self.conn.execute(
            JOURNAL + " WHERE j.seq > ? AND j.seq <= ? ORDER BY j.seq", (seq, bound)))

    def last_seq(self) -> int:
        if self.known is not None:
            return self._tip()[0]
        return int(self.conn.execute("SELECT coalesce(max(seq), 0) FROM journal").get)

    def journal_end(self) -> Callable[[], tuple[int, int]]:
        last = self.last_seq()  # (one writer at a time: the write's rows are the last)
        ends = (last if self._start is None else self._start, last)
        return lambda: ends

    def request(self, caller: str, request_id: str, *, since: str) -> RequestRow | None:
        first = day_of(since)  # the day of ``since`` and the next: a record's whole KEEP
        row = self.conn.execute(
            "SELECT caller, id, verb, digest, answer, at FROM requests"
            " WHERE day IN (?, ?) AND caller = ? AND id = ? ORDER BY day DESC LIMIT 1",
            (first, first + 1, caller, request_id)).fetchone()
        if not row:
            return None
        digest, sealed = unsealed(self.key, *(str(v) for v in row))
        return RequestRow(str(row[0]), str(row[1]), str(row[2]), digest, str(row[4]),
                          str(row[5]), sealed)

    def last_expiry(self, number: int) -> Expiry | None:
        row = self.conn.execute(EXPIRED, (number,)).fetchone()
        return Expiry(str(row[0]), int(row[1])) if row and row[1] is not None else None

    def head(self) -> str | None:
        row = self.conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
                                ).fetchone()
        return None if row is None else f"{row[0]}:{row[1]}"

    def journal_tail(self) -> str | None:
        value = self.conn.execute("SELECT at FROM journal ORDER BY seq DESC LIMIT 1").get
        return None if value is None else str(value)

    def policy(self) -> dict[str, str]:
        known = self.known
        if known is not None and known.policy is not None:
            return dict(known.policy)
        found = {str(k): str(v) for k, v in self.conn.execute("SELECT key, value FROM policy")}
        if known is not None:
            known.policy = dict(found)
        return found

    def required_plugins(self) -> list[RequiredPlugin]:
        known = self.known
        if known is not None and known.required is not None:
            return list(known.required)
        found = [RequiredPlugin(*r) for r in self.conn.execute(
            "SELECT name, kind, digest, settings, at, by FROM required_plugins ORDER BY name")]
        if known is not None:
            known.required = list(found)
        return found

    def controls(self, *, live: bool = True) -> list[ControlRow]:
        known = self.known if live else None
        if known is not None and known.controls is not None:
            return list(known.controls)
        where = " WHERE lifted_at IS NULL" if live else ""  # the partial index when live
        found = [ControlRow(*r) for r in self.conn.execute(
            "SELECT id, kind, agent, instance, task, at, by, reason, lifted_at, lifted_by"
            f" FROM controls{where} ORDER BY id")]
        if known is not None:
            known.controls = list(found)
        return found

    def budgets(self, agent: str | None = None) -> list[BudgetRow]:
        sql = "SELECT agent, tasks, tokens, usd_micros, at, by FROM budgets"
        if agent is None:
            return [BudgetRow(*r) for r in self.conn.execute(sql + " ORDER BY agent")]
        known = self.known
        if known is not None and agent in known.budgets:
            return list(known.budgets[agent])
        found = [BudgetRow(*r) for r in self.conn.execute(sql + " WHERE agent = ?", (agent,))]
        if known is not None:
            known.budgets[agent] = list(found)
        return found

    def enrolments(self, agent: str | None = None) -> list[EnrolmentRow]:
        sql = f"SELECT {ENROLMENT} FROM enrolments"
        if agent is None:
            return [EnrolmentRow(*r) for r in self.conn.execute(sql + " ORDER BY agent")]
        known = self.known
        if known is not None and agent in known.enrolments:
            return list(known.enrolments[agent])
        found = [EnrolmentRow(*r) for r in self.conn.execute(sql + " WHERE agent = ?",
                                                             (agent,))]
        if known is not None:
            known.enrolments[agent] = list(found)
        return found

    def spend(self, agent: str, start: str, end: str) -> Spend:
        """The agent's claims and usage in the day from ``start`` to ``end``. Claims come
        from the agent's row in ``claim_counts`` (migration 13): its count when the row
        counts this day, none when it counts an earlier one (each claim of a counted agent
        starts its day's row first, in a write's :meth:`spend`); with no row, or one ahead
        of this day, the journal is counted (and, in a write, the day's row started, so the
        next claim reads it). Usage reads a partial index that holds only usage reports."""
        row = self.conn.execute("SELECT day, claims FROM claim_counts WHERE agent = ?",
                                (agent,)).fetchone()
        if row is not None and row[0] == start:
            claims = int(row[1])
        elif row is not None and str(row[0]) < start:
            claims = 0
        else:
            claims = int(self.conn.execute(  # (since the day began, as the count's rule)
                "SELECT count(*) FROM journal WHERE actor = ? AND at >= ?"
                " AND from_state = 'routed' AND to_state = 'accepted'", (agent, start)).get)
        if self.known is not None and (row is None or row[0] != start):  # in a write
            self.conn.execute("INSERT OR REPLACE INTO claim_counts(agent, day, claims)"
                              " VALUES (?, ?, ?)", (agent, start, claims))
        tokens, usd = usage_sum(self.conn.execute(
            "SELECT tokens, usd_micros FROM updates WHERE actor = ? AND at >= ? AND at < ?"
            " AND (tokens IS NOT NULL OR usd_micros IS NOT NULL)", (agent, start, end)))
        return Spend(claims, tokens, usd)

    def state_counts(self) -> dict[str, int]:
        return {str(state): int(n) for state, n in self.conn.execute(
            "SELECT state, count(*) FROM tasks GROUP BY state")}

    def token(self, token_id: str) -> TokenRow | None:
        row = self.conn.execute(f"SELECT {TOKEN} FROM tokens WHERE id = ?",
                                (token_id,)).fetchone()
        return TokenRow(*row) if row else None

    def token_journal(self, token_id: str) -> list[LinkRow]:
        found = []
        for seq, stored, *content in self.conn.execute(
                f"SELECT seq, hash, {CONTENT} FROM journal WHERE task IS NULL AND reason IN"
                f" {TOKEN_EVENTS} AND instr(detail, ?) ORDER BY seq", (token_id,)).fetchall():
            before = self.conn.execute("SELECT hash FROM journal WHERE seq < ?"
                                       " ORDER BY seq DESC LIMIT 1", (seq,)).get
            found.append(LinkRow(int(str(seq)), stored,
                                 self.meta("store_id") if before is None else str(before),
                                 tuple(content)))
        return found

    def tokens(self) -> list[TokenRow]:
        return [TokenRow(*r) for r in self.conn.execute(
            f"SELECT {TOKEN} FROM tokens ORDER BY created_at, id")]

    def watch(self, watch_id: str) -> WatchRow | None:
        row = self.conn.execute(f"SELECT {WATCH}, seal FROM watches WHERE id = ?",
                                (watch_id,)).fetchone()
        return read_watch(row, self.key) if row else None

    # -- writing (BEGIN IMMEDIATE holds the file: a row lock is a plain read) -------

    def lock_task(self, ref: str | int) -> TaskRow | None:
        return self.task(ref)

    def lock_overdue(self, at: str) -> list[TaskRow]:
        known = self.known
        if known is None:
            return self.overdue(at)
        if known.leases_from is not None and at < known.leases_from:
            return []
        found = self.overdue(at)
        known.leases_from = self._leases_from(at)  # the overdue ones end in this write
        return found

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, value))

    def insert_task(self, task: NewTask, *, actor: str, reason: str | None) -> int:
        number = int(self.conn.execute("SELECT coalesce(max(number), 0) + 1 FROM tasks").get)
        seq, chain = self._link(number, task.at, actor, None, "requested", None, reason, None)
        waits = 0
        if task.depends_on:
            marks = ", ".join("?" * len(task.depends_on))
            waits = int(self.conn.execute(
                f"SELECT count(*) FROM tasks WHERE number IN ({marks})"
                " AND state IS NOT 'completed'", task.depends_on).get)
        self.conn.execute(
            "INSERT INTO tasks(number, id, state, project, requester, assignee, created_at,"
            " updated_at, priority, labels, depends, actor, reason, chain, waits,"
            " attempt_limit, role, last_seq)"
            " VALUES (?, ?, 'requested', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (number, task.id, task.project, task.requester, task.assignee, task.at, task.at,
             task.priority, task.labels, task.depends, actor, reason, chain, waits,
             task.attempt_limit, task.role, seq),
        )
        self.conn.executemany("INSERT INTO deps(task, on_task) VALUES (?, ?)",
                              [(number, on) for on in sorted(set(task.depends_on))])
        self.conn.execute("INSERT INTO packets(task, body) VALUES (?, ?)", (number, task.packet))
        return number

    def move(self, number: int, from_state: str, to_state: str, *, at: str, actor: str,
             reason: str | None, detail: dict[str, Any] | None = None,
             waiting_on: str | None = None, end_lease: bool = False) -> None:
        lease = (", lease_id = NULL, lease_holder = NULL, lease_instance = NULL,"
                 " lease_session = NULL, lease_expires = NULL") if end_lease else ""
        text = dump(detail)
        seq, chain = self._link(number, at, actor, from_state, to_state, waiting_on, reason,
                                text)
        self.conn.execute(
            "UPDATE tasks SET state = ?, waiting_on = ?, updated_at = ?, actor = ?, reason = ?,"
            f" detail = ?, chain = ?, last_seq = ?{lease} WHERE number = ?",
            (to_state, waiting_on, at, actor, reason, text, chain, seq, number),
        )

    def start_lease(self, number: int, from_state: str, to_state: str, *, lease_id: str,
                    token: int, holder: str, instance: str, session: str | None, expires: str,
                    at: str, reason: str, detail: dict[str, Any],
                    scope: int | None = None) -> None:
        text = dump(detail)
        seq, chain = self._link(number, at, holder, from_state, to_state, None, reason, text)
        if from_state == "routed":  # a claim: counted when its holder has a budget
            self.conn.execute("UPDATE claim_counts SET claims = claims + 1 WHERE agent = ?",
                              (holder,))
        self.conn.execute(
            "UPDATE tasks SET state = ?, waiting_on = NULL, lease_id = ?, lease_token = ?,"
            " lease_holder = ?, lease_instance = ?, lease_session = ?, lease_expires = ?,"
            " updated_at = ?, actor = ?, reason = ?, detail = ?, chain = ?,"
            " lease_scope = ?, last_seq = ? WHERE number = ?",
            (to_state, lease_id, token, holder, instance, session, expires, at, holder, reason,
             text, chain, scope, seq, number),
        )
        if self.known is not None:
            self.known.lease_until(expires)

    def set_fields(self, number: int, *, priority: str, labels: str, attempt_limit: int,
                   version: int) -> None:
        self.conn.execute(
            "UPDATE tasks SET priority = ?, labels = ?, attempt_limit = ?, fields_version = ?"
            " WHERE number = ?", (priority, labels, attempt_limit, version, number))

    def extend_lease(self, number: int, expires: str, *, at: str) -> None:
        self.conn.execute("UPDATE tasks SET lease_expires = ?, updated_at = ? WHERE number = ?",
                          (expires, at, number))
        if self.known is not None:
            self.known.lease_until(expires)

    def touch(self, number: int, at: str) -> None:
        self.conn.execute("UPDATE tasks SET updated_at = ? WHERE number = ?", (at, number))

    def set_checkpoint(self, number: int, body: str) -> None:
        # an UPDATE first: the store refuses a second INSERT of a key (and so an upsert)
        if self.conn.execute("UPDATE checkpoints SET body = ? WHERE task = ? RETURNING task",
                             (body, number)).fetchone() is None:
            self.conn.execute("INSERT INTO checkpoints(task, body) VALUES (?, ?)",
                              (number, body))

    def add_update(self, number: int, *, at: str, actor: str, summary: str,
                   tokens: int | None, usd_micros: int | None) -> None:
        self.conn.execute(
            "INSERT INTO updates(task, at, actor, summary, tokens, usd_micros)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (number, at, actor, summary, tokens, usd_micros),
        )

    def put_result(self, number: int, body: str, *, worker: str, instance: str,
                   session: str | None, outcome: str, threshold: int | None,
                   draft: str | None = None, receipts: str | None = None) -> None:
        kept = self.conn.execute(
            "UPDATE results SET body = ?, worker = ?, instance = ?, session = ?, outcome = ?,"
            " threshold = ?, version = version + 1, merge_commit = NULL, merged_by = NULL,"
            " draft = ?, receipts = ? WHERE task = ? RETURNING version",
            (body, worker, instance, session, outcome, threshold, draft, receipts,
             number)).fetchone()
        if kept is not None:
            return
        self.conn.execute(
            "INSERT INTO results(task, body, worker, instance, session, outcome, threshold,"
            " draft, receipts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (number, body, worker, instance, session, outcome, threshold, draft, receipts))

    def amend_result(self, number: int, body: str, receipts: str | None = None) -> int:
        return int(self.conn.execute(
            "UPDATE results SET body = ?, version = version + 1, receipts = ? WHERE task = ?"
            " RETURNING version", (body, receipts, number)).get)

    def receipts(self, number: int) -> str | None:
        found = self.conn.execute("SELECT receipts FROM results WHERE task = ?", (number,)).get
        return None if found is None else str(found)

    def record_merge(self, number: int, commit: str, by: str) -> None:
        self.conn.execute("UPDATE results SET merge_commit = ?, merged_by = ? WHERE task = ?",
                          (commit, by, number))

    def add_confirmation(self, number: int, version: int, row: ConfirmationRow) -> None:
        self.conn.execute(
            "INSERT INTO confirmations(task, version, reviewer, instance, session, verdict,"
            " reason, at, counted, why) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (number, version, row.reviewer, row.instance, row.session, row.verdict, row.reason,
             row.at, int(row.counted), row.why),
        )

    def reseal_requests(self, key: ChainKey) -> None:
        """Seal every kept first answer with ``key`` (a store taking its key)."""
        rows = self.conn.execute("SELECT day, caller, id, verb, digest, answer, at"
                                 " FROM requests").fetchall()
        self.conn.executemany(
            "UPDATE requests SET digest = ? WHERE day = ? AND caller = ? AND id = ?",
            [(sealed_digest(key, str(c), str(i), str(v), str(d).partition(".")[0], str(a),
                            str(t)), day, c, i) for day, c, i, v, d, a, t in rows])

    def save_request(self, row: RequestRow, *, prune_before: str) -> None:
        # A batch of the oldest days' records a write: from the front of the tree, so a
        # write with nothing to prune reads one leaf and writes none.
        self.conn.execute(
            "DELETE FROM requests WHERE (day, caller, id) IN (SELECT day, caller, id"
            " FROM requests WHERE day < ? LIMIT ?)", (day_of(prune_before), PRUNE_BATCH))
        self.conn.execute(
            "INSERT OR REPLACE INTO requests(day, caller, id, verb, digest, answer, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (day_of(row.at), row.caller, row.id, row.verb,
             sealed_digest(self.key, row.caller, row.id, row.verb, row.digest, row.answer,
                           row.at), row.answer, row.at))

    def record_event(self, number: int | None, *, at: str, actor: str, state: str | None,
                     reason: str, detail: dict[str, Any] | None = None) -> None:
        text = dump(detail)
        seq, chain = self._link(number, at, actor, state, state, None, reason, text)
        self.conn.execute(  # the store moves the task's head to it
            "INSERT INTO journal(seq, task, at, actor, from_state, to_state, reason, detail,"
            " hash, prev) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?,"
            " (SELECT last_seq FROM tasks WHERE number = ?))",
            (seq, number, at, actor, state, state, reason, text, chain, number),
        )


    def _forget(self, what: str) -> None:
        """This write changes a table the next write would otherwise take as known."""
        if self.known is not None:
            if what in ("budgets", "enrolments"):
                getattr(self.known, what).clear()
            else:
                setattr(self.known, what, None)

    def set_policy(self, key: str, value: str | None, *, at: str, by: str) -> None:
        self._forget("policy")
        if key == "timezone":  # another day: each count starts again from the journal
            self.conn.execute("DELETE FROM claim_counts")
        self.conn.execute("DELETE FROM policy WHERE key = ?", (key,))
        if value is not None:
            self.conn.execute("INSERT INTO policy(key, value, at, by) VALUES (?, ?, ?, ?)",
                              (key, value, at, by))

    def require_plugin(self, row: RequiredPlugin) -> None:
        self._forget("required")
        self.conn.execute("DELETE FROM required_plugins WHERE name = ?", (row.name,))
        self.conn.execute(
            "INSERT INTO required_plugins(name, kind, digest, settings, at, by)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (row.name, row.kind, row.digest, row.settings, row.at, row.by))

    def unrequire_plugin(self, name: str) -> bool:
        self._forget("required")
        return self.conn.execute("DELETE FROM required_plugins WHERE name = ? RETURNING name",
                                 (name,)).fetchone() is not None

    def add_control(self, row: ControlRow) -> int:
        self._forget("controls")
        return int(self.conn.execute(
            "INSERT INTO controls(kind, agent, instance, task, at, by, reason)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (row.kind, row.agent, row.instance, row.task, row.at, row.by, row.reason)).get)

    def lift_control(self, control: int, *, at: str, by: str) -> None:
        self._forget("controls")
        self.conn.execute("UPDATE controls SET lifted_at = ?, lifted_by = ? WHERE id = ?",
                          (at, by, control))

    def lock_leases(self, *, agent: str | None = None, instance: str | None = None,
                    task: int | None = None) -> list[TaskRow]:
        clauses, args = ["lease_id IS NOT NULL"], []  # the partial index of live leases
        for clause, value in (("lease_holder = ?", agent),
                              (f"{instance_key('lease_instance')} = ?", instance),
                              ("number = ?", task)):
            if value is not None:
                clauses.append(clause)
                args.append(value)
        return [TaskRow(*r) for r in self.conn.execute(
            f"{SELECT_TASK} WHERE {' AND '.join(clauses)} ORDER BY number", tuple(args))]

    def set_budget(self, row: BudgetRow | None, *, agent: str) -> None:
        self._forget("budgets")
        self.conn.execute("DELETE FROM budgets WHERE agent = ?", (agent,))
        self.conn.execute("DELETE FROM claim_counts WHERE agent = ?", (agent,))
        if row is not None:
            self.conn.execute(
                "INSERT INTO budgets(agent, tasks, tokens, usd_micros, at, by)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (row.agent, row.tasks, row.tokens, row.usd_micros, row.at, row.by))


    def set_enrolment(self, row: EnrolmentRow) -> None:
        self._forget("enrolments")
        self.conn.execute("DELETE FROM enrolments WHERE agent = ?", (row.agent,))
        self.conn.execute(f"INSERT INTO enrolments({ENROLMENT}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (row.agent, row.projects, row.roles, row.rights, row.active,
                           row.seq, row.at, row.by))

    def add_token(self, row: TokenRow) -> None:
        self.conn.execute(f"INSERT INTO tokens({TOKEN}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          (row.id, row.agent, row.instance, row.rights, row.hash,
                           row.created_at, row.expires_at, row.revoked_at, row.by))

    def revoke_token(self, token_id: str, at: str) -> None:
        self.conn.execute("UPDATE tokens SET revoked_at = ? WHERE id = ?", (at, token_id))

    def add_watch(self, row: WatchRow, *, prune_before: str) -> None:
        self.conn.execute(  # a batch of the expired, oldest first, from the expiry index
            "DELETE FROM watches WHERE id IN (SELECT id FROM watches"
            " WHERE expires_at < ? ORDER BY expires_at LIMIT ?)",
            (prune_before, PRUNE_BATCH))
        self.conn.execute(
            f"INSERT INTO watches({WATCH}, seal) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row.id, row.caller, row.token, row.verb, row.number, row.asked, row.answer,
             row.created_at, row.updated_at, row.expires_at, row.poll_ms, row.cancelled_at,
             watch_seal(self.key, row)))

    def settle_watch(self, watch_id: str, *, at: str, answer: str | None = None,
                     cancelled: bool = False) -> None:
        settled = self.conn.execute(
            "UPDATE watches SET answer = CASE WHEN cancelled_at IS NULL"
            " THEN coalesce(?, answer) ELSE answer END, updated_at = ?,"
            " cancelled_at = CASE WHEN ? AND cancelled_at IS NULL THEN ?"
            f" ELSE cancelled_at END WHERE id = ? RETURNING {WATCH}",
            (answer, at, cancelled, at, watch_id)).fetchone()
        if settled is not None:  # sealed as it now is
            self.conn.execute("UPDATE watches SET seal = ? WHERE id = ?",
                              (watch_seal(self.key, WatchRow(*settled)), watch_id))




def _queue_pick(columns: str, assignee: str, project: str | None, label: str | None,
                skip: Sequence[int], projects: Sequence[str] | None,
                roles: Sequence[str], *, unvetoed: bool = False) -> tuple[str, tuple[Any, ...]]:
    """``next``'s pick as SQL and its arguments: ``columns`` of the assignee's best ready
    task (most pressing, then oldest), in ``project`` and the enrolment's ``projects`` and
    ``roles``, with ``label``, leaving out ``skip`` (and, ``unvetoed``, the tasks the owner
    vetoed the assignee on); from the queue index."""
    clauses, args = pick_where("?", READY, assignee, project, projects, roles)
    if unvetoed:
        clauses.append(UNVETOED)
        args.append(assignee)
    if skip:
        clauses.append(f"number NOT IN ({', '.join('?' * len(skip))})")
        args.extend(skip)
    if label is not None:
        clauses.append("EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(labels)"
                       " THEN labels END) WHERE value = ?)")
        args.append(label)
    return (f"SELECT {columns} FROM tasks WHERE {' AND '.join(clauses)}"
            f" ORDER BY assignee, {RANK}, number LIMIT 1", tuple(args))


class SqliteStore:
    """One hivelite store file: WAL, a generous busy timeout, our schema; a connection per
    thread."""

    statements = STATEMENTS

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 synchronous: Synchronous = "NORMAL", allow_network_fs: bool = False,
                 parents: bool = False) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise InvalidInput("invalid_synchronous", f"synchronous is NORMAL or FULL, not"
                               f" {synchronous!r}", field="synchronous")
        self.path = Path(path)
        if not (allow_network_fs or os.environ.get("HIVELITE_ALLOW_NETWORK_FS") == "1"):
            fstype = network_filesystem(self.path, mounts.MOUNTINFO)
            if fstype is not None:
                raise StoreError(
                    "network_filesystem",
                    f"{self.path} is on a {fstype} network filesystem: SQLite's WAL needs one"
                    " machine's shared memory, and writers on two machines can corrupt the"
                    " store. Keep it on a local disk (agents elsewhere use hivelite serve), or"
                    " set HIVELITE_ALLOW_NETWORK_FS=1 if only this machine ever opens it")
        self.tampered: str | None = None
        """What differs between the file's schema and its migrations'; writes are refused."""
        self.damaged: str | None = None
        """What the first open's quick check found wrong with the file
        (:mod:`.quickcheck`); writes are refused, reads go on."""
        self.key: ChainKey | None = None
        """The owner's key that seals the journal: found (or made) by the first write, or
        by :meth:`chain_key`."""
        self._key_named = False
        """Whether this store names :attr:`key` (a write has checked, or recorded, it)."""
        self.synchronous: Synchronous = synchronous
        self._created = False
        if self.path.exists():
            if self.path.is_dir():
                raise StoreError("not_a_store", f"{self.path} is a directory")
            _check_header(self.path)
        elif not create:
            raise StoreError(
                "no_store",
                f"no store at {self.path}; create it first: hivelite --db {self.path} init"
                " --owner NAME (or Hive.open(path, owner=NAME))",
            )
        else:
            try:
                self._created = _create_private(self.path, parents)
            except OSError as exc:
                _reraise(_os_failure(exc, self.path), exc)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._slots: weakref.WeakSet[_Slot] = weakref.WeakSet()
        self._closed = False
        self._group = Group(self._batch, self._solo, patience=BUSY_TIMEOUT_MS / 1000,
                            impatient=lambda: StoreBusy(
                                "busy", f"another writer of this process held the store"
                                f" for more than {BUSY_TIMEOUT_MS // 1000} s"))
        """The writes this process's threads have waiting (group commit)."""
        self._writer: _Slot | None = None
        """The connection the group's transactions are written on once one thread's write
        has waited for another's, by whichever thread leads: what it knows of the file
        stays true from one transaction to the next, whoever led it. Until then each
        thread writes on its own connection (its reads and writes share one page cache),
        as a program whose threads take turns (one opens, another writes) does."""
        self._adopt(self._open(self._first_open))

    def _first_open(self, conn: apsw.Connection) -> None:
        """The opener's connection: check whose file it is, configure, check the file's
        pages (a damaged file is neither migrated nor written), migrate, compare."""
        self._check_identity(conn)
        self._configure(conn)
        self.damaged = None if self._created else quickcheck.damage(conn)
        if self.damaged is not None and conn.execute(
                "PRAGMA user_version").get < SCHEMA_VERSION:
            raise StoreCorrupt(f"{self.path} is damaged ({self.damaged}); it needs a"
                               " migration, which writes, so it cannot be opened. Left it"
                               " untouched: run hivelite doctor, and restore a backup")
        self._migrate(conn)
        self.tampered = schema_problem(conn)

    def _open(self, setup: Callable[[apsw.Connection], None]) -> apsw.Connection:
        """A new connection to the file, ``setup`` run on it; closed again if that fails,
        with an SQLite failure told as what it means for this store."""
        conn = self._connect()
        try:
            setup(conn)
        except apsw.Error as exc:
            failure = self._failure(exc, conn)
            conn.close()
            _reraise(failure, exc)
        except UnicodeDecodeError as exc:  # damage inside the schema's own text
            conn.close()
            raise StoreCorrupt(f"{self.path} is damaged: its schema holds text that is not"
                               f" UTF-8 ({exc.reason} at byte {exc.start}); left it untouched"
                               ) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _failure(self, exc: apsw.Error, conn: apsw.Connection | None = None
                 ) -> HiveliteError | None:
        """What an SQLite failure of this store's file means (see :func:`_sqlite_failure`);
        on a store whose schema is not its migrations' (a table or column renamed, ...), a
        statement that cannot run on it is ``schema_tampered`` too, for reads as well."""
        if isinstance(exc, apsw.ConnectionClosedError) and getattr(self, "_closed", False):
            # close() shut this thread's connection between its last use and this one
            return StoreError("store_closed", f"the store {self.path} has been closed")
        tampered = getattr(self, "tampered", None)  # None until the first open compared
        if tampered is not None and isinstance(exc, apsw.SQLError):
            return StoreError("schema_tampered", f"{self.path} does not have the schema its"
                              f" migrations built ({tampered}), and this cannot run on it"
                              f" ({exc}). Run: hivelite doctor")
        return _sqlite_failure(exc, self.path, conn)

    # -- the contract's properties --------------------------------------------

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def place(self) -> str:
        """Where the store lives, as its place record names it (the file's real path)."""
        return os.path.realpath(self.path)

    @property
    def created(self) -> bool:
        return self._created

    @property
    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").get)

    def tables(self) -> SqliteTables:
        """Raw access to the kept tables, for ``hivelite export`` and ``import``
        (``transfer.SqliteTables``)."""
        from .transfer import SqliteTables

        return SqliteTables(self.conn)

    # -- connections -----------------------------------------------------------

    def _connect(self) -> apsw.Connection:
        conn = apsw.Connection(str(self.path))
        # The busy timeout comes first, before anything else touches the file.
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        return conn

    def _adopt(self, conn: apsw.Connection) -> None:
        """Make ``conn`` this thread's; it is closed when the thread ends or the store
        closes, whichever comes first."""
        slot = _Slot(conn)
        weakref.finalize(slot, _close_quietly, conn)
        with self._lock:
            self._slots.add(slot)
        self._local.slot = slot

    def _slot(self) -> _Slot:
        """This thread's connection and what it knows (made on the thread's first use)."""
        slot: _Slot | None = getattr(self._local, "slot", None)
        if self._closed:
            if slot is not None:  # its close was left to this thread (it was busy)
                _close_quietly(slot.conn)
            raise StoreError("store_closed", f"the store {self.path} has been closed")
        if slot is None:
            self._adopt(self._open(self._configure))
            slot = self._local.slot
        return slot

    @property
    def conn(self) -> apsw.Connection:
        """This thread's connection (made and configured on the thread's first use)."""
        return self._slot().conn

    @conn.setter
    def conn(self, value: apsw.Connection) -> None:
        """Replace this thread's connection (instrumentation: the benchmarks wrap it)."""
        self._local.slot.conn = value

    def _writer_slot(self) -> _Slot:
        """The connection this thread's write transaction is written on
        (:meth:`transact`): its own until writes of this process have waited for each
        other, then the store's write connection, made then."""
        slot = self._writer
        if self._closed:
            if slot is not None:  # its close was left to this thread (it was busy)
                _close_quietly(slot.conn)
            raise StoreError("store_closed", f"the store {self.path} has been closed")
        if slot is not None:
            return slot
        if not self._group.contended:
            return self._slot()
        conn = self._open(self._configure)
        with self._lock:
            if self._closed:  # closed while it was opened
                _close_quietly(conn)
                raise StoreError("store_closed", f"the store {self.path} has been closed")
            slot = self._writer = _Slot(conn)
            self._slots.add(slot)
        return slot

    @property
    def writer(self) -> apsw.Connection:
        """The connection this thread's next write transaction runs on
        (:meth:`transact`)."""
        return self._writer_slot().conn

    @writer.setter
    def writer(self, value: apsw.Connection) -> None:
        """Replace it (instrumentation: the benchmarks and tests wrap it)."""
        self._writer_slot().conn = value

    def _check_identity(self, conn: apsw.Connection) -> None:
        conn.execute("BEGIN")  # one snapshot: another opener may be initialising the file
        try:
            app_id = conn.execute("PRAGMA application_id").get
            version = conn.execute("PRAGMA user_version").get
            tables = {str(r[0]) for r in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table'")}
        except apsw.SQLError as exc:  # "unsupported file format", ...: a damaged header
            raise StoreCorrupt(f"{self.path} is damaged: SQLite cannot read its schema"
                               f" ({exc}); left it untouched") from exc
        finally:
            if conn.in_transaction:  # an I/O error may have ended it already
                conn.execute("COMMIT")
        if app_id == 0 and version == 0 and not tables:
            self._make_private()
            return  # a new, empty file: ours to initialise
        if app_id != APPLICATION_ID:
            if tables >= _OUR_TABLES:
                raise StoreCorrupt(f"{self.path} has hivelite's tables but not its application"
                                   f" id ({app_id}): its header is damaged; left it untouched")
            raise StoreError(
                "foreign_database",
                f"{self.path} is an SQLite database of another program; left it untouched",
            )
        if version < 1:  # the application id is set in the same transaction as version 1
            raise StoreCorrupt(f"{self.path} is a hivelite store with schema version"
                               f" {version}: its header is damaged; left it untouched")
        if version > SCHEMA_VERSION:
            raise StoreError(
                "newer_schema",
                f"{self.path} has schema version {version}, newer than this hivelite "
                f"understands ({SCHEMA_VERSION}); upgrade hivelite. Left it untouched",
            )

    def _make_private(self) -> None:
        """A new store is its owner's only (0600), whatever the empty file it starts from."""
        try:
            os.chmod(self.path, 0o600)
        except OSError as exc:
            if not os.access(self.path, os.W_OK):
                raise StoreReadonly(f"{_readonly_message(self.path)} ({exc.strerror})"
                                    ) from exc
            raise StoreError("not_private", f"cannot make {self.path} readable by its owner"
                             f" only (0600): {exc.strerror}; left it untouched") from exc

    def _configure(self, conn: apsw.Connection) -> None:
        conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
        conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
        self._wal(conn)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA recursive_triggers = ON")
        conn.execute("PRAGMA wal_autocheckpoint = 4000")

    def _wal(self, conn: apsw.Connection) -> None:
        """Switch to WAL; on a new file another opener may hold the lock, so wait for it."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except apsw.BusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _migrate(self, conn: apsw.Connection) -> None:
        if conn.execute("PRAGMA user_version").get >= SCHEMA_VERSION:
            return
        with self._transaction(conn):
            current = conn.execute("PRAGMA user_version").get  # again, under the lock
            if current == 0:
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            for migration in MIGRATIONS:
                if migration.version > current:
                    migration.apply(conn)
                    conn.execute(f"PRAGMA user_version = {migration.version}")

    def close(self) -> None:
        """Close every thread's connection; the store refuses further use. A connection
        another thread is using right now is closed by that thread, on its next use or
        when it ends."""
        self._closed = True
        with self._lock:
            slots, self._slots = list(self._slots), weakref.WeakSet()
        for slot in slots:
            _close_quietly(slot.conn)

    def chain_key(self) -> ChainKey | None:
        """The owner's key that seals the journal: the one the writes use, else the key
        the store names (:func:`.keys.named_key`; None: it names none, and there is none
        here)."""
        if self.key is not None:
            return self.key
        with self.read() as tx:
            identity, named = tx.meta("store_id"), tx.meta(META_KEY)
        self.key = named_key(identity, named, str(self.path), self.place)
        return self.key  # the reads check kept answers with it from now on

    def discard(self) -> None:
        self.close()
        made = os.path.realpath(self.path)  # made through a symlink: the link stays
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{made}{suffix}").unlink(missing_ok=True)

    # -- waiting for work --------------------------------------------------

    def listen(self) -> None:
        """Start waiting for work on this thread: the next :meth:`wait_for_work` sleeps
        :data:`POLL_FIRST` again."""
        self._local.poll = POLL_FIRST

    def unlisten(self) -> None:
        """Nothing to stop: SQLite's waiting is sleeping."""

    def wait_for_work(self, timeout: float) -> bool:
        """SQLite tells no one of a commit, so a worker looks again after a short sleep:
        :data:`POLL_FIRST`, twice as long each time after, at most :data:`POLL_MOST` (a
        task routed to an idle worker is taken within a second, and an idle worker's
        looks, each a short write transaction that finds nothing, stay about one a
        second). True (look again), or False when the sleep took the whole ``timeout``."""
        pause = getattr(self._local, "poll", POLL_FIRST)
        self._local.poll = min(pause * 2, POLL_MOST)
        slept = min(max(0.0, timeout), pause)
        time.sleep(slept)
        return slept < timeout

    # -- transactions ------------------------------------------------------

    @contextmanager
    def _transaction(self, conn: apsw.Connection) -> Iterator[apsw.Connection]:
        self._begin(conn)
        try:
            yield conn
        except BaseException as exc:
            self._undo(conn, exc)
            raise
        self._commit(conn)

    def _begin(self, conn: apsw.Connection) -> None:
        """``BEGIN IMMEDIATE``: the write lock, waited for as long as the busy timeout."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except apsw.BusyError as exc:
            raise StoreBusy("busy", f"another writer held the store for more than"
                            f" {BUSY_TIMEOUT_MS // 1000} s: {exc}") from exc
        except apsw.Error as exc:
            _reraise(self._failure(exc, conn), exc)

    def _undo(self, conn: apsw.Connection, exc: BaseException) -> None:
        """Roll back after ``exc``; raise the hivelite error an SQLite one stands for (a
        trigger's ``code:reason``, a failure of the file), else return (the caller
        raises ``exc``)."""
        mapped = (from_trigger(exc) or self._failure(exc, conn)
                  if isinstance(exc, apsw.Error) else None)
        _rollback(conn)
        if mapped is not None:
            raise mapped from exc

    def _commit(self, conn: apsw.Connection) -> None:
        try:
            conn.execute("COMMIT")
        except apsw.Error as exc:  # disk full while writing the WAL, ...
            failure = self._failure(exc, conn)
            _rollback(conn)
            _reraise(failure, exc)

    def _writable(self, slot: Callable[[], _Slot] | None = None) -> _Slot:
        """This thread's connection (or ``slot()``), when the store takes writes."""
        if self.tampered is not None:
            raise StoreError("schema_tampered", f"{self.path} does not have the schema its"
                             f" migrations built ({self.tampered}); writes are refused until"
                             " it is repaired. Run: hivelite doctor")
        if self.damaged is not None:
            raise StoreCorrupt(f"{self.path} is damaged ({self.damaged}); writes are refused"
                               " so the damage goes no further (reads go on). Run hivelite"
                               " doctor, and restore a backup")
        return (slot or self._slot)()

    def _opening(self, slot: _Slot) -> tuple[Known, ChainKey]:
        """At a write's start, under the lock: what the connection still knows of the file
        (nothing, when another connection wrote since), and the owner's key that seals."""
        conn = slot.conn
        version = conn.data_version()
        known = slot.known if slot.known.version == version else Known()
        slot.known = Known()  # nothing is known unless this write commits
        tx = SqliteTx(conn, known)
        named = self._key_named or tx.meta(META_KEY) is not None
        key = tx.key = self.key if self._key_named and self.key else key_for_writes(
            tx.meta("store_id"), tx.meta(META_KEY), tx.last_seq(),
            lambda fingerprint: tx.set_meta(META_KEY, fingerprint), str(self.path),
            self.place)
        if not named:  # the store takes its key now
            seal_what_came_before(tx, key)
        return known, key

    def _committed(self, slot: _Slot, known: Known, key: ChainKey) -> None:
        """After a write's commit: the connection knows what it left."""
        try:
            known.version = slot.conn.data_version()
        except apsw.ConnectionClosedError:  # committed; close() came between: keep nothing
            return
        slot.known = known
        if not self._key_named:  # (the write that named it, or this process's first)
            record_keyed(key)
        self.key, self._key_named = key, True  # named in the store now: every write seals

    @contextmanager
    def write(self, *, about: str | int | Pick | None = None) -> Iterator[SqliteTx]:
        """One ``BEGIN IMMEDIATE`` transaction: commit on success, roll back on any error.

        A trigger's ``code:reason`` abort comes out as the matching hivelite error.
        ``about`` is not used: a statement here costs no round trip.
        """
        with self._write_on(self._writable()) as tx:
            yield tx

    @contextmanager
    def _write_on(self, slot: _Slot) -> Iterator[SqliteTx]:
        """One write transaction on ``slot``'s connection, and what it leaves known."""
        with self._transaction(slot.conn):
            known, key = self._opening(slot)
            yield SqliteTx(slot.conn, known, key)
        self._committed(slot, known, key)

    @contextmanager
    def _on_writer(self) -> Iterator[_Slot]:
        """The connection the verbs' writes go on now (:meth:`_writer_slot`), with the
        reads of this thread joining its write until it ends."""
        slot = self._writable(self._writer_slot)
        self._local.writing = slot.conn  # a read inside a job joins its write
        try:
            yield slot
        finally:
            self._local.writing = None
            if self._closed and slot is self._writer:  # closed meanwhile: close() left it
                _close_quietly(slot.conn)

    def transact(self, job: Callable[[SqliteTx], T], *,
                 about: str | int | Pick | None = None) -> T:
        """``job`` in a write transaction, shared with the writes this process's other
        threads have waiting (:mod:`.group`): its answer once it is committed, or its
        error with its own writes undone. ``about`` is not used here."""
        if self._group.leading:  # it would wait for itself
            raise UnexpectedError("nested_write", f"a write to {self.path} began inside"
                                  " another write of this thread")
        return self._group.run(job)

    def _solo(self, job: Callable[[SqliteTx], T]) -> T:
        """``job`` alone in its transaction (:class:`.group.Solo`): what
        :meth:`_on_writer`, :meth:`_write_on` and :meth:`_transaction` do together, spelt
        out (the path of every write of one thread; three generators' entries and exits
        were 3 % of a claim -> submit cycle)."""
        slot = self._writable(self._writer_slot)
        conn = slot.conn
        self._local.writing = conn  # a read inside a job joins its write
        try:
            self._begin(conn)
            try:
                known, key = self._opening(slot)
                answer = job(SqliteTx(conn, known, key))
            except BaseException as exc:
                self._undo(conn, exc)
                raise
            self._commit(conn)
            self._committed(slot, known, key)
            return answer
        finally:
            self._local.writing = None
            if self._closed and slot is self._writer:  # closed meanwhile: close() left it
                _close_quietly(conn)

    def _batch(self, turns: list[Turn[Any]]) -> list[Turn[Any]]:
        """One transaction for ``turns`` (:class:`.group.Batch`): each in a savepoint of
        its own when there are several, so a refused one undoes itself alone."""
        try:
            with self._on_writer() as slot:
                return self._written(slot, turns)
        except HiveliteError as error:  # no connection to write on (closed, damaged)
            for turn in turns:
                if not turn.settled:
                    turn.fail(error)
            return []

    def _written(self, slot: _Slot, turns: list[Turn[Any]]) -> list[Turn[Any]]:
        """The batch's transaction on ``slot``: the turns settled once it commits (or all
        failed with what stopped it), and those to write again."""
        conn = slot.conn
        done: list[tuple[Turn[Any], Any]] = []
        again: list[Turn[Any]] = []
        interrupted: BaseException | None = None
        try:
            with self._transaction(conn):
                known, key = self._opening(slot)
                if len(turns) == 1:
                    done.append((turns[0], turns[0].run(SqliteTx(conn, known, key))))
                else:
                    known, interrupted = self._turns(conn, turns, known, key, done, again)
        except _Lost:
            return [turn for turn, _ in done] + again
        except Exception as exc:  # no begin, no commit, or the one turn's own error
            for turn in turns:
                if not turn.settled:
                    turn.fail(exc)
            return []
        for turn, answer in done:  # committed: settled at once, never written again
            turn.done(answer)
        self._committed(slot, known, key)
        if interrupted is not None:  # the turns not written are handed back (.group)
            raise interrupted
        return []

    def _turns(self, conn: apsw.Connection, turns: list[Turn[Any]], known: Known,
               key: ChainKey, done: list[tuple[Turn[Any], Any]], again: list[Turn[Any]]
               ) -> tuple[Known, BaseException | None]:
        """Each turn in its savepoint; the facts the connection knows at the end (what an
        undone turn read or wrote is forgotten), and the interrupt (Ctrl-C) that stopped
        the leader while it wrote another thread's turn, if one did: that turn and those
        after it are not written, and are written again."""
        for index, turn in enumerate(turns):
            conn.execute("SAVEPOINT hivelite_turn")
            try:
                answer = turn.run(SqliteTx(conn, known, key))
            except BaseException as exc:
                if index > 0 and isinstance(exc, KeyboardInterrupt) and conn.in_transaction:
                    conn.execute("ROLLBACK TO hivelite_turn")  # the leader's, not the job's
                    conn.execute("RELEASE hivelite_turn")
                    return Known(), exc
                error: BaseException = exc
                if isinstance(exc, apsw.Error):
                    mapped = from_trigger(exc) or self._failure(exc, conn)
                    if mapped is not None:
                        mapped.__cause__ = exc
                        error = mapped
                turn.fail(error)
                if not conn.in_transaction:  # the error ended the whole transaction
                    again.extend(turns[index + 1:])
                    raise _Lost from exc
                conn.execute("ROLLBACK TO hivelite_turn")
                conn.execute("RELEASE hivelite_turn")
                known = Known()
                continue
            conn.execute("RELEASE hivelite_turn")
            done.append((turn, answer))
        return known, None

    @contextmanager
    def read(self) -> Iterator[SqliteTx]:
        """A consistent snapshot for several reads (joins this thread's open write)."""
        writing: apsw.Connection | None = getattr(self._local, "writing", None)
        if writing is not None:  # inside a turn of the group's transaction
            yield SqliteTx(writing, key=self.key)
            return
        conn = self.conn
        try:
            joined = conn.in_transaction
        except apsw.Error as exc:  # closed by close() since this thread last used it
            _reraise(self._failure(exc, conn), exc)
        if joined:
            yield SqliteTx(conn, key=self.key)
            return
        try:
            conn.execute("BEGIN")
            try:
                yield SqliteTx(conn, key=self.key)
            finally:
                if conn.in_transaction:  # an I/O error may have ended it already
                    conn.execute("COMMIT")
        except apsw.Error as exc:  # a damaged page, a lock held at open, ...
            _reraise(self._failure(exc, conn), exc)


class _Lost(Exception):
    """A turn's error ended the batch's transaction: the other turns write again."""


class _Slot:
    """Holds one thread's connection; dropped with the thread's locals when it ends."""

    __slots__ = ("__weakref__", "conn", "known")

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.known = Known()
        """What the connection knows of the file (emptied while a write runs on it)."""


def _close_quietly(conn: apsw.Connection) -> None:
    """Close a connection unless another thread is using it (that thread closes it)."""
    with suppress(apsw.ThreadingViolationError):
        conn.close()


def _rollback(conn: apsw.Connection) -> None:
    with suppress(apsw.ConnectionClosedError):  # closed by the store's close(): nothing held
        if conn.in_transaction:  # SQLite may have rolled back already (disk full, ...)
            conn.execute("ROLLBACK")
