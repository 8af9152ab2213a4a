"""Task ids that sort by creation time: 48 bits of milliseconds, then 80 random bits.

Crockford base32 (ULID layout), so the text order is the creation order and the
id matches the seed's ``^[A-Za-z0-9_-]+$``.
"""

from __future__ import annotations

import secrets
from datetime import datetime

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_task_id(moment: datetime) -> str:
    """A fresh 26-character id for a task created at ``moment``."""
    millis = int(moment.timestamp() * 1000) & ((1 << 48) - 1)
    return _base32(millis, 10) + _base32(secrets.randbits(80), 16)


def new_lease_id() -> str:
    """An opaque lease id; it names a claim, the fencing token orders claims."""
    return "L" + secrets.token_hex(8)
