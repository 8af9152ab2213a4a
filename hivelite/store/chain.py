"""The journal as a hash chain: each row carries a hash of the row before it and of itself.

The first row's "before" is the store's identity (``meta.store_id``: random, set when the
store is made, never changed), so a journal cannot be passed off as another store's.
Editing, removing, inserting or reordering a row breaks the chain at that row or the
next; ``doctor`` names where. hivelite computes each hash as it writes (under the write
lock it knows the chain's tip) and hands it to the trigger that writes the row, so a row
written by raw SQL carries no fitting hash and shows up too.

Someone who can set the triggers aside can also recompute every hash after a change:
against that, ``doctor`` prints the chain's head (seq and hash) to note somewhere else,
and ``doctor --head SEQ:HASH`` checks later that the journal still holds it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

HASH_CHARS = 32
"""A link is the first 128 bits of a SHA-256, as hex: narrow rows, and far beyond what
anyone could forge by trial."""
CONTENT = "task, at, actor, from_state, to_state, waiting_on, reason, detail"
"""The journal columns a link covers, in order (the seq is its place in the chain)."""


def _field(value: Any) -> str:
    """One column as the link hashes it, unambiguous whatever the text holds: NULL ``~``,
    an integer ``i<digits>;``, text ``s<length>:<text>``; anything else (raw SQL may write
    a real or a blob) ``r<length>:<repr>``."""
    if value is None:
        return "~"
    if type(value) is str:
        return f"s{len(value)}:{value}"
    if type(value) is int:
        return f"i{value};"
    shown = repr(value)
    return f"r{len(shown)}:{shown}"


def link(before: str | None, content: Sequence[Any]) -> str:
    """The hash of a journal row whose previous row's hash is ``before`` and whose
    columns are ``content`` (in :data:`CONTENT`'s order, as stored): SHA-256 of
    ``h<length>:<before>`` and each column's :func:`_field`, in UTF-8."""
    before = before or ""
    text = f"h{len(before)}:{before}" + "".join([_field(v) for v in content])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def broken_links(identity: str | None,
                 rows: Iterable[Sequence[Any]]) -> Iterable[tuple[int, str]]:
    """Each row, given as ``(seq, hash, *content)`` in seq order, whose hash does not
    follow from the row before it (the first from ``identity``): ``(seq, why)``.

    Each row is checked against the hash its predecessor stores, so one changed row is
    reported once (at itself, or at the next row if its own hash was recomputed)."""
    before = identity
    for seq, stored, *content in rows:
        if stored is None:
            yield seq, "carries no hash (written outside hivelite)"
        elif stored != link(before, content):
            yield seq, "does not follow from the row before it (changed, inserted or moved)"
        before = stored


def chain_all(conn: Any) -> int:
    """Write every journal row's hash from scratch, from the store's identity; returns
    the rows chained. For a journal that has none yet (a store upgraded to the chain,
    an import of an older export); the caller sets the journal's update refusal aside."""
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    rows = conn.execute(f"SELECT seq, {CONTENT} FROM journal ORDER BY seq").fetchall()
    before = identity
    links = []
    for seq, *content in rows:
        before = link(before, content)
        links.append((before, seq))
    conn.executemany("UPDATE journal SET hash = ? WHERE seq = ?", links)
    return len(links)


def chain_existing_journal(conn: Any) -> None:
    """Migration 4's step: the journal written before it gets its chain too."""
    refusal = conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'trigger'"
                           " AND name = 'journal_no_update'").get
    if refusal is not None:
        conn.execute("DROP TRIGGER journal_no_update")
    chain_all(conn)
    if refusal is not None:
        conn.execute(refusal)
