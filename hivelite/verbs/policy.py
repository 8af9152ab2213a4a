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
import re

from ..core.caller import Caller, require_owner
from ..core.errors import InvalidInput, NotFound
from ..core.models import PluginState, PluginStatus, RequiredPluginView, StorePolicy
from ..core.protocol import Mode
from ..store import RequiredPlugin
from ..store.schema import ENABLED_PREFIX
from .authority import enabled_names, policy_value, required_view, store_policy
from .base import HiveBase
from .installed import entry_points
from .plugins import call_each_of, load_installed
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
                else " (it is installed, not enabled on this store: enable it first with"
                f" hivelite policy enable {name})" if name in {
                    ep.name for ep in entry_points()}
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


PLUGIN_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
NOTICE = "plugins_notice"
"""Migration 18's policy row on a store made before installing stopped enabling."""


def enable_plugin(hive: HiveBase, caller: Caller, name: str) -> StorePolicy:
    """Let an installed plugin act on this store (installing one enables it nowhere):
    journaled; every process that opens the store loads it from then on, where it is
    installed. ``422 unknown_plugin`` when no plugin of that name is installed here."""
    checked = hive._caller(caller, "policy")
    who = require_owner(checked, hive.owner, "enable a plugin")
    installed = sorted(ep.name for ep in entry_points())
    if not isinstance(name, str) or not PLUGIN_NAME.fullmatch(name) or name not in installed:
        raise InvalidInput("unknown_plugin", f"no plugin called {name!r} is installed here;"
                           f" installed: {', '.join(installed) or 'none'} (a plugins folder"
                           " or a plugin given to Hive.open acts without enabling)",
                           field="name")
    return _set_enabled(hive, checked, who, name, "enabled")


def disable_plugin(hive: HiveBase, caller: Caller, name: str) -> StorePolicy:
    """Stop an installed plugin acting on this store (``404 not_enabled`` when it was not
    enabled; a required one still acts until the owner unrequires it)."""
    checked = hive._caller(caller, "policy")
    who = require_owner(checked, hive.owner, "disable a plugin")
    if not isinstance(name, str) or not PLUGIN_NAME.fullmatch(name):
        raise InvalidInput("unknown_plugin", f"a plugin's name is 1-64 letters, digits or"
                           f" ._-, not {name!r}", field="name")
    return _set_enabled(hive, checked, who, name, None)


def _set_enabled(hive: HiveBase, checked: Caller, who: str, name: str,
                 value: str | None) -> StorePolicy:
    key = ENABLED_PREFIX + name

    def body(unit: Unit) -> StorePolicy:
        was = unit.tx.policy().get(key)
        if value is None and was is None:
            raise NotFound("not_enabled", f"{name!r} is not enabled on this store; enabled:"
                           f" {', '.join(enabled_names(unit.tx.policy())) or 'none'}")
        if was != value:
            unit.tx.set_policy(key, value, at=unit.at, by=who)
            unit.tx.record_event(None, at=unit.at, actor=who, state=None, reason="policy",
                                 detail={"key": key, "value": value, "was": was})
        return store_policy(unit.tx.policy(), unit.tx.required_plugins())

    started = _started_here(hive, name) if value is not None else False
    try:
        policy = hive._write(checked, "policy", body)
    except BaseException:
        if started:
            _unload(hive, name)
        raise
    if value is None and not any(r.name == name for r in policy.required_plugins):
        _unload(hive, name)  # it stops acting here at once
    return policy


def _started_here(hive: HiveBase, name: str) -> bool:
    """Load and start an installed plugin in this process before the owner's choice to
    enable it is recorded, so it acts here at once and a plugin whose start-up check
    refuses this store (its settings, ...) is refused with nothing written. Other
    processes that have the store open follow the choice the next time they open it.
    Whether it was started now (False: loaded already, or left out here by
    ``$HIVELITE_LOAD_PLUGINS``)."""
    plugins = hive.plugins
    if plugins.has_plugin(name):
        return False
    load_installed(plugins, [name])
    plugin = plugins.get_plugin(name)
    if plugin is None:
        return False
    try:  # its start-up check, as Hive.open runs it
        for impl in plugins.hook.hivelite_startup.get_hookimpls():
            if impl.plugin is plugin:
                call_each_of([impl], "hivelite_startup", hive=hive)
    except BaseException:
        _unload(hive, name)
        raise
    hive._loaded_plugins = None  # what this process loaded, asked afresh
    return True


def _unload(hive: HiveBase, name: str) -> None:
    """Stop an installed plugin acting in this process (a plugins-folder file or a given
    plugin of that name is the process's own, and stays)."""
    plugins = hive.plugins
    if plugins.has_plugin(name) and plugins.sources.get(name, "").startswith("entry point"):
        plugins.unregister(name=name)
        plugins.sources.pop(name, None)
        plugins.identities.pop(name, None)
        hive._loaded_plugins = None


def tell_plugins_notice(hive: HiveBase) -> str | None:
    """On the first open of a store made before installing stopped enabling (migration
    18's mark): the installed plugins that no longer act on it, in words for the owner,
    or None when none is installed; the mark is cleared (journaled), so it is said once."""
    installed = {ep.name for ep in entry_points()}

    def body(unit: Unit) -> builtins.list[str] | None:
        values = unit.tx.policy()
        if values.get(NOTICE) is None:
            return None  # another process told it first
        idle = sorted(installed - set(enabled_names(values))
                      - {r.name for r in unit.tx.required_plugins()})
        if not idle:  # nothing to tell here: kept for a process that has plugins installed
            return None
        unit.tx.set_policy(NOTICE, None, at=unit.at, by=hive.owner)
        unit.tx.record_event(None, at=unit.at, actor=hive.owner, state=None, reason="policy",
                             detail={"key": NOTICE, "value": None, "was": values[NOTICE],
                                     "not_enabled": idle})
        return idle

    idle = hive._run(None, body, "policy", Mode.authority)
    if not idle:
        return None
    names = ", ".join(idle)
    return (f"installed plugins act on a store only once its owner enables them there:"
            f" {names} acted on this store before and no longer do; enable each one this"
            f" store should obey with: hivelite policy enable NAME (hivelite plugins lists"
            f" them; docs/decisions.md, 'Installing is not enabling')")


def plugin_status(hive: HiveBase) -> builtins.list[PluginStatus]:
    """Every plugin this process loaded and every plugin the store requires, each with
    whether it passes: ``ok``, ``missing`` (required, not loaded), ``changed`` (other
    code), ``settings_differ``, ``not_required`` (a policy plugin the store does not
    require: writes are refused while the store requires any), ``built_in``,
    ``not_policy`` (answers no policy hook)."""
    with hive.store.read() as reader:
        required = {r.name: r for r in reader.required_plugins()}
        enabled = set(enabled_names(reader.policy()))
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
        elif required and name not in enabled:
            status = "not_required"
        out.append(PluginStatus(
            name=name, source=hive.plugins.sources.get(name, "?"), hooks=hooks,
            policy=name in loaded, essential=name in hive.plugins.essential,
            required=name in required, enabled=name in enabled, status=status,
            detail=detail))
    found = entry_points()
    for ep in found:  # installed, not loaded: the store did not enable it
        if hive.plugins.has_plugin(ep.name) or ep.name in required:
            continue
        on = ep.name in enabled
        out.append(PluginStatus(
            name=ep.name, source=f"entry point ({ep.dist})", loaded=False, enabled=on,
            status="ok" if on else "not_enabled",
            detail="enabled, not loaded in this process (left out by"
            " $HIVELITE_LOAD_PLUGINS, or enabled after it opened the store): it acts here"
            " once the store is opened again" if on else
            f"installed, not enabled on this store: it does not act here; the owner enables"
            f" it with: hivelite policy enable {ep.name}"))
    installed = {ep.name for ep in found}
    for name in sorted(enabled - installed - set(required)):
        out.append(PluginStatus(name=name, source="enabled on this store", loaded=False,
                                enabled=True, status="not_installed",
                                detail="enabled here, not installed in this Python: it does"
                                " not act in this process"))
    for name, row in required.items():
        if not hive.plugins.has_plugin(name):
            out.append(PluginStatus(name=name, source=f"{row.kind} {row.digest}",
                                    loaded=False, required=True, status="missing",
                                    policy=True))
    return out


__all__ = ["disable_plugin", "enable_plugin", "plugin_status", "require_plugin", "set_policy",
           "tell_plugins_notice", "unrequire_plugin"]
