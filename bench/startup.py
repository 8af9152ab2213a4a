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

Then what ``hivelite mcp`` costs an MCP client, which starts it once a session (issue 46:
at most 0.5 s of CPU), in CPU seconds (user + system of the process, best of ``--runs``):
importing what it imports, the ``mcp`` SDK alone beside it (its own floor), and the whole
start (open the store, prove the token, build the tools) until it answers ``initialize``.
**cached** is as installed (every package compiled); **uncached** compiles everything,
the standard library and the SDK included (``PYTHONDONTWRITEBYTECODE=1`` and a fresh,
empty ``PYTHONPYCACHEPREFIX`` each run): a first start after an install that compiled
nothing.

Figures only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
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


MCP_TARGET = 0.5
"""``hivelite mcp``'s imports, in CPU seconds (issue 46, item 6)."""
MCP_IMPORTS: dict[str, str] = {
    "python -c pass": "pass",
    "the mcp SDK alone": "import mcp.server.mcpserver, mcp.server.stdio",
    "hivelite mcp's imports": "import hivelite.faces.cli.main, hivelite.faces.cli.serve,"
                              " hivelite.faces.server.mcp_tools, hivelite.faces.server.keeper",
}
"""What is imported, each in a fresh interpreter: the SDK's own share, and ``hivelite
mcp``'s (the CLI, the command, the tools and the lease keeper)."""
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "bench.startup", "version": "1"}}}) + "\n"


def cpu(command: list[str], env: dict[str, str], *, fresh_cache: bool = False,
        stdin: str | None = None) -> float:
    """The CPU seconds (user + system) one run of ``command`` takes; with
    ``fresh_cache``, in a new empty ``PYTHONPYCACHEPREFIX`` (nothing compiled). With
    ``stdin``, it is sent, one line of answer read, then stdin closed (an MCP server that
    answered and ends)."""
    with tempfile.TemporaryDirectory(prefix="hivelite-bench-pycache-") as cache:
        if fresh_cache:
            env = {**env, "PYTHONPYCACHEPREFIX": cache, "PYTHONDONTWRITEBYTECODE": "1"}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        if stdin is None:
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=env, check=True)
        else:
            process = subprocess.Popen(command, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       env=env, text=True)
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(stdin)
            process.stdin.flush()
            answer = process.stdout.readline()
            process.stdin.close()
            process.wait()
            if '"result"' not in answer:
                raise RuntimeError(f"{' '.join(command)} answered {answer!r}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def mcp_figures(hl: list[str], db: Path, envs: dict[str, dict[str, str]],
                runs: int) -> dict[str, Any]:
    """``hivelite mcp``'s CPU seconds, cached and uncached (best of ``runs``): each of
    :data:`MCP_IMPORTS`, and the whole start until it answers ``initialize``."""
    from hivelite import Hive

    with Hive.open(db) as hive:
        token = hive.add_token(hive.as_owner(), "ana/coder", instance="laptop").token
    commands = {name: [sys.executable, "-c", code] for name, code in MCP_IMPORTS.items()}
    commands["hivelite mcp, until it answers"] = [*hl, "mcp"]
    figures: dict[str, Any] = {"target_cpu_s": MCP_TARGET}
    print(f"\nhivelite mcp: CPU seconds, best of {runs} (target: its imports at most"
          f" {MCP_TARGET} s)")
    print(f"{'':<32} {'cached':>7} {'uncached':>8}")
    for name, command in commands.items():
        stdin = INITIALIZE if command[-1] == "mcp" else None
        took = {mode: min(cpu(command, {**env, "HIVELITE_TOKEN": token},
                              fresh_cache=mode == "uncached", stdin=stdin)
                          for _ in range(runs))
                for mode, env in envs.items()}
        figures[name] = {"cpu_s": took["cached"], "uncached_cpu_s": took["uncached"]}
        print(f"{name:<32} {took['cached']:7.3f} {took['uncached']:8.3f}")
    ours = figures["hivelite mcp's imports"]
    sdk = figures["the mcp SDK alone"]
    verdict = ("met" if ours["cpu_s"] <= MCP_TARGET else
               f"missed by {ours['cpu_s'] - MCP_TARGET:.3f} s"
               f" (the SDK alone: {sdk['cpu_s']:.3f} s)")
    print(f"its imports against {MCP_TARGET} s, cached: {verdict};"
          f" hivelite's own share: {ours['cpu_s'] - sdk['cpu_s']:.3f} s cached,"
          f" {ours['uncached_cpu_s'] - sdk['uncached_cpu_s']:.3f} s uncached")
    return figures


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


def build(db: Path, tasks: int) -> list[str]:
    """A store of ``tasks`` routed tasks, handed off through the library; the first is
    claimed by ana/coder on laptop (for the lease call). Every installed plugin is then
    enabled on it, as an owner who uses them would (issue 46: a read must stay fast with
    the first-party plugins installed and enabled); the names enabled."""
    from hivelite import Hive, ManualClock
    from hivelite.verbs.installed import entry_points

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
        names = sorted(ep.name for ep in entry_points())
        for name in names:
            hive.enable_plugin(ana, name)
    return names


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
    parser.add_argument("--mcp-only", action="store_true",
                        help="only hivelite mcp's CPU figures (not the CLI calls)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hivelite-bench-startup-") as folder:
        db = Path(folder) / "store.db"
        enabled = build(db, args.tasks)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
        env.update(HIVELITE_DB=str(db), HIVELITE_NOW=NOW, PYTHONDONTWRITEBYTECODE="1")
        envs = {
            "cached": {**env, "PYTHONPATH": str(copy_package(Path(folder) / "cached",
                                                             compiled=True))},
            "uncached": {**env, "PYTHONPATH": str(copy_package(Path(folder) / "uncached",
                                                               compiled=False))},
        }
        hl = hivelite_command()
        if args.mcp_only:
            save(args.figures, {"mcp": mcp_figures(hl, db, envs, args.runs)})
            return
        base = {mode: best([sys.executable, "-c", "pass"], args.runs, e)
                for mode, e in envs.items()}
        load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
        print(f"python -c pass: {base['cached'] * 1000:.1f} ms (best of {args.runs});"
              f" store of {args.tasks} tasks; plugins installed and enabled on it:"
              f" {', '.join(enabled) or 'none'}; load average {load}")
        print(f"{'command':<28} {'cached':>7} {'x pass':>6} {'uncached':>8} {'x pass':>6}"
              f" {'target':>6} {'modules':>7}  verdict (cached / uncached)")
        figures: dict[str, Any] = {"pass_ms": base["cached"] * 1000, "runs": args.runs,
                                   "tasks": args.tasks, "load": load, "plugins": enabled}
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
        figures["mcp"] = mcp_figures(hl, db, envs, args.runs)
        save(args.figures, figures)


if __name__ == "__main__":
    main()
