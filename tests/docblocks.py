"""The fenced code blocks of a Markdown page, as the docs tests read them.

A block's info string is its language, then ``key=value`` attributes: ``title=PATH`` (a
file the reader saves), ``db=FILE`` (SQL to run against that store). A block right after
``<!-- not run: REASON -->`` is an illustration the tests do not run, and says why.
Setup a reader need not see sits inside an HTML comment around an ordinary block: the
page does not show it, the tests run it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->\s*\Z", re.S)
HEADING = re.compile(r"^## (.+)$", re.M)

# Ids, times, ages and absolute paths differ from run to run: compared as placeholders.
PLACEHOLDERS = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), "<time>"),
    (re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b"), "<task-id>"),
    (re.compile(r"\b\d+[smhd] ago\b"), "<age>"),
    (re.compile(r"(?<![\w.])/\S*/hivelite\.db\b"), "<dir>/hivelite.db"),
]


@dataclass
class Block:
    lang: str
    attrs: dict[str, str]
    body: str
    line: int  # where the opening fence is, from 1
    section: str  # the ``## `` heading it sits under ("" before the first)
    not_run: str | None  # the reason given by a ``<!-- not run: ... -->`` marker

    @property
    def is_output(self) -> bool:
        """Text a command prints, not a command (``text`` or no language)."""
        return self.lang in ("", "text") and "title" not in self.attrs


def blocks(text: str) -> list[Block]:
    """Every fenced block of ``text``, in order."""
    headings = [(m.start(), m.group(1).strip()) for m in HEADING.finditer(text)]
    out = []
    for match in FENCE.finditer(text):
        lang, _, rest = match.group(1).strip().partition(" ")
        attrs = dict(item.partition("=")[::2] for item in rest.split())
        before = text[:match.start()]
        marker = NOT_RUN.search(before[-400:])
        section = next((name for start, name in reversed(headings) if start < match.start()), "")
        out.append(Block(lang, attrs, match.group(2), before.count("\n") + 1, section,
                         marker.group(1) if marker else None))
    return out


def normal(text: str) -> list[str]:
    """Lines with placeholders for what changes between runs, runs of spaces as one."""
    lines = []
    for line in text.rstrip("\n").splitlines():
        for pattern, token in PLACEHOLDERS:
            line = pattern.sub(token, line)
        lines.append(re.sub(r"\s+", " ", line).strip())
    return lines
