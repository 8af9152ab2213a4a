"""hivelite: agent tasks, their claims and their results in one SQLite file.

The names below are imported when first used (PEP 562), so ``import hivelite`` and the
CLI's ``--version`` and ``--help`` load almost nothing; ``from hivelite import Hive``
loads what a store needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .caller import Caller
    from .clock import ManualClock
    from .errors import (
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
    from .hive import Hive
    from .hookspecs import hookimpl
    from .models import (
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
    from .protocol import MOVES, TERMINAL, State, WaitingOn
    from .settings import PluginSettings, plugin_settings, read_toml, settings_path
    from .work import WorkReport

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Caller": "hivelite.caller",
    "ManualClock": "hivelite.clock",
    "ForbiddenRight": "hivelite.errors",
    "HiveliteError": "hivelite.errors",
    "InvalidInput": "hivelite.errors",
    "InvalidState": "hivelite.errors",
    "NotFound": "hivelite.errors",
    "PluginError": "hivelite.errors",
    "RateLimited": "hivelite.errors",
    "StoreBusy": "hivelite.errors",
    "StoreCorrupt": "hivelite.errors",
    "StoreError": "hivelite.errors",
    "StoreFull": "hivelite.errors",
    "StoreReadonly": "hivelite.errors",
    "Hive": "hivelite.hive",
    "hookimpl": "hivelite.hookspecs",
    "Checkpoint": "hivelite.models",
    "ClaimReceipt": "hivelite.models",
    "DamagedRow": "hivelite.models",
    "Evidence": "hivelite.models",
    "GateDecision": "hivelite.models",
    "HandoffRequest": "hivelite.models",
    "History": "hivelite.models",
    "JournalEntry": "hivelite.models",
    "WorkReport": "hivelite.work",
    "NextClaim": "hivelite.models",
    "Packet": "hivelite.models",
    "Page": "hivelite.models",
    "Receipt": "hivelite.models",
    "Result": "hivelite.models",
    "Task": "hivelite.models",
    "TaskView": "hivelite.models",
    "MOVES": "hivelite.protocol",
    "State": "hivelite.protocol",
    "TERMINAL": "hivelite.protocol",
    "WaitingOn": "hivelite.protocol",
    "PluginSettings": "hivelite.settings",
    "plugin_settings": "hivelite.settings",
    "read_toml": "hivelite.settings",
    "settings_path": "hivelite.settings",
}
"""Where each public name lives."""

__all__ = [
    "MOVES",
    "TERMINAL",
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
