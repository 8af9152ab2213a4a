"""Store names that are URLs: a PostgreSQL store's, told apart from a file path, and shown
without its password.

Kept apart from the engines so that telling them apart imports neither (psycopg is an
optional extra).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlencode

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(name: object) -> bool:
    """Whether ``name`` names a PostgreSQL store rather than a file."""
    return isinstance(name, str) and name.startswith(URL_SCHEMES)


def shown(url: str) -> str:
    """The URL without its password (in the user part or the query), for messages and
    ``location``; the rest as written."""
    scheme, sep, rest = url.partition("://")
    where, slash, tail = rest.partition("/")
    if "@" in where:  # user:password@host[:port][,host2...]
        user, _, hosts = where.rpartition("@")
        where = f"{user.split(':', 1)[0]}@{hosts}"
    path, mark, query = tail.partition("?")
    if mark:
        kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)
                if k not in SECRET_KEYS]
        if len(kept) < len(parse_qsl(query, keep_blank_values=True)):
            query = urlencode(kept, quote_via=quote)
    return f"{scheme}{sep}{where}{slash}{path}{mark if query else ''}{query}"


SECRET_KEYS = frozenset({"password", "sslpassword"})
"""Query parameters of a libpq URL that hold a secret."""
