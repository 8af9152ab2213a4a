"""Receipt signers: the keys the owner registers so that evidence can be verified.

A signer (a CI, say) signs the digest of an artifact with its key; hivelite checks the
signature when a result arrives (``hivelite.core.receipts``). The key is a shared secret
made here and shown once: the owner gives it to the signer, and hivelite keeps it in the
owner's key directory, beside the store's chain key, never in the store (an agent with
the file could otherwise sign its own evidence). Each registration and removal is
journaled with the key's fingerprint.
"""

from __future__ import annotations

import builtins
import secrets

from pydantic import TypeAdapter, ValidationError

from ..core.caller import Caller, require_owner
from ..core.errors import InvalidInput, NotFound, StoreError
from ..core.models import DEFERRED, IssuedSigner, Signer, Slug
from ..core.receipts import fingerprint
from ..store.keys import drop_signer, load_signer, save_signer, signer_names
from .base import HiveBase
from .unit import Unit

_NAME = TypeAdapter(Slug, config=DEFERRED)
EVENT = "signer"


def _name(value: object) -> str:
    try:
        return str(_NAME.validate_python(value))
    except ValidationError:
        raise InvalidInput("invalid_signer", f"a signer is named like a project (1-39 of"
                           f" a-z, 0-9 and -), not {value!r}", field="name") from None


def _store_id(hive: HiveBase) -> str:
    with hive.store.read() as reader:
        found = reader.meta("store_id")
    if not found:
        raise StoreError("invalid_identity", "this store has no identity to keep keys by")
    return found


def add_signer(hive: HiveBase, caller: Caller, name: str,
               secret: str | None = None) -> IssuedSigner:
    """Register signer ``name`` with a new key (or the ``secret`` given, at least 32
    characters), replacing any it had; the answer shows the key this once. Journaled."""
    checked = hive._caller(caller, "signer")
    who = require_owner(checked, hive.owner, "register a signer")
    signer = _name(name)
    if secret is not None and (not isinstance(secret, str) or len(secret) < 32
                               or not secret.isprintable() or secret != secret.strip()):
        raise InvalidInput("invalid_secret", "a signer's secret is at least 32 printable"
                           " characters, without surrounding spaces", field="secret")
    key = secret or secrets.token_hex(32)
    store_id = _store_id(hive)

    def body(unit: Unit) -> IssuedSigner:
        unit.tx.record_event(None, at=unit.at, actor=who, state=None, reason=EVENT,
                             detail={"signer": signer, "fingerprint": fingerprint(key)})
        save_signer(store_id, signer, key)  # last: a refused write leaves no key behind
        return IssuedSigner(name=signer, fingerprint=fingerprint(key), secret=key)

    return hive._write(checked, "signer", body)


def remove_signer(hive: HiveBase, caller: Caller, name: str) -> Signer:
    """Forget signer ``name``'s key: its receipts no longer verify. Journaled."""
    checked = hive._caller(caller, "signer")
    who = require_owner(checked, hive.owner, "remove a signer")
    signer = _name(name)
    store_id = _store_id(hive)
    key = load_signer(store_id, signer)
    if key is None:
        raise NotFound("no_such_signer", f"no signer {signer!r} is registered here")

    def body(unit: Unit) -> Signer:
        unit.tx.record_event(None, at=unit.at, actor=who, state=None, reason=EVENT,
                             detail={"signer": signer, "fingerprint": fingerprint(key),
                                     "removed": True})
        drop_signer(store_id, signer)
        return Signer(name=signer, fingerprint=fingerprint(key))

    return hive._write(checked, "signer", body)


def signers(hive: HiveBase) -> builtins.list[Signer]:
    """The signers registered here, by name, with their keys' fingerprints."""
    store_id = _store_id(hive)
    out = []
    for name in signer_names(store_id):
        key = load_signer(store_id, name)
        if key is not None:
            out.append(Signer(name=name, fingerprint=fingerprint(key)))
    return out


__all__ = ["add_signer", "remove_signer", "signers"]
