"""Handing work over, the owner's permission gate, and the owner's own verbs on a task."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from . import guard
from .base import HiveBase, invalid
from .caller import Caller, require_owner
from .clock import format_ts
from .errors import ForbiddenRight, InvalidInput, PluginError
from .ids import new_task_id
from .models import GateDecision, HandoffRequest, Packet, Receipt, Task
from .plugins import call_each
from .protocol import State, WaitingOn
from .store import NewTask, Reader, TaskRow
from .unit import Unit

GATE_TARGET = {"allow": State.routed, "hold": State.waiting, "deny": State.rejected}


class HandoffVerbs(HiveBase):
    """handoff, approve, deny, cancel."""

    def handoff(self, caller: Caller, request: HandoffRequest | None = None,
                **fields: Any) -> Receipt:
        """Create a task: the owner's permission gate is asked first, before the write lock,
        then the task is inserted and moved in one transaction.

        Any deny rejects it, else any hold parks it waiting on the owner, else it is routed.
        The owner may hand off for any requester; an agent only as itself.
        """
        # The gate is asked first, before the write lock, about the task as it will be
        # created (its id, packet and parties are fixed by then), so a slow gate never holds
        # up other writers. The duplicate-id and dependency checks are made again under the
        # lock, where the task is inserted and moved by the gate's decision in one
        # transaction.
        caller = self._caller(caller, "hand off")
        try:
            req = request if request is not None else HandoffRequest.model_validate(fields)
        except ValidationError as exc:
            raise invalid(exc, "handoff") from None
        if not caller.is_owner and req.requester != caller.name:
            raise ForbiddenRight("not_requester", f"{caller} hands off only as itself, not"
                                 f" as {req.requester}")
        packet_json = req.packet.model_dump_json()
        labels = json.dumps(sorted(set(req.labels)))
        asked = self.clock()  # the gate's; the stored times are read under the lock
        task_id = req.id or new_task_id(asked)
        if req.id is not None or req.packet.depends_on:
            with self.store.read() as reader:  # a gate is not asked about a doomed handoff
                self._check_new(reader, task_id, req.packet)
        at = format_ts(asked)
        decision, answers = self._gate(Task.model_construct(
            id=task_id, project=req.project, state=State.requested, waiting_on=None,
            requester=req.requester, assignee=req.assignee, packet=req.packet,
            result=None, latest_checkpoint=None, created_at=at, updated_at=at))
        target = GATE_TARGET[decision.action]

        def body(unit: Unit) -> Receipt:
            self._check_new(unit.tx, task_id, req.packet)  # again: another writer was quicker
            number = unit.tx.insert_task(
                NewTask(id=task_id, project=req.project, requester=req.requester,
                        assignee=req.assignee, at=unit.at, priority=req.priority,
                        labels=labels, depends=len(req.packet.depends_on),
                        packet=packet_json),
                actor=unit.who, reason="handoff")
            row = TaskRow(
                number=number, id=task_id, state=State.requested.value, waiting_on=None,
                project=req.project, requester=req.requester, assignee=req.assignee,
                created_at=unit.at, updated_at=unit.at, lease_id=None, lease_token=0,
                lease_holder=None, lease_instance=None, lease_session=None, lease_expires=None,
                priority=req.priority, labels=labels, fields_version=1, reason="handoff",
                depends=len(req.packet.depends_on))
            row = unit.move(row, target, actor="gate", reason=decision.reason,
                            waiting_on=WaitingOn.owner_approval
                            if target is State.waiting else None,
                            detail={"decided_by": decision.plugin, "answers": answers})
            return unit.receipt(row)

        return self._write(caller, "hand off", body)

    def _check_new(self, reader: Reader, task_id: str, packet: Packet) -> None:
        """The id is free and every task the packet depends on exists."""
        if reader.task(task_id) is not None:
            raise InvalidInput("duplicate_id", f"a task with id {task_id!r} exists",
                               field="id")
        if not packet.depends_on:
            return
        missing = sorted(set(packet.depends_on) - reader.existing_ids(packet.depends_on))
        if missing:
            raise InvalidInput(
                "unknown_dependency",
                f"packet.depends_on names tasks this store does not have: {', '.join(missing)}",
                field="packet.depends_on")

    def _gate(self, task: Task) -> tuple[GateDecision, list[dict[str, str]]]:
        """Every gate plugin's answer; any deny wins, then any hold, else allow (asked
        outside any transaction: see :meth:`handoff`)."""
        decisions: list[GateDecision] = []
        for plugin, answer in call_each(self.plugins, "hivelite_permission_gate",
                                        task=task, hive=self):
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

    def _owner_move(self, caller: Caller, ref: str | int, target: State, verb: str,
                    reason: str | None, check: Callable[[TaskRow], object]) -> Receipt:
        caller = self._caller(caller, verb)
        who = require_owner(caller, self.owner, verb)
        reason = guard.reason_fits(reason)

        def body(unit: Unit) -> Receipt:
            row = unit.task(ref)
            check(row)
            row = unit.move(row, target, actor=who, reason=reason or verb,
                            end_lease=row.lease_id is not None)
            return unit.receipt(row)

        return self._write(caller, verb, body)

    def approve(self, caller: Caller, ref: str | int, *, reason: str | None = None) -> Receipt:
        """The owner lets a held handoff go ahead: waiting(owner_approval) -> routed."""
        return self._owner_move(caller, ref, State.routed, "approve", reason,
                                lambda row: guard.awaiting_owner(row, "approve"))

    def deny(self, caller: Caller, ref: str | int, *, reason: str | None = None) -> Receipt:
        """The owner refuses a held handoff: waiting(owner_approval) -> rejected."""
        return self._owner_move(caller, ref, State.rejected, "deny", reason,
                                lambda row: guard.awaiting_owner(row, "deny"))

    def cancel(self, caller: Caller, ref: str | int, *, reason: str | None = None) -> Receipt:
        """The owner withdraws an open task (requested, waiting, routed, accepted, working)."""
        return self._owner_move(caller, ref, State.cancelled, "cancel", reason,
                                guard.cancellable)


__all__ = ["HandoffVerbs"]
