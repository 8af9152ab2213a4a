"""Text made safe for a terminal: what the CLI prints passes through :func:`printable`.

Its own small module so that the CLI can escape what it quotes (an argument, a warning)
without importing the models: ``hivelite --help`` stays fast.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match[0]
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str) -> str:
    """``text`` with every terminal control character (C0, DEL, C1, and the Unicode line
    and paragraph separators) written as its Python escape: BEL as ``\\x07``, CR as
    ``\\r``, ESC as ``\\x1b``; the rest is left as it is."""
    return _CONTROL.sub(_escape, text)


__all__ = ["printable"]
