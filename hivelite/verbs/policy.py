"""The store's policy, set by its owner and obeyed by every process that opens it.

The policy is kept in the store, not in a process: the independence mode, the merge
threshold (per store and per project), the time zone the daily budgets count in, what
becomes of a task an agent proposes, and the policy plugins every writing process must
load, each with what identifies its code and the settings it runs with. A process that
lacks one, runs a changed one or adds one is refused before it writes
(``authority.binding_refusal``, asked by the one write path).
"""

from __future__ import annotations

import builtins
import json

from ..core.caller import Caller, require_owner
from ..core.errors import InvalidInput, NotFound
from ..core.models import PluginState, PluginStatus, RequiredPluginView, StorePolicy
from ..store import RequiredPlugin
from .authority import policy_value, required_view, store_policy
from .base import HiveBase
from .unit import Unit


def set_policy(hive: HiveBase, caller: Caller, name: str, value: str | int | None, *,
               project: str | None = None) -> StorePolicy:
    """Set one policy value: ``mode`` (personal or team), ``threshold`` (0-1000, the
    store's or with ``project`` one project's), ``timezone`` (an IANA name) or
    ``proposals`` (gate or owner); None puts it back to its default. Journaled."""
    checked = hive._caller(caller, "policy")
    who = require_owner(checked, hive.owner, "set the policy")
    key, text = policy_value(name, value, project)

    def body(unit: Unit) -> StorePolicy:
        was = unit.tx.policy().get(key)
        unit.tx.set_policy(key, text, at=unit.at, by=who)
        unit.tx.record_event(None, at=unit.at, actor=who, state=None, reason="policy",
                             detail={"key": key, "value": text, "was": was})
        return store_policy(unit.tx.policy(), unit.tx.required_plugins())

    return hive._write(checked, "policy", body)


def require_plugin(hive: HiveBase, caller: Caller, name: str) -> RequiredPluginView:
    """Require a policy plugin of every process that writes to this store, as this
    process loaded it: its code (distribution and version, or its file's hash) and its
    settings. Requiring it again re-approves a changed plugin or changed settings."""
    checked = hive._caller(caller, "policy")
    who = require_owner(checked, hive.owner, "require a plugin")
    loaded = hive._loaded()
    if name not in loaded:
        known = ", ".join(sorted(loaded)) or "none"
        hint = (" (it answers no policy hook)" if hive.plugins.has_plugin(name)
                else " (this process has not loaded it)")
        raise InvalidInput("unknown_plugin", f"{name!r} is not a policy plugin loaded"
                           f" here{hint}; loaded policy plugins: {known}", field="name")
    have = loaded[name]

    def body(unit: Unit) -> RequiredPluginView:
        row = RequiredPlugin(name, have.kind, have.digest, have.settings, unit.at, who)
        unit.tx.require_plugin(row)
        unit.tx.record_event(None, at=unit.at, actor=who, state=None,
                             reason="policy require",
                             detail={"plugin": name, "kind": have.kind,
                                     "digest": have.digest,
                                     "settings": json.loads(have.settings)})
        return required_view(row)

    return hive._write(checked, "policy", body)


def unrequire_plugin(hive: HiveBase, caller: Caller, name: str) -> None:
    """Stop requiring a plugin (``404`` when it was not required)."""
    checked = hive._caller(caller, "policy")
    who = require_owner(checked, hive.owner, "unrequire a plugin")

    def body(unit: Unit) -> None:
        if not unit.tx.unrequire_plugin(name):
            raise NotFound("not_required", f"this store does not require {name!r}")
        unit.tx.record_event(None, at=unit.at, actor=who, state=None,
                             reason="policy unrequire", detail={"plugin": name})

    hive._write(checked, "policy", body)


def plugin_status(hive: HiveBase) -> builtins.list[PluginStatus]:
    """Every plugin this process loaded and every plugin the store requires, each with
    whether it passes: ``ok``, ``missing`` (required, not loaded), ``changed`` (other
    code), ``settings_differ``, ``not_required`` (a policy plugin the store does not
    require: writes are refused while the store requires any), ``built_in``,
    ``not_policy`` (answers no policy hook)."""
    with hive.store.read() as reader:
        required = {r.name: r for r in reader.required_plugins()}
    loaded = hive._loaded()
    out = []
    for name, _ in hive.plugins.list_name_plugin():
        hooks = hive.plugins.hooks_of(name)
        status: PluginState = "ok"
        detail = None
        if name in hive.plugins.essential:
            status = "built_in"
        elif name not in loaded:
            status = "not_policy"
        elif name in required:
            row, have = required[name], loaded[name]
            if (row.kind, row.digest) != (have.kind, have.digest):
                status, detail = "changed", f"required {row.digest}, loaded {have.digest}"
            elif row.settings != have.settings:
                status, detail = ("settings_differ",
                                  f"required {row.settings}, loaded {have.settings}")
        elif required:
            status = "not_required"
        out.append(PluginStatus(
            name=name, source=hive.plugins.sources.get(name, "?"), hooks=hooks,
            policy=name in loaded, essential=name in hive.plugins.essential,
            required=name in required, status=status, detail=detail))
    for name, row in required.items():
        if not hive.plugins.has_plugin(name):
            out.append(PluginStatus(name=name, source=f"{row.kind} {row.digest}",
                                    loaded=False, required=True, status="missing",
                                    policy=True))
    return out


__all__ = ["plugin_status", "require_plugin", "set_policy", "unrequire_plugin"]
