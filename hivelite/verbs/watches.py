"""Watches: a caller's durable wait, kept in the store so that it outlives the server
that took it.

The MCP face answers a long tool call (a handoff to follow, a verdict or the owner's
decision to await, a queue to wait on) with a watch, served as an MCP task whose
``taskId`` is the watch's id. The id is random (192 bits) and bound to the caller and the
token that made it: a watch asked for by anyone else, or after it expired, is not found,
and the refusal does not say which. A watch keeps what was asked; where it stands is read
from its task each time (:mod:`.awaiting`), and only the queue's answer, a claim, is kept
once made, so a retry after a crash answers the same claim.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..core.caller import Caller, require_caller
from ..core.clock import format_ts
from ..core.errors import InvalidInput, NotFound, StoreError
from ..store import WatchRow, Writer
from .scope import inactive

if TYPE_CHECKING:
    from .base import HiveBase

WATCHED = ("handoff", "await", "next")
"""The verbs a watch follows: a handoff's outcome, an ``await``, a ``next`` with a wait."""
TTL_MS = 24 * 3600 * 1000
"""How long a watch is kept after it is made, unless asked otherwise (a day)."""
MAX_TTL_MS = 30 * 24 * 3600 * 1000
POLL_MS = 2000
"""How often a client is asked to look, at most (milliseconds)."""
PREFIX = "hlw_"


def new_watch_id() -> str:
    """A watch's id: 192 random bits, URL-safe, never a task number or a task's id."""
    return PREFIX + secrets.token_urlsafe(24)


def _milliseconds(value: object, field: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= most:
        raise InvalidInput(f"invalid_{field}", f"{field} is a whole number of milliseconds"
                           f" from 1 to {most}, not {value!r}", field=field)
    return value


def watch(hive: HiveBase, caller: Caller, verb: str, *, number: int | None = None,
          asked: Mapping[str, Any] | None = None, token: str | None = None,
          ttl_ms: int = TTL_MS, poll_ms: int = POLL_MS) -> WatchRow:
    """Keep a new watch of ``caller`` (proved by ``token``, when a token proved it) on
    ``verb``: the task ``number`` it follows and what was ``asked``. Committed before it is
    answered, so it can be asked for at once, from any process."""
    if verb not in WATCHED:
        raise InvalidInput("invalid_watch", f"a watch follows one of {', '.join(WATCHED)},"
                           f" not {verb!r}", field="verb")
    ttl = _milliseconds(ttl_ms, "ttl_ms", MAX_TTL_MS)
    poll = _milliseconds(poll_ms, "poll_ms", ttl)
    text = json.dumps(dict(asked or {}), separators=(",", ":"), sort_keys=True)

    checked = hive._caller(caller, "watch")

    def statement(tx: Writer, now: datetime, at: str) -> WatchRow:
        _enrolled(tx, checked)
        row = WatchRow(new_watch_id(), checked.name, token, verb, number, text, None, at, at,
                       format_ts(now + timedelta(milliseconds=ttl)), poll, None)
        tx.add_watch(row, prune_before=at)
        made = tx.watch(row.id)  # (as kept: sealed)
        assert made is not None
        return made

    return hive._verb(checked, "watch", statement,
                      lambda unit: statement(unit.tx, unit.now, unit.at))


def watched(hive: HiveBase, caller: Caller, watch_id: object, *,
            token: str | None = None) -> WatchRow:
    """The caller's own watch, asked for with the token that made it; ``404 not_found
    no_such_watch`` for one unknown, expired, or made by another caller or token (which of
    them is not said)."""
    checked = require_caller(caller, "watch")
    now = format_ts(hive.clock())
    row, live = None, token is None
    if isinstance(watch_id, str) and watch_id.startswith(PREFIX):
        with suppress(StoreError):  # the reads check each watch's seal with it
            hive.store.chain_key()
        with hive.store.read() as reader:
            row = reader.watch(watch_id)
            if token is not None:  # a token revoked or run out since proves nothing now
                proof = reader.token(token)
                live = proof is not None and proof.revoked_at is None and (
                    proof.expires_at is None or proof.expires_at > now)
    if (row is None or not live or row.caller != checked.name or row.token != token
            or row.expires_at <= now):
        raise NotFound("no_such_watch", f"no task {str(watch_id)[:80]!r} of yours: unknown,"
                       " expired, or another caller's")
    _sound(row)
    return row


def _sound(row: WatchRow) -> None:
    """``watch_tampered`` for a watch that does not carry the seal of the owner's key: made,
    or answered, outside hivelite; never answered to its caller."""
    if row.sealed is False:
        raise StoreError("watch_tampered", f"task {row.id[:80]!r} is not sealed with the"
                         " owner's chain key: it was written outside hivelite, and is not"
                         " answered. Run: hivelite doctor")


def settle_watch(hive: HiveBase, caller: Caller, watch_id: str, *, token: str | None = None,
                 answer: str | None = None, cancelled: bool = False) -> WatchRow:
    """Keep the caller's watch's ``answer`` (as JSON), or mark it ``cancelled``: the
    watch as it is after. A cancelled watch keeps the answer it had: one that comes after
    the cancel is not kept (the caller learns it from the watch it gets back)."""
    watched(hive, caller, watch_id, token=token)
    checked = hive._caller(caller, "watch")

    def statement(tx: Writer, now: datetime, at: str) -> WatchRow:
        _enrolled(tx, checked)
        tx.settle_watch(watch_id, at=at, answer=answer, cancelled=cancelled)
        found = tx.watch(watch_id)
        if found is None:  # pruned since it was found: it expired meanwhile
            raise NotFound("no_such_watch", f"no task {watch_id[:80]!r} of yours: expired")
        return found  # (sealed as it now is)

    return hive._verb(checked, "watch", statement,
                      lambda unit: statement(unit.tx, unit.now, unit.at))


def _enrolled(tx: Writer, caller: Caller) -> None:
    """``409 optin_inactive`` for an agent whose enrolment ended, as every write of its is
    refused: a watch journals no row, so no rule of the store's holds it to its enrolment."""
    if not caller.is_owner:
        enrolled = tx.enrolments(caller.name)
        refusal = inactive(enrolled[0] if enrolled else None, caller.name)
        if refusal is not None:
            raise refusal


__all__ = ["POLL_MS", "TTL_MS", "WATCHED", "new_watch_id", "settle_watch", "watch",
           "watched"]
