"""The store contract: what hivelite asks of a backend, and nothing about how.

Every backend (SQLite today) implements :class:`Store`. Reads happen inside
``store.read()`` (one consistent snapshot); writes inside ``store.write()`` (one
transaction that commits on success and rolls back on any error, with the
backend's own refusals raised as hivelite errors).

**Row locking is explicit.** A write reads the rows it will change through the
``lock_*`` methods. SQLite's ``BEGIN IMMEDIATE`` already holds the whole file,
so there they are plain reads; a server database must take the rows
(``SELECT … FOR UPDATE``) so that two writers never decide on the same
snapshot. Code above the contract never relies on one or the other.

**Threads.** A store is shared by every thread of a process; each thread gets
its own connection, so one thread's transaction never joins another's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .keys import ChainKey
    from .transfer import Tables

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
    ViewRow,
    WatchRow,
)

T = TypeVar("T")

STATEMENTS = frozenset({"amend", "answer", "approve", "cancel", "checkpoint", "claim", "decline",
                        "deny", "expire", "fields", "handoff", "hold", "lift", "next", "pause",
                        "release", "renew", "resume", "sign_off", "stop", "submit", "update",
                        "verify", "veto", "watch"})
"""The verbs a store writes as their statements (``Store.statements``): every engine takes
the same ones, through the same ``Writer`` methods."""
STORE_WIDE: ContextVar[bool] = ContextVar("hivelite_store_wide", default=False)
"""True around a write that changes the store-wide rows (the owner's controls, policy,
budgets, enrolments, signers, tokens): the owner's authority verbs. A store whose writers
run side by side (PostgreSQL) lets such a write run alone; SQLite has one writer anyway."""


def binds(control: ControlRow, agent: str, instance: str | None,
          number: int | None = None) -> bool:
    """Whether a live ``control`` binds ``agent`` acting from ``instance``: a stop or a
    hold of it, of its instance (``Laptop.`` is the laptop) or of everyone; a veto of it
    on task ``number`` (None: a write about no task, which no veto binds). As
    ``sqlite.UNBOUND`` says it for a holder's fence, where the full run takes a claim a
    control binds, and refuses in words."""
    if control.kind == "veto":
        return control.agent == agent and number is not None and control.task == number
    if control.agent is not None:
        return control.agent == agent
    if control.instance is not None:  # (both as kept: a control's by its rule, a
        return control.instance == instance  # caller's by ``Caller``)
    return True  # a stop of every agent


def vetoed_tasks(controls: Iterable[ControlRow], agent: str) -> list[int]:
    """The tasks the owner vetoed ``agent`` on, among the live ``controls``."""
    return [row.task for row in controls
            if row.kind == "veto" and row.agent == agent and row.task is not None]


@dataclass(frozen=True, slots=True)
class Pick:
    """What ``next`` picks from (``Writer.next_ready``'s arguments but the owner's vetoes
    and the agent's enrolment, which the write reads first): a write ``about`` a pick may
    take the best ready task with its first statements, and use it when the vetoes and
    the enrolment turn out to leave nothing out (see ``Store.write``)."""

    assignee: str
    project: str | None = None
    label: str | None = None
    skip: tuple[int, ...] = ()


@contextmanager
def store_wide(wide: bool) -> Iterator[None]:
    """Mark the writes begun inside as store-wide (:data:`STORE_WIDE`) when ``wide``."""
    token = STORE_WIDE.set(wide)
    try:
        yield
    finally:
        STORE_WIDE.reset(token)


class Reader(Protocol):
    """What a snapshot can answer."""

    def meta(self, key: str) -> str | None: ...
    def task(self, ref: str | int) -> TaskRow | None: ...
    def bodies(self, number: int) -> Bodies: ...
    def task_with_bodies(self, ref: str | int) -> tuple[TaskRow, Bodies] | None:
        """The task and its bodies together (one statement where a statement costs a
        round trip): what a verb reads before its write to hand the task to plugins."""
        ...
    def view(self, ref: str | int) -> ViewRow | None: ...
    def views(self, where: ListFilter, *, after: int | None, limit: int) -> list[ViewRow]:
        """Tasks in ``where.sort`` order, at most ``limit``. In creation order ``after`` is
        the last number shown; in the other orders, how many rows were shown already."""
        ...
    def numbers_of(self, refs: Sequence[str]) -> dict[str, tuple[int, str]]:
        """Each ref that names a task (an id, else a number in digits) with its number and
        id; refs that name none are left out."""
        ...
    def dependencies(self, number: int) -> list[Dependency]:
        """The tasks a task depends on, as they stand, oldest first."""
        ...
    def overdue(self, at: str) -> list[TaskRow]:
        """Tasks whose live lease ran out at or before ``at``."""
        ...
    def result_meta(self, number: int) -> ResultMeta | None: ...
    def confirmations(self, number: int, version: int) -> list[ConfirmationRow]:
        """Verdicts on one version of a task's result, in the order given."""
        ...
    def journal(self, number: int | None = None) -> list[JournalRow]:
        """Journal rows, all or one task's, oldest first."""
        ...
    def question(self, number: int) -> list[JournalRow]:
        """A task's latest question: the pause that asked it, then each answer given since,
        oldest first (empty when it never paused)."""
        ...
    def receipts(self, number: int) -> str | None:
        """The checked receipts of a task's result (JSON), if it has any."""
        ...
    def submitted(self, number: int) -> int | None:
        """The seq of the journal row of a task's last submission (move 12), if any."""
        ...
    def decision(self, number: int) -> JournalRow | None:
        """The move that decided on a task's current result (13, 16 or 17), or None while
        none has since it was submitted."""
        ...
    def journal_after(self, seq: int, *, upto: int | None = None) -> list[JournalRow]:
        """The rows after ``seq`` (up to ``upto``): an outbox read by sequence number."""
        ...
    def last_seq(self) -> int:
        """The newest journal row's seq (0 for an empty journal)."""
        ...
    def request(self, caller: str, request_id: str, *, since: str) -> RequestRow | None:
        """The newest record kept of a caller's request id, if one is kept; a store may
        leave out records written before ``since`` (``format_ts``; a day at most before
        the write), which answer nothing."""
        ...
    def last_expiry(self, number: int) -> Expiry | None: ...
    def head(self) -> str | None:
        """The journal's newest row as ``seq:hash`` (None: an empty journal): the head
        that backups, exports and servers witness outside the store."""
        ...
    def journal_tail(self) -> str | None:
        """The time of the newest journal row, if any."""
        ...
    def policy(self) -> dict[str, str]:
        """The store's policy as the owner set it (keys left out take their defaults)."""
        ...
    def required_plugins(self) -> list[RequiredPlugin]:
        """The policy plugins every writing process must load, by name."""
        ...
    def controls(self, *, live: bool = True) -> list[ControlRow]:
        """The owner's controls, oldest first: those not lifted, or all of them."""
        ...
    def budgets(self, agent: str | None = None) -> list[BudgetRow]:
        """Daily budgets, by agent (one agent's, when named)."""
        ...
    def enrolments(self, agent: str | None = None) -> list[EnrolmentRow]:
        """Enrolments, ended ones included, by agent (one agent's, when named)."""
        ...
    def spend(self, agent: str, start: str, end: str) -> Spend:
        """What ``agent`` claimed and reported between ``start`` (included) and ``end``."""
        ...
    def state_counts(self) -> dict[str, int]:
        """How many tasks are in each state (states with none left out)."""
        ...
    def token(self, token_id: str) -> TokenRow | None: ...
    def token_journal(self, token_id: str) -> list[LinkRow]:
        """The journal rows about a token (its issue, the key's seal of it, its revoke),
        each with the hash before it, oldest first; rows that only mention its id too."""
        ...
    def tokens(self) -> list[TokenRow]:
        """Every token, oldest first (revoked ones too)."""
        ...
    def watch(self, watch_id: str) -> WatchRow | None:
        """A watch by its id, expired or not (the caller decides what expiry means)."""
        ...


class Writer(Reader, Protocol):
    """What a write transaction can do. The store's own rules (triggers) still apply."""

    def lock_task(self, ref: str | int) -> TaskRow | None:
        """Read a task's row for update: no other writer changes it until this commits."""
        ...
    def lock_overdue(self, at: str) -> list[TaskRow]:
        """Read, for update, every task whose live lease ran out at or before ``at``."""
        ...
    def set_meta(self, key: str, value: str) -> None:
        """Record a new store-wide fact (the owner); recorded facts never change."""
        ...
    def insert_task(self, task: NewTask, *, actor: str, reason: str | None) -> int:
        """Insert a ``requested`` task and its packet (journaled); returns its number."""
        ...
    def move(self, number: int, from_state: str, to_state: str, *, at: str, actor: str,
             reason: str | None, detail: dict[str, Any] | None = None,
             waiting_on: str | None = None, end_lease: bool = False) -> None:
        """Change a task's state from ``from_state`` (as locked); the store checks the move
        and journals it, the row chained to the journal before it."""
        ...
    def start_lease(self, number: int, from_state: str, to_state: str, *, lease_id: str,
                    token: int, holder: str, instance: str, session: str | None, expires: str,
                    at: str, reason: str, detail: dict[str, Any],
                    scope: int | None = None) -> None:
        """Move into ``accepted``/``working`` under a new lease (claim or resume), taken
        under the holder's enrolment ``scope`` (its journal seq; None: it has none)."""
        ...
    def extend_lease(self, number: int, expires: str, *, at: str) -> None:
        """A renewal: the lease runs to ``expires``; ``at`` is when it was renewed."""
        ...
    def touch(self, number: int, at: str) -> None: ...
    def set_checkpoint(self, number: int, body: str) -> None: ...
    def add_update(self, number: int, *, at: str, actor: str, summary: str,
                   tokens: int | None, usd_micros: int | None) -> None: ...
    def put_result(self, number: int, body: str, *, worker: str, instance: str,
                   session: str | None, outcome: str, threshold: int | None,
                   draft: str | None = None, receipts: str | None = None) -> None:
        """Store the task's (new) result, with its draft (JSON) if it brings one and its
        evidence's checked receipts (JSON), under the next version (1, 2, ... per task)."""
        ...
    def amend_result(self, number: int, body: str, receipts: str | None = None) -> int:
        """Replace the result's body (and its evidence's receipts) under a new version;
        returns it."""
        ...
    def record_merge(self, number: int, commit: str, by: str) -> None: ...
    def add_confirmation(self, number: int, version: int, row: ConfirmationRow) -> None: ...
    def take_next(self, lease: Lease, *, at: str, project: str | None = None,
                  label: str | None = None, skip: Sequence[int] = ()) -> Taken | None:
        """``next`` as its statement: the holder's best ready task (as :meth:`next_ready`
        picks it, passing over ``skip``) taken under ``lease``; the rules are the store's
        (its triggers). None when there is no such task."""
        ...
    def take_task(self, ref: str | int, lease: Lease, *, at: str) -> Taken | None:
        """``claim`` as its statement: task ``ref``, when it is ready
        and assigned to the holder and has no role, taken under ``lease`` (as
        :meth:`take_next` takes the one it picks). None when it is not: the write path
        undoes whatever this wrote, and the full run decides (and says why it refuses)."""
        ...
    def take_paused(self, ref: str | int, lease: Lease, *, at: str) -> Taken | None:
        """``resume`` as its statement: task ``ref``, when it is paused
        on a person or an agent and assigned to the holder, taken again under ``lease``
        (waiting -> working, reason ``resumed``). None when it is not: the write path undoes
        whatever this wrote, and the full run decides (and says why it refuses)."""
        ...
    def held(self, ref: str | int, *, lease_id: str, token: int, holder: str,
             instance: str, at: str, scoped: bool = True) -> Held | None:
        """A holder's fence as its statement: task ``ref`` when its live claim is
        ``lease_id`` with ``token``, held by ``holder`` from ``instance`` under its
        enrolment in force (if any; ``scoped=False``, under any: a claim given back is
        never refused for its enrolment) and running at ``at``. None when any of that does not
        hold: the full run decides (and says why it refuses). (The owner's controls are
        the write path's: it asks them before the statement.)"""
        ...
    def next_ready(self, assignee: str, *, project: str | None = None,
                   label: str | None = None, skip: Sequence[int] = (),
                   projects: Sequence[str] | None = None,
                   roles: Sequence[str] = ()) -> TaskRow | None:
        """For update: the ready task of ``assignee`` that the queue gives next (most
        pressing priority, then oldest), if any, leaving out the tasks in ``skip`` (those
        the owner vetoed it on), those outside ``projects`` (an enrolment's; None: every
        project) and those whose role is not one of ``roles``; read from the ready index."""
        ...
    def set_fields(self, number: int, *, priority: str, labels: str, attempt_limit: int,
                   version: int) -> None:
        """New priority, labels and attempt limit under fields version ``version``."""
        ...
    def save_request(self, row: RequestRow, *, prune_before: str) -> None:
        """Keep a write's first answer (replacing an expired record of the same id) and
        drop records older than ``prune_before``: all of them, or a batch a write (a
        record left over is expired: it answers nothing)."""
        ...
    def journal_end(self) -> Callable[[], tuple[int, int]]:
        """The rows this write has added to the journal, as ``(the seq before the first,
        the seq of the last)``, from a function called once the write has committed (or
        earlier, at the cost of a wait on a store whose answers come with the commit).
        A write's rows are numbered one after another."""
        ...
    def record_event(self, number: int | None, *, at: str, actor: str, state: str | None,
                     reason: str, detail: dict[str, Any] | None = None) -> None:
        """Journal something that is not a move (from and to are the same state)."""
        ...
    def set_policy(self, key: str, value: str | None, *, at: str, by: str) -> None:
        """Set one policy key (None: back to its default)."""
        ...
    def require_plugin(self, row: RequiredPlugin) -> None:
        """Require a plugin (replacing an earlier requirement of that name)."""
        ...
    def unrequire_plugin(self, name: str) -> bool:
        """Drop a requirement; False when there was none."""
        ...
    def add_control(self, row: ControlRow) -> int:
        """Record a control (its ``id`` is assigned here); returns the id."""
        ...
    def lift_control(self, control: int, *, at: str, by: str) -> None: ...
    def lock_leases(self, *, agent: str | None = None, instance: str | None = None,
                    task: int | None = None) -> list[TaskRow]:
        """For update: tasks under a live lease held by ``agent``, from ``instance`` (as
        instances compare: case and trailing dots aside), on ``task``; all given must
        hold, and none given means every live lease."""
        ...
    def set_budget(self, row: BudgetRow | None, *, agent: str) -> None:
        """Replace ``agent``'s budget (None: no budget)."""
        ...
    def set_enrolment(self, row: EnrolmentRow) -> None:
        """Replace ``row.agent``'s enrolment (its journal row written just before)."""
        ...
    def add_token(self, row: TokenRow) -> None: ...
    def revoke_token(self, token_id: str, at: str) -> None: ...
    def add_watch(self, row: WatchRow, *, prune_before: str) -> None:
        """Keep a new watch, deleting first a batch of those expired before
        ``prune_before``."""
        ...
    def settle_watch(self, watch_id: str, *, at: str, answer: str | None = None,
                     cancelled: bool = False) -> None:
        """Keep a watch's answer (unless it was cancelled), or mark it cancelled, at
        ``at``."""
        ...


class Store(Protocol):
    """One hivelite store: where it is, its transactions, its life."""

    @property
    def location(self) -> str:
        """Where the store is, for people and error messages (a path, a URL)."""
        ...
    @property
    def created(self) -> bool:
        """True when this opener made the store (so it may take it away again)."""
        ...
    @property
    def schema_version(self) -> int: ...
    tampered: str | None
    """Why the store's schema is not the one its migrations built (writes are refused
    then), or None."""
    def tables(self) -> Tables:
        """Raw access to the kept tables, for ``hivelite export`` and ``import``."""
        ...
    statements: frozenset[str]
    """The verbs this engine writes as their statements (:meth:`Writer.take_next`,
    :meth:`Writer.take_task`, :meth:`Writer.held`, ...); the other verbs take the write
    path's full run."""
    def read(self) -> AbstractContextManager[Reader]: ...
    def write(self, *, about: str | int | Pick | None = None
              ) -> AbstractContextManager[Writer]:
        """One write transaction. ``about``: the task the write takes first
        (``lock_task(about)``), or the pick it makes first (``next_ready``), when the verb
        knows it: a store whose round trips cost may take it with the write's first
        statements (PostgreSQL does)."""
        ...
    def transact(self, job: Callable[[Writer], T], *,
                 about: str | int | Pick | None = None) -> T:
        """``job`` in one write transaction (:meth:`write`): its answer once committed,
        or its error with what it wrote undone. An engine may write the jobs several
        threads of the process have waiting in one transaction (SQLite's group commit:
        :mod:`.group`); a job may then run on another thread, in its caller's context."""
        ...
    def close(self) -> None: ...
    def chain_key(self) -> ChainKey | None:
        """The owner's key that seals this store's journal (None: the store names none and
        there is none here; a key it names that is missing is ``key_missing``)."""
        ...
    def discard(self) -> None:
        """Close and remove a store this opener has just created."""
        ...
    def listen(self) -> None:
        """Get ready to wait for work on this thread; call it before looking for work, so
        that a task made ready after the look is not missed (:meth:`wait_for_work`)."""
        ...
    def unlisten(self) -> None:
        """Stop listening on this thread: done waiting for work (a thread that listened
        and never waited again would go on hearing of every task made ready)."""
        ...
    def wait_for_work(self, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, for a task to become ready; True when it is
        worth looking again (a task may be ready: it may also be someone else's), False
        when the time is up. Never inside a transaction: a waiting thread holds no lock.
        PostgreSQL is woken by the commit that routes a task (``LISTEN``/``NOTIFY``);
        SQLite has no such signal, so it sleeps a short while that grows from one wait to
        the next (reset by :meth:`listen`), and the caller looks again."""
        ...
