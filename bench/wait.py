"""``python -m bench.wait``: how soon a worker waiting for work (``next --wait``) takes a
task handed off to it, on each engine, beside the same handoff and ``next`` made one
after the other in one thread (the least it can take).

For each engine and each idle time (how long the worker has waited when the task comes),
R times: a worker thread, with its own opener of the store, calls
``claim_next(wait=60)`` on an empty queue; after the idle time the main thread hands a
task off; the figure is the time from the start of that handoff to the worker holding
the claim. The baseline, in the same run on the same store: a handoff, then
``claim_next`` at once, in one thread. Also counted: how many times an idle worker looks
(each look a short write transaction) in its idle time. SQLite's worker sleeps 50 ms,
growing to 1 s, between looks; PostgreSQL's is woken by the commit.

The PostgreSQL server is ``$HIVELITE_TEST_POSTGRES`` or ``--postgres``. Figures only:
nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hivelite import Hive

from . import lib
from .engines import pg_url


def _handoff(hive: Hive) -> None:
    hive.handoff(lib.OWNER_CALLER, requester="ana/planner", assignee=lib.AGENT,
                 project="bench", packet=lib.PACKET)


def baseline(store: str, rounds: int) -> float:
    """A handoff and ``next`` one after the other: the median, in seconds."""
    with Hive.open(store, owner=lib.OWNER) as hive:
        took = []
        for _ in range(rounds):
            start = time.perf_counter()
            _handoff(hive)
            hive.claim_next(lib.AGENT_CALLER)
            took.append(time.perf_counter() - start)
    return statistics.median(took)


def waited(store: str, idle: float, rounds: int) -> tuple[float, float]:
    """A handoff to a worker that has waited ``idle`` seconds: the median time from its
    start to the worker's claim, and the median number of looks the worker made while it
    idled."""
    took, looks = [], []
    with Hive.open(store, owner=lib.OWNER) as hive, Hive.open(store) as worker:
        count = [0]
        wait_for_work = worker.store.wait_for_work

        def counted(timeout: float) -> bool:
            count[0] += 1
            return wait_for_work(timeout)

        worker.store.wait_for_work = counted  # type: ignore[method-assign]
        for _ in range(rounds):
            got: dict[str, Any] = {}
            count[0] = 0

            def work(got: dict[str, Any]) -> None:
                worker.claim_next(lib.AGENT_CALLER, wait=60)
                got["at"] = time.perf_counter()

            thread = threading.Thread(target=work, args=(got,))
            thread.start()
            time.sleep(idle)
            idle_looks = count[0] + 1  # each wait follows a look, and one more came first
            start = time.perf_counter()
            _handoff(hive)
            thread.join(timeout=120)
            took.append(got["at"] - start)
            looks.append(idle_looks)
    return statistics.median(took), statistics.median(looks)


def run(args: argparse.Namespace) -> None:
    server = args.postgres or os.environ.get("HIVELITE_TEST_POSTGRES", "")
    with tempfile.TemporaryDirectory(prefix="hivelite-bench-wait-") as scratch:
        stores = {"sqlite": lambda tag: str(Path(scratch) / f"{tag}.db")}
        if server:
            import psycopg

            database = f"hivelite_bench_wait_{os.getpid()}"
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {database}")
            stores["postgres"] = lambda tag: pg_url(server, database, tag)
        else:
            print("postgres: skipped (no server: --postgres or $HIVELITE_TEST_POSTGRES)")
        try:
            for engine, store in stores.items():
                base = baseline(store("base"), args.rounds)
                print(f"{engine}: handoff then next, one thread: {base * 1000:.2f} ms")
                for idle in args.idle:
                    took, looks = waited(store(f"idle{int(idle * 1000)}"), idle, args.rounds)
                    print(f"{engine}: idle {idle:g} s, handoff to the waiting worker's claim:"
                          f" {took * 1000:.2f} ms ({took / base:.1f}x the baseline);"
                          f" {looks:g} looks while idle")
        finally:
            if server:
                with psycopg.connect(server, autocommit=True) as conn:
                    conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.wait", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10, help="Handoffs per figure.")
    p.add_argument("--idle", type=float, nargs="+", default=[0.2, 3.0],
                   help="How long the worker waits before the task comes (seconds).")
    p.add_argument("--postgres", default=None, metavar="CONNINFO")
    run(p.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
