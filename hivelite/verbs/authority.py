"""The owner's authority as rules: the store's policy, controls, daily budgets, independence.

Pure functions over rows the store read (no store, no plugins), so the one write path,
the views and the tests share one statement of each rule. The owner's verbs that change
these live in ``owner``; the write path asks :func:`admit` before every verb's body.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import TypeAdapter, ValidationError

from ..core.caller import Caller
from ..core.clock import duration, format_ts
from ..core.errors import ForbiddenRight, InvalidInput, RateLimited
from ..core.models import (
    DEFERRED,
    Budget,
    Control,
    RequiredPluginView,
    Slug,
    StorePolicy,
    normal_instance,
    scope_of,
)
from ..core.protocol import Mode
from ..store import (
    BudgetRow,
    ConfirmationRow,
    ControlRow,
    RequiredPlugin,
    Spend,
    TaskRow,
)
from ..store.contract import binds
from ..store.schema import ENABLED_PREFIX, MODES, PROPOSALS

_PROJECT = TypeAdapter(Slug, config=DEFERRED)
MAX_THRESHOLD = 1000
DEFAULT_ZONE = "UTC"
"""Where a day begins when the owner set no time zone."""


# -- the store's policy --------------------------------------------------------------


def store_policy(values: dict[str, str], required: Iterable[RequiredPlugin] = ()) -> StorePolicy:
    """The policy rows as a :class:`StorePolicy` (a key not set takes its default)."""
    projects = {key.partition(":")[2]: int(value) for key, value in values.items()
                if key.startswith("threshold:")}
    return StorePolicy.model_validate({
        "mode": values.get("mode", "personal"), "threshold": int(values.get("threshold", 1)),
        "project_thresholds": projects, "timezone": values.get("timezone", DEFAULT_ZONE),
        "proposals": values.get("proposals", "gate"),
        "required_plugins": [required_view(r) for r in required],
        "enabled_plugins": enabled_names(values)})


def enabled_names(values: Mapping[str, str]) -> list[str]:
    """The installed plugins the owner enabled on the store, from its policy rows."""
    return sorted(key[len(ENABLED_PREFIX):] for key, value in values.items()
                  if key.startswith(ENABLED_PREFIX) and value == "enabled")


def required_view(row: RequiredPlugin) -> RequiredPluginView:
    return RequiredPluginView.model_validate({
        "name": row.name, "kind": row.kind, "digest": row.digest,
        "settings": json.loads(row.settings), "at": row.at, "by": row.by})


def policy_value(name: str, value: object, project: str | None) -> tuple[str, str | None]:
    """The policy row (key, text) for setting ``name`` to ``value`` (None: its default),
    or ``422 invalid_input invalid_policy`` naming what is allowed."""
    def refuse(message: str) -> InvalidInput:
        return InvalidInput("invalid_policy", message, field=name)

    if project is not None and name != "threshold":
        raise refuse(f"only the threshold is set per project, not {name}")
    if name == "threshold":
        if project is not None:
            try:
                _PROJECT.validate_python(project)
            except ValidationError:
                raise refuse(f"a project is a slug like web or site-2 (lowercase letters,"
                             f" digits, single dashes), so no task is in {project!r}") from None
        key = f"threshold:{project}" if project is not None else "threshold"
        if value is None:
            return key, None
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 20:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not (
                0 <= value <= MAX_THRESHOLD):
            raise refuse(f"a threshold is a whole number of confirmations from 0 to"
                         f" {MAX_THRESHOLD}, not {value!r}")
        return key, str(value)
    choices = {"mode": MODES, "proposals": PROPOSALS}
    if name in choices:
        if value is not None and value not in choices[name]:
            raise refuse(f"{name} is one of {', '.join(choices[name])}, not {value!r}")
        return name, None if value is None else str(value)
    if name == "timezone":
        if value is None:
            return name, None
        zone(value)
        return name, str(value)
    raise refuse(f"the policy has mode, threshold, timezone and proposals; not {name!r}")


def zone(name: object) -> tzinfo:
    """A time zone by its IANA name (``Europe/Berlin``, ``UTC``), or ``422``. UTC needs no
    time zone database; the others come from the system's (or the ``tzdata`` package)."""
    if name == DEFAULT_ZONE:
        return UTC
    if not isinstance(name, str) or not name or len(name) > 64 or name.startswith("/") \
            or ".." in name:
        raise InvalidInput("invalid_policy", f"a time zone is an IANA name like"
                           f" Europe/Berlin or UTC, not {name!r}", field="timezone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput("invalid_policy", f"no time zone is called {name!r} in this"
                           " system's time zone database; use an IANA name like"
                           " Europe/Berlin (where the system has none: pip install tzdata)",
                           field="timezone") from None


# -- controls ------------------------------------------------------------------------


def control_view(row: ControlRow, ended: Sequence[int] = ()) -> Control:
    return Control.model_validate({
        "id": row.id, "kind": row.kind, "agent": row.agent, "instance": row.instance,
        "task": row.task, "at": row.at, "by": row.by, "reason": row.reason,
        "lifted_at": row.lifted_at, "lifted_by": row.lifted_by, "ended": list(ended)})


def vetoed(controls: Iterable[ControlRow], agent: str, number: int) -> ControlRow | None:
    """The live veto of ``agent`` on task ``number``, if any."""
    for row in controls:
        if row.kind == "veto" and row.agent == agent and row.task == number:
            return row
    return None


def bearing_on(controls: Iterable[ControlRow], row: TaskRow) -> list[Control]:
    """The live controls a task view shows: a veto on it, a hold or stop of its assignee,
    of its holder's instance, or of everyone."""
    instance = normal_instance(row.lease_instance) if row.lease_instance else None
    return [control_view(c) for c in controls if c.task == row.number or (
        c.kind != "veto" and (c.agent == row.assignee
                              or (c.instance is not None and c.instance == instance)
                              or (c.agent is None and c.instance is None)))]


def _lift_hint(row: ControlRow) -> str:
    return f"the owner lifts it with: hivelite lift {row.id}"


def admit_controls(controls: Iterable[ControlRow], caller: Caller, mode: Mode) -> None:
    """Refuse a write the owner's controls forbid: anything from a stopped agent or
    instance (``vetoed``); a claim or holder write from a held one (``held``)."""
    if caller.is_owner:
        return
    rows = [r for r in controls if binds(r, caller.name, caller.instance)]
    for row in rows:
        if row.kind == "stop":
            raise ForbiddenRight("vetoed", f"{caller} is stopped by the owner (control"
                                 f" {row.id}, {row.at}{_why(row)}): every write of {scope(row)}"
                                 f" is refused; {_lift_hint(row)}", control=row.id)
    if mode in (Mode.claiming, Mode.holder):
        for row in rows:
            raise ForbiddenRight("held", f"{caller} is held by the owner (control {row.id},"
                                 f" {row.at}{_why(row)}): {scope(row)} takes no claim and"
                                 f" writes under none; {_lift_hint(row)}", control=row.id)


def refuse_veto(row: ControlRow, agent: str, number: int) -> ForbiddenRight:
    return ForbiddenRight("vetoed", f"the owner vetoed {agent} on task {number} (control"
                          f" {row.id}, {row.at}{_why(row)}); {_lift_hint(row)}",
                          control=row.id, number=number)


def scope(row: ControlRow) -> str:
    """Whom a stored control binds, in words (as ``Control.scope`` says it)."""
    return scope_of(row.kind, row.agent, row.instance, row.task)


def _why(row: ControlRow) -> str:
    return f": {row.reason}" if row.reason else ""


# -- daily budgets -------------------------------------------------------------------


@dataclass(frozen=True)
class Day:
    """Today in the owner's time zone, as the budgets count it."""

    date: str
    """``YYYY-MM-DD`` in that zone."""
    timezone: str
    start: str
    """Its first instant, as stored timestamps are written (UTC)."""
    end: str
    """The next day's first instant: when the budgets reset."""
    reset: datetime


def day_of(now: datetime, timezone: str) -> Day:
    """The day ``now`` falls in, in ``timezone`` (an IANA name); ``422 invalid_input
    time_out_of_range`` when that day, or the next (when the budgets reset), is outside
    the years 1 to 9999 that a timestamp can hold."""
    tz = zone(timezone)
    try:
        local = now.astimezone(tz)
        start = datetime.combine(local.date(), time(0), tz)
        end = datetime.combine(local.date() + timedelta(days=1), time(0), tz)
        return Day(local.date().isoformat(), timezone, format_ts(start), format_ts(end), end)
    except OverflowError:  # "date value out of range": 9999-12-31 has no next day
        edge = "ends after the year 9999" if now.year > 1 else "starts before the year 1"
        raise InvalidInput("time_out_of_range", f"the budgets' day at {format_ts(now)} in"
                           f" {timezone} {edge}; check the clock ($HIVELITE_NOW)",
                           field="now") from None


def budget_view(row: BudgetRow, spend: Spend, day: Day) -> Budget:
    return Budget.model_construct(
        agent=row.agent, tasks=row.tasks, tokens=row.tokens, usd_micros=row.usd_micros,
        day=day.date, timezone=day.timezone, used_tasks=spend.tasks, used_tokens=spend.tokens,
        used_usd_micros=spend.usd_micros, resets_at=day.end, set_at=row.at, set_by=row.by)


USAGE_LIMITS = ("tokens", "usd_micros")


def over_budget(budget: Budget, now: datetime, reset: datetime, *,
                limits: Sequence[str] = ("tasks", *USAGE_LIMITS)) -> RateLimited | None:
    """``429 rate_limited daily_budget`` when one of ``limits`` is used up today (a claim
    minds them all; a usage report the usage limits), with the whole seconds until the
    reset (rounded up: retrying then succeeds)."""
    spent = [name for name in budget.used_up if name in limits]
    if not spent:
        return None
    wait = max(0, math.ceil((reset - now).total_seconds()))
    used = {"tasks": (budget.used_tasks, budget.tasks, "task(s) claimed"),
            "tokens": (budget.used_tokens, budget.tokens, "tokens"),
            "usd_micros": (budget.used_usd_micros, budget.usd_micros, "usd_micros")}
    words = "; ".join(f"{used[k][0]} of {used[k][1]} {used[k][2]}" for k in spent)
    return RateLimited("daily_budget", f"{budget.agent} has used its daily budget for"
                       f" {budget.day} ({budget.timezone}): {words}; it resets at"
                       f" {budget.resets_at}, in {duration(wait)}", retry_after_s=wait,
                       agent=budget.agent, resets_at=budget.resets_at, used_up=spent)


# -- independence --------------------------------------------------------------------


def owner_of(agent: str) -> str:
    return agent.partition("/")[0]


def why_not_counted(mode: str, store_owner: str, worker: str, reviewer: str, instance: str,
                    given: Iterable[ConfirmationRow]) -> str | None:
    """Why an independent verdict (not the worker's, not from the claiming instance) still
    does not count under the store's mode, or None when it counts.

    personal: only the owner's own agents, one per instance; team: only other owners than
    the worker's, one per owner (seed 004, "D1 per instance")."""
    counted = [c for c in given if c.counted]
    if mode == "team":
        if owner_of(reviewer) == owner_of(worker):
            return (f"{reviewer} belongs to {owner_of(worker)}, who owns the worker; a team"
                    " store counts people and agents of other owners")
        for c in counted:
            if owner_of(c.reviewer) == owner_of(reviewer):
                return (f"{owner_of(reviewer)} already counted ({c.reviewer}); a team store"
                        " counts one confirmation per owner")
        return None
    if owner_of(reviewer) != store_owner:
        return (f"{reviewer} is not one of {store_owner}'s agents; a personal store counts"
                f" only its owner's own agents (a team store counts other owners)")
    for c in counted:
        if normal_instance(c.instance) == normal_instance(instance):
            return (f"instance {instance} already counted ({c.reviewer}); a personal store"
                    " counts one confirmation per instance")
    return None


# -- the policy plugins every writer loads -------------------------------------------


@dataclass(frozen=True)
class Loaded:
    """A policy plugin as this process loaded it: what identifies its code, and the
    settings it runs with (canonical JSON)."""

    kind: str
    digest: str
    settings: str


def binding_refusal(required: Sequence[RequiredPlugin], loaded: Mapping[str, Loaded],
                    enabled: Iterable[str] = ()) -> ForbiddenRight | None:
    """Why this process may not write to a store that requires ``required`` policy
    plugins, having loaded ``loaded`` (its policy plugins, built-ins aside); None when it
    has exactly those, unchanged, besides any the owner ``enabled`` on the store. A store
    that requires none binds nothing."""
    if not required:
        return None
    fix = "; the owner re-approves it with: hivelite policy require {name}"
    names = {r.name for r in required}
    for row in required:
        have = loaded.get(row.name)
        if have is None:
            return ForbiddenRight(
                "policy_missing", f"this store requires the policy plugin {row.name!r}"
                f" ({_kind_words(row.kind)} {short(row.digest)}), which this process has not"
                f" loaded; nothing was written. Load it ({_how_to_load(row)}) and try again",
                plugin=row.name)
        if (have.kind, have.digest) != (row.kind, row.digest):
            return ForbiddenRight(
                "policy_changed", f"the policy plugin {row.name!r} loaded here is"
                f" {_kind_words(have.kind)} {short(have.digest)}, not the"
                f" {short(row.digest)} the owner approved; nothing was written"
                + fix.format(name=row.name),
                plugin=row.name, loaded=have.digest, approved=row.digest)
        if have.settings != row.settings:
            return ForbiddenRight(
                "policy_changed", f"the policy plugin {row.name!r} runs here with settings"
                f" {have.settings}, not the {row.settings} the owner approved; nothing was"
                " written" + fix.format(name=row.name), plugin=row.name)
    approved = {n for n in set(enabled) if n in loaded and loaded[n].kind == "entry_point"}
    extra = sorted(set(loaded) - names - approved)  # enabled: the installed one, not a
    # plugins-folder file or a given plugin that takes its name
    if extra:
        return ForbiddenRight(
            "policy_unapproved", f"this process loaded the policy plugin {extra[0]!r}, which"
            f" the store does not require (it requires {', '.join(sorted(names))}); nothing"
            f" was written. Leave it out, or the owner requires it with: hivelite policy"
            f" require {extra[0]}", plugin=extra[0])
    return None


def short(digest: str) -> str:
    """A hash as a message shows it: 12 hex characters (``sha256:2f1c…``; the error's
    ``--json`` document keeps it whole); a distribution's name and version as it is."""
    kind, _, hexed = digest.rpartition(":")
    if len(hexed) >= 40 and all(c in "0123456789abcdef" for c in hexed):
        return f"{kind}:{hexed[:12]}…" if kind else f"{hexed[:12]}…"
    return digest


def _kind_words(kind: str) -> str:
    return {"entry_point": "installed", "file": "plugin file", "given": "given"}.get(kind, kind)


def _how_to_load(row: RequiredPlugin) -> str:
    if row.kind == "entry_point":
        return f"install {row.digest.split(' ')[0]}"
    if row.kind == "file":
        return f"--plugins-dir or $HIVELITE_PLUGINS_DIR naming the folder of {row.name}.py"
    return "pass it to Hive.open(plugins=...)"
