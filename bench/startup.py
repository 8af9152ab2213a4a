"""``python -m bench.startup``: what one CLI call costs, against ``python -c pass``.

Each command runs ``--runs`` times as a fresh process (the CLI is one process per call);
the best wall time of each is compared with the best of ``python -c pass`` in the same
run, and with the targets: issue 32's ``--version`` at most 2.5x and the reads (``list``
on a 1,000-task store, ``--json show 1``, ``history 1``) at most 4x, issue 18's ``--help``
at most 3x. ``show 1 --lease`` (the holder asking for its claim again) has no target of
its own and is printed beside them.

Every figure is taken twice, from two private copies of the ``hivelite`` package (the
same source, put first on ``PYTHONPATH``, ``PYTHONDONTWRITEBYTECODE=1`` for both):
**cached**, compiled beforehand (what an installed package is), and **uncached**, never
compiled (a source checkout on a machine that sets ``PYTHONDONTWRITEBYTECODE``: every
call compiles every hivelite module it imports). The standard library and the other
packages are as installed (compiled) in both. It also prints how many modules each call
imports (``-X importtime``), which moves less with the machine's load than the time does.

Figures only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .figures import save

NOW = "2026-12-01T09:00:00.000Z"
"""The time the store is built at and every call is told ($HIVELITE_NOW), so the claim the
lease call asks for is live whatever the run takes."""
COMMANDS: dict[str, float | None] = {
    "--version": 2.5, "--help": 3.0, "list": 4.0, "--json show 1": 4.0, "history 1": 4.0,
    "show 1 --lease --agent ana/coder --instance laptop": None}
"""Each command with its target (x ``python -c pass``; None: none)."""


def hivelite_command() -> list[str]:
    script = Path(sys.executable).parent / "hivelite"
    if script.is_file():
        return [str(script)]
    found = shutil.which("hivelite")
    return [found] if found else [sys.executable, "-m", "hivelite"]


def best(command: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=env, check=True)
        times.append(time.perf_counter() - began)
    return min(times)


def modules(command: list[str], env: dict[str, str]) -> int:
    """How many modules the call imports (the script's interpreter, with -X importtime)."""
    if Path(command[0]).name != "hivelite":
        return -1
    code = "import sys; from hivelite.faces.cli.main import main; sys.argv[0] = 'hivelite'; main()"
    ran = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *command[1:]],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=env, check=False)
    return sum(1 for line in ran.stderr.splitlines() if line.startswith("import time:")) - 1


def build(db: Path, tasks: int) -> None:
    """A store of ``tasks`` routed tasks, handed off through the library; the first is
    claimed by ana/coder on laptop (for the lease call)."""
    from hivelite import Hive, ManualClock

    clock = ManualClock(datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    with Hive.open(db, owner="ana", clock=clock) as hive:
        ana = hive.as_owner()
        hive.handoff_many(ana, ({"requester": "ana/planner", "assignee": "ana/coder",
                                 "project": "bench",
                                 "packet": {"task": f"Task number {n}",
                                            "deliverable_type": "code",
                                            "acceptance_criteria": ["done"]}}
                                for n in range(tasks)))
        from hivelite import Caller

        hive.claim(Caller.agent("ana/coder", "laptop"), 1)


def copy_package(to: Path, *, compiled: bool) -> Path:
    """A private copy of the ``hivelite`` package under ``to`` (without any bytecode),
    compiled when ``compiled``; the folder to put on ``PYTHONPATH``."""
    import hivelite

    source = Path(hivelite.__file__).parent
    shutil.copytree(source, to / "hivelite", ignore=shutil.ignore_patterns("__pycache__"))
    if compiled:
        compileall.compile_dir(to / "hivelite", quiet=1)
    return to


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.startup")
    parser.add_argument("--runs", type=int, default=15, help="runs of each (best is kept)")
    parser.add_argument("--tasks", type=int, default=1000, help="tasks in the listed store")
    parser.add_argument("--figures", type=Path, default=None, metavar="FILE",
                        help="also write the figures to FILE as JSON (for bench.report)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hivelite-bench-startup-") as folder:
        db = Path(folder) / "store.db"
        build(db, args.tasks)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
        env.update(HIVELITE_DB=str(db), HIVELITE_LOAD_PLUGINS="", HIVELITE_NOW=NOW,
                   PYTHONDONTWRITEBYTECODE="1")
        envs = {
            "cached": {**env, "PYTHONPATH": str(copy_package(Path(folder) / "cached",
                                                             compiled=True))},
            "uncached": {**env, "PYTHONPATH": str(copy_package(Path(folder) / "uncached",
                                                               compiled=False))},
        }
        hl = hivelite_command()
        base = {mode: best([sys.executable, "-c", "pass"], args.runs, e)
                for mode, e in envs.items()}
        load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
        print(f"python -c pass: {base['cached'] * 1000:.1f} ms (best of {args.runs});"
              f" store of {args.tasks} tasks; load average {load}")
        print(f"{'command':<28} {'cached':>7} {'x pass':>6} {'uncached':>8} {'x pass':>6}"
              f" {'target':>6} {'modules':>7}  verdict (cached / uncached)")
        figures: dict[str, Any] = {"pass_ms": base["cached"] * 1000, "runs": args.runs,
                                   "tasks": args.tasks, "load": load}
        for name, target in COMMANDS.items():
            command = [*hl, *name.split()]
            took = {mode: best(command, args.runs, e) for mode, e in envs.items()}
            ratio = {mode: took[mode] / base[mode] for mode in envs}
            figures[name] = {"ms": took["cached"] * 1000, "ratio": ratio["cached"],
                             "uncached_ms": took["uncached"] * 1000,
                             "uncached_ratio": ratio["uncached"], "target": target}
            verdict = " / ".join("-" if target is None else "met" if ratio[m] <= target
                                 else f"short by {ratio[m] / target:.1f} x" for m in envs)
            shown = "lease" if "--lease" in name else name
            print(f"{'hivelite ' + shown:<28} {took['cached'] * 1000:7.1f}"
                  f" {ratio['cached']:6.1f} {took['uncached'] * 1000:8.1f}"
                  f" {ratio['uncached']:6.1f} {target or 0:6.1f}"
                  f" {modules(command, envs['cached']):7d}  {verdict}")
        save(args.figures, figures)


if __name__ == "__main__":
    main()
