"""Keeping an MCP agent's leases alive while it is connected.

``hivelite mcp`` (stdio) lives exactly as long as its agent's connection: the agent's
client starts it and ends it. So, unlike an HTTP server, it knows when its agent is
there, and renews the leases the agent took through it while it is connected; when the
agent disconnects the process ends and the renewals stop, so a lease of a vanished agent
runs out as it should. A renewal carries the lease id and fencing token the agent was
given and nothing else: a lease that ended (submitted, released, paused, expired, ended by
the owner) is refused as stale and forgotten, and a newer claim on the task, with its new
token, is never renewed by a keeper that did not take it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime

from ...core.caller import Caller
from ...core.clock import parse_ts
from ...core.errors import HiveliteError
from ...core.models import ClaimReceipt
from ...hive import Hive

log = logging.getLogger("hivelite.mcp")
EVERY_S = 30.0
"""How often the keeper looks at its leases."""


@dataclass
class Kept:
    number: int
    lease_id: str
    token: int
    minutes: int
    expires_at: datetime


class LeaseKeeper:
    """The leases one agent took through one connection, renewed at half their length."""

    def __init__(self, hive: Hive, caller: Caller) -> None:
        self.hive = hive
        self.caller = caller
        self.kept: dict[int, Kept] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def track(self, answer: object) -> None:
        """Note a claim the agent was given (claim, next, resume or renew's answer)."""
        if not isinstance(answer, ClaimReceipt) or answer.lease_id is None:
            return
        expires, at = parse_ts(answer.expires_at), parse_ts(answer.at)
        minutes = max(5, min(15, round((expires - at).total_seconds() / 60)))
        with self._lock:
            self.kept[answer.number] = Kept(answer.number, answer.lease_id,
                                            answer.fencing_token, minutes, expires)

    def tick(self) -> list[int]:
        """Renew each lease past half its length with its own id and token; forget those
        refused. Answers the tasks renewed."""
        now = self.hive.now()
        with self._lock:
            due = [k for k in self.kept.values()
                   if (k.expires_at - now).total_seconds() < k.minutes * 30]
        renewed = []
        for kept in due:
            try:
                answer = self.hive.renew(self.caller, kept.number, lease_id=kept.lease_id,
                                         token=kept.token, minutes=kept.minutes)
            except HiveliteError as error:  # the lease ended: never look for another one
                log.info("lease on task %s no longer kept: %s", kept.number, error.reason)
                with self._lock:
                    if self.kept.get(kept.number) is kept:
                        del self.kept[kept.number]
                continue
            self.track(answer)
            renewed.append(kept.number)
        return renewed

    def start(self) -> None:
        """Renew in a thread until :meth:`stop` (the connection's end)."""
        def run() -> None:
            while not self._stop.wait(EVERY_S):
                self.tick()
        self._thread = threading.Thread(target=run, name="hivelite-leases", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


__all__ = ["LeaseKeeper"]
