"""``python -m bench.report``: every performance figure in one run, written to a page.

Runs, each in a process of its own and one after the other:

1. ``python -m bench`` (claim -> submit at one worker, NORMAL and FULL, against raw
   SQLite in the same run, with the WAL pages per transaction);
2. ``python -m bench.queue --only drain`` at W = 1 and 2, NORMAL and then FULL (next ->
   submit, against a raw queue of the same shape);
3. ``python -m bench.startup`` (CLI calls against ``python -c pass``);
4. ``python -m bench.sizes`` (the everyday verbs, walking every task and export, on stores
   of 1,000 to 1,000,000 tasks built with the bulk handoff);

then writes ``docs/performance.md``: the machine, the command, each of issue 18's targets
beside the figure reached (met, or short by how much), and every benchmark's own output.
``--quick`` runs smaller versions (minutes instead of most of an hour) for trying it out;
its page says so. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

import hivelite

from .figures import revision

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "performance.md"


@dataclass(frozen=True)
class Run:
    """One benchmark as the report runs it."""

    name: str
    args: tuple[str, ...]
    quick: tuple[str, ...]


RUNS = (
    Run("cycle", ("bench", "--items", "5000", "--repeat", "3", "--sync", "both"),
        ("bench", "--items", "800", "--repeat", "2", "--sync", "both")),
    Run("drain NORMAL", ("bench.queue", "--only", "drain", "--items", "2000", "--repeat", "3",
                         "--sync", "normal"),
        ("bench.queue", "--only", "drain", "--items", "500", "--repeat", "1",
         "--sync", "normal")),
    Run("drain FULL", ("bench.queue", "--only", "drain", "--items", "1000", "--repeat", "3",
                       "--sync", "full"),
        ("bench.queue", "--only", "drain", "--items", "200", "--repeat", "1",
         "--sync", "full")),
    Run("startup", ("bench.startup", "--runs", "15"), ("bench.startup", "--runs", "5")),
    Run("sizes", ("bench.sizes", "--sizes", "1000", "100000", "1000000", "--repeat", "20"),
        ("bench.sizes", "--sizes", "1000", "20000", "--repeat", "5")),
)


@dataclass(frozen=True)
class Target:
    """One of issue 18's targets and the figure that meets or misses it."""

    what: str
    figure: float | None
    goal: float
    unit: str
    at_least: bool
    """True: the figure must reach the goal (a ratio to raw); False: stay under it."""

    def verdict(self) -> str:
        if self.figure is None:
            return "not measured"
        if (self.figure >= self.goal) if self.at_least else (self.figure <= self.goal):
            return "met"
        if self.at_least:
            return f"short: {self.figure / self.goal:.0%} of the target"
        return f"short: {self.figure / self.goal:.1f}x the limit"

    def row(self) -> str:
        sign = ">=" if self.at_least else "<="
        shown = "-" if self.figure is None else f"{self.figure:,.3g} {self.unit}".strip()
        return f"| {self.what} | {shown} | {sign} {self.goal:g} {self.unit} | {self.verdict()} |"


def _get(figures: dict[str, Any], *path: str) -> float | None:
    value: Any = figures
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value) if isinstance(value, int | float) else None


def targets(found: dict[str, dict[str, Any]]) -> list[Target]:
    """Issue 18's targets, each beside what this run measured."""
    cycle, normal, full = found.get("cycle", {}), found.get("drain NORMAL", {}), found.get(
        "drain FULL", {})
    startup, sizes = found.get("startup", {}), found.get("sizes", {})
    rows = [
        Target("claim -> submit, W=1, NORMAL (x raw)", _get(cycle, "NORMAL", "ratio"), 0.15,
               "", True),
        Target("claim -> submit, W=1, FULL (x raw)", _get(cycle, "FULL", "ratio"), 0.50, "",
               True),
        Target("next -> submit, W=2, NORMAL (x raw queue)", _get(normal, "W=2", "ratio"),
               0.10, "", True),
        Target("next -> submit, W=2, FULL (x raw queue)", _get(full, "W=2", "ratio"), 0.40,
               "", True),
        Target("WAL pages per transaction", _get(cycle, "pages", "hivelite", "all"), 2.5, "",
               False),
    ]
    if startup:
        base = _get(startup, "pass_ms")
        for name in ("--version", "list", "--json show 1"):
            goal = 3.0 if name == "--version" else 5.0
            rows.append(Target(f"`hivelite {name}` (x `python -c pass`, {base or 0:.0f} ms)",
                               _get(startup, name, "ratio"), goal, "", False))
    if sizes:
        small, big = min(sizes, key=int), max(sizes, key=int)
        for verb in ("next", "claim -> submit", "show", "history", "list --ready --limit 50",
                     "list --state completed --limit 50"):
            a, b = _get(sizes, small, f"{verb} (ms)"), _get(sizes, big, f"{verb} (ms)")
            ratio = b / a if a and b is not None else None
            rows.append(Target(f"`{verb}` at {int(big):,} tasks (x {int(small):,})", ratio,
                               1.5, "", False))
        rows += [
            Target(f"RSS, listing all {int(big):,} tasks", _get(sizes, big, "walk all RSS (MB)"),
                   80, "MB", False),
            Target(f"RSS, export of {int(big):,} tasks", _get(sizes, big, "export RSS (MB)"),
                   150, "MB", False),
            Target(f"bulk handoff of {int(big):,} tasks", _get(sizes, big, "build (s)"),
                   180 * int(big) / 1_000_000, "s", False),
        ]
    return rows


def machine() -> str:
    """The machine and the versions, in one line."""
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({model}), {platform.system()},"
            f" Python {platform.python_version()}, SQLite {apsw.sqlite_lib_version()},"
            f" hivelite {hivelite.__version__} ({revision()})")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def page(found: dict[str, dict[str, Any]], outputs: dict[str, str], command: str,
         quick: bool, seconds: float) -> str:
    """``docs/performance.md`` from the figures and the outputs of one run."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "<!-- Generated by `python -m bench.report`; its figures are one run's. -->",
        "# Performance",
        "",
        f"Written by `{command}` on {when}, in {_duration(seconds)}"
        + (" (**--quick**: small runs, for trying the report, not for quoting)" if quick
           else "") + ".",
        "",
        f"Machine: {machine()}.",
        "",
        "Every figure is measured in this one run; ratios compare hivelite with a raw SQLite",
        "baseline measured beside it (see bench/README.md for what each side does). The",
        "machine is shared, so figures move between runs: compare ratios, not times.",
        "",
        "## Targets (issue 18)",
        "",
        "| what | reached | target | verdict |",
        "|---|---|---|---|",
        *(t.row() for t in targets(found)),
        "",
        "## What each benchmark printed",
    ]
    for run in RUNS:
        if run.name in outputs:
            args = run.quick if quick else run.args
            lines += ["", f"### {run.name}: `python -m {' '.join(args)}`", "", "```",
                      outputs[run.name].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report")
    parser.add_argument("--quick", action="store_true", help="small runs (a few minutes)")
    parser.add_argument("--out", type=Path, default=PAGE, help="the page to write")
    parser.add_argument("--only", nargs="+", choices=[r.name for r in RUNS], default=None,
                        help="run only these benchmarks")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    found: dict[str, dict[str, Any]] = {}
    outputs: dict[str, str] = {}
    env = {**os.environ, "HIVELITE_LOAD_PLUGINS": ""}
    with tempfile.TemporaryDirectory(prefix="hivelite-report-") as folder:
        for run in RUNS:
            if args.only and run.name not in args.only:
                continue
            figures = Path(folder) / f"{run.name.replace(' ', '-')}.json"
            command = [sys.executable, "-m", *(run.quick if args.quick else run.args),
                       "--figures", str(figures)]
            print(f"{run.name}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
            ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                                 check=False)
            outputs[run.name] = ran.stdout + (f"\n(exit {ran.returncode})\n{ran.stderr[-2000:]}"
                                              if ran.returncode else "")
            if figures.is_file():
                found[run.name] = json.loads(figures.read_text())
    command = "python -m bench.report" + (" --quick" if args.quick else "")
    args.out.write_text(page(found, outputs, command, args.quick, time.perf_counter() - began))
    for target in targets(found):
        print(f"{target.what}: {target.verdict()}", file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
