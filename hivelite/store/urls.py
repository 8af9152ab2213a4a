"""Store names that are URLs: a PostgreSQL store's, told apart from a file path, and shown
without its password.

Kept apart from the engines so that telling them apart imports neither (psycopg is an
optional extra).
"""

from __future__ import annotations

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

