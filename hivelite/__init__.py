"""hivelite: agent tasks, their claims and their results in one SQLite file.

The names below are imported when first used (PEP 562), so ``import hivelite`` and the
CLI's ``--version`` and ``--help`` load almost nothing; ``from hivelite import Hive``
loads what a store needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.caller import Caller
    from .core.clock import ManualClock
    from .core.errors import (
        ForbiddenRight,
        HiveliteError,
        InvalidInput,
        InvalidState,
        NotFound,
        PluginError,
        RateLimited,
        StoreBusy,
        StoreCorrupt,
        StoreError,
        StoreFull,
        StoreReadonly,
    )
    from .core.models import (
        Awaited,
        Checkpoint,
        ClaimReceipt,
        DamagedRow,
        Evidence,
        GateDecision,
        HandoffRequest,
        History,
        JournalEntry,
        NextClaim,
        Packet,
        Page,
        Receipt,
        Result,
        Task,
        TaskView,
    )
    from .core.protocol import MOVES, TERMINAL, State, WaitingOn
    from .hive import Hive
    from .verbs.hookspecs import hookimpl
    from .verbs.settings import PluginSettings, plugin_settings, read_toml, settings_path
    from .verbs.work import WorkReport

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Caller": "hivelite.core.caller",
    "ManualClock": "hivelite.core.clock",
    "ForbiddenRight": "hivelite.core.errors",
    "HiveliteError": "hivelite.core.errors",
    "InvalidInput": "hivelite.core.errors",
    "InvalidState": "hivelite.core.errors",
    "NotFound": "hivelite.core.errors",
    "PluginError": "hivelite.core.errors",
    "RateLimited": "hivelite.core.errors",
    "StoreBusy": "hivelite.core.errors",
    "StoreCorrupt": "hivelite.core.errors",
    "StoreError": "hivelite.core.errors",
    "StoreFull": "hivelite.core.errors",
    "StoreReadonly": "hivelite.core.errors",
    "Hive": "hivelite.hive",
    "hookimpl": "hivelite.verbs.hookspecs",
    "Checkpoint": "hivelite.core.models",
    "ClaimReceipt": "hivelite.core.models",
    "DamagedRow": "hivelite.core.models",
    "Evidence": "hivelite.core.models",
    "GateDecision": "hivelite.core.models",
    "HandoffRequest": "hivelite.core.models",
    "History": "hivelite.core.models",
    "JournalEntry": "hivelite.core.models",
    "WorkReport": "hivelite.verbs.work",
    "Awaited": "hivelite.core.models",
    "NextClaim": "hivelite.core.models",
    "Packet": "hivelite.core.models",
    "Page": "hivelite.core.models",
    "Receipt": "hivelite.core.models",
    "Result": "hivelite.core.models",
    "Task": "hivelite.core.models",
    "TaskView": "hivelite.core.models",
    "MOVES": "hivelite.core.protocol",
    "State": "hivelite.core.protocol",
    "TERMINAL": "hivelite.core.protocol",
    "WaitingOn": "hivelite.core.protocol",
    "PluginSettings": "hivelite.verbs.settings",
    "plugin_settings": "hivelite.verbs.settings",
    "read_toml": "hivelite.verbs.settings",
    "settings_path": "hivelite.verbs.settings",
}
"""Where each public name lives."""

__all__ = [
    "MOVES",
    "TERMINAL",
    "Awaited",
    "Caller",
    "Checkpoint",
    "ClaimReceipt",
    "DamagedRow",
    "Evidence",
    "ForbiddenRight",
    "GateDecision",
    "HandoffRequest",
    "History",
    "Hive",
    "HiveliteError",
    "InvalidInput",
    "InvalidState",
    "JournalEntry",
    "ManualClock",
    "NextClaim",
    "NotFound",
    "Packet",
    "Page",
    "PluginError",
    "PluginSettings",
    "RateLimited",
    "Receipt",
    "Result",
    "State",
    "StoreBusy",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreReadonly",
    "Task",
    "TaskView",
    "WaitingOn",
    "WorkReport",
    "hookimpl",
    "plugin_settings",
    "read_toml",
    "settings_path",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hivelite' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once found, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
