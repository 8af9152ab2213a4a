"""The CLI's progress bar for long work: drawn on stderr when it is a terminal, redrawn
at most ten times a second, erased when the work ends (the command's own last line then
stands alone). Nothing is drawn with ``--json``, into a pipe or a file, on a ``dumb``
terminal, or when the command's output goes to the same terminal.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from ...core.clock import duration
from ...core.progress import Progress

CELLS = 20
"""The bar's width in characters, between its brackets (on a narrow terminal it shrinks to
:data:`MIN_CELLS`, then goes)."""
MIN_CELLS = 8
EVERY = 0.1
"""Seconds between two redraws."""


def line(label: str, unit: str, done: int, total: int | None, elapsed: float,
         note: str = "", width: int = 80, *, timed: bool = True) -> str:
    """One state of the bar, at most ``width - 1`` characters: ``export [=====>    ] 41%
    412,000 of 1,000,000 rows  11,800/s  50 s left  journal``. On a narrow terminal the
    picture shrinks, then the note goes, then the picture, then the rate; ``timed=False``
    (steps of unequal length, like doctor's checks) gives neither rate nor time left."""
    rate = done / elapsed if timed and elapsed >= 0.5 and done and done != total else None
    counts = [f"{done:,} of {total:,} {unit}" if total else f"{done:,} {unit}"]
    share = min(1.0, done / total) if total else None
    if share is not None:
        counts.insert(0, f"{share:4.0%}")
    speed = [f"{rate:,.0f}/s"] if rate is not None else []
    left = [f"{duration(round((total - done) / rate))} left"] if rate and total else []
    text = ""
    for parts, pictured in (([*counts, *speed, *left, note], True),
                            ([*counts, *speed, *left], True), ([*counts, *speed, *left], False),
                            ([*counts, *left], False), (counts, False)):
        text = "  ".join(p for p in (label, *parts) if p)
        room = width - 1 - len(text) - len("  []")
        if pictured and share is not None and room >= MIN_CELLS:
            cells = min(CELLS, room)
            filled = int(share * cells)
            bar = "[" + ("=" * filled + (">" if filled < cells else "")).ljust(cells) + "]"
            return text.replace(label, f"{label}  {bar}", 1)
        if not pictured and len(text) < width:
            return text
    return text[:max(0, width - 1)]


def _width(stream: TextIO) -> int:
    """The columns of the terminal the bar is drawn on (``$COLUMNS`` first, as the
    lists' width)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        found = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        found = 0
    return found if found > 0 else 80  # a terminal that says no size (0) has one


class Bar:
    """A :class:`~hivelite.core.progress.Progress` that draws :func:`line` on a stream."""

    def __init__(self, label: str, unit: str, stream: TextIO, *, timed: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.unit, self.stream, self.clock = label, unit, stream, clock
        self.timed = timed
        self.start = clock()
        self.last = -EVERY
        self.shown = 0
        self.width = _width(stream)

    def __call__(self, done: int, total: int | None, note: str = "") -> None:
        now = self.clock()
        if now - self.last < EVERY and done != total:
            return
        self.last = now
        text = line(self.label, self.unit, done, total, now - self.start, note, self.width,
                    timed=self.timed)
        self.stream.write("\r" + text.ljust(self.shown))
        self.stream.flush()
        self.shown = len(text)

    def close(self) -> None:
        """Erase the bar, leaving the cursor where it started."""
        if self.shown:
            self.stream.write("\r" + " " * self.shown + "\r")
            self.stream.flush()
            self.shown = 0


def wanted(as_json: bool, *, output_too: bool = False) -> bool:
    """Whether a bar is drawn: on a terminal, for a person (not ``--json``), and not over
    output that goes to the same terminal (``output_too``: the command prints its rows)."""
    if as_json or os.environ.get("TERM") == "dumb" or not sys.stderr.isatty():
        return False
    return not (output_too and sys.stdout.isatty())


@contextmanager
def progress(label: str, unit: str, *, as_json: bool, output_too: bool = False,
             timed: bool = True) -> Iterator[Progress | None]:
    """A bar for the work inside the block, or ``None`` where none is drawn."""
    if not wanted(as_json, output_too=output_too):
        yield None
        return
    bar = Bar(label, unit, sys.stderr, timed=timed)
    try:
        yield bar
    finally:
        bar.close()


__all__ = ["Bar", "line", "progress", "wanted"]
