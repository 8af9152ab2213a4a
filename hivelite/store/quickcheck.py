"""The quick check at a store's first open: a damaged file takes no write.

SQLite checks each page a statement reads, so damage on a page that a write touches
already fails that write (``store_corrupt``). Damage elsewhere did not: a claim went
through on a file whose other pages were broken, and only a later ``doctor`` said so.
The first open of a store in a process (:class:`.sqlite.SqliteStore`) now checks the
file before anything writes to it, and a file that fails takes no write until it is
repaired (reads go on, so what is still readable can be looked at and exported).

The check is bounded (``python -m bench.opencheck`` measures it; ``docs/decisions.md``
says why these bounds):

- a file of at most :data:`OPEN_CHECK_PAGES` pages gets SQLite's whole ``quick_check``
  (every page of every table and index; about 8 µs a page from the page cache);
- a larger file gets ``quick_check`` of the tables that hold the owner's authority and
  do not grow with the tasks (:data:`SMALL_TABLES`), and a full read of the newest rows
  of the tables that do (:data:`NEWEST`: the pages the next writes go to). Damage in an
  older task's pages is then met when that task is read or written (``store_corrupt``),
  or by ``hivelite doctor``, which always checks every page.

``PRAGMA quick_check(N)`` is no bound: N caps the errors reported, not the pages read
(at 1,000,000 tasks ``quick_check(1)`` costs what ``quick_check`` does).
"""

from __future__ import annotations

from contextlib import suppress

import apsw

OPEN_CHECK_PAGES = 1024
"""Up to this many pages (4 MiB of 4 KiB pages, about 7,500 tasks) the first open checks
every page; a larger file gets the bounded check."""
SMALL_TABLES = ("meta", "moves", "policy", "required_plugins", "controls", "budgets",
                "tokens", "enrolments")
"""Tables checked whole in a large file: small, and each decides who may do what."""
NEWEST_ROWS = 64
NEWEST = (("tasks", "number"), ("packets", "task"), ("journal", "seq"))
"""The growing tables whose newest :data:`NEWEST_ROWS` rows a large file's check reads
in full, by their key."""
SHOWN = 3
"""How many of SQLite's findings the refusal quotes."""


def _quick_check(conn: apsw.Connection, table: str | None = None) -> list[str]:
    """SQLite's findings (empty: none) for the whole file or one table and its indexes;
    a page SQLite cannot read at all is a finding too."""
    pragma = "PRAGMA quick_check" if table is None else f'PRAGMA quick_check("{table}")'
    try:
        rows = [str(r[0]) for r in conn.execute(pragma)]
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [str(exc)]
    return [] if rows == ["ok"] else rows


def _newest(conn: apsw.Connection, table: str, key: str) -> list[str]:
    """Read every byte of the newest rows of ``table`` (the pages its next rows go to),
    as SQLite stores them: text that is not UTF-8 is a damaged row, not a damaged file
    (``list`` leaves such a row out), so nothing is decoded here."""
    columns = [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]
    size = " + ".join(f'coalesce(length(CAST("{c}" AS BLOB)), 0)' for c in columns)
    try:
        conn.execute(f'SELECT sum({size}) FROM (SELECT * FROM "{table}"'
                     f' ORDER BY "{key}" DESC LIMIT ?)', (NEWEST_ROWS,)).fetchall()
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [f"the newest rows of {table}: {exc}"]
    return []


def damage(conn: apsw.Connection) -> str | None:
    """What the first open's check found wrong with the file behind ``conn`` (None:
    nothing), read in one snapshot."""
    if conn.in_transaction:
        return _damage(conn)
    conn.execute("BEGIN")
    try:
        return _damage(conn)
    finally:
        if conn.in_transaction:  # a read: nothing to keep (SQLite may have ended it)
            with suppress(apsw.Error):
                conn.execute("ROLLBACK")


def _damage(conn: apsw.Connection) -> str | None:
    pages = int(conn.execute("PRAGMA page_count").get)
    if pages <= OPEN_CHECK_PAGES:
        found = _quick_check(conn)
    else:
        tables = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table'")}
        found = []
        for table in SMALL_TABLES:
            if table in tables and not found:
                found = _quick_check(conn, table)
        for table, key in NEWEST:
            if table in tables and not found:
                found = _newest(conn, table, key)
    if not found:
        return None
    lines = [line for item in found for line in item.splitlines()
             if line and not line.startswith("*** in database")]
    text = "; ".join(lines[:SHOWN])
    return text + (f" (and {len(lines) - SHOWN} more)" if len(lines) > SHOWN else "")


__all__ = ["NEWEST", "NEWEST_ROWS", "OPEN_CHECK_PAGES", "SMALL_TABLES", "damage"]
