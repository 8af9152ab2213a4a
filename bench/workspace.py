"""Scratch stores, and running several sides in alternating blocks over the same minutes.

A shared machine's load and disk latency change from second to second. Running
the sides one after another lets one side meet a quiet disk and the other a
busy one (with ``synchronous=FULL`` that alone can flip the ratio). Here every
side has its store open at once and they take turns, a block of items each, so
every side is measured over the same stretch of time.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from .timing import Timing


class Runner(Protocol):
    def block(self, start: int, stop: int) -> Timing: ...

    def close(self) -> None: ...


Opener = Callable[[Path], Runner]


class Workspace:
    """A temporary folder with populated templates; each run gets fresh copies."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._n = 0

    @contextlib.contextmanager
    def fresh(self, template: Path) -> Iterator[Path]:
        self._n += 1
        path = self.root / f"run{self._n}-{template.name}"
        shutil.copyfile(template, path)
        os.sync()  # the copy's dirty pages would otherwise be written during the timed run
        try:
            yield path
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)


def paired(ws: Workspace, sides: Sequence[tuple[str, Path, Opener]], items: int, block: int,
           flip: bool = False) -> dict[str, Timing]:
    """Each side's total time for ``items`` cycles, the sides taking turns ``block`` at a time.

    The order of the sides alternates from block to block (and ``flip`` starts
    with the reverse), so no side always runs right after another one.
    """
    block = block if block > 0 else items
    totals = {name: [0.0, 0.0] for name, _, _ in sides}
    with contextlib.ExitStack() as stack:
        runners: dict[str, Runner] = {}
        for name, template, opener in sides:
            runner = opener(stack.enter_context(ws.fresh(template)))
            stack.callback(runner.close)
            runners[name] = runner
        names = list(runners)
        gc.collect()
        for k, start in enumerate(range(0, items, block)):
            stop = min(start + block, items)
            for name in names if (k % 2 == 0) != flip else names[::-1]:
                t = runners[name].block(start, stop)
                totals[name][0] += t.wall
                totals[name][1] += t.cpu
    return {name: Timing(wall, cpu) for name, (wall, cpu) in totals.items()}
