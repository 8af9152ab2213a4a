"""The owner's controls (DESIGN §10): hold, veto, stop, and lift.

Seed 004: "the claim is a bus lease, so Hold, Veto and Stop end it like any lease".
Each control ends the live leases it covers exactly as expiry does (moves 8/9, with
its own reason and the owner as actor) in the transaction that records it; from then on
the one write path refuses what it forbids (``authority.admit_controls``), and the store
refuses a lease to whom it binds (the ``task_lease_controlled`` trigger).
"""

from __future__ import annotations

import builtins
from datetime import datetime

from pydantic import TypeAdapter, ValidationError

from ..core.caller import Caller, require_owner
from ..core.errors import InvalidInput, NotFound
from ..core.models import DEFERRED, AgentName, Control, ControlKind, InstanceName
from ..core.protocol import CONTROL_ENDINGS, STATE_OF, TERMINAL, State
from ..store import ControlRow, Writer
from ..store.records import replace
from . import guard
from .authority import control_view, scope
from .base import HiveBase
from .unit import Unit

_AGENT = TypeAdapter(AgentName, config=DEFERRED)
_INSTANCE = TypeAdapter(InstanceName, config=DEFERRED)


def agent_name(value: object) -> str:
    try:
        return str(_AGENT.validate_python(value))
    except ValidationError:
        raise InvalidInput("invalid_agent", f"an agent is named owner/agent (like"
                           f" ana/coder), not {value!r}", field="agent") from None


def instance_name(value: object) -> str:
    try:
        return str(_INSTANCE.validate_python(value))
    except ValidationError:
        raise InvalidInput("invalid_instance", f"an instance name is 1-64 of lowercase"
                           f" letters, digits, '.', '_' or '-', not {value!r}",
                           field="instance") from None


def names(agent: str | None, instance: str | None) -> tuple[str | None, str | None]:
    """An agent and an instance as the store keeps them (checked, the instance
    normalised); None stays None."""
    return (agent_name(agent) if agent is not None else None,
            instance_name(instance) if instance is not None else None)


def _control(hive: HiveBase, caller: Caller, kind: ControlKind, *, agent: str | None,
             instance: str | None, task: str | int | None, reason: str | None) -> Control:
    checked = hive._caller(caller, kind)
    who = require_owner(checked, hive.owner, kind)
    why = guard.reason_fits(reason)
    agent, instance = names(agent, instance)

    def placed(tx: Writer, at: str, number: int | None) -> Control:
        """The control's writes: its row, its journal row, and the end of every live
        lease it covers (the store's rules check each move)."""
        row = ControlRow(id=0, kind=kind, agent=agent, instance=instance, task=number,
                         at=at, by=who, reason=why)
        row = replace(row, id=tx.add_control(row))
        tx.record_event(None, at=at, actor=who, state=None, reason=kind,
                        detail={"control": row.id, "agent": agent, "instance": instance,
                                "task": number, "why": why})
        ended = []
        for leased in tx.lock_leases(agent=agent, instance=instance, task=number):
            tx.move(leased.number, leased.state, State.routed.value, at=at, actor=who,
                    reason=CONTROL_ENDINGS[kind], end_lease=True,
                    detail={"control": row.id, "holder": leased.lease_holder,
                            "fencing_token": leased.lease_token})
            ended.append(leased.number)
        return control_view(row, ended)

    def statement(tx: Writer, now: datetime, at: str) -> Control | None:
        if task is None:
            return placed(tx, at, None)
        found = tx.lock_task(task)  # a veto: on a task still open (no rule of the
        if found is None or STATE_OF[found.state] in TERMINAL:  # store's: the full run
            return None  # says which)
        return placed(tx, at, found.number)

    def body(unit: Unit) -> Control:
        number = None
        if task is not None:  # a veto: on a task still open
            found = unit.task(task)
            guard.still_open(found)
            number = found.number
        return placed(unit.tx, unit.at, number)

    return hive._verb(checked, kind, statement, body, about=task)


def hold(hive: HiveBase, caller: Caller, *, agent: str | None = None, instance: str | None = None,
         reason: str | None = None) -> Control:
    """Hold an agent or an instance: its live claims end (back to ``routed``) and it
    takes no claim until lifted; it may still read, hand off and verify."""
    if (agent is None) == (instance is None):
        raise InvalidInput("control_scope", "hold names an agent or an instance (one of"
                           " them)", field="agent")
    return _control(hive, caller, "hold", agent=agent, instance=instance, task=None,
                    reason=reason)


def veto(hive: HiveBase, caller: Caller, ref: str | int, *, agent: str,
         reason: str | None = None) -> Control:
    """Veto one agent on one task: its claim there ends and it may not claim that task
    again until lifted."""
    return _control(hive, caller, "veto", agent=agent, instance=None, task=ref,
                    reason=reason)


def stop(hive: HiveBase, caller: Caller, *, agent: str | None = None, instance: str | None = None,
         everyone: bool = False, reason: str | None = None) -> Control:
    """The kill switch: every live claim of an agent, an instance or (``everyone``)
    every agent ends, and every write of theirs is refused until lifted."""
    if sum((agent is not None, instance is not None, everyone)) != 1:
        raise InvalidInput("control_scope", "stop names an agent, an instance, or"
                           " everyone (one of them)", field="agent")
    return _control(hive, caller, "stop", agent=agent, instance=instance, task=None,
                    reason=reason)


def lift(hive: HiveBase, caller: Caller, control: int | None = None, *, kind: str | None = None,
         agent: str | None = None, instance: str | None = None,
         task: str | int | None = None, everyone: bool = False,
         reason: str | None = None) -> builtins.list[Control]:
    """Lift live controls: one by its id, or every one whose scope is exactly the one
    named (``agent``, ``instance``, ``everyone``; ``task`` with ``agent`` for a veto;
    ``kind`` narrows). Journaled with the owner as actor; what was lifted is answered,
    and naming nothing that is live is ``404 not_found``."""
    checked = hive._caller(caller, "lift")
    who = require_owner(checked, hive.owner, "lift")
    why = guard.reason_fits(reason)
    if kind is not None and kind not in CONTROL_ENDINGS:
        raise InvalidInput("invalid_control", f"a control is hold, veto or stop, not"
                           f" {kind!r}", field="kind")
    named = sum((control is not None, agent is not None or task is not None,
                 instance is not None, everyone))
    if named != 1:
        raise InvalidInput("control_scope", "lift names a control by its id, or an"
                           " agent (with --task for a veto), an instance, or everyone",
                           field="control")
    who_agent, where = names(agent, instance)

    def lifted(tx: Writer, at: str, number: int | None) -> builtins.list[Control]:
        """The live controls named lifted, each journaled; ``404 no_such_control`` when
        none is."""
        picked: builtins.list[ControlRow] = []
        for row in tx.controls():
            if control is not None:
                hit = row.id == control
            elif everyone:
                hit = row.kind == "stop" and row.agent is None and row.instance is None
            elif where is not None:
                hit = row.instance == where
            else:
                hit = row.agent == who_agent and (number is None or row.task == number)
            if hit and (kind is None or row.kind == kind):
                picked.append(row)
        if not picked:
            raise NotFound("no_such_control", "no live control " + (
                f"{control}" if control is not None else "matches that") +
                "; hivelite controls lists them")
        for row in picked:
            tx.lift_control(row.id, at=at, by=who)
            tx.record_event(None, at=at, actor=who, state=None, reason="lift",
                            detail={"control": row.id, "kind": row.kind,
                                    "scope": scope(row), "why": why})
        return [control_view(replace(row, lifted_at=at, lifted_by=who)) for row in picked]

    def statement(tx: Writer, now: datetime, at: str) -> builtins.list[Control] | None:
        if task is None:
            return lifted(tx, at, None)
        found = tx.lock_task(task)
        return None if found is None else lifted(tx, at, found.number)

    def body(unit: Unit) -> builtins.list[Control]:
        return lifted(unit.tx, unit.at, unit.task(task).number if task is not None else None)

    return hive._verb(checked, "lift", statement, body, about=task)


def controls(hive: HiveBase, *, live: bool = True) -> builtins.list[Control]:
    """The owner's controls, oldest first: the live ones, or (``live=False``) all,
    lifted ones included."""
    with hive.store.read() as reader:
        return [control_view(r) for r in reader.controls(live=live)]


__all__ = ["controls", "hold", "lift", "stop", "veto"]
