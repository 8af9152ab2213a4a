"""A VFS shim that simulates power loss, the way SQLite's own crash tests do.

Every write SQLite makes goes to the real file at once (so reads see it, as they would
see the operating system's cache), but until that file is synced (``xSync``) the write is
only *pending*: the shim keeps, for each pending write, the bytes it overwrote (an undo
log, kept only for the part of the file that was durable) and the file's durable size.
``xSync`` makes a file's pending writes durable: its undo log is dropped and its current
size becomes durable. The shim does not pass ``xSync`` on to the disk: durability is what
it simulates, and a real fsync would only cost time.

When the power goes (at the N-th write, sync or truncate, counted over the database, its
``-wal`` and its rollback ``-journal``), every pending write of every file is undone:
the overwritten bytes are put back, newest first, and the file is cut back to its
durable size. With ``flush_chance`` > 0 each pending write (in order) then reaches the disk
anyway with that probability, as a disk cache that wrote some of its blocks would (a write
past the end leaves a hole of zeros, as a file system would). The ``-shm`` file is not
tracked: it is shared memory, and what to do with it after the crash is the caller's
choice (SQLite rebuilds it from the ``-wal``).

Directory entries are not simulated: a file that was created stays, a file that was
deleted stays deleted (SQLite syncs the folder where it depends on it, and a store in
WAL mode creates or deletes no file inside a transaction).

Use: ``PowerCut.install()`` makes the shim the default VFS of this process (above
``unix``), so a library that opens ``apsw.Connection(path)`` goes through it unchanged.
It is meant for a process that dies with the power: the crash-test child calls
``os._exit`` from ``on_power_loss``. Without that callback the shim raises
:class:`PowerLost` at the cut and then ignores every later write and sync, so the
process can close its connections without touching the files.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import apsw

BASE_VFS = "unix"
SHIM_VFS = "powercut"


class PowerLost(Exception):
    """Raised by a write or sync at the moment the power goes (no ``on_power_loss``)."""


@dataclass
class FileState:
    """One file's durable size and its pending (not yet synced) writes."""

    path: str
    kind: str
    fd: int
    durable_size: int
    undo: list[tuple[int, bytes]] = field(default_factory=list)
    redo: list[tuple[str, int, bytes]] = field(default_factory=list)
    pending_bytes: int = 0

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def before_write(self, offset: int, data: bytes, keep_redo: bool) -> None:
        end = min(offset + len(data), self.durable_size)
        if offset < end:  # only what was durable needs putting back
            self.undo.append((offset, os.pread(self.fd, end - offset, offset)))
        if keep_redo:
            self.redo.append(("w", offset, bytes(data)))
        self.pending_bytes += len(data)

    def before_truncate(self, size: int, keep_redo: bool) -> None:
        end = min(self.size(), self.durable_size)
        if size < end:
            self.undo.append((size, os.pread(self.fd, end - size, size)))
        if keep_redo:
            self.redo.append(("t", size, b""))
        self.pending_bytes += 1

    def synced(self) -> None:
        self.undo.clear()
        self.redo.clear()
        self.pending_bytes = 0
        self.durable_size = self.size()

    def lose_pending(self, rng: random.Random, flush_chance: float) -> tuple[int, int]:
        """Undo every pending write (then let some reach the disk after all); returns
        (pending bytes there were, pending writes that survived)."""
        dropped = self.pending_bytes
        for offset, old in reversed(self.undo):
            os.pwrite(self.fd, old, offset)
        os.ftruncate(self.fd, self.durable_size)
        survived = 0
        if flush_chance > 0:
            for kind, offset, data in self.redo:
                if rng.random() < flush_chance:
                    survived += 1
                    if kind == "w":
                        os.pwrite(self.fd, data, offset)
                    else:
                        os.ftruncate(self.fd, offset)
        self.undo.clear()
        self.redo.clear()
        self.pending_bytes = 0
        return dropped, survived


@dataclass
class Cut:
    """What the power cut met: the event it came at and what it dropped."""

    event: int
    at: str
    dropped_bytes: dict[str, int]
    survived_writes: int
    syncs: dict[str, int]


def _kind(flags: int) -> str | None:
    if flags & apsw.SQLITE_OPEN_MAIN_DB:
        return "db"
    if flags & apsw.SQLITE_OPEN_WAL:
        return "wal"
    if flags & apsw.SQLITE_OPEN_MAIN_JOURNAL:
        return "journal"
    return None  # temporary files, statement journals: nothing to keep


def _path(name: Any) -> str | None:
    if name is None:
        return None
    if isinstance(name, str):
        return name
    return str(name.filename())  # apsw.URIFilename


class PowerCut(apsw.VFS):
    """The shim: counts writes, syncs and truncates; at ``cut_at`` the power goes.

    ``cut_at=None`` never cuts (use :meth:`cut` to cut by hand). ``on_sync(kind)`` is
    called after each sync, ``on_power_loss(cut)`` at the cut (it should not return).
    """

    def __init__(self, *, cut_at: int | None = None, flush_chance: float = 0.0,
                 seed: int = 0, on_sync: Callable[[str], None] | None = None,
                 on_power_loss: Callable[[Cut], None] | None = None,
                 name: str = SHIM_VFS, makedefault: bool = True) -> None:
        self.cut_at = cut_at
        self.flush_chance = flush_chance
        self.rng = random.Random(seed)
        self.on_sync = on_sync
        self.on_power_loss = on_power_loss
        self.events = 0
        self.dead = False
        self.files: dict[str, FileState] = {}
        self.syncs: Counter[str] = Counter()
        self._fds: list[int] = []  # never closed while SQLite has the file open (see close)
        super().__init__(name, BASE_VFS, makedefault=makedefault)

    @classmethod
    def install(cls, **options: Any) -> PowerCut:
        """Register the shim as this process's default VFS."""
        return cls(**options)

    # -- the VFS -------------------------------------------------------------

    def xOpen(self, name: Any, flags: list[int]) -> apsw.VFSFile:
        return ShimFile(self, name, flags)

    def xDelete(self, filename: str, syncdir: bool) -> None:
        if not self.dead:
            super().xDelete(filename, syncdir)
            self.files.pop(filename, None)

    def track(self, path: str, kind: str) -> FileState:
        state = self.files.get(path)
        if state is None:
            # Closing any descriptor of a file drops every POSIX lock this process holds
            # on it, SQLite's included: these stay open until the process ends.
            fd = os.open(path, os.O_RDWR)
            self._fds.append(fd)
            state = FileState(path, kind, fd, os.fstat(fd).st_size)
            self.files[path] = state
        return state

    # -- the power -----------------------------------------------------------

    def event(self, what: str) -> None:
        """One write, sync or truncate is about to happen; the power may go first."""
        if self.dead:
            raise PowerLost(what)
        self.events += 1
        if self.cut_at is not None and self.events >= self.cut_at:
            self.cut(what)

    def cut(self, what: str = "by hand") -> Cut:
        """The power goes now: every pending write of every file is lost."""
        dropped: dict[str, int] = {}
        survived = 0
        for state in self.files.values():
            lost, kept = state.lose_pending(self.rng, self.flush_chance)
            survived += kept
            if lost:
                dropped[state.kind] = dropped.get(state.kind, 0) + lost
        self.dead = True
        cut = Cut(self.events, what, dropped, survived, dict(self.syncs))
        if self.on_power_loss is not None:
            self.on_power_loss(cut)
        if what != "by hand":
            raise PowerLost(what)
        return cut

    def pending(self, kind: str) -> int:
        """Bytes written to files of ``kind`` (db, wal, journal) and not yet synced."""
        return sum(s.pending_bytes for s in self.files.values() if s.kind == kind)

    def close(self) -> None:
        """Forget the files and close the shim's descriptors (only once SQLite has closed
        every connection to them) and unregister the shim."""
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
        self.files.clear()
        self.unregister()


class ShimFile(apsw.VFSFile):
    """A file of the shim: writes, truncates and syncs are tracked for the database, its
    ``-wal`` and its ``-journal``; everything else goes straight to ``unix``."""

    def __init__(self, shim: PowerCut, name: Any, flags: list[int]) -> None:
        super().__init__(BASE_VFS, name, flags)
        self.shim = shim
        kind = _kind(flags[0])
        path = _path(name)
        self.state = shim.track(path, kind) if kind is not None and path is not None else None

    def xWrite(self, data: bytes, offset: int) -> None:
        state = self.state
        if state is not None:
            if self.shim.dead:
                return  # the machine is off: nothing reaches the file any more
            self.shim.event(f"write {state.kind}")
            state.before_write(offset, data, self.shim.flush_chance > 0)
        super().xWrite(data, offset)

    def xTruncate(self, size: int) -> None:
        state = self.state
        if state is not None:
            if self.shim.dead:
                return
            self.shim.event(f"truncate {state.kind}")
            state.before_truncate(size, self.shim.flush_chance > 0)
        super().xTruncate(size)

    def xSync(self, flags: int) -> None:
        state = self.state
        if state is None:
            return  # temporary files need no durability
        if self.shim.dead:
            return
        self.shim.event(f"sync {state.kind}")
        state.synced()
        self.shim.syncs[state.kind] += 1
        if self.shim.on_sync is not None:
            self.shim.on_sync(state.kind)
