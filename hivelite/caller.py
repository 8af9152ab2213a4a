"""Who is calling: the store's owner, or an agent acting from an instance (and a session).

The library never guesses. Every write verb takes a ``Caller`` that the face
in front of it has established: the CLI from who runs it (the file's owner
acting as owner, or an agent naming itself), the coming HTTP service from a
token. A verb refuses a caller that does not fit it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from .errors import ForbiddenRight, InvalidInput
from .models import AgentName, InstanceName, Slug

_AGENT = TypeAdapter(AgentName)
_INSTANCE = TypeAdapter(InstanceName)
_SLUG = TypeAdapter(Slug)


@dataclass(frozen=True, slots=True)
class Caller:
    """An established caller. Make one with :meth:`owner` or :meth:`agent`."""

    kind: Literal["owner", "agent"]
    name: str
    """The owner's slug (``ana``) or the agent's ``owner/agent`` (``ana/coder``)."""
    instance: str | None = None
    """The machine or installation an agent acts from."""
    session: str | None = None
    """The process or conversation an agent acts in, when it says."""

    @classmethod
    def owner(cls, name: str) -> Caller:
        """The person who owns the store, acting as owner."""
        try:
            _SLUG.validate_python(name)
        except ValidationError:
            raise InvalidInput("invalid_owner", f"owner {name!r} must be a slug like 'ana'",
                               field="owner") from None
        return cls("owner", name)

    @classmethod
    def agent(cls, name: str, instance: str, session: str | None = None) -> Caller:
        """An agent (``owner/agent``) acting from ``instance``, optionally in ``session``."""
        try:
            _AGENT.validate_python(name)
        except ValidationError as exc:
            raise InvalidInput("invalid_agent", f"agent {name!r} is not owner/agent: "
                               f"{exc.errors()[0]['msg']}", field="agent") from None
        for field, value in (("instance", instance), ("session", session)):
            if value is None and field == "session":
                continue
            try:
                _INSTANCE.validate_python(value)
            except ValidationError:
                raise InvalidInput(f"invalid_{field}", f"{field} {value!r} must be 1-64 of"
                                   " letters, digits, '.', '_' or '-'", field=field) from None
        return cls("agent", name, instance, session)

    @property
    def is_owner(self) -> bool:
        return self.kind == "owner"

    def __str__(self) -> str:
        if self.is_owner:
            return f"{self.name} (owner)"
        where = f"{self.instance}/{self.session}" if self.session else self.instance
        return f"{self.name} on {where}"


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
