"""hivelite's own SQL with no Python around it: the floor its schema and statements set.

:func:`record` runs the hivelite cycles once on a scratch copy and keeps every
statement the store executed, with its bindings, in order. :class:`Runner`
replays them on a fresh copy of the same store, through a connection configured
by the library's own ``Store`` (same pragmas, triggers, statement cache), so
the time is SQLite's alone: what the library would cost if its Python were free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hivelite.store import SqliteStore

from . import lib, timing
from .timing import Timing


@dataclass
class Recording:
    """The statements of a run, and where each item's statements start."""

    log: list[tuple[str, Any]]
    starts: list[int]  # len(items) + 1 entries; item i is log[starts[i]:starts[i + 1]]


class RecordingConn:
    """Stands in for the store's connection and keeps each ``execute`` call."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.log: list[tuple[str, Any]] = []

    def execute(self, sql: str, *args: Any) -> Any:
        self.log.append((sql, args[0] if args else None))
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def record(path: Path, numbers: list[int]) -> Recording:
    """Every statement (with bindings) the cycles run, item by item."""
    with lib.open_hive(path) as hive:
        rec = RecordingConn(hive.store.conn)
        hive.store.conn = rec  # type: ignore[assignment]
        starts = []
        for n in numbers:
            starts.append(len(rec.log))
            lib._cycle(hive, [n], lib._NoRecorder())
        starts.append(len(rec.log))
        hive.store.conn = rec._conn
        lib.check(hive, numbers)
    return Recording(rec.log, starts)


class Runner:
    """A store opened by the library's ``Store`` that replays a slice of the items."""

    def __init__(self, path: Path, recording: Recording, numbers: list[int],
                 synchronous: str) -> None:
        self.recording = recording
        self.numbers = numbers
        self.store = SqliteStore(path, synchronous=synchronous)  # type: ignore[arg-type]

    def block(self, start: int, stop: int) -> Timing:
        rec = self.recording
        statements = rec.log[rec.starts[start]:rec.starts[stop]]
        execute = self.store.conn.execute
        started = timing.start()
        for sql, bindings in statements:
            for _ in execute(sql, bindings):
                pass
        return timing.stop(started)

    def close(self) -> None:
        """Check every task was completed, and close."""
        try:
            done = self.store.conn.execute(
                "SELECT count(*) FROM tasks WHERE state = 'completed'").get
            if done != len(self.numbers):
                raise RuntimeError(f"replay: {done} of {len(self.numbers)} tasks completed")
        finally:
            self.store.close()
