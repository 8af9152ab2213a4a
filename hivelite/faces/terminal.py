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


def fits() -> int | None:
    """How wide human output may be: the terminal's columns when stdout is a terminal, or
    ``$COLUMNS`` when set; None (no limit) when printing to a pipe or a file, so a script
    that greps the output gets whole lines."""
    import os
    import shutil
    import sys

    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return max(shutil.get_terminal_size().columns, 40)
    return None


def coloured() -> bool:
    """Colour only on a terminal, and never when ``$NO_COLOR`` is set (no-color.org)."""
    import os
    import sys

    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


STATE_COLOURS = {"completed": "32", "approval": "36", "verifying": "36", "working": "34",
                 "accepted": "34", "waiting": "33", "rejected": "31", "cancelled": "2"}
"""SGR codes by state: green done, cyan with the reviewers, blue at work, yellow waiting,
red refused, dim cancelled; routed and requested stay plain."""


PRIORITY_COLOURS = {"urgent": "1;31", "high": "33", "low": "2"}
"""SGR codes by priority: bold red urgent, yellow high, dim low; normal stays plain."""


def paint(text: str, state: str, colours: dict[str, str] = STATE_COLOURS) -> str:
    """``text`` in the colour ``colours`` gives ``state`` (a state, or a priority)."""
    code = colours.get(state)
    return f"\x1b[{code}m{text}\x1b[0m" if code else text


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, an ellipsis marking the cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


__all__ = ["PRIORITY_COLOURS", "STATE_COLOURS", "clip", "coloured", "fits", "paint",
           "printable"]
