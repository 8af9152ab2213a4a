"""Storage: the store contract, its row types, and the SQLite backend.

Every SQL statement of hivelite lives in this package; nothing above it sees
a database object.
"""

from .contract import Reader, Store, Writer
from .migrations import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from .rows import (
    Bodies,
    BudgetRow,
    ConfirmationRow,
    ControlRow,
    Dependency,
    EnrolmentRow,
    Expiry,
    Held,
    JournalRow,
    Lease,
    LinkRow,
    ListFilter,
    NewTask,
    RequestRow,
    RequiredPlugin,
    ResultMeta,
    Spend,
    Taken,
    TaskRow,
    TokenRow,
    UpdateRow,
    ViewRow,
    WatchRow,
)
from .schema import move_rows, protocol_triggers, target_sql
from .sqlite import SqliteStore

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Bodies",
    "BudgetRow",
    "ConfirmationRow",
    "ControlRow",
    "Dependency",
    "EnrolmentRow",
    "Expiry",
    "Held",
    "JournalRow",
    "Lease",
    "LinkRow",
    "ListFilter",
    "NewTask",
    "Reader",
    "RequestRow",
    "RequiredPlugin",
    "ResultMeta",
    "Spend",
    "SqliteStore",
    "Store",
    "Taken",
    "TaskRow",
    "TokenRow",
    "UpdateRow",
    "ViewRow",
    "WatchRow",
    "Writer",
    "move_rows",
    "protocol_triggers",
    "target_sql",
]
