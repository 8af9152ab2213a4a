"""Idempotent retries: a write verb called with a ``request_id`` answers a repeat of the same
call with its first answer, without writing again.

An agent whose answer was lost (a timeout, a dropped connection, a crash after the commit)
retries with the same id and gets the same receipt: the same lease and token from a claim,
the same result from a submit, never a second claim or a second result. The same id with
other arguments is ``409 invalid_state idempotency_conflict``. Records are kept per caller
for :data:`KEEP`, then pruned by later writes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel, TypeAdapter

from ..core.clock import format_ts
from ..core.errors import HiveliteError, InvalidInput
from ..core.models import DEFERRED, ClaimReceipt, ExpiredClaim, Receipt

KEEP = timedelta(hours=24)
"""How long a request id answers its retries."""


def kept_since(now: datetime) -> str:
    """The oldest time (``format_ts``) a kept answer still answers from at ``now``: the
    start of time on the first day of the year 1, when ``now - KEEP`` has no date."""
    try:
        return format_ts(now - KEEP)
    except OverflowError:
        return format_ts(datetime.min.replace(tzinfo=UTC))
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
P = ParamSpec("P")
T = TypeVar("T")
_ANSWERS: dict[str, TypeAdapter[Any]] = {
    "Receipt": TypeAdapter(Receipt),
    "ClaimReceipt": TypeAdapter(ClaimReceipt),
    "ExpiredClaims": TypeAdapter(list[ExpiredClaim], config=DEFERRED),
}


@dataclass(frozen=True)
class Pending:
    """The request a verb is running for: its id, its verb and its arguments' digest."""

    id: str
    verb: str
    digest: str


PENDING: ContextVar[Pending | None] = ContextVar("hivelite_pending_request", default=None)
"""The request of the verb running in this context (read by the one write path)."""


def request_id(value: object) -> str:
    """A request id as a caller gives it: 1-128 of letters, digits and ``._:-`` (a UUID or
    a ULID fits), else ``422 invalid_input invalid_request_id``."""
    if not isinstance(value, str) or not REQUEST_ID.fullmatch(value):
        raise InvalidInput("invalid_request_id", f"a request id is 1-128 letters, digits or"
                           f" ._:- (a UUID fits), not {value!r}", field="request_id")
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return repr(value)


def digest(verb: str, arguments: dict[str, Any]) -> str:
    """What makes two calls the same call: the verb and every argument but the caller and
    the request id (defaults filled in, so leaving one out equals giving it)."""
    kept = {k: v for k, v in arguments.items()
            if k not in ("self", "hive", "caller", "request_id")}
    text = json.dumps([verb, kept], sort_keys=True, default=_plain, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def dump_answer(answer: object) -> str:
    """A verb's answer as the request record keeps it."""
    value: Any
    if isinstance(answer, list):
        kind, value = "ExpiredClaims", [a.model_dump(mode="json") for a in answer]
    elif isinstance(answer, BaseModel):
        kind, value = type(answer).__name__, answer.model_dump(mode="json")
    else:  # pragma: no cover - every idempotent verb answers one of the above
        raise TypeError(f"cannot keep an answer of type {type(answer).__name__}")
    return json.dumps({"kind": kind, "value": value}, separators=(",", ":"))


def load_answer(text: str) -> Any:
    """The answer a request record keeps, as the verb first returned it."""
    stored = json.loads(text)
    return _ANSWERS[stored["kind"]].validate_python(stored["value"])


def idempotent(method: Callable[P, T]) -> Callable[P, T]:
    """Make a write verb (a function of the store, then the caller) answer a retry (same
    ``request_id``, same arguments) with its first answer. The verb declares
    ``request_id: str | None = None`` itself."""
    return idempotent_as(method.__name__)(method)


def idempotent_as(name: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """:func:`idempotent` for a method that does the writing part of the verb ``name``
    (records and conflicts then speak of that verb)."""
    return functools.partial(_idempotent, name=name)


def _idempotent(method: Callable[P, T], *, name: str) -> Callable[P, T]:
    signature = inspect.signature(method)
    given = signature.parameters.get("request_id")
    if given is None or given.kind is not inspect.Parameter.KEYWORD_ONLY:
        raise TypeError(f"{method.__qualname__} must take request_id as a keyword-only"
                        " argument")  # so a call without one is known without binding

    @functools.wraps(method)
    def verb(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return answer(*args, **kwargs)
        except HiveliteError as error:  # an error about one task names it (seed 004)
            with contextlib.suppress(TypeError):  # arguments the call itself refused
                error.about(signature.bind_partial(*args, **kwargs).arguments.get("ref"))
            raise

    def answer(*args: P.args, **kwargs: P.kwargs) -> T:
        given = kwargs.get("request_id")
        if given is None:  # the common call: nothing to bind, nothing to replay
            return method(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        pending = Pending(request_id(given), name, digest(name, dict(bound.arguments)))
        token = PENDING.set(pending)
        try:  # a kept answer is found under the write's lock, before the verb's body runs
            return method(*args, **kwargs)
        except HiveliteError:  # or the verb's own checks, run before the lock, refused the
            hive = next(iter(bound.arguments.values()))  # retry: its first call changed
            answered = hive._replay(bound.arguments["caller"], pending)  # what they check
            if answered is None:
                raise
            return answered  # type: ignore[no-any-return]
        finally:
            PENDING.reset(token)

    return verb


__all__ = ["KEEP", "PENDING", "Pending", "digest", "dump_answer", "idempotent",
           "idempotent_as", "kept_since", "load_answer", "request_id"]
