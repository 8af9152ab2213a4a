"""The hivelite side: ``claim`` then ``submit`` through the public ``Hive`` API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hivelite import Caller, Hive, hookimpl

from . import timing
from .timing import Timing
from .wal import PageReport, WalRecorder, report

OWNER = "ana"
AGENT = "ana/coder"
INSTANCE = "bench"
OWNER_CALLER = Caller.owner(OWNER)
AGENT_CALLER = Caller.agent(AGENT, INSTANCE)
PACKET = {"task": "Fix the login bug", "deliverable_type": "code",
          "acceptance_criteria": ["tests pass"]}
SUMMARY = "done"
EVIDENCE = [{"kind": "test_output", "summary": "ok"}]


class ZeroThreshold:
    """Results need no confirmation, so ``submit`` completes the task."""

    @hookimpl
    def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
        return 0


def open_hive(path: Path, synchronous: str = "NORMAL") -> Hive:
    return Hive.open(path, owner=OWNER, plugins=[ZeroThreshold()],
                     synchronous=synchronous)  # type: ignore[arg-type]


def populate(path: Path, items: int) -> list[int]:
    """A new store with ``items`` tasks handed off and routed (not timed)."""
    with open_hive(path) as hive:
        numbers = [hive.handoff(OWNER_CALLER, requester="ana/planner", assignee=AGENT,
                                project="bench", packet=PACKET).number for _ in range(items)]
        if hive.get(numbers[0]).task.state.value != "routed":
            raise RuntimeError("hivelite: the handoff did not route the task")
    return numbers


def autocheckpoint(path: Path) -> int:
    """The ``wal_autocheckpoint`` the library sets on its connections."""
    with open_hive(path) as hive:
        return int(hive.store.conn.execute("PRAGMA wal_autocheckpoint").get)


class _NoRecorder:
    phase = ""


def _cycle(hive: Hive, numbers: list[int], rec: WalRecorder | _NoRecorder, *,
           request_ids: bool = False) -> None:
    claim, submit, agent = hive.claim, hive.submit, AGENT_CALLER
    if request_ids:  # each call with a request id of its own, as a retrying client sends
        for n in numbers:
            rec.phase = "claim"
            lease = claim(agent, n, request_id=f"claim-{n}")
            rec.phase = "submit"
            submit(agent, n, lease_id=lease.lease_id, token=lease.fencing_token,
                   summary=SUMMARY, evidence=EVIDENCE, request_id=f"submit-{n}")
        return
    for n in numbers:
        rec.phase = "claim"
        lease = claim(agent, n)
        rec.phase = "submit"
        submit(agent, n, lease_id=lease.lease_id, token=lease.fencing_token, summary=SUMMARY,
               evidence=EVIDENCE)


def check(hive: Hive, numbers: list[int]) -> None:
    done = hive.store.conn.execute(
        "SELECT count(*) FROM tasks WHERE state = 'completed'").get
    if done != len(numbers):
        raise RuntimeError(f"hivelite: {done} of {len(numbers)} tasks completed")


class Runner:
    """An open hivelite store that runs the cycles for a slice of the tasks at a time."""

    def __init__(self, path: Path, numbers: list[int], synchronous: str) -> None:
        self.numbers = numbers
        self.hive = open_hive(path, synchronous)

    def block(self, start: int, stop: int) -> Timing:
        numbers = self.numbers[start:stop]
        started = timing.start()
        _cycle(self.hive, numbers, _NoRecorder())
        return timing.stop(started)

    def close(self) -> None:
        """Check every task was completed, and close."""
        try:
            check(self.hive, self.numbers)
        finally:
            self.hive.close()


def run(path: Path, numbers: list[int], synchronous: str) -> Timing:
    """Wall and CPU seconds for the timed claim -> submit cycles (open and close not timed)."""
    runner = Runner(path, numbers, synchronous)
    try:
        elapsed = runner.block(0, len(numbers))
    except BaseException:
        runner.hive.close()
        raise
    runner.close()
    return elapsed


def pages(path: Path, numbers: list[int], synchronous: str, *,
          ablated: bool = False, request_ids: bool = False) -> PageReport:
    """The same cycles with a WAL hook counting the pages each commit writes (``ablated``:
    on a copy whose triggers were dropped on purpose, which the store would otherwise
    refuse to write as tampered with; ``request_ids``: every claim and submit with a
    request id of its own)."""
    with open_hive(path, synchronous) as hive:
        if ablated:
            hive.store.tampered = None  # type: ignore[attr-defined]
        rec = WalRecorder(hive.store.conn)
        _cycle(hive, numbers, rec, request_ids=request_ids)
        check(hive, numbers)
        out = report(rec)
        rec.close()
    return out
