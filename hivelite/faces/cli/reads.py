"""The read verbs: ``list``, ``show`` (and ``show --lease``) and ``history``.

A read of a store file is answered from the store's rows (:mod:`..reading`): it imports
click, the store and the renderer, and neither the models, the plugins nor the write path
(issue 32). What that cannot answer as the library would, the library answers: over
``--url``, with ``--plugins-dir``, on PostgreSQL, a store with an expired claim to return,
a row unlike what hivelite writes, a refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import click

from ...core.clock import clock_from_env
from ...core.protocol import PRIORITIES, SORTS, State
from .. import reading, render
from ..terminal import coloured, fits, printable
from .context import Context, acting, global_options, pass_context
from .main import cli

MAX_NUMBER = (1 << 63) - 1
"""The largest task number SQLite can hold."""


def clock() -> datetime:
    """The time a read tells by: ``$HIVELITE_NOW``, else the system's."""
    return clock_from_env()()


@cli.command(name="list")
@click.option("--state", "states", multiple=True,
              type=click.Choice([s.value for s in State]), help="Only these states (repeat).")
@click.option("--assignee", help="Only tasks assigned to this owner/agent.")
@click.option("--requester", help="Only tasks requested by this owner/agent.")
@click.option("--project", help="Only this project.")
@click.option("--role", help="Only tasks needing this role.")
@click.option("--label", "labels", multiple=True, help="Only tasks with this label (repeat:"
              " each).")
@click.option("--priority", "priorities", multiple=True, type=click.Choice(PRIORITIES),
              help="Only this priority (repeat: any).")
@click.option("--ready", is_flag=True, help="Only tasks that can be claimed now (routed,"
              " dependencies completed, attempts left).")
@click.option("--blocked", is_flag=True, help="Only open tasks waiting on a dependency.")
@click.option("--search", help="Only tasks with this text in their title, assignee or a"
              " label (any case).")
@click.option("--sort", default="age", show_default=True, type=click.Choice(SORTS),
              help="Oldest first, most pressing first, or last changed first.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@click.option("--after", "cursor", type=int, help="Continue where the last page ended (the"
              " 'more after' value it printed).")
@pass_context
def list_(ctx: Context, states: Sequence[str], assignee: str | None, requester: str | None,
          project: str | None, role: str | None, labels: Sequence[str],
          priorities: Sequence[str], ready: bool, blocked: bool, search: str | None, sort: str,
          limit: int, cursor: int | None) -> None:
    """List tasks, oldest first (or --sort).

    \b
    Example:
      hivelite list --state routed
      hivelite list --ready --assignee ana/coder --sort priority --json
      hivelite list --search login
    """
    if cursor is not None and not 0 <= cursor <= MAX_NUMBER:
        raise click.BadParameter(f"{cursor} is not a task number (0 to {MAX_NUMBER})",
                                 param_hint="--after")
    if ctx.url is not None:
        from ..client import Client

        with ctx.open() as served:
            assert isinstance(served, Client)
            page = served.list(state=list(states) or None, assignee=assignee,
                               requester=requester, project=project, ready=ready,
                               blocked=blocked, labels=labels,
                               priority=list(priorities) or None, search=search,
                               sort=sort, limit=limit, cursor=cursor, role=role)
            ctx.emit(page, lambda: render.task_table(page.items, served.clock(),
                                                     page.next_cursor, width=fits(),
                                                     colour=coloured()))
        return
    with reading.opened(ctx.db, clock, ctx.plugins_dir) as store:
        if store is not None:
            found = reading.page(store, clock(), states=states, assignee=assignee,
                                 requester=requester, project=project, ready=ready,
                                 blocked=blocked, labels=labels, priorities=priorities,
                                 search=search, sort=sort, limit=limit, cursor=cursor, role=role)
            if found is not None:
                ctx.emit(found, lambda: render.task_table(
                    found["items"], clock(), found["next_cursor"], width=fits(),
                    colour=coloured()))
                return
    with ctx.open_store() as hive:
        page = hive.list(state=list(states) or None, assignee=assignee, requester=requester,
                         project=project, ready=ready, blocked=blocked, labels=labels,
                         priority=list(priorities) or None, search=search, sort=sort,
                         limit=limit, cursor=cursor, role=role)
        ctx.emit(page, lambda: render.task_table(page.items, hive.clock(), page.next_cursor,
                                                 width=fits(), colour=coloured()))
    # a row raw SQL left unreadable is left out of the listing and named here
    for row in page.damaged:
        click.echo(printable(f"warning: task {row.number} ({row.id}) cannot be read"
                                    f" ({row.error}); it is left out of this list"), err=True)


@cli.command()
@click.argument("ref")
@click.option("--lease", "lease", is_flag=True, help="Show the live claim's lease id and"
              " fencing token again (its holder only: --agent and --instance).")
@click.option("--agent", envvar="HIVELITE_AGENT", help="With --lease: the holder,"
              " owner/agent ($HIVELITE_AGENT).")
@click.option("--instance", envvar="HIVELITE_INSTANCE", help="With --lease: the instance it"
              " claimed from ($HIVELITE_INSTANCE).")
@click.option("--session", envvar="HIVELITE_SESSION", help="The process or conversation"
              " acting ($HIVELITE_SESSION).")
@pass_context
def show(ctx: Context, ref: str, lease: bool, agent: str | None, instance: str | None,
         session: str | None) -> None:
    """Show one task by id or number.

    \b
    Example:
      hivelite show 3
      hivelite show 3 --lease --agent ana/coder --instance laptop
    """
    if lease:
        if agent is not None and instance is not None and ctx.url is None:
            with reading.opened(ctx.db, clock, ctx.plugins_dir) as store:
                if store is not None:
                    claim = reading.lease(store, clock(), ref, agent, instance, session)
                    if claim is not None:
                        ctx.emit(claim, lambda: render.lease_text(claim, clock()))
                        return
        caller = ctx.caller(agent, instance, session, agent_verb=True)
        with ctx.open() as hive:
            held = hive.lease(acting(hive, caller), ref)
            ctx.emit(held, lambda: render.lease_text(held, hive.clock()))
        return
    if ctx.url is None:
        with reading.opened(ctx.db, clock, ctx.plugins_dir) as store:
            if store is not None:
                shown = reading.task(store, clock(), ref)
                if shown is not None:
                    ctx.emit(shown, lambda: render.task_block(shown, clock()))
                    return
    with ctx.open() as hive:
        view = hive.get(ref)
        ctx.emit(view, lambda: render.task_block(view, hive.clock()))


@cli.command()
@click.argument("ref")
@pass_context
def history(ctx: Context, ref: str) -> None:
    """The journal of one task: every move, who made it and why.

    On a terminal the times are relative and the lines fit its width (reasons cut);
    into a pipe every reason is whole.

    \b
    Example:
      hivelite history 2
    """
    if ctx.url is None:
        with reading.opened(ctx.db, clock, ctx.plugins_dir) as store:
            if store is not None:
                entries = reading.history(store, ref)
                if entries is not None:
                    ctx.emit(entries, lambda: render.journal_table(entries, clock(),
                                                                    width=fits()))
                    return
    with ctx.open() as hive:
        rows = hive.history(ref)
        ctx.emit(rows, lambda: render.journal_table(rows, hive.clock(), width=fits()))


for command in (list_, show, history):  # the group's options after the verb, too
    global_options(command)
