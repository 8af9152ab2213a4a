"""Receipts on the command line: the owner's signers, and a receipt made where an
artifact is (a CI's job), for the evidence that points at it."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from ...core.errors import InvalidInput
from ...core.receipts import digest_of, sign
from .context import Context, acting, pass_context

KEY_ENV = "HIVELITE_SIGNER_KEY"


@click.group()
def signer() -> None:
    """Receipt signers: the keys that let hivelite verify evidence.

    A signer (a CI, say) signs an artifact's digest with its key (hivelite receipt); the
    evidence that carries that receipt is shown verified. The key is made here, shown
    once, and kept in the owner's key directory, never in the store.

    \b
    Example:
      hivelite signer add ci
      hivelite signer list
      hivelite signer remove ci
    """


@signer.command(name="add")
@click.argument("name")
@pass_context
def signer_add(ctx: Context, name: str) -> None:
    """Register a signer with a new key and print the key once (give it to the signer).

    \b
    Example:
      hivelite signer add ci
    """
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        issued = hive.add_signer(acting(hive, who), name)
        ctx.emit(issued, lambda: f"signer {issued.name} (key {issued.fingerprint}):"
                 f" {issued.secret}\nkeep this key where the signer runs (${KEY_ENV});"
                 " it is shown nowhere else")


@signer.command(name="list")
@pass_context
def signer_list(ctx: Context) -> None:
    """The signers registered here, with their keys' fingerprints.

    \b
    Example:
      hivelite signer list
    """
    with ctx.open_store() as hive:
        rows = hive.signers()
        ctx.emit(rows, lambda: "\n".join(f"{s.name}  key {s.fingerprint}" for s in rows)
                 or "no signers")


@signer.command(name="remove")
@click.argument("name")
@pass_context
def signer_remove(ctx: Context, name: str) -> None:
    """Forget a signer's key: its receipts no longer verify.

    \b
    Example:
      hivelite signer remove ci
    """
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        gone = hive.remove_signer(acting(hive, who), name)
        ctx.emit(gone, lambda: f"signer {gone.name} removed")


@click.command()
@click.argument("artifact", type=click.File("rb"))
@click.option("--signer", "name", help="Sign as this registered signer, with its key from"
              f" ${KEY_ENV}.")
@pass_context
def receipt(ctx: Context, artifact: Any, name: str | None) -> None:
    """Print a receipt for an artifact (a file, or - for stdin), for the evidence that
    points at it: its digest, signed when --signer names a registered signer.

    Needs no store. Put the receipt in the evidence's "receipt" (submit --evidence-file).

    \b
    Example:
      HIVELITE_SIGNER_KEY=... hivelite receipt build.log --signer ci
    """
    digest = digest_of(artifact.read())
    made: dict[str, str] = {"digest": digest}
    if name is not None:
        key = os.environ.get(KEY_ENV)
        if not key:
            raise InvalidInput("key_required", f"--signer needs the signer's key in ${KEY_ENV}",
                               field="signer")
        made |= {"signer": name, "signature": sign(key, digest)}
    click.echo(json.dumps(made, indent=2 if not ctx.as_json else None))


COMMANDS = (signer, receipt)
"""The commands this module adds to the ``hivelite`` group."""
