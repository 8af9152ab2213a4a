"""The rows a store hands across its contract: named, backend-neutral, plain values.

No positional tuples and no database objects leave a store: every backend
fills these same types, so the code above it reads ``row.verdict``, never ``c[3]``.
"""

from __future__ import annotations

from typing import Any

from ..core.ids import number_of
from .records import fields, record


@record()
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
    waits: int = 0
    """How many of those are not completed yet (the store keeps the count)."""
    attempts: int = 0
    """Failed outcomes so far."""
    attempt_limit: int = 3
    """Failed outcomes after which the task is no longer claimable."""
    role: str | None = None
    """The role its assignee must be enrolled in to claim it (seed 004's task role)."""
    lease_scope: int | None = None
    """The enrolment the live lease was taken under (its journal seq; None: none)."""

    @property
    def exhausted(self) -> bool:
        return self.attempts >= self.attempt_limit


@record(frozen=True)
class NewTask:
    """What a handoff inserts: the task row's own facts and its packet."""

    id: str
    project: str
    requester: str
    assignee: str
    at: str
    priority: str
    labels: str
    depends: int
    packet: str
    depends_on: tuple[int, ...] = ()
    """The numbers of the tasks it depends on (each older than it)."""
    attempt_limit: int = 3
    role: str | None = None


@record(frozen=True)
class EnrolmentRow:
    """An agent's enrolment (seed 004's opt-in) as the store keeps it: the projects (a
    JSON array, ``[]`` for every one) and roles it covers, its write rights (comma
    separated), whether it is active, and the journal row that set it."""

    agent: str
    projects: str
    roles: str
    rights: str
    active: int
    seq: int
    at: str
    by: str


@record(frozen=True)
class Dependency:
    """A task another waits on, as it stands."""

    number: int
    id: str
    state: str


@record(frozen=True)
class Bodies:
    """A task's large JSON, kept apart from its hot row: packet, result, checkpoint."""

    packet: str
    result: str | None
    checkpoint: str | None


@record(frozen=True)
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


@record(frozen=True)
class ConfirmationRow:
    """One verdict on one version of a task's result."""

    reviewer: str
    instance: str
    session: str | None
    verdict: str
    reason: str | None
    at: str
    counted: bool
    why: str | None = None
    """Why a verdict was not counted (None when it was)."""


@record(frozen=True)
class UpdateRow:
    """One line of progress with the usage it reported."""

    at: str
    actor: str
    summary: str
    tokens: int | None
    usd_micros: int | None


@record(frozen=True)
class ViewRow:
    """Everything a task view shows, read in one snapshot."""

    task: TaskRow
    bodies: Bodies
    meta: ResultMeta | None
    confirmations: list[ConfirmationRow]
    updates: list[UpdateRow]
    """The newest first."""
    tokens: int
    usd_micros: int
    dependencies: tuple[Dependency, ...] = ()
    """The tasks it depends on, oldest first."""
    created_by: str | None = None
    """Who handed it off (the actor of its first journal row)."""
    question: tuple[JournalRow, ...] = ()
    """Its latest question and the answers since (``Reader.question``), while it waits on
    one or has just resumed; else empty."""
    decision: JournalRow | None = None
    """The move that decided on its current result (``Reader.decision``), when it has one."""
    draft: str | None = None
    """Its result's draft (JSON), when the result brings one."""
    draft_seq: int | None = None
    """The journal row of the submission that recorded the draft."""
    receipts: str | None = None
    """Its result's evidence receipts as hivelite checked them (JSON), if any."""


@record(frozen=True)
class JournalRow:
    """One journal row with its task's id and the number of the move it records."""

    seq: int
    task: str | None
    number: int | None
    at: str
    actor: str | None
    from_state: str | None
    to_state: str | None
    waiting_on: str | None
    move: int | None
    reason: str | None
    detail: dict[str, Any] | None

    def fields(self) -> dict[str, Any]:
        """The row's fields by name, without copying them (``dataclasses.asdict`` deep-copies
        each detail, which cost a bulk handoff a fifth of its time)."""
        return {name: getattr(self, name) for name in fields(self)}

    @property
    def is_move(self) -> bool:
        """A state change (creation included), not an event recorded in place."""
        return self.from_state != self.to_state


@record(frozen=True)
class Lease:
    """A claim's terms as its verb fixed them before the write: who takes it, from where,
    under which id, until when."""

    lease_id: str
    holder: str
    instance: str
    session: str | None
    expires: str
    scope: int | None = None
    """The holder's enrolment it is taken under (its seq; None: the holder has none)."""
    projects: tuple[str, ...] | None = None
    """The projects that enrolment covers, for ``next``'s pick (None: every one)."""
    roles: tuple[str, ...] = ()
    """The roles that enrolment takes tasks for, for ``next``'s pick."""


@record(frozen=True)
class Taken:
    """What a claim's statement answers: the task it took, its id, the new fencing token,
    and the seq of the move's journal row (0 on an engine that numbers its rows at the
    commit: the write path then names it, ``Writer.journal_end``)."""

    number: int
    id: str
    token: int
    seq: int


@record(frozen=True)
class Held:
    """A task under the caller's live claim, as the fence's statement found it."""

    number: int
    id: str
    state: str
    session: str | None
    project: str


@record(frozen=True)
class Expiry:
    """When the clock last ended a claim on a task, and that claim's fencing token."""

    expired_at: str
    token: int


@record(frozen=True)
class RequestRow:
    """A write's first answer, kept for retries with the same request id."""

    caller: str
    id: str
    verb: str
    digest: str
    answer: str
    at: str
    sealed: bool | None = None
    """As read: whether the record carries the seal of the owner's key (None: the reader
    had no key at hand to check it). A record written outside hivelite is never
    replayed."""


@record(frozen=True)
class ListFilter:
    """Which tasks a listing keeps (every field optional; all that are set must hold)."""

    states: tuple[str, ...] = ()
    assignee: str | None = None
    requester: str | None = None
    project: str | None = None
    ready: bool = False
    """Routed tasks whose ``depends_on`` tasks are all completed, with attempts left."""
    blocked: bool = False
    """Open tasks with a dependency not completed."""
    labels: tuple[str, ...] = ()
    """Tasks carrying every one of these labels."""
    priorities: tuple[str, ...] = ()
    role: str | None = None
    """Tasks needing this role (seed 004's listing ``role``)."""
    search: str | None = None
    """Tasks whose title, assignee or a label holds this text (given in lower case: the
    match ignores the case of ASCII letters)."""
    sort: str = "age"
    """``age`` (oldest first, the default), ``priority`` (most pressing, then oldest) or
    ``updated`` (most recently changed first)."""


@record(frozen=True)
class ControlRow:
    """One of the owner's controls: a hold, veto or stop, and its lift once lifted."""

    id: int
    kind: str
    agent: str | None
    instance: str | None
    task: int | None
    at: str
    by: str
    reason: str | None
    lifted_at: str | None = None
    lifted_by: str | None = None


@record(frozen=True)
class BudgetRow:
    """An agent's daily limits (None: no limit of that kind)."""

    agent: str
    tasks: int | None
    tokens: int | None
    usd_micros: int | None
    at: str
    by: str


@record(frozen=True)
class Spend:
    """What an agent used in one day: claims taken and usage reported."""

    tasks: int = 0
    tokens: int = 0
    usd_micros: int = 0


@record(frozen=True)
class RequiredPlugin:
    """A policy plugin the owner requires of every process that writes."""

    name: str
    kind: str
    """``entry_point``, ``file`` or ``given``."""
    digest: str
    """What identifies this plugin's code: its distribution and version, or the hash of
    its file's content."""
    settings: str
    """The plugin's settings table, as canonical JSON."""
    at: str
    by: str


@record(frozen=True)
class TokenRow:
    """An access token as the store keeps it: never its secret, only the secret's hash."""

    id: str
    agent: str | None
    """The agent it acts as (None: the owner's token)."""
    instance: str | None
    rights: str
    """Comma-separated: some of ``tasks.read``, ``tasks.propose``, ``tasks.work``; or
    ``owner``."""
    hash: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    by: str


@record(frozen=True)
class WatchRow:
    """A caller's durable wait (the MCP face's task): what it asked and, once the queue
    answered, the answer; where it stands is read from its task when asked."""

    id: str
    """Random (at least 128 bits), never a task number: it is the MCP ``taskId``."""
    caller: str
    """Who made it: the owner's slug or the agent's name."""
    token: str | None
    """The id of the token that proved the caller (None: a caller no token proved, the
    local MCP server's); every later ask must come with the same."""
    verb: str
    """What it waits on: ``handoff`` (the task's outcome), ``await`` (an outcome or a
    verdict) or ``next`` (the caller's queue)."""
    number: int | None
    """The task it follows (None: ``next``, until it claims one)."""
    asked: str
    """What was asked, as JSON (the awaited outcome, the submission, the queue's filter)."""
    answer: str | None
    """The answer kept once there is one to keep (``next``'s claim), as JSON."""
    created_at: str
    updated_at: str
    expires_at: str
    poll_ms: int
    cancelled_at: str | None
    sealed: bool | None = None
    """As read: whether the watch carries the seal of the owner's key (None: the reader
    had no key at hand, or it is being written). One made or changed outside hivelite is
    never answered."""


def task_key(ref: str | int) -> tuple[str | None, str | int]:
    """How to find a task: by ``number`` (an int, or ASCII digits) or by ``id``;
    (None, ref) when no task can have it (0, or a number beyond 64-bit integers)."""
    if isinstance(ref, str) and not (ref.isascii() and ref.isdigit()):
        return "id", ref
    if isinstance(ref, bool) or not isinstance(ref, int | str):
        return None, ref
    number = ref if isinstance(ref, int) else number_of(ref)
    assert number is not None  # ASCII digits
    return ("number", number) if 0 < number < 2**63 else (None, ref)


@record(frozen=True)
class LinkRow:
    """One journal row as its chain link covers it: its seq and stored hash, the hash of
    the row before it (the store's identity for the first), and its content
    (``chain.CONTENT``'s columns)."""

    seq: int
    hash: object
    """As stored: raw SQL may have written anything."""
    before: str | None
    content: tuple[Any, ...]
    by_task: bool = False
    """Whether the row is chained per task (``before`` is its task's row before it)."""
