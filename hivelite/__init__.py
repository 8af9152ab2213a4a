"""hivelite: agent tasks, their claims and their results in one SQLite file."""

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
    StoreError,
)
from .hive import Hive, settings_path
from .hookspecs import hookimpl
from .models import (
    Checkpoint,
    Evidence,
    GateDecision,
    HandoffRequest,
    JournalEntry,
    Packet,
    Result,
    Task,
    TaskView,
)
from .protocol import MOVES, TERMINAL, State, WaitingOn

__version__ = "0.1.0"

__all__ = [
    "MOVES",
    "TERMINAL",
    "Checkpoint",
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
    "NotFound",
    "Packet",
    "PluginError",
    "RateLimited",
    "Result",
    "State",
    "StoreBusy",
    "StoreError",
    "Task",
    "TaskView",
    "WaitingOn",
    "hookimpl",
    "settings_path",
]
