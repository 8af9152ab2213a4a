"""hivelite-policy: the owner's permission rules, read from a TOML policy file.

The file is named by ``$HIVELITE_POLICY`` or by ``file = "..."`` in the ``[policy]``
table of the settings file. It holds ordered ``[[rule]]`` tables; the first rule
whose every given key matches a handoff decides it (allow, hold or deny). With no
file configured the plugin has no opinion.

Installing the plugin enables it on no store: it acts on a store once that store's
owner runs ``hivelite policy enable policy`` there (``hive.enable_plugin``), and stops
after ``hivelite policy disable policy`` (unless the store requires it:
``hivelite policy require policy``). Given to ``Hive.open(plugins=[...])`` or found in
a plugins folder, it acts without that.

The file is read and checked once, in ``hivelite_startup``: a policy that cannot be
read or understood stops the store from opening, so a typo never turns into a
silent allow.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, cast, get_args

import hivelite
from hivelite import read_toml, settings_path
from hivelite.core.models import DeliverableType, Task

ENV_VAR = "HIVELITE_POLICY"
SECTION = "policy"
SETTINGS_KEYS = frozenset({"file"})
Action = Literal["allow", "hold", "deny"]
ACTIONS: tuple[str, ...] = get_args(Action)
MATCHERS: tuple[str, ...] = ("requester", "assignee", "project", "deliverable_type", "files")
RULE_KEYS = frozenset({*MATCHERS, "action", "reason"})
REASON_MAX = 500  # GateDecision.reason's limit
DELIVERABLE_TYPES: tuple[str, ...] = get_args(DeliverableType)


class PolicyError(ValueError):
    """The policy file (or its setting) is unusable; hivelite reports it as a PluginError."""


@dataclass(frozen=True)
class Rule:
    """One ``[[rule]]``: its 1-based number, the globs per matcher key, and its verdict."""

    number: int
    globs: dict[str, tuple[str, ...]]
    action: Action
    reason: str

    def matches(self, task: Task) -> bool:
        """True when every key the rule gives matches the task (a rule with none: always)."""
        return all(_VALUES[key](task, globs) for key, globs in self.globs.items())

    def as_table(self) -> dict[str, Any]:
        """The rule as its file says it (what a store requiring the plugin binds)."""
        return {"action": self.action, "reason": self.reason,
                **{key: list(globs) for key, globs in self.globs.items()}}

    def decision(self) -> hivelite.GateDecision:
        reason = f"rule {self.number}: {self.reason}"
        if len(reason) > REASON_MAX:  # the prefix may push a 500-character reason over
            reason = reason[: REASON_MAX - 3] + "..."
        return hivelite.GateDecision(action=self.action, reason=reason)


@dataclass(frozen=True)
class Policy:
    """The parsed file: where it came from and its rules in order."""

    path: Path | None
    rules: tuple[Rule, ...]


def _any(value: str, globs: tuple[str, ...]) -> bool:
    # fnmatchcase: the same answer on every platform (fnmatch folds case on Windows).
    return any(fnmatchcase(value, g) for g in globs)


_VALUES: dict[str, Callable[[Task, tuple[str, ...]], bool]] = {
    "requester": lambda t, g: _any(t.requester, g),
    "assignee": lambda t, g: _any(t.assignee, g),
    "project": lambda t, g: _any(t.project, g),
    "deliverable_type": lambda t, g: _any(t.packet.deliverable_type, g),
    "files": lambda t, g: any(_any(f, g) for f in t.packet.files),
}

# Per-store state, dropped with the Hive object (no leaks between stores).
_POLICIES: weakref.WeakKeyDictionary[Any, Policy] = weakref.WeakKeyDictionary()


def policy_path(hive: Any) -> Path | None:
    """``$HIVELITE_POLICY`` (relative to the working folder), else ``[policy] file``.

    A ``file`` in the settings is relative to the settings file's folder.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    settings_file = settings_path(hive.path) or Path("$HIVELITE_CONFIG")
    try:
        table = hive.settings(SECTION)
    except hivelite.InvalidInput as exc:
        raise PolicyError(f"settings file {settings_file}: {exc.message}") from None
    unknown = sorted(set(table) - SETTINGS_KEYS)
    if unknown:
        raise PolicyError(f"settings file {settings_file}: [{SECTION}] has unknown key(s) "
                          f"{', '.join(unknown)} (only 'file' is known)")
    if "file" not in table:
        return None
    value = table["file"]
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(f"settings file {settings_file}: [{SECTION}] file must be a "
                          f"non-empty string, not {value!r}")
    path = Path(value).expanduser()
    return path if path.is_absolute() else settings_file.parent / path


def _globs(where: str, key: str, value: Any) -> tuple[str, ...]:
    """A matcher's value as a tuple of globs: a string, or a non-empty list of strings."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise PolicyError(f"{where}: {key} must be a string or a non-empty list of strings,"
                          f" not {value!r}")
    for item in items:
        if not isinstance(item, str) or not item:
            raise PolicyError(f"{where}: {key} must hold non-empty strings, not {item!r}")
    if key == "deliverable_type":
        for item in items:
            if not any(fnmatchcase(t, item) for t in DELIVERABLE_TYPES):
                raise PolicyError(f"{where}: deliverable_type {item!r} matches no deliverable"
                                  f" type (known: {', '.join(DELIVERABLE_TYPES)})")
    return tuple(items)


def _rule(path: Path, number: int, table: Any) -> Rule:
    where = f"policy file {path}, rule {number}"
    if not isinstance(table, dict):
        raise PolicyError(f"{where}: must be a table ([[rule]]), not {table!r}")
    unknown = sorted(set(table) - RULE_KEYS)
    if unknown:
        raise PolicyError(f"{where}: unknown key(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(RULE_KEYS))})")
    for key in ("action", "reason"):
        if key not in table:
            raise PolicyError(f"{where}: missing {key}")
    action = table["action"]
    if action not in ACTIONS:
        raise PolicyError(f"{where}: action must be one of {', '.join(ACTIONS)}, "
                          f"not {action!r}")
    reason = table["reason"]
    if not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_MAX:
        raise PolicyError(f"{where}: reason must be a string of 1-{REASON_MAX} characters"
                          " (not blank)")
    globs = {key: _globs(where, key, table[key]) for key in MATCHERS if key in table}
    return Rule(number=number, globs=globs, action=cast(Action, action), reason=reason)


def load_policy(path: Path) -> Policy:
    """Read and check a policy file; every problem names the file (and the rule)."""
    data = read_toml(path, "policy file")
    unknown = sorted(set(data) - {"rule"})
    if unknown:
        raise PolicyError(f"policy file {path}: unknown top-level key(s) {', '.join(unknown)}"
                          " (only [[rule]] tables are allowed)")
    rules = data.get("rule", [])
    if not isinstance(rules, list):
        raise PolicyError(f"policy file {path}: rule must be an array of tables written"
                          f" [[rule]], not {type(rules).__name__}")
    return Policy(path=path, rules=tuple(_rule(path, n, t) for n, t in enumerate(rules, 1)))


def _policy(hive: Any) -> Policy:
    """The store's parsed policy: no file means no rules."""
    path = policy_path(hive)
    return Policy(path=None, rules=()) if path is None else load_policy(path)


@hivelite.hookimpl
def hivelite_startup(hive: Any) -> None:
    """Parse the policy once; a malformed one refuses to open the store. The rules it
    read are declared as an input, so a store that requires this plugin binds them: a
    process reading other rules (another file, an edited one) is refused."""
    policy = _POLICIES[hive] = _policy(hive)
    declare = getattr(hive, "runs_with", None)
    if declare is not None:
        declare("rules", [rule.as_table() for rule in policy.rules])


@hivelite.hookimpl
def hivelite_permission_gate(task: Task, hive: Any) -> hivelite.GateDecision | None:
    """The first matching rule's decision, or None (no opinion) when none matches."""
    policy = _POLICIES.get(hive)
    if policy is None:  # a hive built without Hive.open: parse now, once
        policy = _POLICIES[hive] = _policy(hive)
    for rule in policy.rules:
        if rule.matches(task):
            return rule.decision()
    return None
