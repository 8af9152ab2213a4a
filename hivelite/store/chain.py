"""The journal as a hash chain: each row carries a hash of the row before it and of itself.

The first row's "before" is the store's identity (``meta.store_id``: random, set when the
store is made, never changed), so a journal cannot be passed off as another store's.
Editing, removing, inserting or reordering a row breaks the chain at that row or the
next; ``doctor`` names where. hivelite computes each hash as it writes (under the write
lock it knows the chain's tip) and hands it to the trigger that writes the row, so a row
written by raw SQL carries no fitting hash and shows up too.

Someone who can set the triggers aside can also recompute every hash after a change:
against that, each link is sealed with an HMAC under the owner's key, which lives outside
the store (:mod:`.keys`): a keyed row stores its 32-character link, then the link's
32-character MAC, and the next row's link covers both. Without the key the links still
show whether the chain is consistent; with it, ``doctor`` knows who wrote it. Heads noted
outside the file (``doctor --head``, and the witnesses :mod:`.keys` keeps) find a history
rewritten by someone who had the key too.

**Chains per task (a PostgreSQL store, from ``meta.tasks_chained_from``).** Writers on
different tasks there never wait for each other, so no writer knows the journal's tip
while it writes. From the row that meta value names on, each row links to the row
before it *of its own task* (rows about no task, to the row before them about no task),
which the writer holds under the task's row lock, and its MAC covers its task
(:meth:`.keys.ChainKey.seal_task`); the server numbers the rows as they commit and adds
each one's **global link** (:func:`global_link`: the one before it, its seq and its
stored hash), which a head witnessed outside the store names. Every so often a row about
no task, ``seal``, names a seq and its global link: it is sealed with the owner's key like
any row, so with the key a row removed or changed anywhere before a seal no longer
agrees with it. docs/postgres.md, "A chain per task".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .keys import ChainKey

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
    parts = [f"h{len(before)}:{before}"]
    add = parts.append
    for value in content:  # _field, inline: a link is made for every journal row
        kind = type(value)
        if kind is str:
            add(f"s{len(value)}:{value}")
        elif value is None:
            add("~")
        elif kind is int:
            add(f"i{value};")
        else:
            add(_field(value))
    text = "".join(parts)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def global_link(before: str, seq: int, stored: object) -> str:
    """The global link of journal row ``seq`` in a store chained per task: SHA-256 of the
    global link before it, its seq and its stored hash (``~`` for none), cut as a link
    is. The server computes the same in the rule that numbers the row
    (``pg_schema``'s ``journal_number``)."""
    text = f"{before}|{seq}|{stored if type(stored) is str else '~'}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def row_problem(seq: int, stored: object, before: str | None, content: Sequence[Any],
                key: ChainKey | None = None, *, by_task: bool = False) -> str | None:
    """What is wrong with one journal row's stored hash, given the hash of the row before
    it (the store's identity for the first; ``by_task``: the row before it of its own
    task); None when it follows. Given the store's ``key``, a row from the key's
    ``keyed_from`` on must carry its link's MAC (and a row before it that carries one,
    the right one): over its place, or ``by_task`` over its task."""
    if stored is None:
        return "carries no hash (written outside hivelite)"
    if type(stored) is not str or len(stored) not in (HASH_CHARS, 2 * HASH_CHARS):
        return "carries a hash of the wrong shape (written outside hivelite)"
    if stored[:HASH_CHARS] != link(before, content):
        return ("does not follow from the row before it of its task (changed, inserted"
                " or moved)" if by_task else
                "does not follow from the row before it (changed, inserted or moved)")
    if key is not None and len(stored) == HASH_CHARS and seq >= key.keyed_from:
        return "is not sealed with the owner's key (written outside hivelite)"
    if key is not None and len(stored) > HASH_CHARS and not (
            key.task_sealed(content[0], stored) if by_task else key.sealed(seq, stored)):
        return ("is sealed with another key than the owner's (written, or its history"
                " rewritten, outside hivelite)")
    return None


SEAL = "seal"
"""The reason of a row about no task that names a seq and its global link."""
TASKS_FROM = "tasks_chained_from"
"""The meta row naming the first journal row chained per task (a PostgreSQL store's)."""


def seal_problem(detail: object, links: dict[int, str]) -> str | None:
    """What is wrong with a ``seal`` row's detail, given the global links computed up to
    it (``links``: seq to link, for the seqs walked so far); None when it agrees."""
    try:
        data = json.loads(detail) if type(detail) is str else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or type(data.get("seq")) is not int:
        return "is a seal that names no seq"
    found = links.get(data["seq"])
    if found is None:
        return f"seals row {data['seq']}, which is not before it"
    if data.get("link") != found:
        return (f"seals row {data['seq']} with the link {data.get('link')!r}, but the rows up"
                f" to it link to {found}: a row before it was changed, removed or added")
    return None


class Walk:
    """A walk of the journal in seq order that checks each row's link (:func:`row_problem`)
    and, from ``tasks_from`` on (a store chained per task), its task's chain, the seals
    it meets and the global links. It keeps the global link of each seq in ``wanted``
    (``links``) and of the last row walked (``head``)."""

    def __init__(self, identity: str | None, key: ChainKey | None = None,
                 tasks_from: int | None = None, wanted: Iterable[int] = ()) -> None:
        self.identity = identity
        self.key = key
        self.tasks_from = tasks_from
        self.wanted = frozenset(wanted)
        self.links: dict[int, str] = {}
        self.head: tuple[int, str] | None = None

    def problems(self, rows: Iterable[Sequence[Any]]) -> Iterator[tuple[int, str]]:
        """Each row, given as ``(seq, hash, *content)`` in seq order, that does not follow
        (``(seq, why)``). Rows are numbered 1, 2, 3, … with no gap; the first row out of
        its place ends the walk."""
        before: object = self.identity
        glink = self.identity or ""
        split, wanted, links = self.tasks_from, self.wanted, self.links
        heads: dict[Any, object] = {}
        recent: dict[int, str] = {}  # the newest global links, for the seals met
        for place, (seq, stored, *content) in enumerate(rows, start=1):
            if seq != place:  # the MAC covers the place; the count must too
                yield seq, (f"is not in its place: the journal's rows are numbered 1, 2, 3,"
                            f" … and this is its row {place} (renumbered, or rows removed)")
                return
            if split is not None and seq >= split:
                task = content[0]
                head = heads.get(task, self.identity)
                why = row_problem(seq, stored, head if type(head) is str else None, content,
                                  self.key, by_task=True)
                glink = global_link(glink, seq, stored)
                if why is None and task is None and content[6] == SEAL:
                    why = seal_problem(content[7], recent)
                recent[seq] = glink
                if len(recent) > RECENT:
                    del recent[next(iter(recent))]
            else:
                why = row_problem(seq, stored, before if type(before) is str else None,
                                  content, self.key)
                glink = stored if type(stored) is str else (self.identity or "")
            if why is not None:
                yield seq, why
            if split is not None:
                heads[content[0]] = stored
            if seq in wanted:
                links[seq] = glink
            before = stored
            self.head = (seq, glink)


RECENT = 4096
"""How many of the newest global links a :class:`Walk` keeps for the seals it meets (a
seal names a row committed shortly before it)."""


def broken_links(identity: str | None, rows: Iterable[Sequence[Any]],
                 key: ChainKey | None = None, tasks_from: int | None = None
                 ) -> Iterator[tuple[int, str]]:
    """Each row, given as ``(seq, hash, *content)`` in seq order, whose hash does not
    follow from the row before it (the first from ``identity``; from ``tasks_from`` on,
    from the row before it of its task), or is not sealed as ``key`` seals it
    (:func:`row_problem`): ``(seq, why)``. Rows are numbered 1, 2, 3, … with no gap; the
    first row out of its place ends the walk.

    Each row is checked against the hash its predecessor stores, so one changed row is
    reported once (at itself, or at the next row if its own hash was recomputed)."""
    return Walk(identity, key, tasks_from).problems(rows)


TOKEN_EVENTS = "('token add', 'token seal', 'token revoke')"
"""The journal's reasons for a token's issue, the key's seal of the tokens issued before
it, and a revoke, as SQL."""


def token_facts(content: Sequence[Any], token_id: str) -> dict[str, Any] | None:
    """What a token journal row (``CONTENT``'s columns) says of the token ``token_id``:
    its facts (agent, instance, rights, expiry and, since the key, its secret's hash) for
    an issue or a seal, ``{"revoked": True}`` for a revoke; None when it is about another
    token."""
    reason, detail = content[6], content[7]
    try:
        data = json.loads(detail) if type(detail) is str else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if reason == "token seal":
        return next((t for t in data.get("tokens", ()) if isinstance(t, dict)
                     and t.get("token") == token_id), None)
    if data.get("token") != token_id:
        return None
    return {"revoked": True} if reason == "token revoke" else data


def chain_all(conn: Any, key: ChainKey | None = None) -> int:
    """Write every journal row's hash from scratch, from the store's identity (sealed with
    ``key`` from its ``keyed_from`` on); returns the rows chained. For a journal that has
    none yet (a store upgraded to the chain, an import of an older export); the caller
    sets the journal's update refusal aside."""
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    rows = conn.execute(f"SELECT seq, {CONTENT} FROM journal ORDER BY seq").fetchall()
    before = identity
    links = []
    for seq, *content in rows:
        before = link(before, content)
        if key is not None and seq >= key.keyed_from:
            before = key.seal(seq, before)
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


def seal_what_came_before(tx: Any, key: ChainKey) -> None:
    """When a store takes its key (its first write under it): the tokens issued before,
    journaled again with their secrets' hashes in one sealed row (``token seal``: a token
    authenticates by a sealed row), and the first answers kept for retries sealed, so
    neither is taken for a forgery, nor can be changed unseen from now on. ``tx`` is the
    write's transaction, its key set."""
    issued = [sealed for t in tx.tokens() if t.revoked_at is None
              for sealed in [_issued(tx, t.id, t.hash)] if sealed is not None]
    if issued:
        tx.record_event(None, at=tx.journal_tail() or "1970-01-01T00:00:00.000Z",
                        actor="guard", state=None, reason="token seal",
                        detail={"tokens": issued})
    tx.reseal_requests(key)


def _issued(tx: Any, token_id: str, hashed: str) -> dict[str, Any] | None:
    """A live token as the key's seal journals it: what its sound journaled issue says of
    it, with its secret's hash (a row from before the key does not carry it); None for a
    token no sound row issues, or one a row revokes. A row in ``tokens`` alone proves
    nothing: sealing it would make a forged token the owner's."""
    issue: dict[str, Any] | None = None
    for told in tx.token_journal(token_id):
        facts = token_facts(told.content, token_id)
        if facts is None or told.seq < 1 or row_problem(
                told.seq, told.hash, told.before, told.content, by_task=told.by_task):
            continue
        if facts.get("revoked"):
            return None
        issue = facts
    if issue is None:
        return None
    return {"token": token_id, "agent": issue.get("agent"), "instance": issue.get("instance"),
            "rights": issue.get("rights"), "expires_at": issue.get("expires_at"),
            "hash": hashed}
