"""Which engine a store name means: a PostgreSQL URL, or else a file path.

Kept apart from the engines so that telling them apart imports neither (psycopg is an
optional extra).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(name: object) -> bool:
    """Whether ``name`` names a PostgreSQL store rather than a file."""
    return isinstance(name, str) and name.startswith(URL_SCHEMES)


def shown(url: str) -> str:
    """The URL without its password, for messages and ``location``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}@{parts.hostname or ''}" if parts.username else (
        parts.hostname or "")
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def open_url(url: str, **options: Any) -> Any:
    """The PostgreSQL store ``url`` names (``options``: ``PostgresStore``'s), or a clear
    error when the extra that reaches PostgreSQL is not installed."""
    from ..errors import InvalidInput

    try:
        from .postgres import PostgresStore
    except ImportError as exc:
        raise InvalidInput("postgres_missing", "a PostgreSQL store needs the postgres extra:"
                           f" pip install 'hivelite[postgres]' ({exc.name} is missing)",
                           field="path") from None
    return PostgresStore(url, **options)
