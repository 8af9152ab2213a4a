"""Enrolments: seed 004's opt-in, the owner's word on where an agent may work.

An enrolment names the projects an agent works in (none named: every one), the roles it
may take tasks for, and the writes it may make (``tasks.propose``, ``tasks.work``); its
daily budget is the agent's budget. An agent with no enrolment works as before: every
project, no role. The write path asks it of every agent's write:

- an ended enrolment refuses every write but giving a claim back: ``409 optin_inactive``;
- a write its rights or projects do not cover: ``403 optin_scope``;
- a claim of a task whose role it lacks: ``403 not_permitted``, the role named;
- a change of it while the agent holds a claim: the claim's next write is
  ``409 optin_changed`` (the claim names the enrolment it was taken under).

Each change is journaled first. The store's triggers keep the enrolment's own rows and the
lease: no lease outside it, and no holder move under a changed one; the other refusals
(a renewal, an update, a verdict, a handoff) are the write path's.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence

from pydantic import TypeAdapter, ValidationError

from ..core.caller import Caller, require_owner
from ..core.errors import InvalidInput, InvalidState, NotFound
from ..core.models import DEFERRED, Enrolment, Role, Slug
from ..store import BudgetRow, EnrolmentRow, Reader
from ..store.schema import ENROLMENT_RIGHTS
from .authority import Day, budget_view, day_of, store_policy
from .base import HiveBase
from .budgets import _limit
from .controls import agent_name
from .unit import Unit

_SLUG = TypeAdapter(Slug, config=DEFERRED)
_ROLE = TypeAdapter(Role, config=DEFERRED)
EVENT = "enrolment"
"""The journal row's reason for every change of an enrolment."""


def _names(values: object, adapter: TypeAdapter[str], field: str, what: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Sequence):
        raise InvalidInput(f"invalid_{field}", f"{field} is a list of {what}", field=field)
    out: list[str] = []
    for value in values:
        try:
            name = str(adapter.validate_python(value))
        except ValidationError:
            raise InvalidInput(f"invalid_{field}", f"{value!r} is not {what}",
                               field=field) from None
        if name not in out:
            out.append(name)
    return sorted(out)


def _rights(rights: object) -> list[str]:
    if rights is None:
        return list(ENROLMENT_RIGHTS)
    given = [rights] if isinstance(rights, str) else rights
    if not isinstance(given, Sequence) or not given or any(
            r not in ENROLMENT_RIGHTS for r in given):
        raise InvalidInput("invalid_rights", f"an enrolment's rights are some of"
                           f" {', '.join(ENROLMENT_RIGHTS)}, not {rights!r}", field="rights")
    return sorted(set(given))


def enrolment_view(row: EnrolmentRow, reader: Reader | None = None,
                   day: Day | None = None) -> Enrolment:
    """An enrolment as shown, with the agent's budget and today's use when ``reader`` and
    ``day`` are given."""
    budget = None
    if reader is not None and day is not None:
        found = reader.budgets(row.agent)
        if found:
            budget = budget_view(found[0], reader.spend(row.agent, day.start, day.end), day)
    return Enrolment.model_construct(
        agent=row.agent, projects=json.loads(row.projects), roles=json.loads(row.roles),
        rights=row.rights.split(","), active=bool(row.active), at=row.at, by=row.by,
        seq=row.seq, budget=budget)


def _with_budget(unit: Unit, row: EnrolmentRow) -> Enrolment:
    return enrolment_view(row, unit.tx, day_of(unit.now, unit.policy().timezone))


def _record(unit: Unit, who: str, agent: str, projects: builtins.list[str],
            roles: builtins.list[str], rights: builtins.list[str], active: bool,
            reason: str | None) -> EnrolmentRow:
    """Journal the enrolment, then write it (the store takes it only right after)."""
    compact = (",", ":")
    detail = {"agent": agent, "projects": projects, "roles": roles,
              "rights": ",".join(rights), "active": int(active)}
    unit.tx.record_event(None, at=unit.at, actor=who, state=None, reason=EVENT,
                         detail=detail | ({"why": reason} if reason else {}))
    row = EnrolmentRow(agent=agent, projects=json.dumps(projects, separators=compact),
                       roles=json.dumps(roles, separators=compact), rights=",".join(rights),
                       active=int(active), seq=unit.tx.last_seq(), at=unit.at, by=who)
    unit.tx.set_enrolment(row)
    return row


def enrol(hive: HiveBase, caller: Caller, agent: str, *,
          projects: builtins.list[str] | None = None, roles: builtins.list[str] | None = None,
          rights: builtins.list[str] | None = None, tasks: int | None = None,
          tokens: int | None = None, usd_micros: int | None = None,
          reason: str | None = None) -> Enrolment:
    """Enrol ``agent`` (or change its enrolment, or start it again): the projects it works
    in (none: every one), the roles it takes tasks for, its write rights (default both)
    and, when given, its daily budget (replacing any). Journaled; a claim it holds now
    is refused at its next write (``optin_changed``) and may be given back."""
    checked = hive._caller(caller, "enrol")
    who = require_owner(checked, hive.owner, "enrol an agent")
    name = agent_name(agent)
    wanted = (_names(projects, _SLUG, "projects", "a project's name (like shop)"),
              _names(roles, _ROLE, "roles", "a role (1-64 of a-z, 0-9 and -, from a letter)"),
              _rights(rights))
    limits = {k: _limit(k, v) for k, v in (("tasks", tasks), ("tokens", tokens),
                                            ("usd_micros", usd_micros))}

    def body(unit: Unit) -> Enrolment:
        if any(v is not None for v in limits.values()):
            budget = BudgetRow(agent=name, at=unit.at, by=who, **limits)
            unit.tx.set_budget(budget, agent=name)
            unit.tx.record_event(None, at=unit.at, actor=who, state=None, reason="budget",
                                 detail={"agent": name, **limits})
        row = _record(unit, who, name, *wanted, active=True, reason=reason)
        return _with_budget(unit, row)

    return hive._write(checked, "enrol", body)


def end_enrolment(hive: HiveBase, caller: Caller, agent: str, *,
                  reason: str | None = None) -> Enrolment:
    """End ``agent``'s enrolment: every write of it but giving a claim back is refused
    (``409 optin_inactive``) until it is enrolled again. ``404`` when it has none."""
    checked = hive._caller(caller, "enrol")
    who = require_owner(checked, hive.owner, "end an enrolment")
    name = agent_name(agent)

    def body(unit: Unit) -> Enrolment:
        found = unit.tx.enrolments(name)
        if not found:
            raise NotFound("no_such_enrolment", f"{name} has no enrolment")
        old = enrolment_view(found[0])
        if not old.active:
            raise InvalidState("optin_inactive", f"the enrolment of {name} already ended"
                               f" at {old.at}")
        row = _record(unit, who, name, old.projects, old.roles, old.rights, active=False,
                      reason=reason)
        return _with_budget(unit, row)

    return hive._write(checked, "enrol", body)


def enrolments(hive: HiveBase, agent: str | None = None) -> builtins.list[Enrolment]:
    """Every enrolment, ended ones included (or one agent's), with its budget."""
    name = agent_name(agent) if agent is not None else None
    with hive.store.read() as reader:
        day = day_of(hive.clock(), store_policy(reader.policy()).timezone)
        out = [enrolment_view(row, reader, day) for row in reader.enrolments(name)]
    if name is not None and not out:
        raise NotFound("no_such_enrolment", f"{name} has no enrolment")
    return out


__all__ = ["end_enrolment", "enrol", "enrolments"]
