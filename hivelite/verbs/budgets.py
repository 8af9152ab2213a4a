"""Daily budgets (DESIGN §10): per agent, tasks claimed, tokens and money per day.

A day is counted in the owner's time zone (the store policy's ``timezone``, default
UTC) from the journal's claims and the usage the agent reported, both read through
indexes that hold only those rows. Over budget, a claim (or a usage report) is refused
by the one write path with ``429 rate_limited daily_budget`` and ``retry_after_s`` to the
next reset (``HiveBase._charge``).
"""

from __future__ import annotations

import builtins

from ..core.caller import Caller, require_owner
from ..core.errors import InvalidInput, NotFound
from ..core.models import Budget
from ..core.protocol import MAX_USAGE
from ..store import BudgetRow
from .authority import budget_view, day_of, store_policy
from .base import HiveBase
from .controls import agent_name
from .unit import Unit

MAX_LIMIT = {"tasks": 10**9, **MAX_USAGE}


def _limit(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not (
            0 <= value <= MAX_LIMIT[name]):
        raise InvalidInput("invalid_budget", f"a daily {name} limit is a whole number from 0"
                           f" to {MAX_LIMIT[name]:_}, not {value!r}", field=name)
    return value


def set_budget(hive: HiveBase, caller: Caller, agent: str, *, tasks: int | None = None,
               tokens: int | None = None, usd_micros: int | None = None) -> Budget:
    """Set an agent's daily limits (integers; money in millionths of a dollar), replacing
    any it had; a limit left out is no limit. Takes effect at the agent's next write."""
    checked = hive._caller(caller, "budget")
    who = require_owner(checked, hive.owner, "set a budget")
    name = agent_name(agent)
    limits = {k: _limit(k, v) for k, v in (("tasks", tasks), ("tokens", tokens),
                                            ("usd_micros", usd_micros))}
    if all(v is None for v in limits.values()):
        raise InvalidInput("budget_required", "give at least one daily limit (tasks,"
                           " tokens or usd_micros); clear_budget removes a budget",
                           field="tasks")

    def body(unit: Unit) -> Budget:
        row = BudgetRow(agent=name, at=unit.at, by=who, **limits)
        unit.tx.set_budget(row, agent=name)
        unit.tx.record_event(None, at=unit.at, actor=who, state=None, reason="budget",
                             detail={"agent": name, **limits})
        day = day_of(unit.now, unit.policy().timezone)
        return budget_view(row, unit.tx.spend(name, day.start, day.end), day)

    return hive._write(checked, "budget", body)


def clear_budget(hive: HiveBase, caller: Caller, agent: str) -> None:
    """Remove an agent's daily budget (``404`` when it has none)."""
    checked = hive._caller(caller, "budget")
    who = require_owner(checked, hive.owner, "clear a budget")
    name = agent_name(agent)

    def body(unit: Unit) -> None:
        if not unit.tx.budgets(name):
            raise NotFound("no_such_budget", f"{name} has no daily budget")
        unit.tx.set_budget(None, agent=name)
        unit.tx.record_event(None, at=unit.at, actor=who, state=None, reason="budget",
                             detail={"agent": name, "cleared": True})

    hive._write(checked, "budget", body)


def budgets(hive: HiveBase, agent: str | None = None) -> builtins.list[Budget]:
    """Each budget (or one agent's) with what it used today and when it resets; an
    agent with no budget is shown with no limits and today's use."""
    name = agent_name(agent) if agent is not None else None
    with hive.store.read() as reader:
        day = day_of(hive.clock(), store_policy(reader.policy()).timezone)
        rows = reader.budgets(name)
        if name is not None and not rows:  # no limits: what it used today, all the same
            rows = [BudgetRow(name, None, None, None, at="", by="")]
        views = [budget_view(r, reader.spend(r.agent, day.start, day.end), day)
                 for r in rows]
    return [v if v.set_by else v.model_copy(update={"set_at": None, "set_by": None})
            for v in views]

__all__ = ["budgets", "clear_budget", "set_budget"]
