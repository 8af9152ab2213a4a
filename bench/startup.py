"""``python -m bench.startup``: what one CLI call costs, against ``python -c pass``.

Each command runs ``--runs`` times as a fresh process (the CLI is one process per call);
the best wall time of each is compared with the best of ``python -c pass`` in the same
run, and with issue 18's targets: ``--version`` and ``--help`` at most 3x, ``list`` on a
1,000-task store and ``--json show 1`` at most 5x. It also prints how many modules each call
imports (``-X importtime``), which moves less with the machine's load than the time does.

Figures only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .figures import save

TARGETS = {"--version": 3.0, "--help": 3.0, "list": 5.0, "--json show 1": 5.0}


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
    """A store of ``tasks`` routed tasks, handed off through the library."""
    from hivelite import Hive

    with Hive.open(db, owner="ana") as hive:
        ana = hive.as_owner()
        for n in range(tasks):
            hive.handoff(ana, requester="ana/planner", assignee="ana/coder", project="bench",
                         packet={"task": f"Task number {n}", "deliverable_type": "code",
                                 "acceptance_criteria": ["done"]})


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
        env.update(HIVELITE_DB=str(db), HIVELITE_LOAD_PLUGINS="")
        hl = hivelite_command()
        base = best([sys.executable, "-c", "pass"], args.runs, env)
        print(f"python -c pass: {base * 1000:.1f} ms (best of {args.runs});"
              f" store of {args.tasks} tasks")
        print(f"{'command':<24} {'ms':>7} {'x pass':>7} {'target':>7}  {'modules':>7}  verdict")
        figures: dict[str, Any] = {"pass_ms": base * 1000, "runs": args.runs,
                                   "tasks": args.tasks}
        for name, target in TARGETS.items():
            command = [*hl, *name.split()]
            took = best(command, args.runs, env)
            ratio = took / base
            figures[name] = {"ms": took * 1000, "ratio": ratio, "target": target}
            verdict = ("met" if ratio <= target else
                       f"short by {ratio / target:.1f} x ({(took - target * base) * 1000:.0f}"
                       " ms)")
            print(f"{'hivelite ' + name:<24} {took * 1000:7.1f} {ratio:7.1f} {target:7.1f}"
                  f"  {modules(command, env):7d}  {verdict}")
        save(args.figures, figures)


if __name__ == "__main__":
    main()
