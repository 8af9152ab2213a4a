"""What every ``hivelite`` verb shares: the group's options, who the process acts as,
the caller options, and how an answer is printed (one JSON document with ``--json``).

The verbs live in ``cli`` and, for the owner's controls and policy, ``cli_owner``; both
stand on this module.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from ...core.clock import clock_from_env
from ...core.errors import ForbiddenRight

if TYPE_CHECKING:
    from ...core.caller import Caller
    from ...core.models import Receipt
    from ...hive import Hive
    from ...verbs.face import TaskFace


class FileOwner:
    """The CLI's finding that this process acts as the store's owner: no agent is named, and
    the user running it owns the store file."""


FILE_OWNER = FileOwner()


class TokenCaller:
    """The CLI's finding that this process acts as whom its ``--token`` proves (over
    ``--url``, naming no agent): the server says who that is."""


TOKEN = TokenCaller()


@dataclass
class Context:
    """What the group's options set for every verb."""

    db: str
    as_json: bool
    plugins_dir: str | None
    request_id: str | None = None
    """A write verb's --request-id: a retry with the same id gets the first answer."""
    url: str | None = None
    """--url: the task verbs go to this ``hivelite serve`` instead of the file."""
    token: str | None = None

    def open(self) -> TaskFace:
        """Where a task verb runs: the served store (``--url``, with ``--token``) or the
        file."""
        warn_on_stderr()
        if self.url is None:
            return self.open_store()
        if not self.token:
            raise click.UsageError("--url needs the agent's token: --token or $HIVELITE_TOKEN")
        from ..client import Client

        return Client(self.url, self.token)

    def open_store(self, *, create: bool = False, owner: str | None = None,
                   parents: bool = False) -> Hive:
        """The store file itself (the verbs that only a store file serves)."""
        from ...hive import Hive

        warn_on_stderr()
        if self.url is not None:
            verb = click.get_current_context().info_name
            raise click.UsageError(f"{verb} works on a store file, not over --url")
        return Hive.open(self.db, owner=owner, plugins_dir=self.plugins_dir,
                         clock=clock_from_env(), create=create, parents=parents)

    def caller(self, agent: str | None, instance: str | None, session: str | None, *,
               agent_verb: bool = False) -> Caller | FileOwner | TokenCaller:
        """Who this process acts as, decided before the store is opened: the agent it names,
        or the store's owner, which only the user owning the store file may be (its name is
        read from the store once it is open: :func:`acting`). An agent's verb without an
        agent is a usage error, never the owner."""
        from ...core.caller import Caller

        params = click.get_current_context()
        if agent is not None:
            if instance is None:
                raise click.UsageError(f"acting as agent {agent} needs --instance (or"
                                       " $HIVELITE_INSTANCE)")
            from_env = params.get_parameter_source("agent") is ParameterSource.ENVIRONMENT
            return Caller.agent(agent, instance, session,
                                origin="$HIVELITE_AGENT" if from_env else None)
        if self.url is not None:  # the token says who
            return TOKEN
        if agent_verb:
            raise click.UsageError("name the acting agent: --agent owner/agent and --instance"
                                   " (or $HIVELITE_AGENT and $HIVELITE_INSTANCE)")
        for name in ("instance", "session"):
            if params.get_parameter_source(name) is ParameterSource.COMMANDLINE:
                raise click.UsageError(f"--{name} belongs to an agent: name it with --agent,"
                                       f" or drop --{name} to act as the store's owner")
        return self.file_owner()

    @property
    def on_server(self) -> bool:
        """Whether ``--db`` names a PostgreSQL store (a URL) rather than a file."""
        from ...store.urls import is_url

        return is_url(self.db)

    def where(self) -> str:
        """The store as a person reads it: the file's absolute path, or the URL without
        its password."""
        from ...store.urls import shown

        return shown(self.db) if self.on_server else os.path.abspath(self.db)

    def file_only(self, verb: str, instead: str) -> None:
        """A verb of an SQLite file alone: a usage error on a PostgreSQL store."""
        if self.on_server:
            raise click.UsageError(f"{verb} works on an SQLite store file; on PostgreSQL"
                                   f" {instead}")

    def file_owner(self) -> FileOwner:
        """The store's owner, which only the user owning the store file may act as (on
        PostgreSQL, whoever the database lets in: its credentials are the proof)."""
        path = Path(self.db)
        if hasattr(os, "geteuid") and not self.on_server and path.exists():
            uid = path.stat().st_uid
            if uid != os.geteuid():
                raise ForbiddenRight("not_owner", f"{path} belongs to another user (uid"
                                     f" {uid}); only the store file's owner acts as the"
                                     " store's owner. Agents name themselves with --agent"
                                     " and --instance")
        return FILE_OWNER

    def owner_caller(self) -> Caller | FileOwner | TokenCaller:
        """Who runs one of the owner's controls (hold, budget, policy, ...), whose
        ``--agent`` and ``--instance`` name whom it binds: the agent of
        ``$HIVELITE_AGENT`` when set (whom the store then refuses: only the owner
        controls), else the store's owner."""
        from ...core.caller import Caller

        agent = os.environ.get("HIVELITE_AGENT")
        if self.url is not None and not agent:  # over --url the token says who
            return TOKEN
        if agent:
            instance = os.environ.get("HIVELITE_INSTANCE")
            if not instance:
                raise click.UsageError("$HIVELITE_AGENT is set without $HIVELITE_INSTANCE;"
                                       " unset $HIVELITE_AGENT to act as the store's owner")
            return Caller.agent(agent, instance, os.environ.get("HIVELITE_SESSION"),
                                origin="$HIVELITE_AGENT")
        return self.file_owner()

    def agent(self, agent: str | None, instance: str | None,
              session: str | None) -> Caller | TokenCaller:
        """The agent an agent's verb acts as (a usage error when none is named, unless a
        token says who)."""
        caller = self.caller(agent, instance, session, agent_verb=True)
        assert not isinstance(caller, FileOwner)  # an agent's verb never falls back to it
        return caller

    def show(self, hive: TaskFace, receipt: Receipt) -> None:
        """After a write: the task's full view, as ``show`` prints it."""
        from .. import render

        view = hive.get(receipt.number)
        self.emit(view, lambda: render.task_block(view, hive.clock()))

    def emit(self, data: Any, human: Callable[[], str]) -> None:
        if self.as_json:
            click.echo(json.dumps(plain(data), ensure_ascii=False, indent=2))
        else:
            click.echo(human())


def warn_on_stderr() -> None:
    """The library's warnings (``logging``'s ``hivelite`` logger) on stderr as ``warning:
    ...``, control characters escaped, unless the logger has a handler already: set up
    before the library is opened (``logging`` is not imported for a read that needs no
    library)."""
    import logging

    from ..terminal import printable

    class Printable(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return printable(super().format(record))

    logger = logging.getLogger("hivelite")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(Printable("warning: %(message)s"))
        logger.addHandler(handler)


AS_OWNER = ("Acts as the store's owner (you must own the store file); with an agent named"
            " (--agent or $HIVELITE_AGENT) it acts as that agent, and an agent is refused.")
AS_AGENT = "Acts as the agent named by --agent and --instance (or their $HIVELITE_ variables)."


def caller_options(*, agent_verb: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--agent, --instance and --session, each with its ``$HIVELITE_`` variable."""
    need = "; required." if agent_verb else "."
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        command = click.option(
            "--request-id", expose_value=False, callback=_keep_request_id,
            help="Make a retry safe: the same call with the same id answers as the first"
            " did, without writing again (24 hours).")(command)
        command = click.option("--session", envvar="HIVELITE_SESSION",
                               help="The process or conversation acting"
                               " ($HIVELITE_SESSION).")(command)
        command = click.option("--instance", envvar="HIVELITE_INSTANCE",
                               help="The machine or installation the agent acts from"
                               f" ($HIVELITE_INSTANCE){need}")(command)
        return click.option("--agent", envvar="HIVELITE_AGENT",
                            help=f"The acting agent, owner/agent ($HIVELITE_AGENT){need}"
                            )(command)
    return decorate


GLOBALS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("--db", "db", {"type": click.Path(dir_okay=False)}),
    ("--json", "as_json", {"is_flag": True, "is_eager": True}),
    ("--plugins-dir", "plugins_dir", {"type": click.Path(file_okay=False)}),
    ("--url", "url", {}),
    ("--token", "token", {}),
)
"""The group's options, which every command also takes after its verb (``hivelite list
--json``): the option, the ``Context`` field it sets, and how click reads it."""


def global_options(command: click.Command) -> click.Command:
    """``command`` taking the group's options too, each but those it has of its own (a
    holder verb's ``--token`` is its fencing token: the server's comes before the verb).
    Hidden from the command's help: ``hivelite --help`` lists them once."""
    taken = {name for param in command.params for name in getattr(param, "opts", ())}
    for option, field, settings in GLOBALS:
        if option not in taken:
            command.params.append(click.Option(
                [option], "global_" + field, expose_value=False, hidden=True,
                callback=_set_global(field), **settings))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            global_options(sub)
    return command


def _set_global(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def keep(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if param.name and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
            setattr(ctx.find_object(Context), field, value)
    return keep


def _keep_request_id(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.find_object(Context).request_id = value  # type: ignore[union-attr]


def acting(hive: TaskFace, who: Caller | FileOwner | TokenCaller) -> Caller:
    """The caller :meth:`Context.caller` decided on: the owner's name read from the store,
    or (over ``--url``) whom the token proves."""
    if isinstance(who, FileOwner):
        return hive.as_owner()
    if isinstance(who, TokenCaller):
        from ..client import Client

        if not isinstance(hive, Client):  # pragma: no cover - TOKEN only with --url
            raise click.UsageError("a token acts only over --url")
        return hive.caller
    return who


def plain(data: Any) -> Any:
    """``data`` as JSON types: a model dumped, lists and dicts walked (a read's answer is
    JSON already, and pydantic is not imported for it)."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(data, pydantic.BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, list | tuple):
        return [plain(d) for d in data]
    if isinstance(data, dict):
        return {k: plain(v) for k, v in data.items()}
    return data


pass_context = click.make_pass_decorator(Context)


def login_owner() -> str:
    """The login name as an owner's name (for the demo's store, said as it is made)."""
    import getpass
    import re

    slug = re.sub(r"[^a-z0-9]+", "-", getpass.getuser().lower()).strip("-")[:39].strip("-")
    return slug or "owner"


def _both_are_faces(hive: Any, client: Any) -> tuple[TaskFace, TaskFace]:
    """Never called: mypy checks here that a ``Hive`` and a ``Client`` are faces (here,
    where the CLI uses both, so the face itself imports neither)."""
    from ..client import Client

    local: Hive = hive
    served: Client = client
    return local, served
