"""Storage: every SQL statement of hivelite lives in this package."""

from .schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, move_rows, protocol_triggers
from .sqlite import Store, TaskRow

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Store",
    "TaskRow",
    "move_rows",
    "protocol_triggers",
]
