"""``python -m bench``: hivelite's claim -> submit cycle against a raw SQLite baseline.

See ``bench/README.md`` for how to read the output.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import apsw

import hivelite

from . import SCALE_TARGET, TARGETS, ablate, breakdown, lib, raw, replay, scale
from . import figures as figures_file
from .figures import revision
from .timing import Timing
from .wal import PageReport
from .workspace import Workspace, paired

SIDES = ("raw", "hivelite")
REQUEST_ID = "hivelite + request id"
"""The page count's third side: every claim and submit given a request id of its own."""
TIMED = ("raw", "hivelite", "sql only")  # "sql only": hivelite's recorded SQL, replayed
PAGE_ITEMS = 500  # items in the page-counting pass (its WAL is never checkpointed)
WARM_UP_ITEMS = 200


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--items", type=int, default=2000, help="claim -> submit cycles per run")
    p.add_argument("--sync", choices=("normal", "full", "both"), default="both",
                   help="PRAGMA synchronous for both sides (default: both, one after the other)")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs per side and setting; the best is reported")
    p.add_argument("--block", type=int, default=50,
                   help="within a run the sides take turns this many items at a time, so"
                   " they meet the same load and disk (0: one side after the other)")
    p.add_argument("--profile", action="store_true",
                   help="instead: profile the hivelite side (cProfile top 25, per-statement"
                   " time split, trigger firings)")
    p.add_argument("--triggers", action="store_true",
                   help="instead: replay hivelite's SQL with protocol triggers dropped"
                   " from scratch copies (what each trigger costs)")
    p.add_argument("--raw-autocheckpoint", default="library", metavar="N|library|default",
                   help="the raw side's wal_autocheckpoint: the library's value (default),"
                   " SQLite's default, or a number")
    p.add_argument("--dir", type=Path, default=None,
                   help="where the temporary stores go (default: the system temp dir;"
                   " avoid tmpfs, where FULL costs nothing)")
    p.add_argument("--scale", nargs=2, type=int, metavar=("SMALL", "BIG"), default=None,
                   help="instead: claim -> submit in a SMALL-task and a BIG-task store"
                   " (e.g. 1000 100000) with every first-party plugin loaded; reports the"
                   " big store's rate over the small one's (target >= 0.9)")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    p.add_argument("--figures", type=Path, default=None, metavar="FILE",
                   help="also write the main figures to FILE as JSON (for bench.report)")
    args = p.parse_args(argv)
    if args.items < 1 or args.repeat < 1:
        p.error("--items and --repeat must be at least 1")
    return args


def _syncs(choice: str) -> list[str]:
    return {"normal": ["NORMAL"], "full": ["FULL"], "both": ["NORMAL", "FULL"]}[choice]


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _environment(tmp: Path) -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"hivelite {hivelite.__version__} ({revision()}), SQLite {apsw.sqlite_lib_version()},"
            f" apsw {apsw.apsw_version()}, Python {platform.python_version()},"
            f" {os.cpu_count()} cores, load {load}, stores in {tmp.parent}")


def _raw_autocheckpoint(choice: str, lib_template: Path) -> int | None:
    if choice == "library":
        return lib.autocheckpoint(lib_template)
    if choice == "default":
        return None
    return int(choice)


def _sides(names: tuple[str, ...], templates: dict[str, Path], keys: dict[str, list[int]],
           sync: str, autocheckpoint: int | None, recording: replay.Recording | None,
           dropped: dict[str, tuple[str, ...]] | None = None) -> list[tuple[str, Path, Any]]:
    """What :func:`paired` needs for each named side: its template and how to open it."""
    out: list[tuple[str, Path, Any]] = []
    for name in names:
        if name == "raw":
            out.append((name, templates["raw"], lambda path: raw.Runner(
                path, keys["raw"], sync, autocheckpoint)))
            continue
        drop = (dropped or {}).get(name, ())

        def opener(path: Path, drop: tuple[str, ...] = drop, name: str = name) -> Any:
            if drop:
                ablate.drop(path, drop)
            if name == "hivelite":
                return lib.Runner(path, keys["hivelite"], sync)
            assert recording is not None
            return replay.Runner(path, recording, keys["hivelite"], sync)

        out.append((name, templates["hivelite"], opener))
    return out


def _warm_up(ws: Workspace, templates: dict[str, Path], keys: dict[str, list[int]]) -> None:
    """A short untimed run of each side: the first run after setup is often slow."""
    _say("  warming up (not timed) ...")
    count = min(len(keys["raw"]), WARM_UP_ITEMS)
    paired(ws, _sides(SIDES, templates, {k: v[:count] for k, v in keys.items()}, "NORMAL",
                      None, None), count, 50)


def _record(ws: Workspace, templates: dict[str, Path],
            keys: dict[str, list[int]]) -> replay.Recording:
    _say("  recording hivelite's statements (not timed) ...")
    with ws.fresh(templates["hivelite"]) as path:
        return replay.record(path, keys["hivelite"])


def _best(timings: list[Timing]) -> Timing:
    return Timing(min(t.wall for t in timings), min(t.cpu for t in timings))


def compare(args: argparse.Namespace, ws: Workspace, templates: dict[str, Path],
            keys: dict[str, list[int]]) -> bool:
    """The main table: best items/s per side and setting, the ratio and the targets."""
    syncs = _syncs(args.sync)
    n = args.items
    autocheckpoint = _raw_autocheckpoint(args.raw_autocheckpoint, templates["hivelite"])
    recording = _record(ws, templates, keys)
    runs: dict[tuple[str, str], list[Timing]] = {(s, side): [] for s in syncs for side in TIMED}
    for r in range(args.repeat):
        for sync in syncs:
            sides = _sides(TIMED, templates, keys, sync, autocheckpoint, recording)
            result = paired(ws, sides, n, args.block, flip=r % 2 == 1)
            for side, t in result.items():
                runs[(sync, side)].append(t)
            _say(f"  run {r + 1}/{args.repeat} {sync:6} " + ", ".join(
                f"{side} {n / t.wall:,.0f}" for side, t in result.items()) + " items/s")

    _say("  counting WAL pages ...")
    count = min(n, PAGE_ITEMS)
    pages: dict[str, PageReport] = {}
    for side in SIDES:
        with ws.fresh(templates[side]) as path:
            module = raw if side == "raw" else lib
            pages[side] = module.pages(path, keys[side][:count], "NORMAL")
    with ws.fresh(templates["hivelite"]) as path:
        pages[REQUEST_ID] = lib.pages(path, keys["hivelite"][:count], "NORMAL",
                                      request_ids=True)

    best = {key: _best(values) for key, values in runs.items()}
    ac = "SQLite default" if autocheckpoint is None else str(autocheckpoint)
    turns = f"taking turns {args.block} items at a time" if args.block else "one after the other"
    print(f"\nhivelite claim -> submit at one worker: {n} items, best of {args.repeat} runs"
          f" per side, the sides {turns}")
    print(f"raw: one narrow table, 2 BEGIN IMMEDIATE transactions an item,"
          f" wal_autocheckpoint {ac}")
    print()
    print(f"{'sync':6}  {'raw items/s':>11}  {'hivelite items/s':>16}  {'ratio':>6}"
          f"  {'target':>7}  {'met':3}  {'(CPU-time ratio)':>16}")
    met_all = True
    figures: dict[str, Any] = {"items": n, "repeat": args.repeat}
    for sync in syncs:
        t_raw, t_lib = best[(sync, "raw")], best[(sync, "hivelite")]
        ratio = t_raw.wall / t_lib.wall
        figures[sync] = {"raw": n / t_raw.wall, "hivelite": n / t_lib.wall, "ratio": ratio,
                         "cpu_ratio": t_raw.cpu / t_lib.cpu}
        target = TARGETS[sync]
        met = ratio >= target
        met_all &= met
        cpu = f"{t_raw.cpu / t_lib.cpu:16.3f}" if sync == "NORMAL" else f"{'-':>16}"
        print(f"{sync:6}  {n / t_raw.wall:11,.0f}  {n / t_lib.wall:16,.0f}  {ratio:6.3f}"
              f"  >= {target:4.2f}  {'yes' if met else 'NO':3}  {cpu}")

    if "NORMAL" in syncs and "FULL" in syncs:
        wait = (best[("FULL", "raw")].wall - best[("NORMAL", "raw")].wall) / n / 2 * 1e6
        figures["fsync_wait_us"] = wait
        print(f"FULL: each commit waited about {wait:,.0f} us for the disk (raw FULL - raw"
              " NORMAL, per commit); the FULL ratio rises toward 1 as that wait grows")
    print("\nus per item (best runs); 'SQL only' replays hivelite's recorded statements"
          " with no Python around them")
    print(f"{'sync':6}  {'clock':5}  {'raw':>7}  {'SQL only':>8}  {'hivelite':>8}"
          f"  {'Python = hivelite - SQL only':>28}  {'raw / SQL only':>14}")
    for sync in syncs:
        for clock in ("wall", "cpu"):
            us = {side: 1e6 * getattr(best[(sync, side)], clock) / n for side in TIMED}
            python = us["hivelite"] - us["sql only"]
            share = f"{python:8.1f} ({100 * python / us['hivelite']:2.0f} % of hivelite)"
            print(f"{sync:6}  {clock:5}  {us['raw']:7.1f}  {us['sql only']:8.1f}"
                  f"  {us['hivelite']:8.1f}  {share:>28}  {us['raw'] / us['sql only']:14.3f}")
    print("runs (items/s, wall; and each run's own ratio):")
    for sync in syncs:
        for side in TIMED:
            rates = " ".join(f"{n / t.wall:,.0f}" for t in runs[(sync, side)])
            print(f"  {sync:6} {side:8} {rates}")
        each = [a.wall / b.wall for a, b in zip(runs[(sync, "raw")], runs[(sync, "hivelite")],
                                                 strict=True)]
        figures[sync]["runs"] = each
        ratios = " ".join(f"{ratio:.3f}" for ratio in each)
        print(f"  {sync:6} {'ratio':8} {ratios}")

    page_size = pages["raw"].page_size
    print(f"\nWAL pages written per transaction ({count} items, page size {page_size},"
          " counted with a WAL hook, no checkpoint; same for NORMAL and FULL):")
    print(f"  {'':21} {'all':>6} {'claim':>6} {'submit':>6}   KiB/item")
    for side in (*SIDES, REQUEST_ID):
        rep = pages[side]
        kib = rep.pages * rep.page_size / 1024 / count
        print(f"  {side:21} {rep.per_txn:6.2f} {rep.phase_per_txn('claim'):6.2f}"
              f" {rep.phase_per_txn('submit'):6.2f}   {kib:8.1f}")
    ratio = pages["hivelite"].per_txn / pages["raw"].per_txn
    print(f"  hivelite writes {ratio:.1f}x the raw side's pages")
    figures["pages"] = {side: {"all": pages[side].per_txn,
                               "claim": pages[side].phase_per_txn("claim"),
                               "submit": pages[side].phase_per_txn("submit")}
                        for side in SIDES}
    figures["pages"]["request_id"] = {
        "all": pages[REQUEST_ID].per_txn, "claim": pages[REQUEST_ID].phase_per_txn("claim"),
        "submit": pages[REQUEST_ID].phase_per_txn("submit")}
    figures_file.save(args.figures, figures)
    for side in (*SIDES, REQUEST_ID):
        rep = pages[side]
        if not rep.objects:
            print(f"  ({side}: the -wal file did not match the hook's counts; no breakdown)")
            continue
        print(f"  {side} pages by table/index, per transaction:")
        for phase in ("claim", "submit"):
            txns = rep.by_phase[phase][0]
            parts = [f"{name} {k / txns:.2f}" for name, k in rep.objects[phase].most_common()]
            print(f"    {phase:6}: " + ", ".join(parts))
    return met_all


def profile(args: argparse.Namespace, ws: Workspace, templates: dict[str, Path],
            keys: dict[str, list[int]]) -> None:
    """cProfile of the hivelite side, then both sides with every statement timed."""
    sync = "FULL" if args.sync == "full" else "NORMAL"
    numbers = keys["hivelite"]
    _say(f"  profiling the hivelite side ({sync}) ...")
    with ws.fresh(templates["hivelite"]) as path:
        print(breakdown.cprofile(path, numbers, sync))
    autocheckpoint = _raw_autocheckpoint(args.raw_autocheckpoint, templates["hivelite"])
    best: dict[str, breakdown.Split] = {}
    for r in range(args.repeat):
        for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
            with ws.fresh(templates[side]) as path:
                gc.collect()
                if side == "raw":
                    sp = breakdown.split_raw(path, keys[side], sync, autocheckpoint)
                else:
                    sp = breakdown.split(path, numbers, sync)
            if side not in best or sp.wall_ns < best[side].wall_ns:
                best[side] = sp
            _say(f"  timed statements {r + 1}/{args.repeat} {side:8}"
                 f" {sp.wall_ns / sp.items / 1000:8.1f} us/item")
    print(breakdown.format_split(best, sync))
    count = min(len(numbers), 100)
    with ws.fresh(templates["hivelite"]) as path:
        fired = breakdown.trigger_firings(path, numbers[:count])
    print(breakdown.format_triggers(fired, count))


def triggers(args: argparse.Namespace, ws: Workspace, templates: dict[str, Path],
             keys: dict[str, list[int]]) -> None:
    """hivelite's SQL replayed on scratch copies with protocol triggers dropped.

    The replay, not the library, is timed: the library's run-to-run noise on a
    shared machine is larger than a trigger's cost.
    """
    sync = "FULL" if args.sync == "full" else "NORMAL"
    clock = "cpu" if sync == "NORMAL" else "wall"
    n = args.items
    recording = _record(ws, templates, keys)
    labels = tuple(label for label, _ in ablate.VARIANTS)
    sides = _sides(labels, templates, keys, sync, None, recording, dict(ablate.VARIANTS))
    runs: dict[str, list[Timing]] = {}
    for r in range(args.repeat):
        result = paired(ws, sides, n, args.block, flip=r % 2 == 1)
        for label, t in result.items():
            runs.setdefault(label, []).append(t)
        _say(f"  run {r + 1}/{args.repeat} " + ", ".join(
            f"{label} {n / t.wall:,.0f}" for label, t in result.items()) + " items/s")
    us = {label: 1e6 * getattr(_best(values), clock) / n for label, values in runs.items()}
    count = min(n, PAGE_ITEMS)
    print(f"\nhivelite's recorded SQL replayed (no Python) with protocol triggers dropped from"
          f" scratch copies;\n{n} items, {sync}, best of {args.repeat} runs (variants taking"
          f" turns {args.block} items at a time), {clock} time:")
    print(f"  {'variant':16} {'us/item':>8} {'saved':>7}   pages/txn claim submit")
    for label, dropped in ablate.VARIANTS:
        with ws.fresh(templates["hivelite"]) as path:
            ablate.drop(path, dropped)
            rep = lib.pages(path, keys["hivelite"][:count], sync, ablated=bool(dropped))
        print(f"  {label:16} {us[label]:8.1f} {us['as shipped'] - us[label]:7.1f}"
              f"   {rep.per_txn:9.2f} {rep.phase_per_txn('claim'):5.2f}"
              f" {rep.phase_per_txn('submit'):6.2f}")
    moves = sum(sql.lstrip().upper().startswith("UPDATE TASKS SET STATE")
                for sql, _ in recording.log) / max(len(recording.starts) - 1, 1)
    print(f"  (each item runs {moves:g} UPDATEs of tasks that move it; each fires task_update,"
          " task_move and task_journal)")


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    # Installed entry-point plugins would change what is measured; load none unless asked.
    os.environ.setdefault("HIVELITE_LOAD_PLUGINS", "")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hivelite-bench-", dir=args.dir) as tmp:
        root = Path(tmp)
        print(_environment(root))
        if args.scale:
            small, big = args.scale
            if not 0 < args.items <= small < big:
                raise SystemExit("--scale needs 0 < --items <= SMALL < BIG")
            runs = scale.run(root, (small, big), args.items, args.block or args.items,
                             args.repeat)
            ok = scale.report(runs, SCALE_TARGET)
            print(f"\n({time.perf_counter() - started:.0f} s in all)")
            return 1 if args.check and not ok else 0
        ws = Workspace(root)
        templates = {"raw": root / "raw.db", "hivelite": root / "hivelite.db"}
        _say(f"  populating {args.items} items per side (not timed) ...")
        keys = {"raw": raw.populate(templates["raw"], args.items),
                "hivelite": lib.populate(templates["hivelite"], args.items)}
        os.sync()
        _warm_up(ws, templates, keys)
        ok = True
        if args.profile:
            profile(args, ws, templates, keys)
        elif args.triggers:
            triggers(args, ws, templates, keys)
        else:
            ok = compare(args, ws, templates, keys)
    print(f"\n({time.perf_counter() - started:.0f} s in all)")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
