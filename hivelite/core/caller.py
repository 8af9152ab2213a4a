"""Who is calling: the store's owner, or an agent acting from an instance (and a session).

The library never guesses. Every write verb takes a ``Caller`` that the face
in front of it has established: the CLI from who runs it (the file's owner
acting as owner, or an agent naming itself), the coming HTTP service from a
token. A verb refuses a caller that does not fit it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from .errors import ForbiddenRight, InvalidInput
from .models import DEFERRED, AgentName, InstanceName, Slug, normal_instance
from .protocol import Right

_AGENT = TypeAdapter(AgentName, config=DEFERRED)
_INSTANCE = TypeAdapter(InstanceName, config=DEFERRED)
_SLUG = TypeAdapter(Slug, config=DEFERRED)


def _check(adapter: TypeAdapter[str], value: object, field: str, rule: str,
           kind: object) -> None:
    try:
        adapter.validate_python(value)
    except ValidationError as exc:
        from .wording import expected, rule_of

        first = exc.errors()[0]
        said = rule_of(kind) if first["type"] != "string_pattern_mismatch" else None
        raise InvalidInput(f"invalid_{field}", f"{field} {value!r} {rule}:"
                           f" {said or expected(first)}", field=field) from None


@dataclass(frozen=True, slots=True)
class Caller:
    """An established caller. Make one with :meth:`owner` or :meth:`agent`; every way of
    making one checks it, so a verb never meets a malformed caller."""

    kind: Literal["owner", "agent"]
    name: str
    """The owner's slug (``ana``) or the agent's ``owner/agent`` (``ana/coder``)."""
    instance: str | None = None
    """The machine or installation an agent acts from, normalised (lowercase, no
    surrounding space or trailing dots)."""
    session: str | None = None
    """The process or conversation an agent acts in, when it says."""
    origin: str | None = field(default=None, compare=False)
    """How the face learnt who this is, for messages (``$HIVELITE_AGENT``, a token)."""
    rights: frozenset[str] | None = field(default=None, compare=False)
    """What the token that proved this caller allows (``tasks.read``, ``tasks.propose``,
    ``tasks.work``); None when no token limits it (the library, the local CLI)."""

    def __post_init__(self) -> None:
        if self.kind == "owner":
            _check(_SLUG, self.name, "owner", "is not an owner's name (like ana)", Slug)
            if self.instance is not None or self.session is not None:
                raise InvalidInput("invalid_caller", "the owner acts as a person: no instance"
                                   " or session", field="caller")
        elif self.kind == "agent":
            _check(_AGENT, self.name, "agent", "is not an agent name", AgentName)
            _check(_INSTANCE, self.instance, "instance", "is not an instance name", InstanceName)
            # every comparison sees one spelling: "Laptop." is the machine "laptop"
            object.__setattr__(self, "instance", normal_instance(self.instance))
            if self.session is not None:
                _check(_INSTANCE, self.session, "session", "is not a session name",
                       InstanceName)
        else:
            raise InvalidInput("invalid_caller", f"a caller is an owner or an agent, not"
                               f" {self.kind!r}", field="caller")

    @classmethod
    def owner(cls, name: str) -> Caller:
        """The person who owns the store, acting as owner."""
        return cls("owner", name)

    @classmethod
    def agent(cls, name: str, instance: str, session: str | None = None, *,
              origin: str | None = None, rights: frozenset[str] | None = None) -> Caller:
        """An agent (``owner/agent``) acting from ``instance``, optionally in ``session``."""
        return cls("agent", name, instance, session, origin, rights)

    @property
    def is_owner(self) -> bool:
        return self.kind == "owner"

    def __str__(self) -> str:
        if self.is_owner:
            text = f"{self.name} (owner)"
        else:
            where = f"{self.instance}/{self.session}" if self.session else self.instance
            text = f"{self.name} on {where}"
        return f"{text} (named by {self.origin})" if self.origin else text


def require_right(caller: Caller, verb: str, needed: Right | None) -> None:
    """``403 forbidden_right not_permitted`` when the token that proved ``caller`` does not
    carry the right ``verb`` needs (the verb table's)."""
    if caller.rights is not None and needed is not None and needed.value not in caller.rights:
        raise ForbiddenRight("not_permitted", f"{verb} needs the right {needed.value}; the"
                             f" token of {caller} carries"
                             f" {', '.join(sorted(caller.rights)) or 'none'}",
                             right=needed.value)


def require_caller(caller: object, verb: str) -> Caller:
    """The caller, or ``422 invalid_input caller_required``: a missing caller is never the
    owner."""
    if not isinstance(caller, Caller):
        raise InvalidInput("caller_required",
                           f"{verb} needs a Caller (Caller.owner(...) or Caller.agent(...)),"
                           f" not {caller!r}", field="caller")
    return caller


def require_owner(caller: Caller, owner: str, verb: str) -> str:
    """The owner's name, or ``403 forbidden_right`` for anyone else."""
    if not caller.is_owner:
        raise ForbiddenRight("not_permitted", f"only the owner {owner!r} may {verb};"
                             f" {caller} may not")
    return caller.name


def require_agent(caller: Caller, verb: str) -> Caller:
    """The agent caller, or ``403 forbidden_right`` for the owner (an agent's verb)."""
    if caller.is_owner:
        raise ForbiddenRight("agent_only", f"{verb} is an agent's verb; the owner"
                             f" {caller.name!r} acts through sign-off, decline, cancel or"
                             " release instead")
    return caller
