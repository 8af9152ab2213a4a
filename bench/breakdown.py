"""Where the hivelite side's time goes: cProfile, a per-statement split, trigger firings.

The per-statement split wraps the store's connection in :class:`TimedConn`,
which times every ``execute`` (SQLite's work for that statement, its triggers
and, for ``COMMIT``, the WAL write and any fsync or checkpoint); what the wall
clock shows beyond the sum of those is Python.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from . import lib, raw

_SPACES = re.compile(r"\s+")


class TimedConn:
    """Stands in for the store's ``apsw.Connection``, timing each ``execute`` by statement."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn
        self.phase = ""
        self.stats: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        self._writing = False

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        cursor = self._conn.execute(sql, *args, **kwargs)
        elapsed = time.perf_counter_ns() - start
        if sql == "BEGIN IMMEDIATE":
            self._writing = True
        elif sql in ("COMMIT", "ROLLBACK"):
            sql = f"{sql} ({'write' if self._writing else 'read'})"
            self._writing = False
        entry = self.stats[(self.phase, sql)]
        entry[0] += 1
        entry[1] += elapsed
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@dataclass
class Split:
    """One side's timed pass: wall time and the time in each distinct statement."""

    items: int
    wall_ns: int
    statements: list[tuple[str, str, int, int]]  # phase, sql, calls, ns

    @property
    def sql_ns(self) -> int:
        return sum(s[3] for s in self.statements)

    def calls(self, *prefixes: str) -> int:
        return sum(s[2] for s in self.statements if s[1].startswith(prefixes))

    def ns(self, *prefixes: str) -> int:
        return sum(s[3] for s in self.statements if s[1].startswith(prefixes))


def _statements(timed: TimedConn) -> list[tuple[str, str, int, int]]:
    return sorted(((phase, _SPACES.sub(" ", sql).strip(), calls, ns)
                   for (phase, sql), (calls, ns) in timed.stats.items()),
                  key=lambda s: -s[3])


def cprofile(path: Path, numbers: list[int], synchronous: str, top: int = 25) -> str:
    """The cycles under cProfile: the ``top`` functions by cumulative time, then by own time."""
    with lib.open_hive(path, synchronous) as hive:
        prof = cProfile.Profile()
        prof.enable()
        lib._cycle(hive, numbers, lib._NoRecorder())
        prof.disable()
        lib.check(hive, numbers)
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).strip_dirs()
    out.write(f"--- cProfile, {len(numbers)} items, {synchronous}:"
              f" top {top} by cumulative time ---\n")
    stats.sort_stats("cumulative").print_stats(top)
    out.write(f"--- the same run: top {top // 2} by own (total) time ---\n")
    stats.sort_stats("tottime").print_stats(top // 2)
    return out.getvalue()


def split(path: Path, numbers: list[int], synchronous: str) -> Split:
    """The hivelite cycles with every statement timed (see :class:`TimedConn`)."""
    with lib.open_hive(path, synchronous) as hive:
        timed = TimedConn(hive.store.conn)
        hive.store.conn = timed  # type: ignore[assignment]
        start = time.perf_counter_ns()
        lib._cycle(hive, numbers, timed)
        wall = time.perf_counter_ns() - start
        hive.store.conn = timed._conn
        lib.check(hive, numbers)
    return Split(len(numbers), wall, _statements(timed))


def split_raw(path: Path, ids: list[int], synchronous: str,
              autocheckpoint: int | None) -> Split:
    """The raw cycles with every statement timed, for the same comparison."""
    conn = raw.connect(path, synchronous, autocheckpoint)
    try:
        timed = TimedConn(conn)
        start = time.perf_counter_ns()
        raw._cycle(timed, ids, timed)  # type: ignore[arg-type]
        wall = time.perf_counter_ns() - start
        raw._check(conn, ids)
    finally:
        conn.close()
    return Split(len(ids), wall, _statements(timed))


def trigger_firings(path: Path, numbers: list[int]) -> Counter[tuple[str, str]]:
    """How often each trigger runs, by verb (a separate pass: tracing costs time)."""
    fired: Counter[tuple[str, str]] = Counter()
    with lib.open_hive(path) as hive:
        rec = lib._NoRecorder()

        def on_stmt(event: dict[str, Any]) -> None:
            sql = event.get("sql", "")
            if event.get("trigger") and sql.startswith("TRIGGER "):
                fired[(rec.phase, sql[len("TRIGGER "):])] += 1

        hive.store.conn.trace_v2(apsw.SQLITE_TRACE_STMT, on_stmt, id="bench")
        lib._cycle(hive, numbers, rec)
        hive.store.conn.trace_v2(0, None, id="bench")
    return fired


def format_split(splits: dict[str, Split], synchronous: str, top: int = 16) -> str:
    """Both sides' split side by side, then hivelite's costliest statements."""
    lib_split = splits["hivelite"]
    n = lib_split.items
    lines = [f"--- time split, {n} items, {synchronous} (every execute timed;"
             " Python = wall - SQL) ---",
             f"  {'us per item':34} {'raw':>8} {'hivelite':>9}"]

    def row(label: str, fn: Any, fmt: str = ".1f") -> None:
        values = [fn(splits[side]) for side in ("raw", "hivelite")]
        lines.append(f"  {label:34} {values[0]:8{fmt}} {values[1]:9{fmt}}")

    def per_item(sp: Split, ns: float) -> float:
        return ns / sp.items / 1000

    def each(sp: Split, prefix: str) -> float:
        calls = sp.calls(prefix)
        return sp.ns(prefix) / calls / 1000 if calls else 0.0

    row("wall", lambda sp: per_item(sp, sp.wall_ns))
    row("  in SQLite (all execute calls)", lambda sp: per_item(sp, sp.sql_ns))
    row("    COMMIT of write transactions", lambda sp: per_item(sp, sp.ns("COMMIT (write)")))
    row("    BEGINs and read COMMITs", lambda sp: per_item(
        sp, sp.ns("BEGIN") + sp.ns("COMMIT (read)")))
    row("    statements", lambda sp: per_item(
        sp, sp.sql_ns - sp.ns("BEGIN") - sp.ns("COMMIT")))
    row("  Python (wall - SQLite)", lambda sp: per_item(sp, sp.wall_ns - sp.sql_ns))
    row("write transactions per item", lambda sp: sp.calls("BEGIN IMMEDIATE") / sp.items, ".2f")
    row("read transactions per item", lambda sp: sp.calls("COMMIT (read)") / sp.items, ".2f")
    row("statements per item", lambda sp: (
        sum(s[2] for s in sp.statements) - sp.calls("BEGIN") - sp.calls("COMMIT")) / sp.items,
        ".2f")
    row("us per write COMMIT", lambda sp: each(sp, "COMMIT (write)"))
    lines.append("hivelite statements by time (phase, calls/item, us/call, us/item, % of wall):")
    for phase, text, calls, ns in lib_split.statements[:top]:
        short = text if len(text) <= 76 else text[:73] + "..."
        lines.append(f"  {phase:6} {calls / n:5.2f} {ns / calls / 1000:8.1f} {ns / n / 1000:7.1f}"
                     f" {100 * ns / lib_split.wall_ns:5.1f}  {short}")
    rest = lib_split.statements[top:]
    if rest:
        ns = sum(s[3] for s in rest)
        lines.append(f"  ({len(rest)} more statements: {ns / n / 1000:.1f} us/item)")
    return "\n".join(lines)


def format_triggers(fired: Counter[tuple[str, str]], items: int) -> str:
    lines = [f"--- trigger firings per item ({items} items) ---"]
    for phase in ("claim", "submit"):
        parts = [f"{name} {count / items:.2f}" for (p, name), count in sorted(fired.items())
                 if p == phase]
        lines.append(f"  {phase:6}: " + (", ".join(parts) if parts else "none"))
    return "\n".join(lines)
