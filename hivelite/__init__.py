"""hivelite: agent tasks, their claims and their results in one SQLite file."""

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
    JournalEntry,
    NextClaim,
    Packet,
    Receipt,
    Result,
    Task,
    TaskView,
)
from .protocol import MOVES, TERMINAL, State, WaitingOn
from .settings import PluginSettings, plugin_settings, read_toml, settings_path

__version__ = "0.1.0"

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
    "Hive",
    "HiveliteError",
    "InvalidInput",
    "InvalidState",
    "JournalEntry",
    "ManualClock",
    "NextClaim",
    "NotFound",
    "Packet",
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
    "hookimpl",
    "plugin_settings",
    "read_toml",
    "settings_path",
]
