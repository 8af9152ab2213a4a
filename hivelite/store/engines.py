"""Opening the engine a store name calls for, without importing the others."""

from __future__ import annotations

from typing import Any

from ..core.errors import InvalidInput
from .contract import Store


def open_url(url: str, **options: Any) -> Store:
    """The PostgreSQL store ``url`` names (``options``: ``PostgresStore``'s), or a clear
    error when the extra that reaches PostgreSQL is not installed."""
    try:
        from .postgres import PostgresStore
    except ImportError as exc:
        raise InvalidInput("postgres_missing", "a PostgreSQL store needs the postgres extra:"
                           f" pip install 'hivelite[postgres]' ({exc.name} is missing)",
                           field="path") from None
    return PostgresStore(url, **options)
