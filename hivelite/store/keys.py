"""The owner's chain key and the heads witnessed outside the store.

The journal's hash chain (:mod:`.chain`) shows a changed row to anyone who recomputes it,
but anyone who can write the file can also recompute every hash after a change. So each
link also carries an HMAC under a key that lives **outside the store**: a file of the
owner's, ``<keys>/<store_id>.key`` (mode 0600, in a folder of mode 0700), made when the
store first writes. A forger who has the file but not the key cannot write a row that
``doctor`` accepts, nor rewrite the history before it.

The key file also says from which journal row on the links carry the MAC
(``keyed_from``): a store that predates the key keeps its older rows as they were, and
the first keyed row's MAC covers, through its link, the whole history before it.

Heads (``seq:hash``) are witnessed in ``<keys>/<store_id>.heads`` beside the key: every
backup, export, server start and sound doctor adds one line. A history rewritten by
someone with the key too, or rows dropped from the end (an older copy put in the store's
place), disagree with a head witnessed before.

``<keys>`` is ``$HIVELITE_KEYS`` if set, else ``$XDG_CONFIG_HOME/hivelite/keys``, else
``~/.config/hivelite/keys``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import StoreError
from .folder import ENV, keys_dir
from .records import replace
from .rows import WatchRow

MAC_CHARS = 32
"""A MAC is the first 128 bits of an HMAC-SHA256, as hex, after the link it seals."""
META_KEY = "chain_key"
"""The meta row naming the key's fingerprint: a store that names one refuses writes
without it."""
_STORE_ID = re.compile(r"^[0-9a-f]{16,64}$")


def _named(store_id: str, suffix: str) -> Path:
    if not _STORE_ID.match(store_id):
        raise StoreError("invalid_identity", f"the store's identity {store_id[:80]!r} is not"
                         " one hivelite makes (16-64 lowercase hex); its key cannot be found")
    return keys_dir() / f"{store_id}{suffix}"


def key_path(store_id: str) -> Path:
    """The file that holds (or would hold) the key of the store ``store_id``."""
    return _named(store_id, ".key")


def heads_path(store_id: str) -> Path:
    """The file of heads witnessed for the store ``store_id``."""
    return _named(store_id, ".heads")


def keyed_path(store_id: str) -> Path:
    """The record that this folder's key sealed the store ``store_id``
    (:func:`record_keyed`)."""
    return _named(store_id, ".keyed")


@dataclass(frozen=True)
class ChainKey:
    """One store's chain key: the secret, and the first journal row it seals."""

    store_id: str
    secret: bytes
    keyed_from: int
    path: Path

    @property
    def fingerprint(self) -> str:
        """Names the key in the store (``meta.chain_key``) without giving it away."""
        return hashlib.sha256(b"hivelite chain key:" + self.secret).hexdigest()[:16]

    def mac(self, link: str) -> str:
        """The seal of one link (an HMAC-SHA256 of the link's text, cut to 32 hex)."""
        return hmac.digest(self.secret, link.encode("utf-8", "surrogatepass"),
                           "sha256").hex()[:MAC_CHARS]

    def seal(self, seq: int, link: str) -> str:
        """The hash the journal row ``seq`` stores: its link, then the MAC of its place
        and link (a row moved to another place no longer verifies)."""
        return link + self.mac(f"{seq}:{link}")

    def seal_task(self, task: int | None, link: str) -> str:
        """The hash a journal row stores in a store chained per task (:mod:`.chain`): its
        link, then the MAC of its task and link (its link covers the row before it of that
        task; a row moved to another task no longer verifies)."""
        return link + self.mac(f"task {'-' if task is None else task}:{link}")

    def task_sealed(self, task: object, stored: str) -> bool:
        """Whether a row chained per task, about ``task``, carries the right MAC."""
        link, mac = stored[:-MAC_CHARS], stored[-MAC_CHARS:]
        named = "-" if task is None else task
        return len(stored) > MAC_CHARS and hmac.compare_digest(
            mac, self.mac(f"task {named}:{link}"))

    def request_seal(self, caller: str, request_id: str, verb: str, digest: str,
                     answer: str, at: str) -> str:
        """The seal of a kept first answer (``requests``): a retry replays only a record
        hivelite wrote, never one rewritten behind its back."""
        return self.mac(json.dumps(["request", caller, request_id, verb, digest, answer, at],
                                   ensure_ascii=True))

    def sealed(self, seq: int, stored: str) -> bool:
        """Whether the journal row ``seq``'s stored hash carries the right MAC."""
        link, mac = stored[:-MAC_CHARS], stored[-MAC_CHARS:]
        return len(stored) > MAC_CHARS and hmac.compare_digest(mac, self.mac(f"{seq}:{link}"))


def load_key(store_id: str) -> ChainKey | None:
    """The key of the store ``store_id``, or None when there is no key file. A key file
    that cannot be read, or is not a key of this store, is an error naming it."""
    path = key_path(store_id)
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError("key_unreadable", f"cannot read the store's chain key {path}:"
                         f" {exc.strerror}") from None
    try:
        data = json.loads(text)
        secret = bytes.fromhex(data["key"])
        keyed_from = data["keyed_from"]
        named = data["store_id"]
    except (ValueError, KeyError, TypeError):
        raise StoreError("key_unreadable", f"{path} is not a hivelite chain key") from None
    if (named != store_id or len(secret) != 32 or type(keyed_from) is not int
            or keyed_from < 1):
        raise StoreError("key_unreadable", f"{path} is not the chain key of store"
                         f" {store_id}")
    return ChainKey(store_id, secret, keyed_from, path)


def make_key(store_id: str, keyed_from: int) -> ChainKey:
    """A new key for the store ``store_id``, sealing rows from ``keyed_from`` on; written
    0600 in one step (another opener that made it first wins, and its key is read)."""
    import secrets

    path = key_path(store_id)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        secret = secrets.token_bytes(32)
        text = json.dumps({"format": "hivelite-chain-key", "store_id": store_id,
                           "key": secret.hex(), "keyed_from": keyed_from}, indent=1) + "\n"
        draft = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            with suppress(FileExistsError):  # never over a key that exists
                os.link(draft, path)
            folder = os.open(path.parent, os.O_RDONLY)
            try:  # the key's name on the disk before the store names the key
                os.fsync(folder)
            finally:
                os.close(folder)
        finally:
            draft.unlink(missing_ok=True)
    except OSError as exc:
        raise StoreError("key_unwritable", f"cannot write the store's chain key {path}:"
                         f" {exc.strerror}; set ${ENV} to a folder of yours") from None
    found = load_key(store_id)
    assert found is not None  # just written, by us or by the opener that won
    return found


@dataclass(frozen=True)
class Keyed:
    """This folder's record of a store its key sealed: the store, the key's fingerprint,
    and the first journal row sealed. A store the folder has keyed never takes a key
    again: one that stops naming its key was changed behind hivelite's back."""

    store_id: str
    fingerprint: str
    first_sealed: int
    path: Path


def keyed(store_id: str) -> Keyed | None:
    """The record that this folder's key sealed ``store_id`` (None: it never did, as far
    as this folder knows). A record that does not read is taken as one: it was written
    only after a store named its key, and a store must not shed its key by spoiling it."""
    path = keyed_path(store_id)
    try:
        data = json.loads(path.read_bytes())
        return Keyed(store_id, str(data["fingerprint"]), int(data["first_sealed"]), path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return Keyed(store_id, "?", 0, path)


def record_keyed(key: ChainKey) -> None:
    """Record, once, that ``key`` seals its store: called when a write finds the store
    naming it, and after the commit of the write that named it (never before: a first
    write that is undone leaves a key file no store names, which the next write takes).
    Best effort, as a witness: a record that cannot be written now is written by the next
    write of the next process."""
    import secrets

    path = keyed_path(key.store_id)
    if path.exists():
        return
    text = json.dumps({"format": "hivelite-keyed", "store_id": key.store_id,
                       "fingerprint": key.fingerprint, "first_sealed": key.keyed_from},
                      indent=1) + "\n"
    draft = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    try:
        fd = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(text)
        with suppress(FileExistsError):
            os.link(draft, path)
    except OSError:
        return
    finally:
        draft.unlink(missing_ok=True)


def dropped_key(identity: str, where: str) -> StoreError | None:
    """``schema_tampered`` when this folder's key sealed the store ``identity`` and the
    store no longer names a key (someone with the file but not the key removed its name, to
    have the key taken again and seal what they wrote); else None."""
    record = keyed(identity)
    if record is None:
        return None
    return StoreError("schema_tampered", f"{where} was sealed with the owner's chain key"
                      f" {record.fingerprint} (from journal row {record.first_sealed} on, as"
                      f" {record.path} records) and no longer names it: its name was removed"
                      " behind hivelite's back. A store never takes a key twice: writes are"
                      " refused. Run hivelite doctor, and restore a backup made since it"
                      " was keyed")


def signers_path(store_id: str) -> Path:
    """The folder of the store's receipt signers' keys (``hivelite.core.receipts``)."""
    return _named(store_id, ".signers")


def save_signer(store_id: str, name: str, secret: str) -> Path:
    """Keep signer ``name``'s secret (0600), replacing any it had."""
    import secrets

    folder = signers_path(store_id)
    path = folder / f"{name}.key"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        draft = folder / f".{name}.{secrets.token_hex(4)}"
        fd = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(secret + "\n")
        os.replace(draft, path)
    except OSError as exc:
        raise StoreError("key_unwritable", f"cannot write the signer's key {path}:"
                         f" {exc.strerror}; set ${ENV} to a folder of yours") from None
    return path


def load_signer(store_id: str, name: str) -> str | None:
    """Signer ``name``'s secret, or None when none is registered here."""
    try:
        return (signers_path(store_id) / f"{name}.key").read_text(encoding="ascii").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError("key_unreadable", f"cannot read the key of signer {name!r}:"
                         f" {exc}") from None


def drop_signer(store_id: str, name: str) -> bool:
    """Forget signer ``name``'s key; whether there was one."""
    try:
        (signers_path(store_id) / f"{name}.key").unlink()
    except FileNotFoundError:
        return False
    return True


def signer_names(store_id: str) -> list[str]:
    """The signers registered here, by name."""
    folder = signers_path(store_id)
    return sorted(p.name[:-4] for p in folder.glob("*.key")) if folder.is_dir() else []


def _place(location: str) -> Path:
    digest = hashlib.sha256(location.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return keys_dir() / "places" / f"{digest}.id"


def place_of(location: str) -> str | None:
    """The identity of the store that was last written at ``location`` (a file's real
    path, a PostgreSQL store's URL without its password), as recorded beside the keys."""
    try:
        found = _place(location).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return found if _STORE_ID.match(found) else None


def remember_place(location: str, store_id: str) -> None:
    """Record which store lives at ``location`` (best effort: a record is evidence)."""
    import secrets

    if place_of(location) == store_id:
        return
    path = _place(location)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        draft.write_text(store_id + "\n", encoding="ascii")
        os.chmod(draft, 0o600)
        os.replace(draft, path)
    except OSError:
        return


def check_place(location: str | None, identity: str, where: str) -> None:
    """Refuse a store whose identity is not the one last written at its place: the file
    replaced by another store's, or its identity (and with it, the key it is held to)
    rewritten by someone without the key."""
    if location is None:
        return
    recorded = place_of(location)
    if recorded is not None and recorded != identity and key_path(recorded).exists():
        raise StoreError("identity_changed", f"{where} was store {recorded} (its key is"
                         f" {key_path(recorded)}); it now says it is {identity}: the file was"
                         " replaced by another store's, or its identity rewritten. Writes are"
                         " refused; run hivelite doctor (a store put there on purpose: remove"
                         f" {_place(location)})")


@dataclass(frozen=True)
class Witness:
    """A head (``seq:hash``) seen outside the store, when and by what."""

    seq: int
    hash: str
    at: str
    by: str

    @property
    def head(self) -> str:
        return f"{self.seq}:{self.hash}"


def witness(store_id: str, head: str, at: str, by: str) -> Path | None:
    """Record ``head`` as seen by ``by`` at ``at``; the file it went to, or None when it
    could not be written (a witness is worth having, never worth failing a backup for)."""
    if ":" not in head or "\t" in by or "\n" in by:
        return None
    try:
        path = heads_path(store_id)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(f"{head}\t{at}\t{by}\n")
    except (OSError, StoreError):
        return None
    from .notes import keep_checkpoint  # (signing loads its library only here)

    keep_checkpoint(store_id, head)  # the head signed too, for whoever checks it later
    return path


RESTORED = "restored"
"""What a witness line says when the owner put an older copy in the store's place on
purpose (``hivelite doctor --restored``): the heads before it are history, not a
yardstick."""


def witnesses(store_id: str) -> list[Witness]:
    """Every head witnessed for the store ``store_id`` since the owner last restored it
    (lines that do not read are skipped: a witness file is evidence, not a rule)."""
    try:
        text = heads_path(store_id).read_text(encoding="utf-8", errors="replace")
    except (OSError, StoreError):
        return []
    found: list[Witness] = []
    for line in text.splitlines():
        head, _, rest = line.partition("\t")
        at, _, by = rest.partition("\t")
        seq, _, value = head.partition(":")
        if seq.isdigit() and len(seq) <= 19 and value:
            if by == RESTORED:  # the owner took the journal as it stands: start again
                found.clear()
            found.append(Witness(int(seq), value, at, by))
    return found


def named_key(identity: str | None, named: str | None, where: str,
              location: str | None = None) -> ChainKey | None:
    """The key a store names (its fingerprint ``named``, from ``meta.chain_key``), from
    the key file of its ``identity``; a store that names none yet gets its key file's key
    if there is one. A named key that is missing or another is an error: the store's
    writes, and the tokens it issued, cannot be trusted without it."""
    if identity is None:
        return None
    check_place(location, identity, where)
    key = load_key(identity)
    if named is None:
        dropped = dropped_key(identity, where)
        if dropped is not None:
            raise dropped
        return key
    if key is None:
        raise StoreError("key_missing", f"{where} seals its journal with the owner's chain"
                         f" key, which is not at {key_path(identity)}: writes are refused"
                         f" (reads work). Put the key file there, or set ${ENV} to the"
                         " folder that holds it")
    if key.fingerprint != named:
        raise StoreError("key_mismatch", f"{key.path} is not the chain key {where} names"
                         f" ({named}): writes are refused (reads work)")
    record_keyed(key)  # (a store keyed before the record was kept)
    return key


def key_for_writes(identity: str | None, named: str | None, tip: int,
                   record: Callable[[str], None], where: str,
                   location: str | None = None) -> ChainKey:
    """The key a store's writes seal their journal rows with, read in the first write's
    transaction (:func:`named_key`); a store that names none yet (a new one, or one from
    before the key) adopts its key file, made now if there is none, and ``record`` names
    it in the store. ``tip`` is the journal's last row (the key seals the rows after
    it)."""
    if identity is None:
        raise StoreError("no_identity", f"{where} has no identity (meta.store_id): its"
                         " chain cannot be sealed; run hivelite doctor")
    key = named_key(identity, named, where, location if tip else None)  # (an empty
    if named is None:                                 # store may take another's place)
        key = key or make_key(identity, tip + 1)
        record(key.fingerprint)
    assert key is not None  # named_key raised for a named key it could not find
    if location is not None:
        remember_place(location, identity)
    return key


WATCH_SEALED = ("id", "caller", "token", "verb", "number", "asked", "answer", "created_at",
                "expires_at", "poll_ms", "cancelled_at")
"""What a watch's seal covers: every column of its but when it was last asked
(``updated_at``) and the seal itself."""


def watch_seal(key: ChainKey | None, row: WatchRow) -> str | None:
    """The seal of a watch (a ``WatchRow``, as it is after its write) under the owner's
    key: a watch handed to another caller or token, extended, answered or made outside
    hivelite no longer verifies (None: no key)."""
    if key is None:
        return None
    return key.mac(json.dumps(["watch", *(getattr(row, name) for name in WATCH_SEALED)],
                              ensure_ascii=True))


def read_watch(row: Sequence[Any], key: ChainKey | None) -> WatchRow:
    """A watch as read (its columns, then its seal): a ``WatchRow`` saying whether it
    carries its seal (``sealed``; None: no key to check it with)."""
    found = WatchRow(*row[:-1])
    if key is None:
        return found
    want = watch_seal(key, found)
    seal = row[-1]
    return replace(found, sealed=type(seal) is str and want is not None
                   and hmac.compare_digest(seal, want))


def sealed_digest(key: ChainKey | None, caller: str, request_id: str, verb: str, digest: str,
                  answer: str, at: str) -> str:
    """A request record's digest as the store keeps it: with its seal after a ``.``."""
    if key is None:
        return digest
    return f"{digest}.{key.request_seal(caller, request_id, verb, digest, answer, at)}"


def unsealed(key: ChainKey | None, caller: str, request_id: str, verb: str, kept: str,
             answer: str, at: str) -> tuple[str, bool | None]:
    """A kept request record's digest, and whether its seal verifies (None: no key)."""
    digest, _, seal = kept.partition(".")
    if key is None:
        return digest, None
    want = key.request_seal(caller, request_id, verb, digest, answer, at)
    return digest, bool(seal) and hmac.compare_digest(seal, want)
