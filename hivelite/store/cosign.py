"""A witness: another key holder who cosigns a store's checkpoints (C2SP
``tlog-cosignature``), each only when the journal extends the last one it cosigned.

A checkpoint signed by the owner (:mod:`.notes`) says what the journal was; the owner,
holding the file and the key, could still rewrite the history and sign the rewrite. A
witness is someone the owner does not control (another user, another machine, the
server's host) who keeps the last checkpoint it cosigned of each store and cosigns a new
one only when the store's journal still holds that one's head and the chain runs on from
it to the new head. A rewritten history then has no cosignature from anyone who saw the
history before, and ``doctor`` holds the store to every head a witness cosigned.

A cosignature is a signed-note line whose key id is that of a cosigner key (type 0x04),
its signature over ``cosignature/v1``, the time and the checkpoint's text; the line holds
the key id, the time (8 bytes, big-endian seconds) and the signature.
"""

from __future__ import annotations

import base64
import os
import secrets
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InvalidInput
from .notes import (
    DASH,
    Checkpoint,
    Signer,
    Verifier,
    checkpoint_of,
    key_id,
    read_checkpoint,
    trusted,
    verifier,
)

COSIGNER = b"\x04"
"""The signature type of a cosignature (C2SP tlog-cosignature/v1)."""


def cosigner_id(name: str, public: bytes) -> bytes:
    """A cosigner key's four-byte id."""
    return key_id(name, public, COSIGNER)


def cosigner_vkey(key: Verifier) -> str:
    """A witness's key as the verifier key text an owner trusts it by."""
    return (f"{key.name}+{cosigner_id(key.name, key.public).hex()}+"
            f"{base64.b64encode(COSIGNER + key.public).decode()}")


def cosigner(vkey: str) -> Verifier:
    """A witness's verifier key text read (``ValueError`` when it is not one)."""
    return verifier(vkey, COSIGNER)


def _signed(text: str, at: int) -> bytes:
    return f"cosignature/v1\ntime {at}\n".encode() + text.encode()


def cosign(signer: Signer, note: str, at: int) -> str:
    """``note`` with this witness's cosignature line added, made at ``at`` (seconds)."""
    text = note.rpartition("\n\n")[0] + "\n"
    signature = signer.sign_bytes(_signed(text, at))
    key = signer.verifier
    line = base64.b64encode(cosigner_id(key.name, key.public) + struct.pack(">Q", at)
                            + signature).decode()
    return f"{note}{DASH}{signer.name} {line}\n"


@dataclass(frozen=True)
class Cosigned:
    """A witness's cosignature that verifies: who, and when (seconds)."""

    name: str
    at: int


def cosignatures(note: str, known: Iterable[Verifier]) -> list[Cosigned]:
    """The cosignatures of ``note`` by the known witness keys that verify (others are
    left alone)."""
    text, blank, block = note.rpartition("\n\n")
    if not blank:
        return []
    text += "\n"
    keys = {(k.name, cosigner_id(k.name, k.public)): k for k in known}
    found = []
    for line in block.splitlines():
        if not line.startswith(DASH):
            continue
        name, _, encoded = line[len(DASH):].rpartition(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except ValueError:
            continue
        key = keys.get((name, raw[:4]))
        if key is None or len(raw) != 4 + 8 + 64:
            continue
        (at,) = struct.unpack(">Q", raw[4:12])
        if key.verifies_bytes(_signed(text, at), raw[12:]):
            found.append(Cosigned(name, at))
    return found


Head = tuple[int, str]
"""A journal's head as a store holds it: its seq and hash."""


def witness_checkpoint(note: str, owners: Iterable[Verifier], heads: dict[int, str],
                       tip: Head, chain_sound: bool, folder: Path, signer: Signer,
                       at: int) -> str:
    """Cosign the owner's checkpoint ``note`` of a store whose journal holds ``heads``
    (seq: hash, for the seqs asked for) up to ``tip``, its chain sound from its start
    (``chain_sound``): only when an owner's key signed it, it names a head the journal
    holds, and that head extends the last one this witness cosigned of the store (kept in
    ``folder``); then the cosigned note, kept as the store's last. Else
    ``invalid_input/not_witnessed``, saying why."""
    found = read_checkpoint(note, owners)
    if found is None:
        raise _refused("the checkpoint is not signed by an owner's key this witness trusts")
    if not chain_sound:
        raise _refused("the store's journal does not chain from its start to its end")
    if heads.get(found.size) != found.hash or found.size > tip[0]:
        raise _refused(f"the store's journal does not hold the checkpoint's head"
                       f" {found.size}:{found.hash[:64]}")
    last = last_cosigned(folder, found.store_id)
    if last is not None:
        if found.size < last.size:
            raise _refused(f"the checkpoint ({found.size} rows) is older than the last this"
                           f" witness cosigned ({last.size} rows)")
        if heads.get(last.size) != last.hash:
            raise _refused(f"the journal no longer holds row {last.size} as this witness"
                           f" cosigned it: the history was rewritten")
    cosigned = cosign(signer, note, at)
    path = folder / f"{found.store_id}.checkpoint"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    draft.write_text(cosigned, encoding="utf-8")
    os.replace(draft, path)
    return cosigned


def last_cosigned(folder: Path, store_id: str) -> Checkpoint | None:
    """The last checkpoint of the store ``store_id`` this witness cosigned (its own record,
    read as its text alone)."""
    try:
        return checkpoint_of((folder / f"{store_id}.checkpoint").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def asked_heads(note: str, folder: Path) -> list[int]:
    """The journal rows a witness must read to judge ``note``: its head's, and that of the
    last checkpoint it cosigned of the same store."""
    said = checkpoint_of(note)
    if said is None:
        return []
    last = last_cosigned(folder, said.store_id)
    return [said.size] + ([last.size] if last is not None else [])


def cosigned_path(store_id: str) -> Path:
    """The folder of the cosigned checkpoints of store ``store_id`` the owner keeps, one
    file a witness (``<name>.checkpoint``)."""
    from .folder import keys_dir

    return keys_dir() / f"{store_id}.cosigned"


def known_cosigners() -> list[Verifier]:
    """The witnesses this machine trusts: the cosigner keys in ``trusted.vkeys``."""
    return trusted(COSIGNER)


@dataclass(frozen=True)
class WitnessedHead:
    """A head a witness cosigned, as doctor holds a store to it; or why a cosigned
    checkpoint kept beside the keys proves nothing (``problem``)."""

    seq: int
    hash: str
    by: str
    at: int
    problem: str | None = None


def cosigned_heads(store_id: str) -> list[WitnessedHead]:
    """The heads of store ``store_id`` that a trusted witness cosigned, from the
    checkpoints kept in :func:`cosigned_path` (none: no folder)."""
    folder = cosigned_path(store_id)
    if not folder.is_dir():
        return []
    witnesses = known_cosigners()
    found = []
    for path in sorted(folder.glob("*.checkpoint")):
        try:
            note = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        said, signed = checkpoint_of(note), cosignatures(note, witnesses)
        if said is None or not signed or said.store_id != store_id:
            found.append(WitnessedHead(0, "", path.name, 0, f"{path} is not a checkpoint of"
                                       " this store cosigned by a witness trusted here"))
            continue
        found += [WitnessedHead(said.size, said.hash, f"witness {c.name}", c.at)
                  for c in signed]
    return found


def _refused(why: str) -> InvalidInput:
    return InvalidInput("not_witnessed", f"{why}: not cosigned", field="checkpoint")


__all__ = ["Cosigned", "WitnessedHead", "asked_heads", "cosign", "cosignatures",
           "cosigned_heads", "cosigned_path", "cosigner", "cosigner_id", "cosigner_vkey",
           "known_cosigners", "last_cosigned", "witness_checkpoint"]
