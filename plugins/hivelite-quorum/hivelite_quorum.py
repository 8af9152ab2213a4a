"""hivelite-quorum: how many independent confirmations a result needs, and whose count.

Two rules, read from the ``[quorum]`` table of the settings file (or from the
TOML file named by ``$HIVELITE_QUORUM``, which holds the same keys at its top
level and then replaces the table):

* ``hivelite_merge_threshold``: the largest of the values that apply to a task
  (its project's, its deliverable type's, ``default``), so the stricter rule
  wins; when none applies the plugin has no opinion and the core's Personal
  threshold (1) decides.
* ``hivelite_count_confirmation``: the requester's own accept is recorded but
  never counted, because the agent who asked for the work is not independent
  of it. ``requester_counts = true`` switches this off.

The settings are checked once, at start-up, so a typo refuses to open the
store instead of silently applying no quorum.

Installing the plugin enables it on no store: it acts on a store once that store's
owner runs ``hivelite policy enable quorum`` there (``hive.enable_plugin``), and stops
after ``hivelite policy disable quorum``. (Given to ``Hive.open(plugins=[...])`` or
found in a plugins folder, it acts without that.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from hivelite import hookimpl, plugin_settings
from hivelite.core.models import SLUG_MAX, Confirmation, DeliverableType, Task

SECTION = "quorum"
ENV_VAR = "HIVELITE_QUORUM"
MAX_CONFIRMATIONS = 20
DELIVERABLE_TYPES: tuple[str, ...] = get_args(DeliverableType)
TOP_KEYS = ("default", "deliverable_type", "project", "requester_counts")
_PROJECT_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# Parsed settings live on the hive they were read for, so two stores never share them.
_ATTR = "_hivelite_quorum"


class QuorumSettingsError(ValueError):
    """The quorum settings are malformed; the message names where and what."""


@dataclass(frozen=True)
class Quorum:
    """Checked settings: per-type and per-project thresholds, a default, the requester rule."""

    source: str
    default: int | None = None
    by_type: Mapping[str, int] = field(default_factory=dict)
    by_project: Mapping[str, int] = field(default_factory=dict)
    requester_counts: bool = False

    def threshold(self, project: str, deliverable_type: str) -> int | None:
        """The strictest value that applies, or None when no value applies (no opinion)."""
        values = [v for v in (self.by_project.get(project), self.by_type.get(deliverable_type),
                              self.default) if v is not None]
        return max(values) if values else None


def _count(value: Any, where: str) -> int:
    # bool is an int subclass in Python; ``code = true`` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuorumSettingsError(f"{where} must be an integer 0..{MAX_CONFIRMATIONS},"
                                  f" not {value!r}")
    if not 0 <= value <= MAX_CONFIRMATIONS:
        raise QuorumSettingsError(f"{where} = {value} is out of range; it must be"
                                  f" 0..{MAX_CONFIRMATIONS}")
    return value


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise QuorumSettingsError(f"{where} must be a table of name = count, not {value!r}")
    return value


def parse_settings(table: Mapping[str, Any], source: str, *, prefix: str = "quorum.") -> Quorum:
    """Check a settings table and return it as a :class:`Quorum`; raise naming the problem.

    ``source`` names the file for the message; ``prefix`` is how its keys are
    spelled there (``quorum.`` in the settings file, nothing in ``$HIVELITE_QUORUM``).
    """
    def fail(message: str) -> QuorumSettingsError:
        return QuorumSettingsError(f"{source}: {message}")

    unknown = sorted(set(table) - set(TOP_KEYS))
    if unknown:
        hint = ""
        if SECTION in unknown and not prefix:
            hint = f" (in ${ENV_VAR}'s file the keys sit at the top level, without [{SECTION}])"
        raise fail(f"unknown key(s) {', '.join(map(repr, unknown))} in"
                   f" [{prefix.rstrip('.') or 'top level'}]; expected {', '.join(TOP_KEYS)}"
                   + hint)
    try:
        default = (_count(table["default"], f"{prefix}default")
                   if "default" in table else None)
        by_type: dict[str, int] = {}
        where = f"{prefix}deliverable_type"
        for name, value in _table(table.get("deliverable_type", {}), f"[{where}]").items():
            if name not in DELIVERABLE_TYPES:
                raise QuorumSettingsError(f"[{where}] {name!r} is not a deliverable type;"
                                          f" expected one of {', '.join(DELIVERABLE_TYPES)}")
            by_type[name] = _count(value, f"{where}.{name}")
        by_project: dict[str, int] = {}
        where = f"{prefix}project"
        for name, value in _table(table.get("project", {}), f"[{where}]").items():
            if not _PROJECT_RE.fullmatch(name) or len(name) > SLUG_MAX:
                raise QuorumSettingsError(f"[{where}] {name!r} is not a project slug (lowercase"
                                          f" letters, digits and single dashes, at most"
                                          f" {SLUG_MAX} characters); no task could match it")
            by_project[name] = _count(value, f"{where}.{name}")
        requester_counts = table.get("requester_counts", False)
        if not isinstance(requester_counts, bool):
            raise QuorumSettingsError(f"{prefix}requester_counts must be true or false,"
                                      f" not {requester_counts!r}")
    except QuorumSettingsError as exc:
        raise fail(str(exc)) from None
    return Quorum(source=source, default=default, by_type=by_type, by_project=by_project,
                  requester_counts=requester_counts)


def load(hive: Any) -> Quorum:
    """The quorum settings for this store: ``$HIVELITE_QUORUM``'s file, else ``[quorum]``."""
    settings = plugin_settings(hive, SECTION, ENV_VAR)
    if settings.from_env:
        return parse_settings(settings.table, settings.source, prefix="")
    return parse_settings(settings.table, settings.source)


def _quorum(hive: Any) -> Quorum:
    """The settings read at start-up (read now if this hive skipped ``hivelite_startup``)."""
    quorum = getattr(hive, _ATTR, None)
    if not isinstance(quorum, Quorum):
        quorum = load(hive)
        setattr(hive, _ATTR, quorum)
    return quorum


@hookimpl
def hivelite_startup(hive: Any) -> None:
    """Read and check the settings once: a malformed file keeps the store closed."""
    setattr(hive, _ATTR, load(hive))


@hookimpl
def hivelite_merge_threshold(task: Task, hive: Any) -> int | None:
    """The strictest of the project's, the deliverable type's and the default value."""
    return _quorum(hive).threshold(task.project, task.packet.deliverable_type)


@hookimpl(tryfirst=True)
def hivelite_count_confirmation(
    task: Task, confirmation: Confirmation, hive: Any
) -> bool | None:
    """The requester's own accept does not count (asked first, so no plugin can count it)."""
    if _quorum(hive).requester_counts:
        return None
    return False if confirmation.reviewer == task.requester else None
