"""``python -m bench.peers``: hivelite beside its peers on FleetWright's contention workload.

FleetWright (PyPI ``fleetwright``: work leases in one SQLite file) publishes one benchmark,
``bench/contention.py`` in its sdist and "Does it hold up under contention" in its README:
N units in one file, P operating-system processes each looping claim -> finish until none
is left, counting the units finished, the units handed out twice, the ``SQLITE_BUSY``
errors that reach a worker, and the latency's tail. This module runs that workload, with
each peer's own package, on three sides in the same run:

fleetwright
    ``fleetwright.connect`` (WAL, its 10 s busy timeout), N units of one kind added to one
    run; each worker ``claim(conn, "unit", worker=me, lease=120)`` then ``finish(conn,
    unit_id, worker=me, token=..., result={"n": ...})``, exactly as its script does.
hivelite
    one store, N tasks handed off to one agent, the store's threshold 0 (``set_policy``) so
    a submission completes its task at once, as a finish does; each worker opens the store
    itself (``Hive.open``) as that agent with an instance of its own and loops
    ``claim_next`` -> ``submit`` (a result with one evidence item) until ``queue_empty``.
litequeue
    ``LiteQueue(path)`` holding N messages; each worker loops ``pop`` -> ``done`` until
    ``pop`` finds none (its busy timeout raised from sqlite3's 5 s to the others' 10 s).

Every side runs at the same durability, ``--durability``: WAL with ``synchronous`` FULL
(FleetWright's own: it leaves SQLite's default) or NORMAL (hivelite's and litequeue's
default), set on every worker's connection. Every worker opens its store, says it is
ready and waits; all start together and the time runs to the last one's end (opening is
not timed). A busy error is counted and the call tried again (FleetWright's script does
the same for claim; a finish or submit is retried too, so the run still ends). Nothing is
asserted: compare ratios within one run. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from . import figures as figures_file
from .workers import outputs, reap

SIDES = ("hivelite", "fleetwright", "litequeue")
PEERS = ("fleetwright", "litequeue")
"""The modules the ``bench`` extra installs."""
OWNER = "ana"
AGENT = "ana/coder"
PACKET = {"task": "Process one unit", "deliverable_type": "code",
          "acceptance_criteria": ["done"]}
EVIDENCE = [{"kind": "test_output", "summary": "ok"}]
KIND = "unit"
LEASE_S = 120
"""FleetWright's lease in its script (seconds); hivelite's claims keep their default."""
BUSY_TIMEOUT_S = 10.0
"""litequeue's busy timeout here: FleetWright's and hivelite's own."""
WORKER_TIMEOUT_S = 900.0
MAX_ERRORS = 1000
"""A worker gives up after this many errors other than busy ones (the table then shows
them, and fewer units done than the store held)."""


# -- the sides -----------------------------------------------------------------------------


def populate(side: str, path: Path, units: int) -> None:
    """A new store of ``side`` holding ``units`` units ready to claim (not timed)."""
    if side == "hivelite":
        from hivelite import Caller, Hive

        owner = Caller.owner(OWNER)
        with Hive.open(path, owner=OWNER) as hive:
            hive.set_policy(owner, "threshold", 0)
            for start in range(0, units, 5000):
                hive.handoff_many(owner, [
                    {"requester": "ana/planner", "assignee": AGENT, "project": "bench",
                     "packet": PACKET} for _ in range(start, min(units, start + 5000))])
    elif side == "fleetwright":
        import fleetwright

        conn = fleetwright.connect(path)
        fleetwright.define(conn, KIND, "do $name", done_when="d")
        run = fleetwright.start_run(conn, label=f"contention {units}")
        fleetwright.add(conn, KIND, [f"u{i:06d}" for i in range(units)], run=run)
        conn.close()
    else:
        from litequeue import LiteQueue

        queue = LiteQueue(str(path))
        with queue.transaction():
            for i in range(units):
                queue.put(f"u{i:06d}")
        queue.close()


def finished(side: str, path: Path) -> int:
    """How many units the store holds as done."""
    sql = {"hivelite": "SELECT count(*) FROM tasks WHERE state = 'completed'",
           "fleetwright": "SELECT count(*) FROM unit WHERE status = 'done'",
           "litequeue": "SELECT count(*) FROM Queue WHERE status = 2"}[side]
    conn = apsw.Connection(str(path))
    try:
        return int(conn.execute(sql).get)
    finally:
        conn.close()


@dataclass
class Tally:
    """What one worker saw."""

    done: list[str] = field(default_factory=list)
    """The units whose finish (submit, done) this worker was told succeeded."""
    claim_ms: list[float] = field(default_factory=list)
    finish_ms: list[float] = field(default_factory=list)
    busy_claim: int = 0
    busy_finish: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    """Other errors that reached the worker, by kind."""

    def timed(self, into: list[float], call: Callable[..., Any], *args: Any,
              **kwargs: Any) -> Any:
        """``call(*args, **kwargs)``, its wall time (ms) added to ``into``, raised or not."""
        began = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            into.append((time.perf_counter() - began) * 1000)

    def report(self, end: float, cpu: float) -> dict[str, Any]:
        return {"done": self.done, "cpu": cpu, "claim_ms": [round(v, 3) for v in self.claim_ms],
                "finish_ms": [round(v, 3) for v in self.finish_ms],
                "busy_claim": self.busy_claim, "busy_finish": self.busy_finish,
                "errors": dict(self.errors), "end": end}


def _is_busy(exc: BaseException) -> bool:
    if isinstance(exc, apsw.BusyError):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        return "locked" in str(exc) or "busy" in str(exc)
    return getattr(exc, "code", "") == "store_busy"


class HiveliteWorker:
    def __init__(self, path: Path, name: str, synchronous: str) -> None:
        from hivelite import Caller, Hive

        self.me = Caller.agent(AGENT, name)
        self.hive = Hive.open(path, synchronous=synchronous)  # type: ignore[arg-type]

    def run(self, tally: Tally) -> None:
        from hivelite import HiveliteError, NotFound

        claim_next, submit, me = self.hive.claim_next, self.hive.submit, self.me
        while sum(tally.errors.values()) < MAX_ERRORS:
            try:
                lease = tally.timed(tally.claim_ms, claim_next, me)
            except NotFound as exc:
                if exc.reason == "queue_empty":
                    break
                tally.errors[f"claim {exc.code} {exc.reason}"] += 1
                continue
            except (HiveliteError, apsw.Error) as exc:
                if _is_busy(exc):
                    tally.busy_claim += 1
                else:
                    tally.errors[f"claim {getattr(exc, 'code', type(exc).__name__)}"] += 1
                continue
            while True:
                try:
                    tally.timed(tally.finish_ms, submit, me, lease.number,
                                lease_id=lease.lease_id, token=lease.fencing_token,
                                summary="done", evidence=EVIDENCE)
                except (HiveliteError, apsw.Error) as exc:
                    if _is_busy(exc):
                        tally.busy_finish += 1
                        continue
                    tally.errors[f"submit {getattr(exc, 'code', type(exc).__name__)}"
                                 f" {getattr(exc, 'reason', '')}".rstrip()] += 1
                    break
                tally.done.append(str(lease.number))
                break

    def close(self) -> None:
        self.hive.close()


class FleetWrightWorker:
    def __init__(self, path: Path, name: str, synchronous: str) -> None:
        import fleetwright

        self.fw = fleetwright
        self.me = f"w{os.getpid()}"
        self.conn = fleetwright.connect(path)
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")

    def run(self, tally: Tally) -> None:
        claim, finish, conn, me = self.fw.claim, self.fw.finish, self.conn, self.me
        while sum(tally.errors.values()) < MAX_ERRORS:
            try:
                got = tally.timed(tally.claim_ms, claim, conn, KIND, worker=me,
                                  lease=LEASE_S)
            except sqlite3.Error as exc:
                if _is_busy(exc):
                    tally.busy_claim += 1
                else:
                    tally.errors[f"claim {type(exc).__name__}: {exc}"] += 1
                continue
            if not got:
                break
            unit = got[0]
            while True:
                try:
                    ok = tally.timed(tally.finish_ms, finish, conn, unit.unit_id, worker=me,
                                     token=unit.token, result={"n": len(tally.done) + 1})
                except sqlite3.Error as exc:
                    if _is_busy(exc):
                        tally.busy_finish += 1
                        continue
                    tally.errors[f"finish {type(exc).__name__}: {exc}"] += 1
                    break
                if ok:
                    tally.done.append(unit.unit_id)
                else:
                    tally.errors["finish lost its lease"] += 1
                break

    def close(self) -> None:
        self.conn.close()


class LiteQueueWorker:
    def __init__(self, path: Path, name: str, synchronous: str) -> None:
        from litequeue import LiteQueue

        self.queue = LiteQueue(str(path), timeout=BUSY_TIMEOUT_S)
        self.queue.conn.execute(f"PRAGMA synchronous = {synchronous}")

    def run(self, tally: Tally) -> None:
        pop, done = self.queue.pop, self.queue.done
        while sum(tally.errors.values()) < MAX_ERRORS:
            try:
                message = tally.timed(tally.claim_ms, pop)
            except sqlite3.Error as exc:
                if _is_busy(exc):
                    tally.busy_claim += 1
                else:
                    tally.errors[f"pop {type(exc).__name__}: {exc}"] += 1
                continue
            if message is None:
                break
            while True:
                try:
                    tally.timed(tally.finish_ms, done, message.message_id)
                except sqlite3.Error as exc:
                    if _is_busy(exc):
                        tally.busy_finish += 1
                        continue
                    tally.errors[f"done {type(exc).__name__}: {exc}"] += 1
                    break
                tally.done.append(message.data)
                break

    def close(self) -> None:
        self.queue.close()


WORKERS = {"hivelite": HiveliteWorker, "fleetwright": FleetWrightWorker,
           "litequeue": LiteQueueWorker}


def worker_main(argv: Sequence[str]) -> int:
    """One worker (a child process): open the store, print ``ready``, wait for a line on
    stdin, claim -> finish until none is left, print what it saw as JSON (``end`` on the
    system-wide monotonic clock)."""
    side, path, name, synchronous = argv
    tally = Tally()
    opened = None
    while opened is None:  # an error opening the store reaches the worker too
        try:
            opened = WORKERS[side](Path(path), name, synchronous)
        except Exception as exc:
            if sum(tally.errors.values()) >= 100:
                raise
            if _is_busy(exc):
                tally.busy_claim += 1
            else:
                tally.errors[f"open {type(exc).__name__}"] += 1
            time.sleep(0.01)
    print("ready", flush=True)
    if not sys.stdin.readline():
        return 1
    cpu = time.process_time()
    try:
        opened.run(tally)
        end, cpu = time.monotonic(), time.process_time() - cpu
    finally:
        opened.close()
    print(json.dumps(tally.report(end, cpu)), flush=True)
    return 0


# -- one run -------------------------------------------------------------------------------


def _pct(values: Sequence[float], p: float) -> float | None:
    """The ``p`` quantile (nearest rank, as FleetWright's script takes it)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


@dataclass
class Run:
    """One drain of one side by P processes."""

    side: str
    processes: int
    units: int
    seconds: float
    done: list[str]
    per_worker: list[int]
    claim_ms: list[float]
    finish_ms: list[float]
    busy_claim: int
    busy_finish: int
    errors: Counter[str]
    in_store: int
    cpu: float
    """The workers' CPU seconds (user + system) in their loops, summed."""

    @property
    def rate(self) -> float:
        return self.in_store / self.seconds if self.seconds > 0 else 0.0

    @property
    def duplicates(self) -> int:
        """Finishes beyond the first of a unit (a unit finished twice counts one)."""
        return len(self.done) - len(set(self.done))


def _env() -> dict[str, str]:
    here = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "HIVELITE_LOAD_PLUGINS": "",
            "PYTHONPATH": os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))}


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def drain(side: str, template: Path, scratch: Path, processes: int, units: int,
          synchronous: str) -> Run:
    """Copy ``template``, start ``processes`` workers, release them together, time them."""
    path = scratch / f"{side}-{processes}.db"
    shutil.copyfile(template, path)
    os.sync()
    env = _env()
    procs = [subprocess.Popen([sys.executable, "-m", "bench.peers", "_worker", side, str(path),
                               f"w{k}", synchronous], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
             for k in range(processes)]
    try:
        for p in procs:  # each opens its store, then says so
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{side}: a worker did not start")
        started = time.monotonic()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
    except BaseException:
        reap(procs)
        raise
    outs = outputs(procs, side, WORKER_TIMEOUT_S)
    reports = [json.loads(out.strip().splitlines()[-1]) for out in outs]
    in_store = finished(side, path)
    _remove(path)
    errors: Counter[str] = Counter()
    for r in reports:
        errors.update(r["errors"])
    return Run(side, processes, units, max(r["end"] for r in reports) - started,
               [u for r in reports for u in r["done"]], [len(r["done"]) for r in reports],
               [v for r in reports for v in r["claim_ms"]],
               [v for r in reports for v in r["finish_ms"]],
               sum(r["busy_claim"] for r in reports), sum(r["busy_finish"] for r in reports),
               errors, in_store, sum(r["cpu"] for r in reports))


# -- the figures ---------------------------------------------------------------------------


def summary(runs: Sequence[Run]) -> dict[str, Any]:
    """One side at one P over every repeat: the best rate, the errors summed, the
    latencies of every run pooled."""
    best = max(runs, key=lambda r: r.rate)
    claim = [v for r in runs for v in r.claim_ms]
    finish = [v for r in runs for v in r.finish_ms]
    errors: Counter[str] = Counter()
    for r in runs:
        errors.update(r.errors)
    return {"per_s": best.rate, "runs": [r.rate for r in runs],
            "seconds": [r.seconds for r in runs],
            "finished": min(r.in_store for r in runs), "units": best.units,
            "duplicates": sum(r.duplicates for r in runs),
            "busy": sum(r.busy_claim + r.busy_finish for r in runs),
            "busy_claim": sum(r.busy_claim for r in runs),
            "busy_finish": sum(r.busy_finish for r in runs),
            "errors": sum(errors.values()), "error_kinds": dict(errors),
            "claim_p50_ms": _pct(claim, 0.50), "claim_p99_ms": _pct(claim, 0.99),
            "finish_p50_ms": _pct(finish, 0.50), "finish_p99_ms": _pct(finish, 0.99),
            "claim_max_ms": max(claim, default=None), "finish_max_ms": max(finish, default=None),
            "cpu_ms_per_unit": 1000 * best.cpu / best.in_store if best.in_store else None,
            "cpu_share": best.cpu / best.seconds / (os.cpu_count() or 1) if best.seconds
            else None,
            "idle_workers": sum(1 for r in runs for n in r.per_worker if n == 0),
            "busiest_worker": max(max(r.per_worker) for r in runs)}


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def versions() -> dict[str, str]:
    """The packages and SQLite libraries each side ran on."""
    found = {"sqlite3 (FleetWright, litequeue)": sqlite3.sqlite_version,
             "apsw (hivelite)": apsw.sqlite_lib_version()}
    for name in ("hivelite", *PEERS):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def table(figures: dict[str, Any], sides: Sequence[str]) -> Iterator[str]:
    """The printed table, one line per side and P, from ``figures``."""
    yield (f"{'P':>3}  {'side':11}  {'units/s':>8}  {'x FW':>5}  {'done':>11}  {'dup':>3}"
           f"  {'busy':>9}  {'errors':>6}  {'claim p50':>9}  {'p99 ms':>7}"
           f"  {'finish p50':>10}  {'p99 ms':>7}  {'CPU ms/unit':>11}  {'CPU':>4}")
    for key in figures["processes"]:
        at = figures[f"P={key}"]
        fw = at.get("fleetwright", {}).get("per_s")
        for side in sides:
            s = at[side]
            ratio = f"{s['per_s'] / fw:5.2f}" if fw else "    -"
            done = f"{s['finished']:,}/{s['units']:,}"
            busy = f"{s['busy_claim']}+{s['busy_finish']}"
            share = "-" if s.get("cpu_share") is None else f"{s['cpu_share']:.0%}"
            yield (f"{key:>3}  {side:11}  {s['per_s']:8,.0f}  {ratio}  {done:>11}"
                   f"  {s['duplicates']:>3}  {busy:>9}  {s['errors']:>6}"
                   f"  {_ms(s['claim_p50_ms']):>9}  {_ms(s['claim_p99_ms']):>7}"
                   f"  {_ms(s['finish_p50_ms']):>10}  {_ms(s['finish_p99_ms']):>7}"
                   f"  {_ms(s.get('cpu_ms_per_unit')):>11}  {share:>4}")


def measure(folder: Path, units: int, processes: Sequence[int], repeat: int,
            synchronous: str, sides: Sequence[str]) -> dict[str, Any]:
    """Every side at every P, ``repeat`` times, the sides taking turns; the figures."""
    templates = {side: folder / f"{side}.db" for side in sides}
    began = time.perf_counter()
    for side in sides:
        populate(side, templates[side], units)
    print(f"populated {units:,} units per side in {time.perf_counter() - began:.1f} s",
          flush=True)
    runs: dict[tuple[str, int], list[Run]] = {}
    for r in range(repeat):
        for k, p in enumerate(processes):
            order = list(sides) if (r + k) % 2 == 0 else list(reversed(sides))
            for side in order:
                run = drain(side, templates[side], folder, p, units, synchronous)
                runs.setdefault((side, p), []).append(run)
                errors = f"  errors {dict(run.errors)}" if run.errors else ""
                print(f"  run {r + 1}/{repeat} P={p:<3} {side:11} {run.rate:8,.0f} units/s"
                      f"  {run.seconds:6.2f} s  busy {run.busy_claim}+{run.busy_finish}"
                      f"  dup {run.duplicates}  done {run.in_store}/{units}{errors}",
                      flush=True)
    return collect(runs, units, processes, repeat, synchronous, sides)


def collect(runs: dict[tuple[str, int], list[Run]], units: int, processes: Sequence[int],
            repeat: int, synchronous: str, sides: Sequence[str]) -> dict[str, Any]:
    """The figures (``--figures FILE``, what ``bench.report`` reads) from every run, by
    side and P: each side's :func:`summary`, and hivelite over FleetWright (the best rates,
    each repeat's, and the p99 of a submit over that of a finish)."""
    figures: dict[str, Any] = {"units": units, "repeat": repeat, "durability": synchronous,
                               "processes": list(processes), "sides": list(sides),
                               "versions": versions()}
    for p in processes:
        at: dict[str, Any] = {side: summary(runs[(side, p)]) for side in sides}
        fw = at.get("fleetwright")
        hl = at.get("hivelite")
        if fw and hl:
            at["ratio"] = hl["per_s"] / fw["per_s"] if fw["per_s"] else None
            at["run_ratios"] = [a / b if b else None for a, b in zip(
                hl["runs"], fw["runs"], strict=True)]
            at["finish_p99_ratio"] = (hl["finish_p99_ms"] / fw["finish_p99_ms"]
                                      if hl["finish_p99_ms"] and fw["finish_p99_ms"] else None)
        figures[f"P={p}"] = at
    return figures


def show(figures: dict[str, Any]) -> None:
    sides = figures["sides"]
    print(f"\nFleetWright's contention workload: {figures['units']:,} units, P processes each"
          f" claim -> finish until none is left; WAL, synchronous {figures['durability']} on"
          f" every side; best of {figures['repeat']} runs, the sides taking turns")
    print("units/s: units done / time from the start to the last worker's end; x FW: over"
          " FleetWright's in this run; busy: busy errors that reached a worker at claim +"
          " at finish; latencies over every run (hivelite's finish is submit, litequeue's"
          " claim is pop); CPU: the workers' CPU time in their loops, per unit done and as"
          f" a share of the {os.cpu_count()} cores over the best run")
    for line in table(figures, sides):
        print(line)
    for key in figures["processes"]:
        at = figures[f"P={key}"]
        kinds = {side: at[side]["error_kinds"] for side in sides if at[side]["error_kinds"]}
        if kinds:
            print(f"P={key} errors: {kinds}")
        longest = ", ".join(f"{side} {_ms(at[side]['claim_max_ms'])} / "
                            f"{_ms(at[side]['finish_max_ms'])}" for side in sides)
        line = f"P={key}: longest claim / finish, ms: {longest}"
        if "run_ratios" in at:
            line += ("; hivelite / FleetWright each run "
                     + " ".join(f"{v:.2f}" if v is not None else "-" for v in at["run_ratios"])
                     + "; submit p99 / finish p99 "
                     + (f"{at['finish_p99_ratio']:.2f}" if at["finish_p99_ratio"] else "-"))
        print(line)
    print("versions: " + ", ".join(f"{k} {v}" for k, v in figures["versions"].items()))


# -- the command ---------------------------------------------------------------------------


def _args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--units", type=int, default=5000,
                   help="units in the store each run drains (default 5000: FleetWright's"
                   " published 64-worker run)")
    p.add_argument("--processes", type=int, nargs="+", default=[1, 8, 64], metavar="P",
                   help="worker process counts (default: 1 8 64)")
    p.add_argument("--repeat", type=int, default=2,
                   help="runs per side and P, the sides taking turns; the best rate is"
                   " reported, errors are summed and latencies pooled (default 2)")
    p.add_argument("--durability", choices=("full", "normal"), default="full",
                   help="WAL with synchronous FULL (FleetWright's own: SQLite's default) or"
                   " NORMAL (hivelite's and litequeue's default), on every side (default"
                   " full)")
    p.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES),
                   help="which sides to run (default: all three)")
    p.add_argument("--figures", type=Path, default=None, metavar="FILE",
                   help="also write the figures to FILE as JSON (for bench.report)")
    p.add_argument("--dir", type=Path, default=None,
                   help="where the temporary stores go (default: the system temp dir;"
                   " avoid tmpfs, where FULL costs nothing)")
    args = p.parse_args(argv)
    if min([args.units, args.repeat, *args.processes]) < 1:
        p.error("--units, --processes and --repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_worker"]:
        return worker_main(argv[1:])
    args = _args(argv)
    sides = [s for s in SIDES if s in args.sides]
    absent = [m for m in PEERS if m in sides and importlib.util.find_spec(m) is None]
    if absent:
        print(f"{', '.join(absent)} not installed: pip install -e '.[bench]'",
              file=sys.stderr)
        return 2
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    os.environ["HIVELITE_LOAD_PLUGINS"] = ""
    began = time.perf_counter()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="hivelite-peers-", dir=args.dir) as tmp:
        print(f"stores in {Path(tmp).parent}, {os.cpu_count()} cores, load average"
              f" {', '.join(f'{x:.2f}' for x in load)}")
        figures = measure(Path(tmp), args.units, sorted(set(args.processes)), args.repeat,
                          args.durability.upper(), sides)
    figures["load"] = [load[0], os.getloadavg()[0]]
    show(figures)
    print(f"load average (1 minute) at the start {load[0]:.2f}, at the end"
          f" {figures['load'][1]:.2f}; {time.perf_counter() - began:.0f} s in all")
    figures_file.save(args.figures, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
