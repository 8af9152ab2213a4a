"""The plugin manager: built-ins first (essential), then a plugins folder and given plugins,
then the installed plugins a store's owner enabled on it (or requires).

Installing a plugin enables it nowhere: an installed (entry-point) plugin acts on a store
only once that store's owner enabled it there (``hivelite policy enable NAME``, kept in
the store's policy and journaled) or requires it (``hivelite policy require NAME``).
A plugins folder or a plugin object handed to ``Hive.open`` is the opening process's own
choice, and loads as it is named.

There is no manager made at import time: each ``Hive`` gets its own from
:func:`get_plugin_manager`, so tests and notebooks never share plugin state.

Every hook call goes through :func:`_answers_of`, which marks the thread as being
inside that hook: hooks may read but not write (:func:`refuse_write_in_hook`, asked
by the one write path). A plugins folder, and each file in it, must be writable by
its owner alone (:func:`check_private`), since whoever can write there runs code as
whoever runs hivelite.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import re
import stat
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from ..core.errors import PluginError
from . import default_gate, default_threshold, hookspecs, installed

ENTRY_POINT_GROUP = installed.GROUP
DEFAULT_PLUGINS: dict[str, ModuleType] = {"hivelite.default_gate": default_gate,
                                          "hivelite.default_threshold": default_threshold}
"""The built-in policy, by the names a journal, a store's policy and ``hivelite plugins``
know them by (their names from before the modules moved into ``hivelite.verbs``)."""


POLICY_HOOKS = frozenset({"hivelite_permission_gate", "hivelite_merge_threshold",
                          "hivelite_check_evidence", "hivelite_count_confirmation"})
"""The hooks that decide (a plugin answering one is a policy plugin the owner can require);
notifiers and start-up checks decide nothing."""


class PluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers where each plugin came from, and what identifies
    its code (so a store can require exactly that code)."""

    def __init__(self) -> None:
        super().__init__("hivelite")
        self.add_hookspecs(hookspecs)
        self.sources: dict[str, str] = {}
        self.essential: set[str] = set()
        self.identities: dict[str, tuple[str, str]] = {}
        """Each plugin's (kind, digest): ``entry_point`` with its distribution and
        version, ``file`` with the hash of the source it ran, ``given`` with its name."""

    def add(self, plugin: object, name: str, source: str, *, essential: bool = False,
            identity: tuple[str, str] | None = None) -> None:
        try:
            self.register(plugin, name=name)
        except pluggy.PluginValidationError as exc:
            raise PluginError(name, _hook_named(str(exc)) or "register", str(exc)) from exc
        except ValueError as exc:
            raise PluginError(name, "register", str(exc)) from exc
        self.sources[name] = source
        if essential:
            self.essential.add(name)
        elif identity is not None:
            self.identities[name] = identity

    def hooks_of(self, name: str) -> list[str]:
        plugin = self.get_plugin(name)
        return sorted(c.name for c in self.get_hookcallers(plugin) or ()) if plugin else []

    def policy_plugins(self) -> list[str]:
        """The loaded plugins, built-ins aside, that answer a policy hook."""
        return [name for name, _ in self.list_name_plugin()
                if name not in self.essential and POLICY_HOOKS & set(self.hooks_of(name))]

    def describe(self) -> list[dict[str, Any]]:
        """Every loaded plugin: its name, source, whether essential, and its hooks."""
        out = []
        for name, plugin in self.list_name_plugin():
            hooks = sorted(
                caller.name for caller in self.get_hookcallers(plugin) or ()
            )
            out.append({"name": name, "source": self.sources.get(name, "?"),
                        "essential": name in self.essential, "hooks": hooks})
        return out


def _hook_named(message: str) -> str | None:
    match = re.search(r"\b(hivelite_\w+)", message)
    return match.group(1) if match else None


def check_private(path: Path, info: os.stat_result, plugin: str, what: str) -> None:
    """Refuse a plugins folder or plugin file that someone else could change: writable by
    its group or by others, or owned by another user than the one running (root's own
    files are trusted, as ssh trusts them). Not checked where there are no POSIX modes."""
    if os.name != "posix":  # pragma: no cover - no POSIX modes to check
        return
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = " and ".join(w for w, bit in (("its group", stat.S_IWGRP),
                                               ("other users", stat.S_IWOTH)) if mode & bit)
        raise PluginError(plugin, "load", f"{what} {path} is writable by {who} (mode"
                          f" {mode:04o}), and whoever can write it runs code as you;"
                          f" fix it with: chmod go-w {path}")
    me = os.geteuid()
    if info.st_uid not in (me, 0):
        raise PluginError(plugin, "load", f"{what} {path} belongs to user {info.st_uid},"
                          f" not to you (user {me}), and whoever owns it runs code as you;"
                          f" copy it into a folder of your own (or: chown {me} {path})")


def _load_file(path: Path) -> tuple[ModuleType, str]:
    """Import one plugins-folder file from its source, checked first; the module and the
    hash of the source it ran.

    The source is read from the very file that was checked (no window to swap it) and
    compiled here, so no bytecode cache is read from or written into the folder.
    """
    name = f"hivelite_plugins_dir.{path.stem}"
    try:
        with path.open("rb") as file:
            check_private(path, os.fstat(file.fileno()), path.stem, "plugin file")
            source = file.read()
    except OSError as exc:
        raise PluginError(path.stem, "load", f"cannot read {path}: {exc}") from exc
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise PluginError(path.stem, "load", f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)
    except Exception as exc:
        raise PluginError(path.stem, "load", f"import of {path} failed: {exc!r}") from exc
    return module, "sha256:" + hashlib.sha256(source).hexdigest()


def _load_folder(pm: PluginManager, folder: str | os.PathLike[str]) -> None:
    """Every ``*.py`` directly in the folder, in name order; the folder is checked first."""
    directory = Path(folder)
    try:
        info = directory.stat()
    except OSError:
        info = None
    if info is None or not stat.S_ISDIR(info.st_mode):
        raise PluginError(str(directory), "load", "the plugins folder does not exist")
    check_private(directory, info, str(directory), "the plugins folder")
    for path in sorted(directory.glob("*.py")):
        module, digest = _load_file(path)
        pm.add(module, path.stem, f"file {path}", identity=("file", digest))


def load_installed(pm: PluginManager, names: Iterable[str]) -> list[str]:
    """Load the installed plugins called ``names`` (those a store enabled or requires)
    that are installed and not loaded yet, then check the manager again; the names that
    are not installed here (a store may name a plugin this machine lacks: the required
    ones are refused at the first write). ``$HIVELITE_LOAD_PLUGINS`` (comma-separated)
    limits which of them load, for a process that must leave one out."""
    wanted = set(names)
    if not wanted:  # the common case: no look at what is installed at all
        return []
    listed = os.environ.get("HIVELITE_LOAD_PLUGINS")
    if listed is not None:
        allow = {n.strip() for n in listed.split(",") if n.strip()}
        unknown = sorted(allow - {ep.name for ep in installed.entry_points()})
        if unknown:  # a typo must not silently switch a policy off
            raise PluginError(", ".join(unknown), "load",
                              "HIVELITE_LOAD_PLUGINS names plugins that are not installed:"
                              f" {', '.join(unknown)}")
        wanted &= allow
    found = {ep.name: ep for ep in installed.entry_points()}
    for name in sorted(wanted & set(found)):
        if pm.has_plugin(name):
            continue
        ep = found[name]
        try:
            plugin = ep.load()
        except Exception as exc:
            raise PluginError(ep.name, "load", f"entry point failed: {exc!r}") from exc
        if pm.is_registered(plugin):  # given to Hive.open too: it acts once, as given
            continue
        pm.add(plugin, ep.name, f"entry point ({ep.dist})",
               identity=("entry_point", f"{ep.dist} {ep.version}"))
    check(pm)
    return sorted(wanted - set(found))


def get_plugin_manager(
    plugins_dir: str | os.PathLike[str] | None = None,
    *,
    extra: Iterable[object] = (),
    installed_names: Iterable[str] = (),
) -> PluginManager:
    """A new manager with the built-ins, a plugins folder's ``.py`` files, the plugins
    given, and the installed plugins named (:func:`load_installed`: a store's enabled and
    required ones; none by default, since installing enables nothing).

    ``$HIVELITE_PLUGINS_DIR`` is used when no folder is given. A plugin that implements a
    hook hivelite does not have fails here, naming both.
    """
    pm = PluginManager()
    for name, module in DEFAULT_PLUGINS.items():
        pm.add(module, name, "built-in", essential=True)
    folder = plugins_dir or os.environ.get("HIVELITE_PLUGINS_DIR")
    if folder:
        _load_folder(pm, folder)
    for plugin in extra:
        if pm.is_registered(plugin):
            continue
        base = str(getattr(plugin, "__name__", None) or type(plugin).__name__)
        name, n = base, 1
        while pm.has_plugin(name):  # several instances of one policy class
            n += 1
            name = f"{base}-{n}"
        pm.add(plugin, name, "given", identity=("given", _given_name(plugin)))
    load_installed(pm, installed_names)
    check(pm)
    return pm


def _given_name(plugin: object) -> str:
    """What identifies a plugin object handed to ``Hive.open``: its module or class, and
    the hash of its source when Python can find it (so an edited class is another plugin).
    Its state is not part of it: values a store should bind belong in its settings."""
    code = plugin if isinstance(plugin, ModuleType | type) else type(plugin)
    name = code.__name__ if isinstance(code, ModuleType) else (
        f"{code.__module__}.{code.__qualname__}")
    try:
        source = inspect.getsource(code)
    except (OSError, TypeError):  # built in, or defined where no source is kept
        return name
    return f"{name} sha256:{hashlib.sha256(source.encode('utf-8')).hexdigest()[:16]}"


def check(pm: PluginManager) -> None:
    """Refuse unknown hooks (a typo would otherwise be ignored) and wrappers."""
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        plugin = getattr(exc, "plugin", None)
        name = pm.get_name(plugin) if plugin is not None else "?"
        raise PluginError(name or "?", _hook_named(str(exc)) or "check_pending",
                          str(exc)) from exc
    for name, plugin in pm.list_name_plugin():
        for attr in dir(plugin):
            if attr.startswith("hivelite_") and callable(getattr(plugin, attr)) and not hasattr(
                    getattr(plugin, attr), "hivelite_impl"):
                raise PluginError(name, attr, "looks like a hook but is not decorated with"
                                  " @hivelite.hookimpl, so it would never be called")
    for caller in pm.hook.__dict__.values():
        if not isinstance(caller, pluggy.HookCaller):
            continue
        for impl in caller.get_hookimpls():
            if impl.hookwrapper or impl.wrapper:
                raise PluginError(impl.plugin_name, caller.name,
                                  "hook wrappers are not supported by hivelite")


# -- hooks read, never write --------------------------------------------------------


@dataclass
class HookCall:
    """One hook implementation running on this thread, and a write it tried, if any."""

    plugin: str
    hook: str
    refused: PluginError | None = None


_running = threading.local()


def _calls() -> list[HookCall]:
    calls: list[HookCall] | None = getattr(_running, "calls", None)
    if calls is None:
        calls = _running.calls = []
    return calls


def inside_hook() -> HookCall | None:
    """The hook implementation this thread is running now, if any."""
    calls = _calls()
    return calls[-1] if calls else None


def refuse_write_in_hook(verb: str) -> None:
    """Refuse a write while a hook runs on this thread (through any ``Hive``): a write there
    would recurse (a notifier's move announces itself), or run a second verb inside the
    first. The refusal is remembered, so a hook that swallows it still fails."""
    call = inside_hook()
    if call is None:
        return
    error = PluginError(call.plugin, call.hook, f"called the write verb {verb!r}: hooks may"
                        " read (get, list, history) but not write; nothing was written")
    if call.refused is None:
        call.refused = error
    raise error


def _call(impl: Any, hook: str, args: dict[str, Any]) -> Any:
    """One implementation, with the thread marked as inside it."""
    call = HookCall(impl.plugin_name, hook)
    calls = _calls()
    calls.append(call)
    try:
        value = impl.function(**args)
    except Exception as exc:
        if call.refused is not None:  # its write was refused: that is the error, said once
            if exc is call.refused:
                raise
            raise call.refused from exc  # it caught the refusal, then failed anyway
        message = f"raised {type(exc).__name__}: {exc}"
        raise PluginError(impl.plugin_name, hook, message) from exc
    finally:
        calls.pop()
    if call.refused is not None:  # it caught the refusal and went on as if it had written
        raise call.refused
    return value


def _answers(pm: PluginManager, hook: str, kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Each implementation's answer with its plugin's name, in pluggy's call order.

    Calling them one by one lets a decision name the plugin that made it, and an
    error name the plugin that raised.
    """
    caller: pluggy.HookCaller = getattr(pm.hook, hook)
    return _answers_of(reversed(caller.get_hookimpls()), hook, kwargs)


def _answers_of(impls: Iterable[Any], hook: str,
                kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    trace = os.environ.get("HIVELITE_TRACE_PLUGINS") == "1"
    for impl in impls:
        value = _call(impl, hook, {name: kwargs[name] for name in impl.argnames})
        if trace:
            print(f"hivelite: {hook} [{impl.plugin_name}] -> {value!r}", file=sys.stderr)
        yield impl.plugin_name, value


def call_all(pm: PluginManager, hook: str, **kwargs: Any) -> list[PluginError]:
    """Call every implementation even when some fail; the failures, each naming its plugin."""
    failures: list[PluginError] = []
    caller: pluggy.HookCaller = getattr(pm.hook, hook)
    for impl in reversed(caller.get_hookimpls()):
        try:
            next(_answers_of([impl], hook, kwargs))
        except PluginError as error:
            failures.append(error)
    return failures


def call_each_of(impls: Iterable[Any], hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
    """The answers of the given implementations of ``hook``, each with its plugin's name."""
    return list(_answers_of(impls, hook, kwargs))


def call_each(pm: PluginManager, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
    """Every plugin's answer to ``hook``, each with the plugin's name."""
    return list(_answers(pm, hook, kwargs))


def call_first(pm: PluginManager, hook: str, **kwargs: Any) -> tuple[str, Any] | None:
    """The first non-None answer with its plugin's name (for ``firstresult`` hooks)."""
    for plugin, value in _answers(pm, hook, kwargs):
        if value is not None:
            return plugin, value
    return None
