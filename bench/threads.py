"""``python -m bench.threads``: one process's threads writing to one store.

The writes a process's threads have waiting share one transaction (group commit:
docs/decisions.md, "Group commit"). For each thread count T, a new store with T x N ready
tasks for one agent (the store's threshold 0: a submission completes its task), one
``Hive`` shared by T threads, each running ``next -> submit`` N times as an instance of
its own. Prints cycles a second, the process's CPU a cycle, and a cycle's p50, p99 and
longest latency (how fairly the threads are served); the last line, ``FIGURES {...}``, is
what ``bench.report`` reads. Figures only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hivelite import Caller, Hive

from .figures import emit
from .peers import AGENT, EVIDENCE, populate


def run(path: Path, threads: int, cycles: int) -> dict[str, Any]:
    """``threads`` threads, ``cycles`` cycles each, on the store at ``path``."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    hive = Hive.open(path)
    start = threading.Barrier(threads + 1)

    def loop(t: int) -> None:
        me = Caller.agent(AGENT, f"thread-{t}")
        mine: list[float] = []
        start.wait()
        try:
            for _ in range(cycles):
                began = time.perf_counter()
                lease = hive.claim_next(me)
                hive.submit(me, lease.number, lease_id=lease.lease_id,
                            token=lease.fencing_token, summary="done", evidence=EVIDENCE)
                mine.append(time.perf_counter() - began)
        except Exception as exc:  # reported, never hidden
            errors.append(f"{type(exc).__name__}: {exc}")
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    wall, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.join()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    hive.close()
    latencies.sort()
    done = len(latencies)
    return {"threads": threads, "cycles": done, "per_s": done / wall,
            "cpu_us": cpu / max(done, 1) * 1e6,
            "p50_ms": statistics.median(latencies) * 1e3 if latencies else 0.0,
            "p99_ms": latencies[int(done * 0.99)] * 1e3 if latencies else 0.0,
            "max_ms": latencies[-1] * 1e3 if latencies else 0.0, "errors": errors}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.threads", description=__doc__)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 32])
    parser.add_argument("--cycles", type=int, default=2400,
                        help="cycles a run, shared among its threads (default 2400)")
    args = parser.parse_args(argv)
    print(f"next -> submit, {args.cycles} cycles a run, one process")
    print(f"{'threads':>7} {'cycles/s':>9} {'cpu us':>7} {'p50 ms':>7} {'p99 ms':>7}"
          f" {'max ms':>7}  errors")
    figures: dict[str, Any] = {"cycles": args.cycles, "threads": args.threads}
    with tempfile.TemporaryDirectory(prefix="hivelite-threads-") as folder:
        for threads in args.threads:
            each = max(1, args.cycles // threads)
            path = Path(folder) / f"t{threads}.db"
            populate("hivelite", path, threads * each)
            got = figures[f"T={threads}"] = run(path, threads, each)
            print(f"{threads:>7} {got['per_s']:>9.0f} {got['cpu_us']:>7.0f}"
                  f" {got['p50_ms']:>7.1f} {got['p99_ms']:>7.1f} {got['max_ms']:>7.0f}"
                  f"  {len(got['errors'])}")
            for error in got["errors"][:3]:
                print(f"  {error}")
    emit(figures)  # the last line: the figures, for bench.report
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
