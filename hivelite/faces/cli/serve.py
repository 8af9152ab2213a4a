"""``hivelite serve``: the stores over HTTP, each a vault (the ``server`` extra).

Loopback by default: an agent on another machine reaches the store through this service
with its token, never through the file. Binding elsewhere warns that TLS belongs to a
reverse proxy in front (docs/serve.md).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ...core.clock import clock_from_env, format_ts
from ...core.errors import InvalidInput
from ..server.hosts import is_loopback
from .context import Context, pass_context

if TYPE_CHECKING:
    from ...hive import Hive

DEFAULT_PORT = 8377
WRITERS = 1
"""``--writers``: the server's default (``hivelite.faces.server.vaults.WRITERS``, which
this module does not import: the server extra may be missing)."""


@click.command()
@click.argument("stores", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen"
              " on (loopback; anything else needs TLS in front: docs/serve.md).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535))
@click.option("--socket", "uds", type=click.Path(dir_okay=False),
              help="Listen on this unix socket instead of a port.")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="A host name a proxy in front forwards for (repeat); /mcp answers only"
              " loopback and these.")
@click.option("--board-on-loopback", is_flag=True, help="Show the board (/) to browsers on"
              " this machine without an owner token.")
@click.option("--no-access-log", "quiet", is_flag=True, help="Print no line per request"
              " (the access log names the caller, never a token).")
@click.option("--writers", default=WRITERS, show_default=True, type=click.IntRange(1, 64),
              help="Threads that run each store's writes, in the order they came (SQLite"
              " takes one writer at a time; more only help a plugin slow after each move:"
              " docs/serve.md).")
@pass_context
def serve(ctx: Context, stores: tuple[str, ...], host: str, port: int,
          uds: str | None, allowed_hosts: tuple[str, ...], board_on_loopback: bool,
          quiet: bool, writers: int) -> None:
    """Serve stores over HTTP: seed 004's routes, one vault per store.

    Each STORE (default: --db) is served as the vault of its id (hivelite info). Agents
    call with a token (hivelite token add); the routes are in /openapi.json.

    \b
    Example:
      hivelite serve ~/hives/hive.db --port 8377
    """
    from ...hive import Hive
    from ...store.keys import witness

    if board_on_loopback and (uds is not None or not is_loopback(host) or allowed_hosts):
        raise click.UsageError("--board-on-loopback needs a loopback --host and no proxy"
                               " (--socket, --allowed-host): behind a proxy every visitor"
                               " would look local")
    try:
        import uvicorn  # noqa: F401

        from ..server.app import create_app  # noqa: F401
        from ..server.vaults import writes_refused
    except ImportError as exc:
        raise InvalidInput("server_missing", "hivelite serve needs the server extra:"
                           f" pip install 'hivelite[server]' ({exc.name} is missing)",
                           field="serve") from None
    hives: list[Hive] = []
    try:
        for path in stores or (ctx.db,):
            hives.append(Hive.open(path, plugins_dir=ctx.plugins_dir, clock=clock_from_env(),
                                   create=False))
        for hive in hives:  # a key the store names and that is missing: no serving
            hive.store.chain_key()
        refusal = writes_refused(hives)  # before listening: no server that cannot write
        if refusal is not None:
            raise refusal
        for hive in hives:  # the server holds each store's key, and witnesses where it starts
            info = hive.info()
            if info.head is not None:
                witness(info.vault_id, info.head, format_ts(hive.clock()), "serve")
        _serve(hives, host=host, port=port, uds=uds, allowed_hosts=allowed_hosts,
               board_on_loopback=board_on_loopback, quiet=quiet, writers=writers)
    finally:
        for hive in hives:
            hive.close()


def _serve(hives: list[Hive], *, host: str, port: int, uds: str | None,
           allowed_hosts: tuple[str, ...], board_on_loopback: bool, quiet: bool,
           writers: int) -> None:
    """Listen, serving ``hives``, until stopped."""
    import uvicorn

    from ..server.app import create_app

    app = create_app(hives, allowed_hosts=allowed_hosts, board_on_loopback=board_on_loopback,
                     writers=writers)
    origin = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    where = f"unix socket {uds}" if uds else origin
    for vault_id, hive in app.state.vaults.by_id.items():
        click.echo(f"serving {hive.store.location} as vault {vault_id} at {where}"
                   f"/v1/vaults/{vault_id}/tasks", err=True)
    if uds is None:
        click.echo(f"board: {origin}/"
                   + ("" if board_on_loopback else " (sign in with an owner token)"), err=True)
        click.echo(f"mcp: {origin}/mcp (streamable HTTP, with a token)", err=True)
    if not quiet:
        import logging

        access = logging.getLogger("hivelite.access")
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        access.addHandler(handler)
        access.setLevel(logging.INFO)
        access.propagate = False
    if uds is None and not is_loopback(host):
        click.echo(f"warning: listening on {host}, beyond this machine, over plain HTTP:"
                   " tokens would cross the network in the clear. Put a TLS reverse proxy"
                   " in front (docs/serve.md) and keep this on loopback.", err=True)
    uvicorn.run(app, host=host, port=port, uds=uds, log_level="warning", access_log=False)


@click.command(name="mcp")
@click.option("--token", envvar="HIVELITE_TOKEN", required=True,
              help="The agent's (or the owner's) token ($HIVELITE_TOKEN); required.")
@click.option("--session", envvar="HIVELITE_SESSION", help="The session acting"
              " ($HIVELITE_SESSION).")
@pass_context
def mcp_stdio(ctx: Context, token: str, session: str | None) -> None:
    """Speak MCP on stdin and stdout, as the caller a token proves.

    For an MCP-speaking agent on this machine: its client starts this command. The tools
    act as the token's agent on the token's instance, with the token's rights (an owner's
    token gets the owner's tools instead; docs/serve.md has a client configuration).
    While the agent is connected, its leases taken here are renewed at half their length
    with their own token; when it disconnects, they run out.

    \b
    Example:
      HIVELITE_TOKEN=hl_... hivelite --db ~/hives/hive.db mcp
    """
    from ...hive import Hive

    try:
        from ..server.mcp_tools import build_mcp
    except ImportError as exc:
        raise InvalidInput("server_missing", "hivelite mcp needs the server extra:"
                           f" pip install 'hivelite[server]' ({exc.name} is missing)",
                           field="mcp") from None
    hive = Hive.open(ctx.db, plugins_dir=ctx.plugins_dir, clock=clock_from_env(),
                     create=False)
    try:
        auth = hive.authenticate(token, session=session)
        caller = auth.caller
        from ..server.keeper import LeaseKeeper
        from ..server.mcp_calls import Acting

        keeper = LeaseKeeper(hive, caller)  # its agent's leases, while it is connected
        acting = Acting(hive, caller, auth.token_id)
        server = build_mcp(lambda: acting, caller.kind, on_answer=keeper.track)
        keeper.start()
        try:
            server.run()
        finally:
            keeper.stop()
    finally:
        hive.close()
