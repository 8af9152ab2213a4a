"""Receipts: how a piece of evidence proves what it stands for.

A receipt carries the SHA-256 of an artifact (``sha256:<hex>``), and optionally an
HMAC-SHA256 of that digest made with a signer's key that the owner registered (a CI's,
say): ``hivelite receipt FILE --signer ci`` makes one where the artifact is. hivelite
checks a receipt when the result arrives and sets the evidence's ``verified`` itself
(seed 004's ``EvidenceViewV1``: never the client):

- signed: the signature must be the signer's HMAC of the digest;
- unsigned: the evidence must carry the artifact itself, as its ``content``, and the
  digest must be its digest.

HMAC keeps to the standard library: the verifier holds the same secret as the signer,
in the owner's key directory beside the store's chain key, never in the store.
"""

from __future__ import annotations

import hashlib
import hmac
import re

PREFIX = "sha256:"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
SIGNATURE = re.compile(r"^[0-9a-f]{64}\Z")


def digest_of(data: bytes) -> str:
    """The digest of an artifact, as a receipt writes it."""
    return PREFIX + hashlib.sha256(data).hexdigest()


def sign(secret: str, digest: str) -> str:
    """A signer's signature of ``digest``: HMAC-SHA256 with its secret, as hex."""
    return hmac.new(secret.encode("utf-8"), digest.encode("ascii"), hashlib.sha256).hexdigest()


def fingerprint(secret: str) -> str:
    """A signer's key as the journal names it: enough to tell keys apart, never the key."""
    return hashlib.sha256(b"hivelite signer\0" + secret.encode("utf-8")).hexdigest()[:16]


def check(digest: str, content: str | None, signer: str | None, signature: str | None,
          secret: str | None) -> str | None:
    """Why the receipt does not verify, or None when it does."""
    if signer is not None:
        if secret is None:
            return f"no key of the signer {signer!r} is registered here"
        if signature is None or not hmac.compare_digest(sign(secret, digest), signature):
            return f"the signature is not {signer}'s over this digest"
        if content is not None and not hmac.compare_digest(
                digest_of(content.encode("utf-8")), digest):
            return "the digest is not the digest of the evidence's content"  # signed, but
        return None                                                       # not this text
    if content is None:
        return "an unsigned receipt needs the artifact as the evidence's content"
    if not hmac.compare_digest(digest_of(content.encode("utf-8")), digest):
        return "the digest is not the digest of the evidence's content"
    return None


__all__ = ["DIGEST", "SIGNATURE", "check", "digest_of", "fingerprint", "sign"]
