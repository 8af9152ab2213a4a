"""Task ids that sort by creation time: 48 bits of milliseconds, then 80 random bits.

Crockford base32 (ULID layout), so the text order is the creation order and the
id matches the seed's ``^[A-Za-z0-9_-]+$``.
"""

from __future__ import annotations

from datetime import datetime

from .errors import NotFound

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


_last: list[int] = [0, 0]  # the last id's milliseconds and random part, for monotonicity


def new_task_id(moment: datetime) -> str:
    """A fresh 26-character id for a task created at ``moment``.

    Within one process, ids made in the same millisecond still sort in the
    order they were made (the random part counts up, as in monotonic ULIDs).
    """
    import secrets

    millis = int(moment.timestamp() * 1000) & ((1 << 48) - 1)
    if millis <= _last[0]:
        millis, rand = _last[0], (_last[1] + 1) & ((1 << 80) - 1)
    else:
        rand = secrets.randbits(79)  # headroom so counting up never wraps in practice
    _last[0], _last[1] = millis, rand
    return _base32(millis, 10) + _base32(rand, 16)


def new_lease_id() -> str:
    """An opaque lease id; it names a claim, the fencing token orders claims."""
    import secrets

    return "L" + secrets.token_hex(8)


NUMBER_DIGITS = 19
"""The most digits a task number has (numbers are 64-bit: below 2**63)."""


def number_of(text: str) -> int | None:
    """The task number ``text`` spells in ASCII digits, or None when it spells none (an
    id). Digits no task number can have (more than :data:`NUMBER_DIGITS`) are
    ``404 invalid_ref``, before Python is asked to read thousands of digits."""
    if not (text.isascii() and text.isdigit()):
        return None
    if len(text) > NUMBER_DIGITS:
        shown = text[:20] + ("…" if len(text) > 20 else "")
        raise NotFound("invalid_ref", f"no task has the number {shown} ({len(text)} digits):"
                       f" a task number has at most {NUMBER_DIGITS}")
    return int(text)
