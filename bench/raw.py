"""The raw baseline: one narrow table, two ``BEGIN IMMEDIATE`` transactions an item.

This is the floor §4a measures against: the same commits a claim -> submit
cycle needs, with no protocol, journal, validation or plugins.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from . import timing
from .timing import Timing
from .wal import PageReport, WalRecorder, report

SCHEMA = """
CREATE TABLE items(
    id INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    lease TEXT,
    token INTEGER NOT NULL DEFAULT 0,
    result TEXT
);
"""
CLAIM = ("UPDATE items SET state = 'accepted', lease = ?, token = token + 1"
         " WHERE id = ? AND state = 'routed'")
SUBMIT = ("UPDATE items SET state = 'completed', lease = NULL, result = ?"
          " WHERE id = ? AND lease = ?")
# About the size of the result JSON hivelite stores for the same submit.
RESULT = ('{"summary":"done","evidence":[{"kind":"test_output","summary":"ok"}],'
          '"provenance":"agent_generated","returned_by":"ana/coder",'
          '"returned_at":"2026-12-02T14:56:09.123Z"}')


def populate(path: Path, items: int) -> list[int]:
    """A new raw store with ``items`` rows ready to claim (not timed)."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(SCHEMA)
    with conn:
        conn.executemany("INSERT INTO items(id, state) VALUES (?, 'routed')",
                         [(i,) for i in range(1, items + 1)])
    conn.close()
    return list(range(1, items + 1))


def connect(path: Path, synchronous: str, autocheckpoint: int | None) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(10_000)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    if autocheckpoint is not None:
        conn.execute(f"PRAGMA wal_autocheckpoint = {int(autocheckpoint)}")
    return conn


class _NoRecorder:
    phase = ""


def _cycle(conn: apsw.Connection, ids: list[int], rec: WalRecorder | _NoRecorder) -> None:
    execute = conn.execute
    for i in ids:
        lease = f"L{i:016x}"
        rec.phase = "claim"
        execute("BEGIN IMMEDIATE")
        execute(CLAIM, (lease, i))
        execute("COMMIT")
        rec.phase = "submit"
        execute("BEGIN IMMEDIATE")
        execute(SUBMIT, (RESULT, i, lease))
        execute("COMMIT")


def _check(conn: apsw.Connection, ids: list[int]) -> None:
    done = conn.execute("SELECT count(*) FROM items WHERE state = 'completed'").get
    if done != len(ids):
        raise RuntimeError(f"raw: {done} of {len(ids)} items completed")


class Runner:
    """An open raw store that runs the cycles for a slice of the items at a time."""

    def __init__(self, path: Path, ids: list[int], synchronous: str,
                 autocheckpoint: int | None) -> None:
        self.ids = ids
        self.conn = connect(path, synchronous, autocheckpoint)

    def block(self, start: int, stop: int) -> Timing:
        ids = self.ids[start:stop]
        started = timing.start()
        _cycle(self.conn, ids, _NoRecorder())
        return timing.stop(started)

    def close(self) -> None:
        """Check every item was completed, and close."""
        try:
            _check(self.conn, self.ids)
        finally:
            self.conn.close()


def run(path: Path, ids: list[int], synchronous: str, autocheckpoint: int | None) -> Timing:
    """Wall and CPU seconds for the timed claim -> submit cycles (open and close not timed)."""
    runner = Runner(path, ids, synchronous, autocheckpoint)
    try:
        elapsed = runner.block(0, len(ids))
    except BaseException:
        runner.conn.close()
        raise
    runner.close()
    return elapsed


def pages(path: Path, ids: list[int], synchronous: str) -> PageReport:
    """The same cycles with a WAL hook counting the pages each commit writes."""
    conn = connect(path, synchronous, None)
    try:
        rec = WalRecorder(conn)
        _cycle(conn, ids, rec)
        _check(conn, ids)
        out = report(rec)
        rec.close()
    finally:
        conn.close()
    return out
