"""The ``hivelite`` command line: a thin click layer over :class:`hivelite.Hive`.

Every verb prints one JSON document with ``--json``; errors go to stderr as
``error: <code>/<reason>: <message>`` and exit with the code of their class.

This module is what the console script imports, so it holds only the group, its options
and the error handling: a command's module is imported when the command is called (the
read verbs from ``reads``, which needs no model and no plugin; the others from
``commands``), and ``--version`` imports none.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import MutableMapping, Sequence
from typing import NoReturn

import click

from ... import __version__
from ...core.errors import HiveliteError, InvalidInput, UnexpectedError
from ..terminal import printable

FILE_FREE_VERBS = frozenset({"states", "schema", "completion"})
EXIT_USAGE = 2
READS = frozenset({"list", "show", "history"})
"""The commands of ``reads``; every other command is in ``commands``."""


class VerbGroup(click.Group):
    """A group whose commands are imported when first needed: a call imports the module
    of its verb alone; the help, a completion and a misspelt verb's suggestions import
    them all."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._commands: dict[str, click.Command] = {}
        self._loaded: set[str] = set()
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    @property
    def commands(self) -> MutableMapping[str, click.Command]:
        """Every command (each module imported)."""
        self._load("reads", "commands")
        return self._commands

    @commands.setter
    def commands(self, value: MutableMapping[str, click.Command]) -> None:
        self._commands = dict(value)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name
        if name is None:
            raise TypeError("Command has no name.")
        self._commands[name] = cmd

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._load("reads" if cmd_name in READS else "commands")
        return self._commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)

    def loaded(self) -> list[click.Command]:
        """The commands the modules imported so far have added."""
        return list(self._commands.values())

    def _load(self, *modules: str) -> None:
        for module in modules:
            if module not in self._loaded:
                if module != "reads":  # the other commands use the library
                    from .context import warn_on_stderr

                    warn_on_stderr()
                self._loaded.add(module)
                importlib.import_module(f"{__package__}.{module}")


def served_verbs() -> frozenset[str]:
    """The verbs that run against ``hivelite serve`` with ``--url`` and ``--token``; the
    others work on the store file itself."""
    from ...verbs.table import VERBS
    from .verbs import COMMAND_OF

    return frozenset(COMMAND_OF.get(v.name, v.cli) for v in VERBS if v.http is not None)


@click.group(cls=VerbGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--db", envvar="HIVELITE_DB", default="hivelite.db", show_default=True,
              type=click.Path(dir_okay=False), help="The store file ($HIVELITE_DB).")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON document.")
@click.option("--plugins-dir", type=click.Path(file_okay=False),
              help="Load every .py file in this folder as a plugin.")
@click.option("--url", envvar="HIVELITE_URL", help="Send the task verbs to this hivelite"
              " serve instead of the file ($HIVELITE_URL).")
@click.option("--token", envvar="HIVELITE_TOKEN", help="The token to call --url with"
              " ($HIVELITE_TOKEN): it says who acts.")
@click.version_option(version=__version__, prog_name="hivelite")
@click.pass_context
def cli(ctx: click.Context, db: str, as_json: bool, plugins_dir: str | None,
        url: str | None, token: str | None) -> None:
    """hivelite: agent tasks, claims and results in one SQLite file."""
    from .context import Context

    ctx.obj = Context(db=db, as_json=as_json, plugins_dir=plugins_dir, url=url, token=token)
    verb = ctx.invoked_subcommand
    if url is not None and verb is not None and verb not in served_verbs() | FILE_FREE_VERBS:
        raise click.UsageError(f"{verb} works on a store file, not over --url")



def _fail(error: HiveliteError, as_json: bool) -> NoReturn:
    if as_json:
        click.echo(json.dumps({"error": error.to_dict()}, indent=2))
    # the message may quote what a caller typed or a row holds: no control characters
    click.echo(printable(f"error: {error.code}/{error.reason}: {error.message}"),
               err=True)
    sys.exit(error.exit_code)


def _check_utf8(args: Sequence[str]) -> None:
    """Arguments and ``$HIVELITE_`` variables are text: bytes that are not UTF-8 (which
    Python keeps as lone surrogates) are ``422 invalid_input invalid_utf8``."""
    named = [(f"argument {i}", True, a) for i, a in enumerate(args, 1)]
    named += [(f"${k}", False, v) for k, v in os.environ.items() if k.startswith("HIVELITE_")]
    for field, quote, text in named:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            quoted = f" ({printable_arg(text)})" if quote else ""
            raise InvalidInput("invalid_utf8", f"{field}{quoted} is not UTF-8 text",
                               field=field) from None


def printable_arg(text: str) -> str:
    """An argument as an error quotes it: undecodable bytes as ``\\xff``, control
    characters escaped."""
    raw = text.encode("utf-8", "surrogateescape")
    return printable(raw.decode("utf-8", "backslashreplace"))


def _show(exc: click.ClickException) -> None:
    """What ``exc.show()`` prints (the usage, a hint, ``Error: ...``), with the message's
    control characters escaped: it may quote what was typed."""
    ctx = exc.ctx if isinstance(exc, click.UsageError) else None
    color = exc.show_color
    if ctx is not None:
        hint = ""
        if ctx.command.get_help_option(ctx) is not None:
            names = ctx.command.get_help_option_names(ctx)
            hint = f"Try '{ctx.command_path} {max(names, key=len)}' for help.\n"
        color = ctx.color
        click.echo(f"{ctx.get_usage()}\n{hint}", err=True, color=color)
    click.echo(f"Error: {printable(exc.format_message())}", err=True, color=color)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the group and turn every error into its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "logging" in sys.modules:  # else when the library is opened (a read need not be)
        from .context import warn_on_stderr

        warn_on_stderr()
    try:
        _check_utf8(args)
        cli.main(args=args, prog_name="hivelite", standalone_mode=False)
    except HiveliteError as error:
        _fail(error, _asks_json(args))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.UsageError as exc:
        if _bare(exc):  # a group without its verb: its help, as --help prints it (click 8.1)
            click.echo(exc.ctx.get_help(), color=exc.ctx.color)  # type: ignore[union-attr]
            sys.exit(0)
        _usage(exc, _asks_json(args))
    except click.ClickException as exc:
        _usage(exc, _asks_json(args))
    except Exception as exc:
        if not isinstance(exc, _unforeseen()):
            raise
        # a file that cannot be read, a failure of SQLite the store did not foresee, ...
        _fail(UnexpectedError("unexpected", f"{type(exc).__name__}: {exc}"),
              _asks_json(args))


def _asks_json(args: Sequence[str]) -> bool:
    """Whether the call asked for JSON: ``--json`` before the verb or after it (a group's
    option every command also takes), so even a usage error found before click read the
    options is answered in JSON; nothing after ``--`` counts."""
    return "--json" in (args[:list(args).index("--")] if "--" in args else args)


def _bare(exc: click.UsageError) -> bool:
    """Whether ``exc`` is click's way (8.2 and later) of saying a group was run without a
    verb; click 8.1 printed the help and exited instead."""
    kind = getattr(click.exceptions, "NoArgsIsHelpError", None)
    return kind is not None and isinstance(exc, kind) and exc.ctx is not None


def _usage(exc: click.ClickException, as_json: bool) -> NoReturn:
    if as_json:
        click.echo(json.dumps({"error": {"status": 400, "code": "usage", "reason": "usage",
                                         "message": exc.format_message()}}, indent=2))
    _show(exc)
    sys.exit(EXIT_USAGE)


def _unforeseen() -> tuple[type[BaseException], ...]:
    """The failures ``main`` reports as an error rather than a traceback: a file that cannot
    be read, text that is not what it should be, and SQLite's own errors, when the verb
    opened a store at all (it is not imported otherwise: ``--help`` stays fast)."""
    kinds: list[type[BaseException]] = [OSError, UnicodeError, ValueError, OverflowError]
    sqlite = sys.modules.get("hivelite.store.sqlite")
    if sqlite is not None:
        kinds.append(sqlite.DatabaseError)
    return tuple(kinds)



__all__ = ["cli", "main"]
