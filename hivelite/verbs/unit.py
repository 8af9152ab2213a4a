"""The unit of work: one write verb's transaction as the verb's body sees it.

``HiveBase._write`` opens it (the time read under the write lock, the expiry
sweep, the admission seam), runs the verb's body, commits, and announces the
moves from the journal afterwards. A body only reads the rows it needs (locked
for update), checks, and moves; it never writes its own transaction skeleton.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any

from ..core.caller import Caller
from ..core.clock import format_ts
from ..core.models import ClaimReceipt, Receipt, StorePolicy, made
from ..core.protocol import STATE_OF, WAITING_OF, Mode, Right, State, WaitingOn
from ..store import ControlRow, EnrolmentRow, TaskRow, Writer
from ..store.columns import submission_detail
from ..store.records import fields
from . import guard
from .authority import refuse_veto, store_policy, vetoed
from .scope import changed, lacks_role, outside_project, outside_rights

_ROW = attrgetter(*fields(TaskRow))


def updated(row: TaskRow, **changes: Any) -> TaskRow:
    """A copy of ``row`` with ``changes``: the row as a write leaves it. (The hot path's own
    copy: ``dataclasses.replace`` checks each field and rebuilds through ``__init__``, ten
    times slower; a name the row lacks is refused all the same.)"""
    after = TaskRow(*_ROW(row))
    for name, value in changes.items():
        setattr(after, name, value)
    return after


def receipt(number: int, task_id: str, state: State | str, at: str,
            waiting_on: WaitingOn | str | None = None) -> Receipt:
    """The answer of a write (``TaskAckV1``): the task as the write left it, at its time
    (the write path names the journal seq after the commit)."""
    return made(Receipt, {
        "number": number, "id": task_id,
        "state": STATE_OF[state] if isinstance(state, str) else state,
        "waiting_on": WAITING_OF[waiting_on] if isinstance(waiting_on, str) else waiting_on,
        "at": at, "seq": None})


@dataclass
class Unit:
    """One write in progress: its transaction, caller and time, and what it changed."""

    tx: Writer
    caller: Caller | None
    """None only for the library's own sweeps (opening a store)."""
    now: datetime
    at: str = ""
    swept: list[TaskRow] = field(default_factory=list)
    """Tasks whose expired claims this write returned to ``routed`` first."""
    journaled: bool = False
    """Whether this write journaled a row for the task it answers about; the write path
    then fills the receipt's ``seq``."""
    as_it_is: bool = False
    """The body answers with what the store holds as it is, and has nothing to write (a
    handoff another write made already): an answer even after the store refused the
    verb's statement, which a body that writes never is."""
    verb: str = "write"
    mode: Mode = Mode.write
    """How the write path admits this write: its verb's mode (the verb table's)."""
    right: Right | None = None
    """The right its verb needs (the verb table's): an enrolment must give it too."""
    controls: list[ControlRow] = field(default_factory=list)
    """The owner's live controls, read for an agent's write (its vetoes are checked when
    it names a task)."""
    subject: int | None = None
    """The task this write named (the first one :meth:`task` locked): an error in the
    write names it."""
    _policy: StorePolicy | None = None
    _enrolment: list[EnrolmentRow] | None = None

    def __post_init__(self) -> None:
        self.at = format_ts(self.now)

    def policy(self) -> StorePolicy:
        """The store's policy as this transaction sees it (read once)."""
        if self._policy is None:
            self._policy = store_policy(self.tx.policy())
        return self._policy

    def enrolment(self) -> EnrolmentRow | None:
        """The calling agent's enrolment as this transaction sees it (read once; None for
        the owner, or an agent with none)."""
        if self.caller is None or self.caller.is_owner:
            return None
        if self._enrolment is None:
            self._enrolment = self.tx.enrolments(self.caller.name)
        return self._enrolment[0] if self._enrolment else None

    def check_project(self, project: str) -> None:
        """``403 optin_scope`` when the calling agent's enrolment does not cover
        ``project``."""
        row = self.enrolment()
        if row is not None:
            refusal = outside_project(row, row.agent, project)
            if refusal is not None:
                raise refusal

    def check_scope(self, row: TaskRow) -> None:
        """The calling agent's enrolment on a task it writes about: a claim taken under
        another enrolment (``409 optin_changed``), a project outside it (``403
        optin_scope``), a role it lacks when it claims (``403 not_permitted``). Giving a
        claim back is never refused."""
        if self.caller is None or self.caller.is_owner or self.verb == "release":
            return
        enrolment, agent = self.enrolment(), self.caller.name
        right = self.right.value if self.right else None
        for refusal in (changed(enrolment, agent, row),
                        outside_rights(enrolment, agent, self.verb, right)
                        if self.mode is Mode.holder else None,
                        outside_project(enrolment, agent, row.project),
                        lacks_role(enrolment, agent, row) if self.mode is Mode.claiming
                        else None):
            if refusal is not None:
                raise refusal

    def check_veto(self, row: TaskRow) -> None:
        """``403 forbidden_right vetoed`` when the owner vetoed the calling agent on this
        task (a claim of it, or a write under its lease)."""
        if self.caller is not None and not self.caller.is_owner:
            veto = vetoed(self.controls, self.caller.name, row.number)
            if veto is not None:
                raise refuse_veto(veto, self.caller.name, row.number)

    @property
    def who(self) -> str:
        """The caller's name as the journal records it."""
        return self.caller.name if self.caller is not None else "clock"

    def task(self, ref: str | int) -> TaskRow:
        """The task's row, locked for this write, or ``404 not_found``; ``403 vetoed`` when
        the owner vetoed the calling agent on it (a veto refuses every write of that agent
        on that task)."""
        row = guard.found(self.tx.lock_task(ref), ref)
        if self.subject is None:
            self.subject = row.number
        self.check_veto(row)
        self.check_scope(row)
        return row

    def move(self, row: TaskRow, target: State, *, actor: str, reason: str | None,
             detail: dict[str, Any] | None = None, waiting_on: WaitingOn | None = None,
             end_lease: bool = False) -> TaskRow:
        """Make one move (checked here first, then by the store); the row as it is after."""
        guard.check_move(row.state, row.waiting_on, target, waiting_on)
        waiting = waiting_on.value if waiting_on is not None else None
        self.tx.move(row.number, row.state, target.value, at=self.at, actor=actor, reason=reason,
                     detail=detail, waiting_on=waiting, end_lease=end_lease)
        self.journaled = True
        if end_lease:
            return updated(row, state=target.value, waiting_on=waiting, updated_at=self.at,
                           reason=reason, lease_id=None, lease_holder=None,
                           lease_instance=None, lease_session=None, lease_expires=None)
        return updated(row, state=target.value, waiting_on=waiting, updated_at=self.at,
                       reason=reason)

    def submission(self, row: TaskRow, target: State, *, actor: str, reason: str,
                   sealed: dict[str, Any], judged: dict[str, Any]) -> TaskRow:
        """A submission's one journal row: from the holder's state through ``verifying``
        (ending the claim) to the guard's judgement ``target``, as the seed moves 7, 12
        and 13, 14 or 15 (each checked here first, then by the store)."""
        via = guard.check_passage(row.state, target)
        self.tx.move(row.number, row.state, target.value, at=self.at, actor=actor,
                     reason=reason, detail=submission_detail(via, sealed, judged),
                     end_lease=True)
        self.journaled = True
        return updated(row, state=target.value, waiting_on=None, updated_at=self.at,
                       reason=reason, lease_id=None, lease_holder=None, lease_instance=None,
                       lease_session=None, lease_expires=None)

    def event(self, row: TaskRow, reason: str, detail: dict[str, Any] | None = None) -> None:
        """Journal something that happened to the task without moving it."""
        self.tx.record_event(row.number, at=self.at, actor=self.who, state=row.state,
                             reason=reason, detail=detail)
        self.journaled = True

    def start_lease(self, row: TaskRow, target: State, *, lease_id: str, token: int,
                    expires: str, reason: str) -> TaskRow:
        """Move into ``accepted``/``working`` under a new lease held by the caller."""
        agent = self.caller
        assert agent is not None and agent.instance is not None
        guard.check_move(row.state, row.waiting_on, target)
        self.tx.start_lease(
            row.number, row.state, target.value, lease_id=lease_id, token=token, holder=agent.name,
            instance=agent.instance, session=agent.session, expires=expires, at=self.at,
            reason=reason, detail={"fencing_token": token, "instance": agent.instance,
                                   "session": agent.session, "expires_at": expires},
            scope=scope.seq if (scope := self.enrolment()) is not None else None)
        self.journaled = True
        return updated(row, state=target.value, waiting_on=None, lease_id=lease_id,
                       lease_token=token, lease_holder=agent.name,
                       lease_instance=agent.instance, lease_session=agent.session,
                       lease_expires=expires, updated_at=self.at, reason=reason,
                       lease_scope=scope.seq if scope is not None else None)

    def receipt(self, row: TaskRow) -> Receipt:
        """The answer of a write (``TaskAckV1``) from the row as this write left it (the
        write path adds the journal seq after the body)."""
        return receipt(row.number, row.id, row.state, self.at, row.waiting_on)

    def claim_receipt(self, row: TaskRow) -> ClaimReceipt:
        """The answer of claim, resume and renew (``TaskClaimAckV1``)."""
        return made(ClaimReceipt, {
            "number": row.number, "id": row.id, "state": STATE_OF[row.state],
            "waiting_on": None, "at": self.at, "seq": None, "lease_id": row.lease_id or "",
            "fencing_token": row.lease_token, "holder": row.lease_holder or "",
            "instance": row.lease_instance or "", "session": row.lease_session,
            "expires_at": row.lease_expires or "", "question": None})
