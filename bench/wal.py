"""Counting the WAL frames (pages) each transaction writes, and whose pages they are.

While a WAL hook is installed SQLite does no automatic checkpoint (the
autocheckpoint *is* the default WAL hook), so the log only grows: the hook's
page count after each commit, minus the count after the previous one, is the
number of pages that transaction dirtied. Reading the ``-wal`` file afterwards
gives each frame's page number, and ``dbstat`` names the table or index that
owns the page.
"""

from __future__ import annotations

import struct
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import apsw

WAL_HEADER = 32
FRAME_HEADER = 24


class WalRecorder:
    """Records ``(phase, pages written)`` for every commit on one connection.

    Set :attr:`phase` before each verb so the commits can be told apart.
    """

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.phase = ""
        self.commits: list[tuple[str, int]] = []
        self._last = 0
        conn.set_wal_hook(self._hook)  # replaces (so disables) the autocheckpoint

    def _hook(self, _conn: apsw.Connection, _db: str, pages: int) -> int:
        self.commits.append((self.phase, pages - self._last))
        self._last = pages
        return apsw.SQLITE_OK

    def close(self) -> None:
        self.conn.set_wal_hook(None)


def wal_transactions(wal_path: str | Path) -> list[list[int]]:
    """The page numbers of each committed transaction in a ``-wal`` file, in order."""
    data = Path(wal_path).read_bytes()
    if len(data) < WAL_HEADER:
        return []
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    txns: list[list[int]] = []
    current: list[int] = []
    offset = WAL_HEADER
    while offset + FRAME_HEADER + page_size <= len(data):
        pgno, commit = struct.unpack(">II", data[offset:offset + 8])
        if data[offset + 8:offset + 16] != salts:
            break  # a frame left over from an earlier generation of the log
        current.append(pgno)
        if commit:
            txns.append(current)
            current = []
        offset += FRAME_HEADER + page_size
    return txns


def page_owners(conn: apsw.Connection) -> dict[int, str]:
    """Page number -> the table or index it belongs to (``dbstat`` sees the WAL too)."""
    owners = {int(pgno): str(name) for name, pgno in conn.execute(
        "SELECT name, pageno FROM dbstat")}
    owners[1] = "page 1 (header, sqlite_schema)"
    return owners


@dataclass
class PageReport:
    """Pages written per transaction, overall, per phase and per table/index."""

    page_size: int
    transactions: int
    pages: int
    by_phase: dict[str, tuple[int, int]] = field(default_factory=dict)
    """phase -> (transactions, pages)"""
    objects: dict[str, Counter[str]] = field(default_factory=dict)
    """phase -> table/index -> pages (summed over that phase's transactions)"""

    @property
    def per_txn(self) -> float:
        return self.pages / self.transactions if self.transactions else float("nan")

    def phase_per_txn(self, phase: str) -> float:
        txns, pages = self.by_phase.get(phase, (0, 0))
        return pages / txns if txns else float("nan")


def report(recorder: WalRecorder) -> PageReport:
    """Sum up a recorder's commits; name the pages if the ``-wal`` file agrees with it."""
    conn = recorder.conn
    page_size = int(conn.execute("PRAGMA page_size").get)
    commits = recorder.commits
    by_phase: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for phase, pages in commits:
        by_phase[phase][0] += 1
        by_phase[phase][1] += pages
    result = PageReport(page_size, len(commits), sum(p for _, p in commits),
                        {k: (v[0], v[1]) for k, v in by_phase.items()})
    txns = wal_transactions(conn.filename_wal)
    if len(txns) == len(commits) and all(
            len(t) == n for t, (_, n) in zip(txns, commits, strict=True)):
        owners = page_owners(conn)
        for (phase, _), pages in zip(commits, txns, strict=True):
            counter = result.objects.setdefault(phase, Counter())
            counter.update(owners.get(p, "other (freelist)") for p in pages)
    return result
