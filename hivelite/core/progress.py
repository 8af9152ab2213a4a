"""Progress of long work (an export, an import, a backup, a bulk handoff, doctor), told to
whoever asked for it.

The library never draws anything: a long operation takes an optional :class:`Progress`
and calls it now and then with how far it is (the CLI draws a bar on a terminal, a
notebook may print or ignore it). Calls are spaced by :data:`STEP` items, so a callback
costs nothing on a million rows; the last call always says the work is done.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from io import IOBase, TextIOBase
from typing import Protocol, TypeVar

T = TypeVar("T")
STEP = 512
"""Items between two calls of a progress callback."""


class Progress(Protocol):
    """How far a long operation is: ``done`` of ``total`` (``None`` when not known ahead),
    with a word on what it is doing now (``note``)."""

    def __call__(self, done: int, total: int | None, note: str = "") -> None: ...


def counted(items: Iterable[T], progress: Progress | None, total: int | None = None,
            note: str = "") -> Iterator[T]:
    """``items``, telling ``progress`` how many went by (every :data:`STEP`, then at the
    end)."""
    if progress is None:
        yield from items
        return
    done = 0
    progress(0, total, note)
    for item in items:
        yield item
        done += 1
        if not done % STEP:
            progress(done, total, note)
    progress(done, done, note)


def lines_in(handle: object) -> int | None:
    """How many lines a regular file holds from where ``handle`` stands, read on its own
    descriptor without moving it; ``None`` for a pipe, a terminal (they can be read only
    once) or lines that are no file."""
    if not isinstance(handle, IOBase | TextIOBase):
        return None
    try:
        fd = handle.fileno()
        info = os.fstat(fd)
        start = handle.tell()
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    count, offset, last = 0, start, b"\n"
    while chunk := os.pread(fd, 1 << 20, offset):
        count += chunk.count(b"\n")
        offset += len(chunk)
        last = chunk[-1:]
    return count + (last != b"\n")


__all__ = ["STEP", "Progress", "counted", "lines_in"]
