"""Signed checkpoints of a store's journal (C2SP ``signed-note`` and ``tlog-checkpoint``).

The chain's HMAC (:mod:`.keys`) can be checked only by whoever holds the key, and so can
also be forged by them. A checkpoint is the journal's head (its size and hash) signed
with the owner's Ed25519 key, which anyone given the public key can check and no one
else can make: an export carries one, and an import elsewhere takes only an export whose
checkpoint a key it knows signed (``hivelite import --unsigned`` otherwise, recorded in
the store for good).

The formats are C2SP's, so other tools read them: a note is its text, a blank line, then
one line per signature, ``— <name> <base64(key id || signature)>``; the key id is the
first four bytes of SHA-256(name || 0x0A || 0x01 || public key); a verifier key (vkey) is
``<name>+<hex key id>+<base64(0x01 || public key)>``, a signing key
``PRIVATE+KEY+<name>+<hex key id>+<base64(0x01 || seed)>``. A checkpoint's text is its
origin (``hivelite/<store_id>``), the journal's size (the head's seq) and its head hash
(base64), a line each.

The owner's signing key is ``<keys>/signing.key`` (mode 0600), made when a store is first
signed; the keys this machine trusts are it and the vkeys in ``<keys>/trusted.vkeys``,
one a line. Signing is done at backups, exports, server starts and sound doctors, never
by a write: it costs a write nothing.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import re
import secrets
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import StoreError
from .folder import ENV, keys_dir

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ED25519 = b"\x01"
"""The signature type of an Ed25519 key (C2SP signed-note)."""
DASH = "\u2014 "
"""What starts a signature line: an em dash, then a space."""
ORIGIN = "hivelite/"
"""A store's checkpoints' origin, before its identity."""
MAX_SIGNATURES = 100
_NAME = re.compile(r"^[^\s+]+$")


def signing_path() -> Path:
    """The owner's signing key on this machine."""
    return keys_dir() / "signing.key"


def trusted_path() -> Path:
    """The verifier keys this machine trusts besides its own, one a line."""
    return keys_dir() / "trusted.vkeys"


def key_id(name: str, public: bytes, kind: bytes = ED25519) -> bytes:
    """A key's four-byte id: binds its name, its type (``kind``: a signer's
    :data:`ED25519`, a witness's ``cosign.COSIGNER``) and its public key."""
    return hashlib.sha256(name.encode() + b"\n" + kind + public).digest()[:4]


@dataclass(frozen=True)
class Verifier:
    """A public key a signature is checked with, and its name."""

    name: str
    public: bytes

    @property
    def id(self) -> bytes:
        return key_id(self.name, self.public)

    @property
    def vkey(self) -> str:
        """The key as C2SP's verifier key text: what another machine trusts."""
        return (f"{self.name}+{self.id.hex()}+"
                f"{base64.b64encode(ED25519 + self.public).decode()}")

    def verifies(self, text: str, signature: bytes) -> bool:
        return self.verifies_bytes(text.encode(), signature)

    def verifies_bytes(self, data: bytes, signature: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, data)
        except (InvalidSignature, ValueError):
            return False
        return True


def verifier(vkey: str, kind: bytes = ED25519) -> Verifier:
    """A verifier key's text read, of type ``kind`` (``ValueError`` naming what is wrong
    with it)."""
    name, _, rest = vkey.strip().partition("+")
    given_id, _, encoded = rest.partition("+")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except ValueError:
        raise ValueError(f"{vkey[:80]!r} is no verifier key: its key is not base64") from None
    if not _NAME.match(name) or raw[:1] != kind or len(raw) != 33:
        raise ValueError(f"{vkey[:80]!r} is no verifier key of type {kind[0]} (name+id+key)")
    found = Verifier(name, raw[1:])
    if key_id(name, found.public, kind).hex() != given_id.lower():
        raise ValueError(f"{vkey[:80]!r}: its id does not match its name and key")
    return found


@dataclass(frozen=True)
class Signer:
    """The owner's signing key."""

    name: str
    seed: bytes

    def _private(self) -> Ed25519PrivateKey:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return Ed25519PrivateKey.from_private_bytes(self.seed)

    @property
    def verifier(self) -> Verifier:
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        public = self._private().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return Verifier(self.name, public)

    @property
    def text(self) -> str:
        """The key as a Go ``note`` signer key's text."""
        return (f"PRIVATE+KEY+{self.name}+{self.verifier.id.hex()}+"
                f"{base64.b64encode(ED25519 + self.seed).decode()}")

    def sign_bytes(self, data: bytes) -> bytes:
        """An Ed25519 signature of ``data`` (a cosignature's, :mod:`.cosign`)."""
        return self._private().sign(data)

    def sign(self, text: str) -> str:
        """``text`` (lines, each ending in a newline) as a note signed by this key."""
        if not text.endswith("\n") or "\n\n" in text:
            raise ValueError("a note's text is lines, each ending in a newline, none blank")
        signature = self._private().sign(text.encode())
        line = base64.b64encode(self.verifier.id + signature).decode()
        return f"{text}\n{DASH}{self.name} {line}\n"


def signer(text: str) -> Signer:
    """A signing key's text read (``ValueError`` when it is not one)."""
    parts = text.strip().split("+", 4)  # (base64 may hold a "+")
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"] or not _NAME.match(parts[2]):
        raise ValueError("not a signing key (PRIVATE+KEY+name+id+key)")
    raw = base64.b64decode(parts[4], validate=True)
    if raw[:1] != ED25519 or len(raw) != 33:
        raise ValueError("not an Ed25519 signing key")
    found = Signer(parts[2], raw[1:])
    if found.verifier.id.hex() != parts[3].lower():
        raise ValueError("its id does not match its name and key")
    return found


def opened(note: str, known: Iterable[Verifier]) -> tuple[str, Verifier] | None:
    """The text of ``note`` and the known key that signed it, or None when no signature
    of a known key verifies. As C2SP says: a signature line of a known key (its name and
    id) that does not verify rejects the note whatever else it carries; lines of keys not
    known are left alone."""
    text, blank, block = note.rpartition("\n\n")
    if not blank or not block.endswith("\n") or len(note) > 1 << 20:
        return None
    text += "\n"
    keys = {(k.name, k.id): k for k in known}
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        return None
    found: Verifier | None = None
    for line in lines:
        if not line.startswith(DASH):
            return None
        name, _, encoded = line[len(DASH):].rpartition(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except ValueError:
            return None
        key = keys.get((name, raw[:4]))
        if key is None:
            continue
        if not key.verifies(text, raw[4:]):
            return None
        found = found or key
    return None if found is None else (text, found)


@dataclass(frozen=True)
class Checkpoint:
    """A store's journal as a signed checkpoint says it was."""

    store_id: str
    size: int
    hash: str
    signer: str


def checkpoint_text(store_id: str, head: str) -> str:
    """The checkpoint of the head ``seq:hash`` of store ``store_id``."""
    seq, _, value = head.partition(":")
    return f"{ORIGIN}{store_id}\n{int(seq)}\n{base64.b64encode(value.encode()).decode()}\n"


def read_checkpoint(note: object, known: Iterable[Verifier]) -> Checkpoint | None:
    """A signed checkpoint, when ``note`` is one a known key signed (else None)."""
    if not isinstance(note, str):
        return None
    found = opened(note, known)
    if found is None:
        return None
    text, key = found
    said = checkpoint_of(text)
    return None if said is None else Checkpoint(said.store_id, said.size, said.hash, key.name)


def checkpoint_of(note: str) -> Checkpoint | None:
    """What a checkpoint's text says (its store, size and head hash), whoever signed it
    (``signer`` empty): a witness's own record, read back; None when it is no checkpoint.
    Take a note from anyone else through :func:`read_checkpoint`."""
    lines = note.partition("\n\n")[0].split("\n")
    if len(lines) < 3 or not lines[0].startswith(ORIGIN) or not lines[1].isdigit():
        return None
    try:
        value = base64.b64decode(lines[2], validate=True).decode()
    except ValueError:
        return None
    return Checkpoint(lines[0][len(ORIGIN):], int(lines[1]), value, "")


def own_signer(name: str) -> Signer:
    """This machine's signing key, made (as ``name``) the first time it is asked for:
    written 0600 in one step; another process that made it first wins."""
    path = signing_path()
    try:
        return signer(path.read_text(encoding="ascii"))
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StoreError("key_unreadable", f"{path} is not a signing key ({exc})") from None
    made = Signer(name if _NAME.match(name) else "hivelite", secrets.token_bytes(32))
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(made.text + "\n")
            with suppress(FileExistsError):  # another opener's key, made meanwhile
                os.link(draft, path)
        finally:
            draft.unlink(missing_ok=True)
        return signer(path.read_text(encoding="ascii"))
    except OSError as exc:
        raise StoreError("key_unwritable", f"cannot write the signing key {path}:"
                         f" {exc.strerror}; set ${ENV} to a folder of yours") from None


def own_vkey() -> str | None:
    """This machine's signing key as its verifier key text (None: it has none yet); worked
    out once a key file (``info`` asks it at every board page)."""
    path = signing_path()
    try:
        return _vkey_of(path, path.stat().st_mtime_ns)
    except OSError:
        return None


@functools.lru_cache(maxsize=4)
def _vkey_of(path: Path, changed: int) -> str | None:
    try:
        return signer(path.read_text(encoding="ascii")).verifier.vkey
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def known_keys() -> list[Verifier]:
    """The keys whose checkpoints this machine takes: its own, and those it trusts
    (lines of ``trusted.vkeys`` that do not read are left out)."""
    found: list[Verifier] = []
    with suppress(OSError, UnicodeDecodeError, ValueError):
        found.append(signer(signing_path().read_text(encoding="ascii")).verifier)
    return found + trusted(ED25519)


def trusted(kind: bytes) -> list[Verifier]:
    """The keys of type ``kind`` listed in ``trusted.vkeys`` (lines that do not read as
    one are left out: the file holds signers' and witnesses' keys alike)."""
    try:
        lines = trusted_path().read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    found = []
    for line in lines:
        with suppress(ValueError):
            found.append(verifier(line, kind))
    return found


def machine_name() -> str:
    """The name this machine's signing key is made with: its user at its host."""
    import getpass
    import socket

    try:
        found = f"{getpass.getuser()}@{socket.gethostname()}"
    except (OSError, KeyError):
        return "hivelite"
    return found if _NAME.match(found) and found.isprintable() else "hivelite"


def sign_head(store_id: str, head: str) -> str:
    """The head ``seq:hash`` of store ``store_id`` as a checkpoint signed by this
    machine's key (made, as :func:`machine_name`, if there is none yet)."""
    return own_signer(machine_name()).sign(checkpoint_text(store_id, head))


def checkpoint_path(store_id: str) -> Path:
    """The newest checkpoint this machine signed of the store ``store_id``."""
    return keys_dir() / f"{store_id}.checkpoint"


def keep_checkpoint(store_id: str, head: str) -> Path | None:
    """Sign the head ``seq:hash`` of store ``store_id`` and keep it as its newest
    checkpoint beside the keys (what a witness is shown); None when it cannot be (a
    checkpoint is worth having, never worth failing a backup for)."""
    try:
        note = sign_head(store_id, head)
        path = checkpoint_path(store_id)
        draft = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(note)
        os.replace(draft, path)
    except (OSError, StoreError, ValueError):
        return None
    return path


__all__ = ["Checkpoint", "Signer", "Verifier", "checkpoint_of", "checkpoint_path",
           "checkpoint_text",
           "keep_checkpoint", "key_id", "known_keys", "machine_name", "opened", "own_signer",
           "read_checkpoint", "sign_head", "signer", "trusted", "verifier"]
