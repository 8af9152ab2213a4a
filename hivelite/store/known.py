"""What one connection's last write left known about the file, for its next write.

Every write begins by reading the same few small things: the journal's tip (to
chain the next row), the owner's live controls, the plugins the store requires,
its policy, the calling agent's budget, and whether any lease has run out. When
nobody has written the file since this connection's last commit, those are what
that commit left, so the next write need not read them again.

SQLite says whether anybody has: its *data version* (``SQLITE_FCNTL_DATA_VERSION``,
``apsw.Connection.data_version``) changes with every commit to the file, by this
connection or any other, and costs no statement to read. A write keeps what it
knows only if the version it sees under its write lock is the one recorded right
after the last commit here; any other commit (another process, raw SQL on this
very connection, an import) makes it read everything afresh. A write that changes
one of these tables drops what it knew of it; a write that fails leaves nothing
known.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .rows import BudgetRow, ControlRow, EnrolmentRow, RequiredPlugin

NO_LEASE = "\uffff"
"""``leases_from`` when no lease is live: later than any timestamp."""


@dataclass(slots=True)
class Known:
    """The facts a write reads every time, as this connection last left them."""

    version: int = -1
    """The file's data version right after the commit that left these facts (-1: none)."""
    tip: tuple[int, str] | None = None
    """The journal's newest row: its seq and hash (the chain's tip)."""
    controls: list[ControlRow] | None = None
    """The owner's live controls."""
    required: list[RequiredPlugin] | None = None
    policy: dict[str, str] | None = None
    budgets: dict[str, list[BudgetRow]] = field(default_factory=dict)
    """Each agent's budget row (an empty list: none), as read."""
    enrolments: dict[str, list[EnrolmentRow]] = field(default_factory=dict)
    """Each agent's enrolment row (an empty list: none), as read."""
    leases_from: str | None = None
    """No live lease expires before this time (it may be earlier than the first that
    does: a lease ended since is not taken out). None: not known."""

    def lease_until(self, expires: str) -> None:
        """A lease was taken or extended to ``expires``."""
        if self.leases_from is not None and expires < self.leases_from:
            self.leases_from = expires
