"""JSON from outside, bounded: nesting is counted before parsing, so a file nested 100,000
deep is refused with a clear error instead of exhausting the parser's recursion."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from .errors import InvalidInput

MAX_JSON_DEPTH = 64
"""How deep a JSON input may nest arrays and objects (packets, evidence, export lines)."""

_JSON_MARK = re.compile(r'[][{}"\\]')


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep ``text`` nests arrays and objects, counted without parsing (and so without
    recursion); the count stops once it passes ``limit``. Brackets inside strings do not
    count."""
    depth = deepest = 0
    in_string = False
    escaped_at = -1  # the index of the character a backslash escapes
    for mark in _JSON_MARK.finditer(text):
        char, at = mark[0], mark.start()
        if in_string:
            if at == escaped_at:
                continue
            if char == "\\":
                escaped_at = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif char in "]}":
            depth -= 1
    return deepest


def loads_bounded(text: str, what: str) -> Any:
    """``json.loads(text)``, or ``422 invalid_input too_deep`` naming ``what`` when it nests
    deeper than :data:`MAX_JSON_DEPTH`; invalid JSON raises ``json.JSONDecodeError``."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise InvalidInput("too_deep", f"{what} nests arrays and objects more than"
                           f" {MAX_JSON_DEPTH} deep", field=what)
    return json.loads(text)


def text_lines(lines: Iterable[bytes]) -> Iterator[str]:
    """Lines of a file read as bytes, each decoded as UTF-8: a line that is not UTF-8 is
    ``422 invalid_utf8`` naming the line and the byte, not a decoder's traceback."""
    for number, raw in enumerate(lines, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput("invalid_utf8", f"line {number} is not UTF-8 text (byte"
                               f" {exc.start + 1} of the line is {raw[exc.start]:#04x})",
                               field=f"line {number}", line=number) from None
