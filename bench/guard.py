"""``python -m bench.guard``: what the rules' guard and the chain key cost a write.

Two costs issue 30 added to every write, each measured against the same write without it,
the two sides taking turns in one run (ratios, not seconds, are what to read):

- **PostgreSQL's guard** (``store/pg_guard.py``): the stamp of the store's triggers read
  in each write's first round trip, and a full check of the rules at most once a second.
  The other side reads a constant instead and never checks in full.
- **The chain key** (``store/keys.py``): each journal row's link sealed with an HMAC. The
  other side writes the unkeyed link alone.

Each side runs claim -> submit cycles on tasks made beforehand (not timed), ``--block``
items at a time, best of ``--repeat``. Figures only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hivelite import Caller, Hive
from hivelite.store import keys

from .lib import ZeroThreshold

PACKET = {"task": "Write the parser", "deliverable_type": "code",
          "acceptance_criteria": ["tests pass"]}
EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
CODER = Caller.agent("ana/coder", "laptop")


def _tasks(hive: Hive, count: int) -> list[int]:
    me = hive.as_owner()
    return [hive.handoff(me, requester="ana/planner", assignee="ana/coder", project="bench",
                         packet=PACKET).number for _ in range(count)]


def _cycles(hive: Hive, numbers: list[int]) -> float:
    """Seconds for claim -> submit of each task."""
    start = time.perf_counter()
    for number in numbers:
        lease = hive.claim(CODER, number)
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
    return time.perf_counter() - start


@contextmanager
def _unguarded(hive: Hive) -> Iterator[None]:
    """The PostgreSQL store's guard reads a constant, and never checks in full."""
    from hivelite.store.postgres import STAMP_WIDTH

    guard: Any = hive.store.guard  # type: ignore[attr-defined]
    sql, before = guard.sql, guard.before_write
    guard.sql = "SELECT " + ", ".join(["NULL"] * STAMP_WIDTH)  # (the stamp's columns)
    guard.before_write = lambda conn, stamp: None
    try:
        yield
    finally:
        guard.sql, guard.before_write = sql, before


@contextmanager
def _unkeyed(hive: Hive) -> Iterator[None]:
    """The chain's links written unsealed (the store's key set aside)."""
    original = keys.ChainKey.seal
    keys.ChainKey.seal = lambda self, seq, link: link  # type: ignore[method-assign]
    try:
        yield
    finally:
        keys.ChainKey.seal = original  # type: ignore[method-assign]


def compare(hive: Hive, without: Callable[[Hive], Any], items: int, block: int,
            repeat: int) -> tuple[float, float]:
    """Best µs per cycle (with, without), the sides taking turns ``block`` items apiece."""
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        numbers = _tasks(hive, 2 * items)
        spent = [0.0, 0.0]
        for turn, start in enumerate(range(0, items, block)):
            for side in (0, 1) if turn % 2 else (1, 0):  # each side first in turn
                chosen = numbers[side * items + start:side * items + start + block]
                if side:
                    with without(hive):
                        spent[1] += _cycles(hive, chosen)
                else:
                    spent[0] += _cycles(hive, chosen)
        best = [min(b, s / items * 1e6) for b, s in zip(best, spent, strict=True)]
    return best[0], best[1]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.guard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", default=os.environ.get("HIVELITE_TEST_POSTGRES", ""),
                        help="a libpq connection string (default: $HIVELITE_TEST_POSTGRES)")
    args = parser.parse_args()
    print(f"claim -> submit, {args.items} items a side, {args.block} at a time, best of"
          f" {args.repeat}; microseconds per cycle (two write transactions)")
    print(f"{'engine':<10} {'cost of':<22} {'with':>8} {'without':>8} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("HIVELITE_KEYS", str(Path(folder) / "keys"))
        stores: list[tuple[str, str, Callable[[Hive], Any]]] = [
            ("sqlite", str(Path(folder) / "bench.db"), _unkeyed)]
        if args.postgres:
            params = dict(item.split("=", 1) for item in args.postgres.split())
            url = (f"postgresql://{params.get('user', 'postgres')}@/"
                   f"{params.get('dbname', 'postgres')}?host={params['host']}"
                   f"&schema=bench_guard_{os.getpid()}")
            stores += [("postgres", url, _unkeyed), ("postgres", url, _unguarded)]
        for engine, where, without in stores:
            with Hive.open(where, owner="ana", plugins=[ZeroThreshold()]) as hive:
                with_us, without_us = compare(hive, without, args.items, args.block,
                                              args.repeat)
                what = "the guard" if without is _unguarded else "the chain key (HMAC)"
                print(f"{engine:<10} {what:<22} {with_us:>8.0f} {without_us:>8.0f}"
                      f" {without_us / with_us:>7.3f}")
        if args.postgres:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS bench_guard_{os.getpid()} CASCADE")


if __name__ == "__main__":
    main()
