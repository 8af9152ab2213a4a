"""Access tokens: how an agent on another machine proves who it is to ``hivelite serve``.

An agent gets a token, never the store file. A token is ``hl_<id>_<secret>``: a random
id to find it by and a 256-bit secret, of which the store keeps only the SHA-256 (a
slow hash adds nothing for a random secret) and compares it in constant time. A token
is bound to one agent on one instance, with some of seed 004's lease rights
(``tasks.read``, ``tasks.propose``, ``tasks.work``), or to the owner; the caller a
face acts as comes from the token's row alone, never from the request.

A server checks a token on every request. It reads the token's row and its journal rows
each time, but checks the journal rows' seals only when they are not exactly the rows it
last checked (:class:`Verdicts`): a verdict depends on those rows and the key alone.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from ..core.caller import Caller, require_owner
from ..core.clock import format_ts, parse_ts
from ..core.errors import InvalidInput, NotFound, Unauthenticated
from ..core.models import IssuedToken, TokenView
from ..store import LinkRow, TokenRow
from ..store.chain import HASH_CHARS, row_problem, token_facts
from ..store.keys import ChainKey
from ..store.schema import RIGHTS
from .base import HiveBase
from .controls import agent_name, instance_name
from .unit import Unit

PREFIX = "hl"
OWNER_RIGHT = "owner"
VERDICTS = 1024
"""How many tokens' verdicts, and callers, a process remembers at most (the least
recently used go first): tokens are few, but a server of many stores, or a caller naming
a new session each request, never grows it past this."""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def token_view(row: TokenRow) -> TokenView:
    return TokenView.model_validate({
        "id": row.id, "agent": row.agent, "instance": row.instance,
        "rights": row.rights.split(","), "created_at": row.created_at,
        "expires_at": row.expires_at, "revoked_at": row.revoked_at, "by": row.by})


def parse_token(token: object) -> tuple[str, str]:
    """(id, secret) of a token as issued, or ``401 unauthenticated invalid_token``."""
    if isinstance(token, str):
        prefix, _, rest = token.partition("_")
        token_id, _, secret = rest.partition("_")
        if prefix == PREFIX and token_id and secret and token_id.isalnum():
            return token_id, secret
    raise Unauthenticated("invalid_token", "this is not a hivelite token (hl_<id>_<secret>)")


@dataclass(frozen=True)
class Authenticated:
    """Who a token proves: the caller to act as, and the token's id (for logs)."""

    caller: Caller
    token_id: str
    rights: frozenset[str]

    def may(self, right: str) -> bool:
        return OWNER_RIGHT in self.rights or right in self.rights


def add_token(hive: HiveBase, caller: Caller, agent: str | None = None, *,
              instance: str | None = None, rights: builtins.list[str] | None = None,
              expires_at: str | datetime | None = None) -> IssuedToken:
    """Issue a token for ``agent`` on ``instance`` (rights default to all three lease
    rights), or with no agent the owner's own token. The secret is in the answer only:
    the store keeps its hash. Journaled without it."""
    checked = hive._caller(caller, "token")
    who = require_owner(checked, hive.owner, "issue a token")
    if agent is None:
        if instance is not None or rights is not None:
            raise InvalidInput("invalid_token", "an owner's token names no instance or"
                               " rights: it carries the owner's", field="instance")
        granted = [OWNER_RIGHT]
        where = None
    else:
        agent = agent_name(agent)
        if instance is None:
            raise InvalidInput("instance_required", "a token binds an agent to one"
                               " instance: name it", field="instance")
        where = instance_name(instance)
        granted = sorted(set(rights if rights is not None else RIGHTS))
        unknown = [r for r in granted if r not in RIGHTS]
        if unknown or not granted:
            raise InvalidInput("invalid_rights", f"rights are some of {', '.join(RIGHTS)},"
                               f" not {unknown or 'none'}", field="rights")
    expires = None
    if expires_at is not None:
        expires = format_ts(expires_at if isinstance(expires_at, datetime)
                            else parse_ts(expires_at))
    token_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)

    def body(unit: Unit) -> IssuedToken:
        if expires is not None and expires <= unit.at:
            raise InvalidInput("invalid_expiry", f"the token would expire at {expires},"
                               f" which is not after now ({unit.at})", field="expires_at")
        row = TokenRow(token_id, agent, where, ",".join(granted), _hash(secret), unit.at,
                       expires, None, who)
        unit.tx.add_token(row)
        unit.tx.record_event(None, at=unit.at, actor=who, state=None, reason="token add",
                             detail={"token": token_id, "agent": agent,
                                     "instance": where, "rights": granted,
                                     "expires_at": expires, "hash": row.hash})
        view = token_view(row)
        return IssuedToken(**view.model_dump(), token=f"{PREFIX}_{token_id}_{secret}")

    return hive._write(checked, "token", body)


def tokens(hive: HiveBase) -> builtins.list[TokenView]:
    """Every token issued, oldest first, revoked ones included; never a secret."""
    with hive.store.read() as reader:
        return [token_view(r) for r in reader.tokens()]


def revoke_token(hive: HiveBase, caller: Caller, token_id: str) -> TokenView:
    """Revoke a token now: every later request with it is ``401``. Journaled."""
    checked = hive._caller(caller, "token")
    who = require_owner(checked, hive.owner, "revoke a token")

    def body(unit: Unit) -> TokenView:
        row = unit.tx.token(token_id)
        if row is None or row.revoked_at is not None:
            raise NotFound("no_such_token", f"no live token {token_id!r}; hivelite token"
                           " list shows them")
        unit.tx.revoke_token(token_id, unit.at)
        unit.tx.record_event(None, at=unit.at, actor=who, state=None,
                             reason="token revoke", detail={"token": token_id})
        return token_view(TokenRow(row.id, row.agent, row.instance, row.rights, row.hash,
                                   row.created_at, row.expires_at, unit.at, row.by))

    return hive._write(checked, "token", body)


def authenticate(hive: HiveBase, token: object, *, session: str | None = None) -> Authenticated:
    """The caller a token proves (``session`` as the request names it), or
    ``401 unauthenticated``: unknown, revoked or expired tokens alike say only that. A
    token the journal does not show the owner issuing (in a row sealed with the owner's
    chain key) never authenticates, whatever its row in ``tokens`` says; with the key, its
    secret's hash, agent, rights and expiry are the sealed row's, and a journaled revoke
    stands.

    Every call reads the token's row and its journal rows as they are now and compares
    the secret; the journal rows' seals are checked again only when those rows, or the
    key, are not exactly the ones last checked (a process remembers 1024 tokens' checks)."""
    token_id, secret = parse_token(token)
    key = hive.store.chain_key()
    with hive.store.read() as reader:
        row = reader.token(token_id)
        told = reader.token_journal(token_id) if row is not None else []
    now = format_ts(hive.clock())
    hashed = _hash(secret)
    if row is None or not hmac.compare_digest(row.hash, hashed):
        raise Unauthenticated("invalid_token", "unknown token")
    facts = VERDICTS_KEPT.facts(token_id, told, key)
    if facts is None:
        raise Unauthenticated("unissued_token", f"token {token_id} was not issued by the"
                              " owner: no sound, sealed journal row issues it")
    if key is not None:  # the sealed row's word, not the table's
        if not hmac.compare_digest(str(facts.get("hash")), hashed):
            raise Unauthenticated("invalid_token", "unknown token")
        row = TokenRow(row.id, facts.get("agent"), facts.get("instance"),
                       ",".join(facts.get("rights") or ()), row.hash, row.created_at,
                       facts.get("expires_at"), row.revoked_at or facts.get("revoked_at"),
                       row.by)
    if row.revoked_at is not None:
        raise Unauthenticated("revoked_token", f"token {token_id} was revoked at"
                              f" {row.revoked_at}")
    if row.expires_at is not None and row.expires_at <= now:
        raise Unauthenticated("expired_token", f"token {token_id} expired at"
                              f" {row.expires_at}")
    rights = frozenset(row.rights.split(","))
    return Authenticated(_caller(hive.owner, row.agent, row.instance, session,
                                 f"token {token_id}", rights), token_id, rights)


@functools.lru_cache(maxsize=VERDICTS)
def _caller(owner: str, agent: str | None, instance: str | None, session: str | None,
            origin: str, rights: frozenset[str]) -> Caller:
    """The caller a token's facts make, made once for each: a ``Caller`` is immutable, and
    its names need checking once, not on every request."""
    if agent is None:
        return Caller("owner", owner, origin=origin)
    return Caller.agent(agent, str(instance), session, origin=origin, rights=rights)


@dataclass(frozen=True)
class _Checked:
    """One full check of a token's journal rows: the rows as read (seq, stored hash, the
    hash before, content), the key they were checked with, and what the check found."""

    told: tuple[LinkRow, ...]
    key: ChainKey | None
    facts: Mapping[str, Any] | None

    def rows_are(self, told: tuple[LinkRow, ...], key: ChainKey | None) -> bool:
        """Whether ``told`` under ``key`` is exactly what was checked."""
        return (self.key is key or self.key == key) and self.told == told


class Verdicts:
    """The verdicts of the tokens' journal rows a process has checked, by token id: the
    facts :func:`_sealed_facts` found and the very rows and key it found them in. A
    verdict is a function of those alone, so it is given again only for the same rows
    (every column as read now: a revoke, a seal, a row removed, changed or put in
    another place all differ) under the same key; anything else is checked in full.
    Holds at most ``size`` tokens, the least recently used dropped first."""

    def __init__(self, size: int = VERDICTS) -> None:
        self.size = size
        self._kept: OrderedDict[str, _Checked] = OrderedDict()
        self._lock = threading.Lock()

    def facts(self, token_id: str, told: builtins.list[LinkRow],
              key: ChainKey | None) -> Mapping[str, Any] | None:
        """What the sound journal rows ``told`` say of the token (None: none issues it)."""
        rows = tuple(told)
        with self._lock:
            kept = self._kept.get(token_id)
            if kept is not None and kept.rows_are(rows, key):
                self._kept.move_to_end(token_id)
                return kept.facts
        found = _sealed_facts(told, token_id, key)
        facts = None if found is None else MappingProxyType(found)
        with self._lock:
            self._kept[token_id] = _Checked(rows, key, facts)
            self._kept.move_to_end(token_id)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return facts

    def __len__(self) -> int:
        return len(self._kept)


VERDICTS_KEPT = Verdicts()
"""The process's verdicts (a store's rows and key are part of each, so one holds all)."""


def _sealed_facts(rows: builtins.list[LinkRow] | tuple[LinkRow, ...], token_id: str,
                  key: ChainKey | None) -> dict[str, Any] | None:
    """The token's facts as the newest sound journal row about it gives them (an issue,
    or the key's seal of a token issued before it), with ``revoked_at`` when a row revokes
    it; None when no sound row issues it. With the key, only a sealed row that carries the
    secret's hash counts."""
    facts: dict[str, Any] | None = None
    revoked: str | None = None
    for told in rows:
        said = token_facts(told.content, token_id)
        if said is None or told.seq < 1 or row_problem(told.seq, told.hash, told.before,
                                                       told.content, key,
                                                       by_task=told.by_task) is not None:
            continue
        sealed = key is not None and type(told.hash) is str and len(told.hash) > HASH_CHARS
        if said.get("revoked"):
            revoked = revoked or str(told.content[1])
        elif key is None or (sealed and "hash" in said):
            facts = dict(said)
    if facts is not None and revoked is not None:
        facts["revoked_at"] = revoked
    return facts


__all__ = ["VERDICTS", "VERDICTS_KEPT", "Authenticated", "Verdicts", "add_token",
           "authenticate", "parse_token", "revoke_token", "tokens"]
