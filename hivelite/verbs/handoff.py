"""Handing work over, the owner's permission gate, and the owner's own verbs on a task."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..core.caller import Caller, require_owner
from ..core.clock import format_ts
from ..core.errors import ForbiddenRight, HiveliteError, InvalidInput, PluginError
from ..core.ids import new_task_id
from ..core.models import (
    DependsOn,
    GateDecision,
    HandoffRequest,
    Packet,
    Receipt,
    Task,
)
from ..core.protocol import State, WaitingOn
from ..store import NewTask, Reader, TaskRow, Writer
from . import guard
from .authority import store_policy
from .base import HiveBase, invalid
from .plugins import call_each
from .retries import idempotent
from .unit import Unit, receipt

DEFAULT_MAX_ATTEMPTS = 3
GATE_TARGET = {"allow": State.routed, "hold": State.waiting, "deny": State.rejected}


@dataclass(frozen=True)
class Handed:
    """One handoff, checked: what its row will hold, and the task the gate is asked about."""

    req: HandoffRequest
    task_id: str
    packet: Packet
    packet_json: str
    depends_on: tuple[int, ...]
    labels: str

    def task(self, at: str) -> Task:
        """The task as it will be created (the gate's question)."""
        req = self.req
        return Task.model_construct(
            id=self.task_id, project=req.project, state=State.requested, waiting_on=None,
            requester=req.requester, assignee=req.assignee, packet=self.packet,
            result=None, latest_checkpoint=None, created_at=at, updated_at=at)


def _numbered(items: Iterable[Any]) -> Iterator[tuple[int, Any]]:
    """``enumerate(items)``, where an error reading an item (a stream's bad line) names
    that item's place too."""
    iterator = iter(items)
    for index in itertools.count():
        try:
            item = next(iterator)
        except StopIteration:
            return
        except HiveliteError as error:
            raise in_batch(error, index) from None
        yield index, item


def in_batch(error: HiveliteError, index: int) -> HiveliteError:
    """``error`` naming the place in a bulk handoff of the task it is about."""
    if "index" not in error.extra:
        error.extra["index"] = index
        error.message = f"task {index + 1} of the batch: {error.message}"
        error.args = (f"{error.code}/{error.reason}: {error.message}",)
    return error


@idempotent
def handoff(hive: HiveBase, caller: Caller, request: HandoffRequest | None = None, *,
            depends_on: Sequence[int | str] | None = None, request_id: str | None = None,
            **fields: Any) -> Receipt:
    """Create a task: the owner's permission gate is asked first, before the write lock,
    then the task is inserted and moved in one transaction.

    Any deny rejects it, else any hold parks it waiting on the owner, else it is routed.
    The owner may hand off for any requester; an agent only as itself. A handoff that
    names its task ``id`` is a retry when that task exists with the same parties,
    project and packet: it answers with that task (another task of that id is
    ``duplicate_id``).

    ``depends_on`` names the tasks that must be completed before this one can be
    claimed, each by number (``2`` or ``"2"``) or by id, beside the other arguments or
    as the packet's ``"depends_on"`` (one place or the other, not both). The stored
    packet names them by id, each once. An unknown task, a number below 1, a bool, a text
    that is neither a number nor an id, or more than 20 tasks is ``InvalidInput``,
    naming the argument as it was given:

    ```python
    first = hive.handoff(ana, requester="ana/planner", assignee="ana/coder",
                         project="site", packet={"task": "Fix the login bug",
                         "deliverable_type": "code", "acceptance_criteria": ["tests pass"]})
    hive.handoff(ana, requester="ana/planner", assignee="ana/coder", project="site",
                 packet={"task": "Release the login fix", "deliverable_type": "other",
                         "acceptance_criteria": ["released"]},
                 depends_on=[first.number])     # or packet={..., "depends_on": [1]}
    ```
    """
    # The gate is asked first, before the write lock, about the task as it will be
    # created (its id, packet and parties are fixed by then), so a slow gate never holds
    # up other writers. The duplicate-id and dependency checks are made again under the
    # lock, where the task is inserted and moved by the gate's decision in one
    # transaction.
    caller = hive._caller(caller, "handoff")
    req, where = _request(hive, caller, request if request is not None else fields,
                          depends_on)
    limit = max_attempts(hive)
    asked = hive.clock()  # the gate's; the stored times are read under the lock
    if req.id is not None or req.packet.depends_on:
        with hive.store.read() as reader:  # a gate is not asked about a doomed handoff
            handed = _checked(hive, reader, req, where, asked)
    else:
        handed = _checked(hive, None, req, where, asked)
    if isinstance(handed, Receipt):
        return handed
    gated = _gate(hive, handed.task(format_ts(asked)))

    def statement(tx: Writer, now: datetime, at: str) -> Receipt:
        # (an id another write took meanwhile: the store refuses it, and the full run
        # answers with that task, or says duplicate_id)
        return _inserted(hive, tx, at, caller, handed, gated, limit,
                         store_policy(tx.policy()).proposals)

    def body(unit: Unit) -> Receipt:
        earlier = _earlier(hive, unit.tx, handed.task_id, req, handed.packet_json)
        if earlier is not None:  # again, locked: made meanwhile, nothing to write
            unit.as_it_is = True
            return earlier
        return _insert(hive, unit, caller, handed, gated, limit)

    return hive._verb(caller, "handoff", statement, body)


def handoff_many(hive: HiveBase, caller: Caller,
                 requests: Iterable[HandoffRequest | Mapping[str, Any]]) -> list[Receipt]:
    """Create many tasks in one transaction, each through the gate as
    :meth:`handoff` does: all of them, or (at the first refusal) none.

    ``requests`` is read once, inside the transaction, so it may stream (the CLI's
    ``--from-jsonl``). A task may depend on one handed off before it in the same batch
    (``depends_on`` beside the packet or in it, as :meth:`handoff` takes it).
    An error names the failing task's place (``index``, from 0). The gate is asked under
    the write lock here, so a long batch holds other writers for its length. A retry of
    a batch whose tasks name their ``id`` answers with the tasks the first one made.
    """
    caller = hive._caller(caller, "handoff")
    limit = max_attempts(hive)

    def body(unit: Unit) -> list[Receipt]:
        receipts: list[Receipt] = []
        for index, item in _numbered(requests):
            try:
                req, where = _request(hive, caller, item)
                handed = _checked(hive, unit.tx, req, where, unit.now)
                receipts.append(handed if isinstance(handed, Receipt) else _insert(hive,
                    unit, caller, handed, _gate(hive, handed.task(unit.at)), limit))
            except HiveliteError as error:
                raise in_batch(error, index) from None
        if not receipts:
            raise InvalidInput("empty_batch", "a bulk handoff needs at least one task",
                               field="requests")
        return receipts

    return hive._write(caller, "handoff", body)


def _request(hive: HiveBase, caller: Caller, given: HandoffRequest | Mapping[str, Any],
             depends_on: Sequence[int | str] | None = None) -> tuple[HandoffRequest, str]:
    """The handoff as asked for, validated, and where it names its dependencies; an agent
    hands off only as itself."""
    req, where = requested(given, depends_on)
    if not caller.is_owner and req.requester != caller.name:
        raise ForbiddenRight("not_requester", f"{caller} hands off only as itself, not"
                             f" as {req.requester}")
    return req, where


class _Beside(BaseModel):
    """``depends_on`` named beside the packet (so a refusal names it as given)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    depends_on: DependsOn


def requested(given: HandoffRequest | Mapping[str, Any],
              depends_on: Sequence[int | str] | None = None) -> tuple[HandoffRequest, str]:
    """The handoff validated, with the dependencies named beside the packet (the
    ``depends_on`` argument, or a mapping's ``"depends_on"`` key) moved into it, as the
    seed's packet holds them; and where the caller named them: ``depends_on`` or
    ``packet.depends_on`` (its refusals say it as the caller wrote it). Named in both
    places is refused: which list was meant is the caller's to say."""
    if not isinstance(given, HandoffRequest) and "depends_on" in given:  # a batch's item
        given = dict(given)  # (a keyword argument of handoff is its own parameter)
        depends_on = given.pop("depends_on")
    beside: list[str] | None = None
    try:
        if depends_on is not None:
            beside = _Beside.model_validate({"depends_on": depends_on}).depends_on
        req = (given if isinstance(given, HandoffRequest)
               else HandoffRequest.model_validate(given))
    except ValidationError as exc:
        raise invalid(exc, "handoff") from None
    if not beside:  # none given beside (an empty list names none)
        return req, "packet.depends_on"
    if req.packet.depends_on:
        from ..core.wording import spelling

        raise InvalidInput(
            "invalid_handoff", "invalid handoff: the tasks it depends on are given twice, as"
            f" {spelling('depends_on')} and as {spelling('packet.depends_on')}; give them in"
            " one place", field="depends_on")
    req = req.model_copy(update={
        "packet": req.packet.model_copy(update={"depends_on": beside})})
    return req, "depends_on"


def _checked(hive: HiveBase, reader: Reader | None, req: HandoffRequest, where: str,
             at: datetime) -> Handed | Receipt:
    """The task this handoff makes (its id, its dependencies as ids and numbers), or the
    task an earlier identical handoff made. ``reader`` is needed only for a handoff
    naming its id or dependencies."""
    task_id = req.id or new_task_id(at)
    packet, depends_on = req.packet, tuple[int, ...]()
    if reader is not None:
        packet, depends_on = _dependencies(hive, reader, req.packet, where)
    packet_json = packet.model_dump_json()
    if reader is not None:
        earlier = _earlier(hive, reader, task_id, req, packet_json)
        if earlier is not None:
            return earlier
    return Handed(req, task_id, packet, packet_json, depends_on,
                  json.dumps(sorted(set(req.labels))))


def _insert(hive: HiveBase, unit: Unit, caller: Caller, handed: Handed,
            gated: tuple[GateDecision, list[dict[str, str]]], limit: int) -> Receipt:
    """Insert the task and make the gate's move (or the store policy's hold), in the full
    run: an enrolled agent hands off within its projects."""
    unit.check_project(handed.req.project)
    unit.journaled = True
    return _inserted(hive, unit.tx, unit.at, caller, handed, gated, limit,
                     unit.policy().proposals)


def _inserted(hive: HiveBase, tx: Writer, at: str, caller: Caller, handed: Handed,
              gated: tuple[GateDecision, list[dict[str, str]]], limit: int,
              proposals: str) -> Receipt:
    """The task inserted and moved where the gate decided (or, the policy's
    ``proposals`` being ``owner``, held for the owner when an agent proposed it); the
    store's rules check the move."""
    req, (decision, answers) = handed.req, gated
    number = tx.insert_task(
        NewTask(id=handed.task_id, project=req.project, requester=req.requester,
                assignee=req.assignee, at=at, priority=req.priority,
                labels=handed.labels, depends=len(handed.depends_on),
                packet=handed.packet_json, depends_on=handed.depends_on,
                attempt_limit=limit, role=req.role),
        actor=caller.name, reason="handoff")
    moved, reason, decided_by = GATE_TARGET[decision.action], decision.reason, decision.plugin
    if (moved is State.routed and not caller.is_owner
            and proposals == "owner"):  # seed 004: a person approves
        moved, decided_by = State.waiting, "store policy"
        reason = (f"proposed by {caller.name}; this store holds every task an agent"
                  f" proposes for {hive.owner}'s approval (policy proposals=owner)")
    waiting = WaitingOn.owner_approval if moved is State.waiting else None
    tx.move(number, State.requested.value, moved.value, at=at, actor="gate", reason=reason,
            waiting_on=waiting.value if waiting is not None else None,
            detail={"decided_by": decided_by, "answers": answers})
    return receipt(number, handed.task_id, moved, at, waiting)


def _earlier(hive: HiveBase, reader: Reader, task_id: str, req: HandoffRequest,
             packet_json: str) -> Receipt | None:
    """The task this handoff already made (same id, parties, project and packet) as it
    stands, or None when the id is free; another task of that id is ``duplicate_id``."""
    row = reader.task(task_id)
    if row is None:
        return None
    if ((row.requester, row.assignee, row.project, row.role) != (
            req.requester, req.assignee, req.project, req.role)
            or reader.bodies(row.number).packet != packet_json):
        raise InvalidInput("duplicate_id", f"a task with id {task_id!r} exists (task"
                           f" {row.number}) with other content; a retry repeats the same"
                           " handoff, a new task takes a new id", field="id")
    return Receipt.model_construct(
        number=row.number, id=row.id, state=State(row.state),
        waiting_on=WaitingOn(row.waiting_on) if row.waiting_on else None,
        at=row.created_at, seq=None)


def _dependencies(hive: HiveBase, reader: Reader, packet: Packet,
                  where: str) -> tuple[Packet, tuple[int, ...]]:
    """The packet with each ``depends_on`` entry as the task's id (an entry may name a
    task by id or by number; a task named twice is one dependency), and those tasks'
    numbers; every one must exist. ``where`` is where the caller named them (its refusal
    says it so)."""
    from ..core.wording import field_words

    if not packet.depends_on:
        return packet, ()
    named = field_words(where.split("."), "handoff")
    found = reader.numbers_of(packet.depends_on)
    missing = [ref for ref in packet.depends_on if ref not in found]
    if missing:
        raise InvalidInput(
            "unknown_dependency",
            f"{named}: this store has no task {', '.join(missing)}",
            field=where)
    ids = list(dict.fromkeys(found[ref][1] for ref in packet.depends_on))
    numbers = tuple(sorted({found[ref][0] for ref in packet.depends_on}))
    return packet.model_copy(update={"depends_on": ids}), numbers


def said_where(error: HiveliteError, where: str) -> HiveliteError:
    """A served handoff's refusal of its dependencies (the server names them as the body
    carried them, ``packet["depends_on"]``) naming them as this caller gave them:
    ``where``, spelled as the face in front spells it (the ``Client``'s own caller, or the
    CLI over ``--url``)."""
    from ..core.wording import SPELLING, field_words, spelled

    if error.extra.get("field") != "packet.depends_on":
        return error
    with spelled("python"):
        served = field_words(["packet", "depends_on"], "handoff")
    if SPELLING.get() == "python" and where == "packet.depends_on":
        return error
    error.message = error.message.replace(served, field_words(where.split("."), "handoff"), 1)
    error.extra["field"] = where
    error.args = (f"{error.code}/{error.reason}: {error.message}",)
    return error


def max_attempts(hive: HiveBase) -> int:
    """Failed outcomes a new task may have before it is no longer claimable: the
    ``max_attempts`` of the settings file's ``[queue]`` table, default 3."""
    value = hive.settings("queue").get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise InvalidInput("invalid_config", f"[queue] max_attempts must be an integer"
                           f" from 1 to 1000, not {value!r}", field="queue.max_attempts")
    return value


def _gate(hive: HiveBase, task: Task) -> tuple[GateDecision, list[dict[str, str]]]:
    """Every gate plugin's answer; any deny wins, then any hold, else allow (asked
    outside any transaction: see :meth:`handoff`)."""
    decisions: list[GateDecision] = []
    for plugin, answer in call_each(hive.plugins, "hivelite_permission_gate",
                                    task=task, hive=hive):
        if answer is None:
            continue
        if isinstance(answer, str) and answer in GATE_TARGET:
            answer = GateDecision(action=answer, reason=f"{plugin} says {answer}")
        if not isinstance(answer, GateDecision):
            raise PluginError(plugin, "hivelite_permission_gate",
                              f"returned {answer!r}; expected a GateDecision, "
                              "'allow', 'hold', 'deny' or None")
        decisions.append(answer.model_copy(update={"plugin": plugin}))
    answers = [{"plugin": d.plugin or "", "action": d.action, "reason": d.reason}
               for d in decisions]
    for action in ("deny", "hold", "allow"):
        for decision in decisions:
            if decision.action == action:
                return decision, answers
    return GateDecision(action="allow", reason="no gate plugin objected"), answers


def _owner_move(hive: HiveBase, caller: Caller, ref: str | int, target: State, verb: str,
                reason: str | None, check: Callable[[TaskRow], object]) -> Receipt:
    caller = hive._caller(caller, verb)
    who = require_owner(caller, hive.owner, verb)
    reason = guard.reason_fits(reason)
    def body(unit: Unit) -> Receipt:
        row = unit.task(ref)
        check(row)
        row = unit.move(row, target, actor=who, reason=reason or verb,
                        end_lease=row.lease_id is not None)
        return unit.receipt(row)

    return hive._moved_by_owner(caller, verb, ref, target, reason=reason or verb,
                                explain=body, accepts=_held_for_the_owner)


def _held_for_the_owner(row: TaskRow) -> bool:
    return row.state == State.waiting.value and (
        row.waiting_on == WaitingOn.owner_approval.value)


@idempotent
def approve(hive: HiveBase, caller: Caller, ref: str | int, *, reason: str | None = None,
            request_id: str | None = None) -> Receipt:
    """The owner lets a held handoff go ahead: waiting(owner_approval) -> routed."""
    return _owner_move(hive, caller, ref, State.routed, "approve", reason,
                       lambda row: guard.awaiting_owner(row, "approve"))


@idempotent
def deny(hive: HiveBase, caller: Caller, ref: str | int, *, reason: str | None = None,
         request_id: str | None = None) -> Receipt:
    """The owner refuses a held handoff: waiting(owner_approval) -> rejected."""
    return _owner_move(hive, caller, ref, State.rejected, "deny", reason,
                       lambda row: guard.awaiting_owner(row, "deny"))


@idempotent
def cancel(hive: HiveBase, caller: Caller, ref: str | int, *, reason: str | None = None,
           request_id: str | None = None) -> Receipt:
    """Withdraw an open task (requested, waiting, routed, accepted, working): the owner any
    task; in team mode, an agent of a guest owner the requests of that owner's agents
    (seed 000: the requesting agent's owner cancels)."""
    caller = hive._caller(caller, "cancel")
    given = guard.reason_fits(reason) if caller.is_owner else reason  # an agent: who first

    def body(unit: Unit) -> Receipt:
        row = unit.task(ref)
        why = given
        if not caller.is_owner:
            _withdraws(unit, caller, row, hive.owner)
            why = guard.reason_fits(given)
        guard.cancellable(row)
        row = unit.move(row, State.cancelled, actor=caller.name, reason=why or "cancel",
                        end_lease=row.lease_id is not None)
        return unit.receipt(row)

    if caller.is_owner:  # (the rules: which states)
        return hive._moved_by_owner(caller, "cancel", ref, State.cancelled,
                                    reason=given or "cancel", explain=body)
    if reason is not None and not (isinstance(reason, str)
                                   and len(reason) <= guard.MAX_REASON):
        return hive._write(caller, "cancel", body, about=ref)  # (who first, then why)
    why = guard.reason_fits(reason) or "cancel"  # (named after who may cancel)
    return hive._verb(caller, "cancel", lambda tx, now, at: _withdrawn(tx, at, caller, ref, why),
                      body, about=ref)


def _withdrawn(tx: Writer, at: str, agent: Caller, ref: str | int, why: str) -> Receipt | None:
    """An agent's cancel as its statement: the task cancelled by the agent, which the
    rules take only in team mode, from an agent of the guest owner whose agent requested
    it, and from a state a task is cancelled from; else the full run says which. A task the
    agent holds under an earlier enrolment than the one in force takes the full run (the
    claim ends with the move, so no rule sees the enrolment it was taken under: the full
    run says ``optin_changed``)."""
    row = tx.lock_task(ref)
    if row is None:
        return None
    if row.lease_holder == agent.name:
        enrolled = tx.enrolments(agent.name)
        if row.lease_scope != (enrolled[0].seq if enrolled and enrolled[0].active else None):
            return None
    tx.move(row.number, row.state, State.cancelled.value, at=at, actor=agent.name,
            reason=why, end_lease=row.lease_id is not None)
    return receipt(row.number, row.id, State.cancelled, at)


def _withdraws(unit: Unit, agent: Caller, row: TaskRow, owner: str) -> None:
    """``403 not_permitted`` unless, in team mode, ``agent`` belongs to the guest owner
    whose agent requested the task."""
    guest = row.requester.partition("/")[0]
    if (unit.policy().mode != "team" or guest == owner
            or agent.name.partition("/")[0] != guest):
        raise ForbiddenRight(
            "not_permitted", f"only the owner {owner!r} may cancel task {row.number}; {agent}"
            " may not (in team mode an agent of a guest owner withdraws that owner's own"
            f" requests, and {row.requester} requested this one)")


__all__ = ["approve", "cancel", "deny", "handoff", "handoff_many", "max_attempts",
           "requested", "said_where"]
