"""Handing work over, the owner's permission gate, and the owner's own verbs on a task."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from . import guard
from .base import HiveBase, invalid
from .clock import format_ts
from .errors import InvalidInput, PluginError
from .ids import new_task_id
from .models import GateDecision, HandoffRequest, Packet, Task, TaskView
from .plugins import call_each
from .protocol import MOVES_BY_PAIR, State, WaitingOn
from .store import TaskRow

GATE_TARGET = {"allow": State.routed, "hold": State.waiting, "deny": State.rejected}


class HandoffVerbs(HiveBase):
    """handoff, approve, deny, cancel."""

    def handoff(self, request: HandoffRequest | None = None, **fields: Any) -> TaskView:
        """Create a task and run the owner's permission gate on it, in one transaction.

        Any deny rejects it, else any hold parks it waiting on the owner, else it is routed.
        """
        try:
            req = request if request is not None else HandoffRequest.model_validate(fields)
        except ValidationError as exc:
            raise invalid(exc, "handoff") from None
        packet_json = req.packet.model_dump_json()
        with self.store.write():
            now = self._now()
            at = format_ts(now)
            task_id = req.id or new_task_id(now)
            task = Task.model_construct(
                id=task_id, project=req.project, state=State.requested, waiting_on=None,
                requester=req.requester, assignee=req.assignee, packet=req.packet, result=None,
                latest_checkpoint=None, created_at=at, updated_at=at,
            )
            row = TaskRow(
                number=0, id=task_id, state=State.requested.value, waiting_on=None,
                project=req.project, requester=req.requester, assignee=req.assignee,
                created_at=at, updated_at=at, lease_id=None, lease_token=0, lease_holder=None,
                lease_instance=None, lease_session=None, lease_expires=None,
                priority=req.priority, labels=json.dumps(sorted(set(req.labels))),
                fields_version=1, reason=None, depends=len(req.packet.depends_on),
            )
            moved = self._sweep(at)
            if self.store.task(task_id) is not None:
                raise InvalidInput("duplicate_id", f"a task with id {task_id!r} exists",
                                   field="id")
            self._check_dependencies(req.packet)
            number = self.store.insert_task(row, packet_json, actor=req.requester,
                                            reason="handoff", detail=None)
            decision, answers = self._gate(task)
            target = GATE_TARGET[decision.action]
            waiting = WaitingOn.owner_approval.value if target is State.waiting else None
            self.store.move(number, target.value, at=at, actor="gate",
                            reason=decision.reason, waiting_on=waiting,
                            detail={"decided_by": decision.plugin, "answers": answers})
        moved.append((number, MOVES_BY_PAIR[(State.requested, target)], "gate"))
        self._notify(moved)
        return self.get(number)

    def _check_dependencies(self, packet: Packet) -> None:
        missing = sorted(set(packet.depends_on) - self.store.existing_ids(packet.depends_on))
        if missing:
            raise InvalidInput(
                "unknown_dependency",
                f"packet.depends_on names tasks this store does not have: {', '.join(missing)}",
                field="packet.depends_on")

    def _gate(self, task: Task) -> tuple[GateDecision, list[dict[str, str]]]:
        """Every gate plugin's answer; any deny wins, then any hold, else allow."""
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

    def _person_move(self, ref: str | int, target: State, verb: str, actor: str | None,
                     reason: str | None, check: Callable[[TaskRow], object]) -> TaskView:
        who = guard.person(self.owner, actor, verb)
        reason = guard.reason_fits(reason)
        with self.store.write():
            at = format_ts(self._now())  # under the lock: fence and journal agree
            moved = self._sweep(at)
            row = self._row(ref)
            check(row)
            move = guard.check_move(row.state, row.waiting_on, target)
            self.store.move(row.number, target.value, at=at, actor=who,
                            reason=reason or verb, end_lease=row.lease_id is not None)
        moved.append((row.number, move, who))
        self._notify(moved)
        return self.get(row.number)

    def approve(self, ref: str | int, *, actor: str | None = None,
                reason: str | None = None) -> TaskView:
        """The owner lets a held handoff go ahead: waiting(owner_approval) -> routed."""
        return self._person_move(ref, State.routed, "approve", actor, reason,
                                 lambda row: guard.awaiting_owner(row, "approve"))

    def deny(self, ref: str | int, *, actor: str | None = None,
             reason: str | None = None) -> TaskView:
        """The owner refuses a held handoff: waiting(owner_approval) -> rejected."""
        return self._person_move(ref, State.rejected, "deny", actor, reason,
                                 lambda row: guard.awaiting_owner(row, "deny"))

    def cancel(self, ref: str | int, *, actor: str | None = None,
               reason: str | None = None) -> TaskView:
        """The owner withdraws an open task (requested, waiting, routed, accepted, working)."""
        return self._person_move(ref, State.cancelled, "cancel", actor, reason,
                                 guard.cancellable)


__all__ = ["HandoffVerbs"]
