"""The ``hivelite`` command line: a thin click layer over :class:`hivelite.Hive`.

Every verb prints one JSON document with ``--json``; errors go to stderr as
``error: <code>/<reason>: <message>`` and exit with the code of their class.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, NoReturn

import click
from pydantic import BaseModel

from . import render
from .clock import clock_from_env
from .errors import HiveliteError
from .hive import Hive
from .protocol import State

EXIT_USAGE = 2


@dataclass
class Context:
    """What the group's options set for every verb."""

    db: str
    as_json: bool
    plugins_dir: str | None

    def open(self, *, create: bool = False, owner: str | None = None) -> Hive:
        return Hive.open(self.db, owner=owner, plugins_dir=self.plugins_dir,
                         clock=clock_from_env(), create=create)

    def emit(self, data: Any, human: Callable[[], str]) -> None:
        if self.as_json:
            click.echo(json.dumps(_plain(data), ensure_ascii=False, indent=2))
        else:
            click.echo(human())


def _plain(data: Any) -> Any:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, list | tuple):
        return [_plain(d) for d in data]
    if isinstance(data, dict):
        return {k: _plain(v) for k, v in data.items()}
    return data


pass_context = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--db", envvar="HIVELITE_DB", default="hivelite.db", show_default=True,
              type=click.Path(dir_okay=False), help="The store file ($HIVELITE_DB).")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON document.")
@click.option("--plugins-dir", type=click.Path(file_okay=False),
              help="Load every .py file in this folder as a plugin.")
@click.version_option(package_name="hivelite")
@click.pass_context
def cli(ctx: click.Context, db: str, as_json: bool, plugins_dir: str | None) -> None:
    """hivelite: agent tasks, claims and results in one SQLite file."""
    ctx.obj = Context(db=db, as_json=as_json, plugins_dir=plugins_dir)


@cli.command()
@click.option("--owner", help="The person who owns the store (default: $HIVELITE_OWNER or login).")
@pass_context
def init(ctx: Context, owner: str | None) -> None:
    """Create a store (mode 0600). Example: hivelite init --owner ana"""
    with ctx.open(create=True, owner=owner) as hive:
        data = {"db": os.path.abspath(ctx.db), "owner": hive.owner,
                "schema_version": hive.store.schema_version}
        ctx.emit(data, lambda: f"store {data['db']} ready (owner {hive.owner})")


@cli.command()
@click.option("--requester", required=True, help="owner/agent handing the work over.")
@click.option("--assignee", required=True, help="owner/agent who will do it.")
@click.option("--project", required=True, help="Project slug.")
@click.option("--task", "text", help="What to do (5-500 characters).")
@click.option("--type", "deliverable_type", default="other", show_default=True,
              help="Deliverable type: code, doc, answer, screenshots, reviewed_pr, design, "
              "data, other.")
@click.option("--accept", "acceptance", multiple=True, help="An acceptance criterion (repeat).")
@click.option("--context", "context_text", default="", help="Background for the assignee.")
@click.option("--file", "files", multiple=True, help="A file the work concerns (repeat).")
@click.option("--depends-on", multiple=True, help="A task id that must complete first (repeat).")
@click.option("--packet", "packet_file", type=click.File("r"),
              help="The whole packet as JSON from a file, or - for stdin.")
@click.option("--id", "task_id", help="Use this task id instead of a generated one.")
@click.option("--priority", default="normal", show_default=True,
              type=click.Choice(["low", "normal", "high", "urgent"]))
@click.option("--label", "labels", multiple=True, help="A label (repeat).")
@pass_context
def handoff(ctx: Context, requester: str, assignee: str, project: str, text: str | None,
            deliverable_type: str, acceptance: Sequence[str], context_text: str,
            files: Sequence[str], depends_on: Sequence[str], packet_file: Any,
            task_id: str | None, priority: str, labels: Sequence[str]) -> None:
    """Hand work to an agent; the owner's gate routes, holds or refuses it.

    Example: hivelite handoff --requester ana/planner --assignee ana/coder
    --project site --task "Fix the login bug" --type code --accept "tests pass"
    """
    if packet_file is not None:
        try:
            packet: Any = json.load(packet_file)
        except json.JSONDecodeError as exc:
            raise click.UsageError(f"--packet is not valid JSON: {exc}") from None
    else:
        if text is None:
            raise click.UsageError("give --task TEXT (or the whole packet with --packet FILE)")
        packet = {"task": text, "deliverable_type": deliverable_type,
                  "acceptance_criteria": list(acceptance), "context": context_text,
                  "files": list(files), "depends_on": list(depends_on)}
    with ctx.open() as hive:
        fields: dict[str, Any] = {"requester": requester, "assignee": assignee,
                                  "project": project, "packet": packet, "priority": priority,
                                  "labels": list(labels)}
        if task_id is not None:
            fields["id"] = task_id
        view = hive.handoff(**fields)
        ctx.emit(view, lambda: render.task_block(view))


@cli.command(name="list")
@click.option("--state", "states", multiple=True,
              type=click.Choice([s.value for s in State]), help="Only these states (repeat).")
@click.option("--assignee", help="Only tasks assigned to this owner/agent.")
@click.option("--requester", help="Only tasks requested by this owner/agent.")
@click.option("--project", help="Only this project.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@click.option("--after", "cursor", type=int, help="Continue after this task number.")
@pass_context
def list_(ctx: Context, states: Sequence[str], assignee: str | None, requester: str | None,
          project: str | None, limit: int, cursor: int | None) -> None:
    """List tasks in creation order. Example: hivelite list --state routed"""
    with ctx.open() as hive:
        page = hive.list(state=list(states) or None, assignee=assignee, requester=requester,
                         project=project, limit=limit, cursor=cursor)
        ctx.emit(page, lambda: render.task_table(page.items, hive.clock(), page.next_cursor))


@cli.command()
@click.argument("ref")
@pass_context
def show(ctx: Context, ref: str) -> None:
    """Show one task by id or number. Example: hivelite show 3"""
    with ctx.open() as hive:
        view = hive.get(ref)
        ctx.emit(view, lambda: render.task_block(view, hive.clock()))


def _person_verb(name: str, summary: str, example: str) -> None:
    def run(ctx: Context, ref: str, reason: str | None) -> None:
        with ctx.open() as hive:
            view = getattr(hive, name)(ref, reason=reason)
            ctx.emit(view, lambda: render.task_block(view, hive.clock()))

    run.__doc__ = f"{summary} Example: {example}"
    command = click.argument("ref")(pass_context(run))
    command = click.option("--reason", help="Why (at most 500 characters).")(command)
    cli.command(name=name)(command)


_person_verb("approve", "The owner lets a held handoff go ahead.", "hivelite approve 2")
_person_verb("deny", "The owner refuses a held handoff.", 'hivelite deny 2 --reason "not now"')
_person_verb("cancel", "The owner withdraws an open task.",
             'hivelite cancel 4 --reason "no longer needed"')


@cli.command()
@click.argument("ref")
@pass_context
def history(ctx: Context, ref: str) -> None:
    """The journal of one task: every move, who made it and why. Example: hivelite history 2"""
    with ctx.open() as hive:
        rows = hive.history(ref)
        ctx.emit(rows, lambda: render.journal_table(rows))


@cli.command()
@click.option("--format", "fmt", default="table", show_default=True,
              type=click.Choice(["table", "mermaid", "dot", "json"]))
@pass_context
def states(ctx: Context, fmt: str) -> None:
    """The protocol: states and the 22 allowed moves. Example: hivelite states --format mermaid"""
    from . import diagrams

    if ctx.as_json or fmt == "json":
        click.echo(json.dumps(diagrams.as_json(), indent=2))
    else:
        click.echo({"table": diagrams.markdown_table, "mermaid": diagrams.mermaid,
                    "dot": diagrams.dot}[fmt]())


@cli.command()
@pass_context
def schema(ctx: Context) -> None:
    """Print the seed task object's JSON Schema. Example: hivelite schema > task.schema.json"""
    text = resources.files("hivelite").joinpath("data/task.schema.json").read_text()
    click.echo(text.rstrip())


@cli.command()
@pass_context
def demo(ctx: Context) -> None:
    """Play a short story on the store (created if missing). Example: hivelite demo"""
    from .demo import run_demo

    with ctx.open(create=True) as hive:
        steps = run_demo(hive, echo=None if ctx.as_json else click.echo)
        if ctx.as_json:
            click.echo(json.dumps(_plain(steps), indent=2))


def _fail(error: HiveliteError, as_json: bool) -> NoReturn:
    if as_json:
        click.echo(json.dumps({"error": error.to_dict()}, indent=2))
    click.echo(f"error: {error.code}/{error.reason}: {error.message}", err=True)
    sys.exit(error.exit_code)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the group and turn every error into its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args[: args.index("--") if "--" in args else len(args)]
    try:
        cli.main(args=args, prog_name="hivelite", standalone_mode=False)
    except HiveliteError as error:
        _fail(error, as_json)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        if as_json:
            click.echo(json.dumps({"error": {"status": 400, "code": "usage",
                                             "reason": "usage", "message": exc.format_message()}}))
        exc.show()
        sys.exit(EXIT_USAGE)


__all__ = ["cli", "main"]
