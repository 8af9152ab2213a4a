"""``python -m bench --scale``: does a cycle cost the same in a big store as in a small one?

Two stores, one with 1,000 routed tasks and one with 100,000 (sizes settable), both
opened with every first-party plugin loaded through its entry point (policy, quorum,
evidence, notify: unconfigured, so they answer nothing, but their hooks are called),
plus the benchmark's zero threshold. The stores take turns, a block of claim -> submit
cycles at a time, so both meet the same load; the figure is the big store's rate over
the small one's (1.0: size costs nothing).

The tasks are made in one SQL transaction through the library's own connection, with
the store's triggers (creation and gate rows journaled as a handoff writes them): the
same rows a handoff leaves, in seconds instead of minutes.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from hivelite import Hive

from .lib import AGENT, AGENT_CALLER, EVIDENCE, OWNER, PACKET, SUMMARY, ZeroThreshold

FIRST_PARTY = ("policy", "quorum", "evidence", "notify")
AT = "2026-12-01T09:00:00.000Z"


@dataclass
class ScaleResult:
    size: int
    items: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.items / self.seconds


def _open(path: Path) -> Hive:
    return Hive.open(path, owner=OWNER, plugins=[ZeroThreshold()])


def populate(path: Path, size: int) -> None:
    """``size`` routed tasks for ``AGENT``, journaled as handoffs journal them."""
    with _open(path) as hive, hive.store.write():
        conn = hive.store.conn  # type: ignore[attr-defined]
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
            " INSERT INTO tasks(id, state, project, requester, assignee, created_at,"
            " updated_at, actor, reason) SELECT printf('B%09d', i), 'requested', 'bench',"
            " 'ana/planner', ?, ?, ?, ?, 'handoff' FROM n",
            (size, AGENT, AT, AT, OWNER))
        conn.execute("INSERT INTO packets(task, body) SELECT number, ? FROM tasks",
                     (json.dumps(PACKET),))
        conn.execute("UPDATE tasks SET state = 'routed', actor = 'gate',"
                     " reason = 'requester and assignee belong to ana'"
                     " WHERE state = 'requested'")


def _missing_plugins() -> list[str]:
    names = {ep.name for ep in importlib.metadata.entry_points(group="hivelite")}
    return [name for name in FIRST_PARTY if name not in names]


def run(folder: Path, sizes: tuple[int, int], items: int, block: int,
        repeat: int) -> list[tuple[ScaleResult, ScaleResult]]:
    """Best-of-``repeat`` pairs of (small, big) results."""
    missing = _missing_plugins()
    if missing:
        raise SystemExit(f"--scale needs the first-party plugins installed: {missing}"
                         " (pip install -e plugins/hivelite-<name>)")
    os.environ["HIVELITE_LOAD_PLUGINS"] = ",".join(FIRST_PARTY)
    templates = {}
    for size in sizes:
        template = folder / f"scale-{size}.db"
        started = time.perf_counter()
        populate(template, size)
        print(f"  populated {size:,} tasks in {time.perf_counter() - started:.1f} s",
              flush=True)
        templates[size] = template
    runs = []
    for attempt in range(repeat):
        hives, numbers, spent = {}, {}, {}
        for size, template in templates.items():
            copy = folder / f"run-{attempt}-{size}.db"
            copy.write_bytes(template.read_bytes())
            hives[size] = _open(copy)
            numbers[size] = list(range(size - items + 1, size + 1))  # the newest tasks
            spent[size] = 0.0
        os.sync()
        try:
            for start in range(0, items, block):
                order = sizes if (start // block) % 2 == 0 else sizes[::-1]
                for size in order:
                    hive = hives[size]
                    chunk = numbers[size][start:start + block]
                    began = time.perf_counter()
                    for n in chunk:
                        lease = hive.claim(AGENT_CALLER, n)
                        hive.submit(AGENT_CALLER, n, lease_id=lease.lease_id,
                                    token=lease.fencing_token, summary=SUMMARY,
                                    evidence=EVIDENCE)
                    spent[size] += time.perf_counter() - began
            for size, hive in hives.items():
                done = hive.store.conn.execute(  # type: ignore[attr-defined]
                    "SELECT count(*) FROM tasks WHERE state = 'completed'").get
                if done != items:
                    raise RuntimeError(f"{size}-task store: {done} of {items} completed")
        finally:
            for hive in hives.values():
                hive.close()
        small, big = (ScaleResult(s, items, spent[s]) for s in sizes)
        print(f"  run {attempt + 1}/{repeat}: {small.size:,} tasks {small.rate:,.0f}/s,"
              f" {big.size:,} tasks {big.rate:,.0f}/s, ratio {big.rate / small.rate:.3f}",
              flush=True)
        runs.append((small, big))
    return runs


def report(runs: list[tuple[ScaleResult, ScaleResult]], target: float) -> bool:
    small = max((r[0] for r in runs), key=lambda r: r.rate)
    big = max((r[1] for r in runs), key=lambda r: r.rate)
    ratio = big.rate / small.rate
    met = ratio >= target
    print(f"\nclaim -> submit with every first-party plugin loaded ({', '.join(FIRST_PARTY)}),"
          f" {small.items} items, best of {len(runs)} runs per store, taking turns")
    print(f"{'tasks':>9}  {'cycles/s':>9}")
    print(f"{small.size:>9,}  {small.rate:>9,.0f}")
    print(f"{big.size:>9,}  {big.rate:>9,.0f}")
    print(f"ratio {ratio:.3f} (target >= {target}: {'met' if met else 'NOT met'})")
    return met
