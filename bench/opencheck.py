"""``python -m bench.opencheck``: what the quick check at a store's first open costs.

For each size, a store of that many routed tasks (made in one SQL transaction, as
``--scale`` makes them) is opened ``--repeat`` times with the check and without it
(``SqliteStore`` opened and closed: identity, settings, the check, the schema's
fingerprint). Printed per size: the file's pages, the median milliseconds of a plain
open and of a checked open, their ratio, and what SQLite's whole ``quick_check`` of the
same file costs (what the check would cost without its bound). ``--cold`` also drops the
file's pages from the page cache before each open (``posix_fadvise``), as after a reboot.

Figures only: nothing here asserts a timing. ``docs/decisions.md`` ("The quick check at
the first open") records the figures the bound was chosen from.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import apsw

from hivelite.store import quickcheck
from hivelite.store.sqlite import SqliteStore

from .figures import save
from .scale import populate


def forget(path: Path) -> None:
    """Drop the store's pages from the OS page cache (the next read goes to the disk)."""
    for suffix in ("", "-wal"):
        name = f"{path}{suffix}"
        if os.path.exists(name):
            fd = os.open(name, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def median_ms(call: Callable[[], object], repeat: int, path: Path, cold: bool) -> float:
    times = []
    for _ in range(repeat):
        if cold:
            forget(path)
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def plain_open(path: Path) -> None:
    """An open without the check (the check answers at once: nothing found)."""
    checked = quickcheck.damage
    quickcheck.damage = lambda conn: None
    try:
        SqliteStore(path, create=False).close()
    finally:
        quickcheck.damage = checked


def checked_open(path: Path) -> None:
    store = SqliteStore(path, create=False)
    try:
        if store.damaged is not None:
            raise SystemExit(f"{path} is damaged: {store.damaged}")
    finally:
        store.close()


def whole_check(path: Path) -> None:
    """SQLite's ``quick_check`` of every page, for comparison."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def measure(path: Path, repeat: int, cold: bool) -> dict[str, float]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    pages = int(conn.execute("PRAGMA page_count").get)
    conn.close()
    checked_open(path)  # once, to warm what a first call warms
    plain = median_ms(lambda: plain_open(path), repeat, path, cold)
    checked = median_ms(lambda: checked_open(path), repeat, path, cold)
    whole = median_ms(lambda: whole_check(path), max(1, min(repeat, 3)), path, cold)
    return {"pages": pages, "MiB": path.stat().st_size / 2**20, "plain open (ms)": plain,
            "checked open (ms)": checked, "ratio": checked / plain,
            "whole quick_check (ms)": whole,
            "whole check": float(pages <= quickcheck.OPEN_CHECK_PAGES)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.opencheck")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--cold", action="store_true",
                        help="drop the file from the page cache before each open too")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the temporary stores go (not a tmpfs for --cold)")
    parser.add_argument("--figures", type=Path, default=None, metavar="FILE",
                        help="also write the figures to FILE as JSON")
    args = parser.parse_args(argv)
    os.environ.setdefault("HIVELITE_LOAD_PLUGINS", "")
    results: dict[str, dict[str, float]] = {}
    print(f"bounded at {quickcheck.OPEN_CHECK_PAGES:,} pages: up to it every page is"
          " checked; beyond it the small tables and the newest"
          f" {quickcheck.NEWEST_ROWS} rows of {', '.join(t for t, _ in quickcheck.NEWEST)}")
    print(f"{'tasks':>10} {'pages':>8} {'MiB':>7} {'cache':>5} {'plain ms':>9}"
          f" {'checked ms':>11} {'ratio':>6} {'whole quick_check ms':>21}  check")
    with tempfile.TemporaryDirectory(prefix="hivelite-bench-opencheck-",
                                     dir=args.dir) as folder:
        for size in args.sizes:
            path = Path(folder) / f"open-{size}.db"
            began = time.perf_counter()
            populate(path, size)
            print(f"(built {size:,} tasks in {time.perf_counter() - began:.1f} s)",
                  file=sys.stderr)
            for cold in (False, True) if args.cold else (False,):
                row = measure(path, args.repeat, cold)
                cache = "cold" if cold else "warm"
                results[f"{size} {cache}"] = row
                print(f"{size:>10,} {row['pages']:>8,.0f} {row['MiB']:>7.1f} {cache:>5}"
                      f" {row['plain open (ms)']:>9.2f} {row['checked open (ms)']:>11.2f}"
                      f" {row['ratio']:>6.2f} {row['whole quick_check (ms)']:>21.1f}  "
                      + ("every page" if row["whole check"] else "bounded"))
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    save(args.figures, results)


if __name__ == "__main__":
    main()
