"""``python -m bench.queue``: the work queue under load, and what it costs as a store grows.

drain
    W worker processes (W = 1 and 2 by default) drain N tasks of mixed priorities with
    ``claim_next`` -> ``submit`` (zero threshold, so a submit completes the task), beside a
    raw SQLite baseline of the same shape run in the same minutes: one narrow table, and per
    item ``BEGIN IMMEDIATE; SELECT the best ready row ... LIMIT 1; UPDATE it claimed;
    COMMIT`` then a second transaction marking it done. Prints cycles/s, the hivelite/raw
    ratio per W, and the wasted claims (refusals other than ``queue_empty``; 0 when the
    pick and the claim are one transaction).
scale
    ``next`` and ``list(ready=True, limit=50)`` latency in stores of different sizes (1,000
    and 1,000,000 tasks by default) holding the same few ready tasks (200 for the agent, 100
    for another; the rest completed), taking turns so both meet the same load. The partial
    ``tasks_queue`` index holds only ready tasks, so the cost should not grow with the
    store; the ratio big/small shows it. Ends with ``EXPLAIN QUERY PLAN`` of ``next``'s query.

Figures only: nothing here asserts a timing. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from hivelite import Caller, Hive, HiveliteError, NotFound
from hivelite.core.protocol import PRIORITIES

from . import figures as figures_file
from . import lib
from .replay import RecordingConn
from .workers import outputs, reap

AGENT = lib.AGENT
OTHER = "ana/reviewer"
"""The agent the scale stores' other ready tasks are assigned to."""
AT = "2026-12-01T09:00:00.000Z"
LEASE_ENDS = "2026-12-01T09:10:00.000Z"
RESULT_BODY = json.dumps({"summary": "done", "evidence": [{"kind": "note", "summary": "ok"}],
                          "provenance": "agent_generated", "returned_by": AGENT,
                          "returned_at": AT})
WORKER_TIMEOUT_S = 600.0


def priority(i: int) -> str:
    """Task ``i``'s priority: a fixed, even mix, the same for both sides of a comparison."""
    return PRIORITIES[(i * 7919) % len(PRIORITIES)]


PRIORITY_SQL = ("CASE (number * 7919) % 4 " + " ".join(
    f"WHEN {n} THEN '{p}'" for n, p in enumerate(PRIORITIES)) + " END")
""":func:`priority` as SQL over a task's ``number``."""


# -- drain: the raw baseline ---------------------------------------------------------------

RAW_SCHEMA = """
CREATE TABLE items(
    id INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    rank INTEGER NOT NULL,
    lease TEXT,
    token INTEGER NOT NULL DEFAULT 0,
    result TEXT
);
CREATE INDEX items_ready ON items(rank, id) WHERE state = 'routed';
"""
RAW_NEXT = "SELECT id FROM items WHERE state = 'routed' ORDER BY rank, id LIMIT 1"
RAW_CLAIM = ("UPDATE items SET state = 'accepted', lease = ?, token = token + 1"
             " WHERE id = ? AND state = 'routed'")
RAW_DONE = ("UPDATE items SET state = 'completed', lease = NULL, result = ?"
            " WHERE id = ? AND lease = ?")


def raw_populate(path: Path, items: int) -> None:
    """``items`` ready rows with the hivelite side's priorities (not timed)."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(RAW_SCHEMA)
    with conn:
        conn.executemany("INSERT INTO items(id, state, rank) VALUES (?, 'routed', ?)",
                         [(i, PRIORITIES.index(priority(i))) for i in range(1, items + 1)])
    conn.close()


def lib_populate(path: Path, items: int) -> None:
    """``items`` tasks handed off to the agent through the API, same priorities (not timed)."""
    with lib.open_hive(path) as hive:
        for i in range(1, items + 1):
            hive.handoff(lib.OWNER_CALLER, requester="ana/planner", assignee=AGENT,
                         project="bench", packet=lib.PACKET, priority=priority(i))


def raw_worker(path: Path, name: str, synchronous: str, autocheckpoint: int) -> tuple[int, int]:
    """Drain the raw table; (cycles, wasted claims)."""
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(10_000)
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(f"PRAGMA wal_autocheckpoint = {autocheckpoint}")
    execute = conn.execute
    cycles = wasted = 0
    while True:
        execute("BEGIN IMMEDIATE")
        row = execute(RAW_NEXT).fetchone()
        if row is None:
            execute("COMMIT")
            break
        lease = f"{name}-{cycles}"
        execute(RAW_CLAIM, (lease, row[0]))
        claimed = conn.changes() == 1
        execute("COMMIT")
        if not claimed:
            wasted += 1
            continue
        execute("BEGIN IMMEDIATE")
        execute(RAW_DONE, (lib.SUMMARY, row[0], lease))
        wasted += conn.changes() != 1
        execute("COMMIT")
        cycles += 1
    conn.close()
    return cycles, wasted


def lib_worker(path: Path, name: str, synchronous: str) -> tuple[int, int]:
    """Drain the queue through the API; (cycles, wasted: refusals other than queue_empty)."""
    me = Caller.agent(AGENT, name)
    cycles = wasted = 0
    with lib.open_hive(path, synchronous) as hive:
        claim_next, submit = hive.claim_next, hive.submit
        while wasted <= 1000:
            try:
                lease = claim_next(me)
            except NotFound as exc:
                if exc.reason == "queue_empty":
                    break
                wasted += 1
                continue
            except HiveliteError:
                wasted += 1
                continue
            try:
                submit(me, lease.number, lease_id=lease.lease_id, token=lease.fencing_token,
                       summary=lib.SUMMARY, evidence=lib.EVIDENCE)
            except HiveliteError:
                wasted += 1
                continue
            cycles += 1
    return cycles, wasted


def worker_main(argv: Sequence[str]) -> int:
    """One drain worker (a child process): open, say ready, wait for the start, drain, and
    print ``{"cycles", "wasted", "end"}`` (``end`` on the system-wide monotonic clock)."""
    side, path, name, go, synchronous, autocheckpoint = argv
    ready = Path(f"{go}.{name}")
    if side == "raw":
        def drain() -> tuple[int, int]:
            return raw_worker(Path(path), name, synchronous, int(autocheckpoint))
    else:
        def drain() -> tuple[int, int]:
            return lib_worker(Path(path), name, synchronous)
    ready.touch()
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            return 1
        time.sleep(0.0005)
    cycles, wasted = drain()
    print(json.dumps({"cycles": cycles, "wasted": wasted, "end": time.monotonic()}))
    return 0


@dataclass
class Drain:
    """One drain: how long W workers took for every item, and what each reported."""

    side: str
    workers: int
    seconds: float
    cycles: list[int]
    wasted: int

    @property
    def rate(self) -> float:
        return sum(self.cycles) / self.seconds


def drain_once(side: str, template: Path, scratch: Path, workers: int, items: int,
               synchronous: str, autocheckpoint: int) -> Drain:
    """Copy ``template``, start ``workers`` processes, release them together, time them."""
    path = scratch / f"{side}-{workers}.db"
    shutil.copyfile(template, path)
    go = scratch / f"go-{side}-{workers}"
    os.sync()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, (str(Path(__file__).resolve().parents[1]),
                      os.environ.get("PYTHONPATH"))))}
    names = [f"w{k}" for k in range(workers)]
    procs = [subprocess.Popen([sys.executable, "-m", "bench.queue", "_worker", side,
                               str(path), name, str(go), synchronous, str(autocheckpoint)],
                              stdout=subprocess.PIPE, text=True, env=env) for name in names]
    try:
        deadline = time.monotonic() + 60
        while not all(Path(f"{go}.{name}").exists() for name in names):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"{side}: a worker did not start")
            time.sleep(0.005)
        started = time.monotonic()
        go.touch()
    except BaseException:
        reap(procs)
        raise
    outs = outputs(procs, side, WORKER_TIMEOUT_S)
    reports = [json.loads(out) for out in outs]
    done = _completed(side, path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    for name in names:
        Path(f"{go}.{name}").unlink()
    go.unlink()
    if done != items or sum(r["cycles"] for r in reports) != items:
        raise RuntimeError(f"{side}: {done} of {items} completed")
    return Drain(side, workers, max(r["end"] for r in reports) - started,
                 [r["cycles"] for r in reports], sum(r["wasted"] for r in reports))


def _completed(side: str, path: Path) -> int:
    conn = apsw.Connection(str(path))
    try:
        table = "items" if side == "raw" else "tasks"
        return int(conn.execute(f"SELECT count(*) FROM {table} WHERE state = 'completed'").get)
    finally:
        conn.close()


def drain(folder: Path, items: int, workers: Sequence[int], repeat: int,
          synchronous: str) -> dict[str, Any]:
    """Both sides at each W, ``repeat`` times, taking turns; print the best of each."""
    templates = {"raw": folder / "raw.db", "hivelite": folder / "hivelite.db"}
    started = time.perf_counter()
    raw_populate(templates["raw"], items)
    lib_populate(templates["hivelite"], items)
    autocheckpoint = lib.autocheckpoint(templates["hivelite"])
    print(f"  drain: populated {items:,} items per side in"
          f" {time.perf_counter() - started:.1f} s", flush=True)
    runs: dict[tuple[str, int], list[Drain]] = {}
    for r in range(repeat):
        for w in workers:
            sides = ("raw", "hivelite") if (r + w) % 2 == 0 else ("hivelite", "raw")
            for side in sides:
                d = drain_once(side, templates[side], folder, w, items, synchronous,
                               autocheckpoint)
                runs.setdefault((side, w), []).append(d)
                print(f"  run {r + 1}/{repeat} W={w} {side:8} {d.rate:9,.0f} cycles/s"
                      f"  per worker {d.cycles}  wasted {d.wasted}", flush=True)
    best = {key: max(values, key=lambda d: d.rate) for key, values in runs.items()}
    print(f"\ndrain: {items:,} tasks of mixed priorities, claim_next -> submit (zero"
          f" threshold), synchronous {synchronous}; best of {repeat} runs, sides taking turns")
    print("raw: one narrow table with a partial index of ready rows; per item BEGIN IMMEDIATE;"
          " SELECT best ready LIMIT 1; UPDATE claimed; COMMIT, then a second transaction"
          " marking it done")
    print(f"{'W':>2}  {'raw cycles/s':>12}  {'hivelite cycles/s':>17}  {'hivelite/raw':>12}"
          f"  {'wasted raw':>10}  {'wasted hivelite':>15}")
    figures: dict[str, Any] = {"items": items, "repeat": repeat, "sync": synchronous}
    for w in workers:
        raw_d, lib_d = best[("raw", w)], best[("hivelite", w)]
        wasted_raw = sum(d.wasted for d in runs[("raw", w)])
        wasted_lib = sum(d.wasted for d in runs[("hivelite", w)])
        figures[f"W={w}"] = {"raw": raw_d.rate, "hivelite": lib_d.rate,
                             "ratio": lib_d.rate / raw_d.rate, "wasted_raw": wasted_raw,
                             "wasted_hivelite": wasted_lib}
        print(f"{w:>2}  {raw_d.rate:12,.0f}  {lib_d.rate:17,.0f}  {lib_d.rate / raw_d.rate:12.3f}"
              f"  {wasted_raw:>10}  {wasted_lib:>15}")
    if len(workers) > 1:
        low, high = min(workers), max(workers)
        gain = {side: best[(side, high)].rate / best[(side, low)].rate
                for side in ("raw", "hivelite")}
        print(f"W={high} over W={low}: raw {gain['raw']:.2f}x, hivelite {gain['hivelite']:.2f}x"
              " (wasted: refusals other than queue_empty, summed over every run)")
    return figures


# -- scale ---------------------------------------------------------------------------------

def scale_populate(path: Path, size: int, ready: int, elsewhere: int) -> None:
    """``size`` tasks in one SQL transaction through the library's own connection, every
    move through the store's triggers and journaled: ``ready`` routed to the agent,
    ``elsewhere`` routed to another agent (both spread evenly over the numbers), the rest
    claimed, submitted and completed (half the agent's, half a third agent's)."""
    step = size // (ready + elsewhere)
    if step < 1:
        raise SystemExit(f"a {size}-task store cannot hold {ready + elsewhere} ready tasks")
    with lib.open_hive(path) as hive, hive.store.write():
        conn = hive.store.conn  # type: ignore[attr-defined]
        conn.execute("CREATE TEMP TABLE plan(number INTEGER PRIMARY KEY, assignee TEXT,"
                     " done INTEGER)")
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)"
            " INSERT INTO plan SELECT i,"
            " CASE WHEN i % ?2 = 0 AND i / ?2 <= ?3 THEN ?4"
            "      WHEN i % ?2 = 0 AND i / ?2 <= ?3 + ?5 THEN ?6"
            "      WHEN i % 2 = 1 THEN ?4 ELSE 'ana/tester' END,"
            " NOT (i % ?2 = 0 AND i / ?2 <= ?3 + ?5) FROM n",
            (size, step, ready, AGENT, elsewhere, OTHER))
        conn.execute(
            "INSERT INTO tasks(number, id, state, project, requester, assignee, created_at,"
            " updated_at, priority, actor, reason)"
            f" SELECT number, printf('Q%09d', number), 'requested', 'bench', 'ana/planner',"
            f" assignee, ?1, ?1, {PRIORITY_SQL}, ?2, 'handoff' FROM plan", (AT, lib.OWNER))
        conn.execute("INSERT INTO packets(task, body) SELECT number, ? FROM tasks",
                     (json.dumps(lib.PACKET),))
        conn.execute("UPDATE tasks SET state = 'routed', actor = 'gate',"
                     " reason = 'requester and assignee belong to ana'")
        conn.execute(
            "UPDATE tasks SET state = 'accepted', lease_id = 'L' || number, lease_token = 1,"
            " lease_holder = assignee, lease_instance = 'bench', lease_expires = ?,"
            " actor = assignee, reason = 'claimed'"
            " WHERE number IN (SELECT number FROM plan WHERE done)", (LEASE_ENDS,))
        conn.execute(
            "INSERT INTO results(task, body, worker, instance, outcome, threshold)"
            " SELECT number, ?, assignee, 'bench', 'completed', 0 FROM tasks"
            " WHERE state = 'accepted'", (RESULT_BODY,))
        conn.execute("UPDATE tasks SET state = 'working', reason = 'update'"
                     " WHERE state = 'accepted'")
        conn.execute("UPDATE tasks SET state = 'verifying', reason = 'submitted',"
                     " lease_id = NULL, lease_holder = NULL, lease_instance = NULL,"
                     " lease_expires = NULL WHERE state = 'working'")
        conn.execute("UPDATE tasks SET state = 'completed', actor = 'guard', reason = 'passed'"
                     " WHERE state = 'verifying'")
        conn.execute("DROP TABLE temp.plan")


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _next_once(hive: Hive, me: Caller) -> float:
    """One timed ``next``; the task is released again (not timed), so the queue keeps its
    size from call to call."""
    began = time.perf_counter()
    lease = hive.claim_next(me)
    spent = time.perf_counter() - began
    hive.release(me, lease.number, lease_id=lease.lease_id, token=lease.fencing_token)
    return spent


def _timed(call: Callable[[], object]) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


def _plan(hive: Hive, record: Callable[[], object], pick: Callable[[str], bool]
          ) -> tuple[str, list[str]]:
    """The statement ``record`` runs that ``pick`` chooses, and SQLite's plan for it."""
    store: Any = hive.store
    rec = RecordingConn(store.conn)
    store.conn = rec
    try:
        record()
    finally:
        store.conn = rec._conn
    sql, args = next((s, a) for s, a in rec.log if pick(s))
    plan = store.conn.execute(f"EXPLAIN QUERY PLAN {sql}", args or ()).fetchall()
    return sql, [str(row[3]) for row in plan]


def scale(folder: Path, sizes: Sequence[int], ready: int, elsewhere: int, calls: int,
          block: int) -> None:
    """Median ``next`` and ready-listing latency per store size, the sizes taking turns."""
    hives: dict[int, Hive] = {}
    for size in sizes:
        path = folder / f"scale-{size}.db"
        began = time.perf_counter()
        scale_populate(path, size, ready, elsewhere)
        print(f"  scale: populated {size:,} tasks in {time.perf_counter() - began:.1f} s"
              f" ({path.stat().st_size / 1e6:,.0f} MB)", flush=True)
    me = Caller.agent(AGENT, "bench")
    try:
        for size in sizes:
            hives[size] = lib.open_hive(folder / f"scale-{size}.db")
            mine = hives[size].list(ready=True, assignee=AGENT, limit=500)
            everyone = hives[size].list(ready=True, limit=500)
            if (len(mine.items), len(everyone.items)) != (ready, ready + elsewhere):
                raise RuntimeError(f"{size}-task store: {len(mine.items)} ready for {AGENT},"
                                   f" {len(everyone.items)} in all")
        probes: dict[str, Callable[[Hive], float]] = {
            "next (claim_next)": lambda h: _next_once(h, me),
            "list(ready=True, limit=50)": lambda h: _timed(
                lambda: h.list(ready=True, limit=50)),
            "list(ready, assignee, sort=priority)": lambda h: _timed(
                lambda: h.list(ready=True, assignee=AGENT, sort="priority", limit=50)),
        }
        samples: dict[tuple[str, int], list[float]] = {}
        for name, probe in probes.items():
            for size in sizes:  # warm up: the first calls read pages from disk
                for _ in range(min(20, calls)):
                    probe(hives[size])
            for k, start in enumerate(range(0, calls, block)):
                for size in sizes if k % 2 == 0 else list(reversed(sizes)):
                    for _ in range(min(block, calls - start)):
                        samples.setdefault((name, size), []).append(probe(hives[size]))
        small = min(sizes)
        print(f"\nscale: median us per call over {calls} calls, the stores taking turns"
              f" {block} calls at a time; each store holds {ready} tasks ready for {AGENT},"
              f" {elsewhere} for {OTHER}, the rest completed")
        print(f"{'call':38}" + "".join(f"{size:>14,}" for size in sizes)
              + "".join(f"  {f'{size:,}/{small:,}':>17}" for size in sizes if size != small))
        for name in probes:
            us = {size: _median_us(samples[(name, size)]) for size in sizes}
            print(f"{name:38}" + "".join(f"{us[size]:14.1f}" for size in sizes)
                  + "".join(f"  {us[size] / us[small]:17.2f}" for size in sizes
                            if size != small))
        big = hives[max(sizes)]
        sql, plan = _plan(big, lambda: _next_once(big, me), lambda s: "ORDER BY assignee" in s)
        print(f"\nEXPLAIN QUERY PLAN of next's query ({max(sizes):,}-task store):\n  {sql}")
        print("".join(f"  -> {line}\n" for line in plan), end="")
        _, plan = _plan(big, lambda: big.list(ready=True, limit=50),
                        lambda s: "JOIN packets" in s)
        print("EXPLAIN QUERY PLAN of list(ready=True)'s query:")
        print("".join(f"  -> {line}\n" for line in plan), end="")
    finally:
        for hive in hives.values():
            hive.close()


# -- the command ---------------------------------------------------------------------------

def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.queue", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--items", type=int, default=2000, help="tasks each drain run empties")
    p.add_argument("--figures", type=Path, default=None, metavar="FILE",
                   help="also write the drain's figures to FILE as JSON (for bench.report)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], metavar="W",
                   help="worker process counts to drain with (default: 1 2)")
    p.add_argument("--repeat", type=int, default=3,
                   help="drain runs per side and W; the best is reported")
    p.add_argument("--sync", choices=("normal", "full"), default="normal",
                   help="PRAGMA synchronous for both drain sides")
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 1_000_000], metavar="N",
                   help="store sizes for the scale part (default: 1000 1000000)")
    p.add_argument("--ready", type=int, default=200,
                   help="tasks ready for the agent in every scale store")
    p.add_argument("--elsewhere", type=int, default=100,
                   help="tasks ready for another agent in every scale store")
    p.add_argument("--calls", type=int, default=200, help="timed calls per probe and size")
    p.add_argument("--block", type=int, default=20,
                   help="the scale stores take turns this many calls at a time")
    p.add_argument("--only", choices=("drain", "scale"), default=None,
                   help="run one part only")
    p.add_argument("--dir", type=Path, default=None,
                   help="where the temporary stores go (default: the system temp dir)")
    args = p.parse_args(argv)
    if min([args.items, args.repeat, args.calls, args.block, *args.workers]) < 1:
        p.error("--items, --workers, --repeat, --calls and --block must be at least 1")
    if args.ready < 1 or args.elsewhere < 0:
        p.error("--ready must be at least 1 and --elsewhere at least 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_worker"]:
        return worker_main(argv[1:])
    args = _args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    # Installed entry-point plugins would change what is measured; load none unless asked.
    os.environ.setdefault("HIVELITE_LOAD_PLUGINS", "")
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hivelite-queue-", dir=args.dir) as tmp:
        folder = Path(tmp)
        print(f"stores in {folder.parent}, {os.cpu_count()} cores, load"
              f" {', '.join(f'{x:.2f}' for x in os.getloadavg())}, SQLite"
              f" {apsw.sqlite_lib_version()}")
        if args.only in (None, "drain"):
            figures_file.save(args.figures, drain(folder, args.items, sorted(set(args.workers)),
                                                  args.repeat, args.sync.upper()))
        if args.only in (None, "scale"):
            scale(folder, sorted(set(args.sizes)), args.ready, args.elsewhere, args.calls,
                  args.block)
    print(f"\n({time.perf_counter() - began:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
