"""``hivelite witness``: cosign a store's checkpoint as another key holder (docs/reliability.md).

Run by someone the owner does not control, with a keys folder of their own
(``$HIVELITE_KEYS``), and read access to the store: the owner's signed checkpoint is
cosigned only when the store's journal holds its head and extends the last head this
witness cosigned of the store.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from ...core.errors import InvalidInput
from ..terminal import printable
from .context import Context, pass_context


@click.command()
@click.argument("checkpoint", type=click.Path(dir_okay=False, exists=True))
@click.option("--owner", "owners", multiple=True, required=True, metavar="VKEY",
              help="The owner's verifier key (hivelite info --json: signing_vkey) whose"
              " checkpoints this witness cosigns (repeat for more).")
@click.option("--out", type=click.Path(dir_okay=False), help="Where the cosigned checkpoint"
              " goes (default: CHECKPOINT itself); the owner keeps it as"
              " <keys>/<store_id>.cosigned/<name>.checkpoint.")
@pass_context
def witness(ctx: Context, checkpoint: str, owners: tuple[str, ...], out: str | None) -> None:
    """Cosign the owner's CHECKPOINT of the store (--db) as its witness.

    Only when an owner's key signed it, the store's journal holds its head and chains from
    its start, and that head extends the last one this witness cosigned of the store:
    else exits 6 (not_witnessed), saying why. This witness's key is the signing key in its
    own keys folder ($HIVELITE_KEYS); it keeps each store's last cosigned checkpoint there.

    \b
    Example:
      HIVELITE_KEYS=~/witness hivelite --db /srv/hive.db witness hive.checkpoint \\
          --owner 'ana@laptop+1a2b3c4d+AXtb...'
    """
    from ...store.cosign import asked_heads, cosigner_vkey, witness_checkpoint
    from ...store.folder import keys_dir
    from ...store.notes import known_keys, machine_name, own_signer, verifier

    try:
        trusted = [verifier(vkey) for vkey in owners] + known_keys()
    except ValueError as exc:
        raise InvalidInput("invalid_vkey", str(exc), field="owner") from None
    note = Path(checkpoint).read_text(encoding="utf-8")
    folder = keys_dir() / "cosigned"
    heads, tip, sound = _journal(ctx, asked_heads(note, folder))
    signer = own_signer(machine_name())
    cosigned = witness_checkpoint(note, trusted, heads, tip, sound, folder, signer,
                                  int(time.time()))
    target = Path(out or checkpoint)
    target.write_text(cosigned, encoding="utf-8")
    data = {"cosigned": str(target), "witness": cosigner_vkey(signer.verifier)}
    ctx.emit(data, lambda: f"cosigned {printable(str(target))} as {data['witness']}")


def _journal(ctx: Context, seqs: list[int]) -> tuple[dict[int, str], tuple[int, str], bool]:
    """The store's journal as a witness reads it (the store's own readers)."""
    if ctx.on_server:
        from ...store.pg_doctor import journal_heads_url

        return journal_heads_url(ctx.db, seqs)
    from ...store.doctor import journal_heads

    return journal_heads(Path(ctx.db), seqs)


__all__ = ["witness"]
