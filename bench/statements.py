"""``python -m bench.statements``: the verbs as their statements against the full run.

On SQLite ``claim``, ``next`` and ``submit`` are written as their statements in the plain
case (docs/decisions.md, "Verbs as their statements"); every other case takes the write
path's full run. This runs the same cycles both ways in one process, on two stores made
alike (N tasks for one agent, the store's threshold 0 so a submission completes its task,
one evidence item a result), taking turns ``--block`` cycles at a time so both meet the
same load: ``next -> submit`` (``bench.peers``'s loop) and ``claim -> submit`` (``python
-m bench``'s). The full run's side has its store's statements switched off
(``Store.statements`` emptied), which is exactly the path a case that is not plain takes.

Prints microseconds a cycle (and each verb's share) for each side, and the full run over
the statements. Figures only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hivelite import Caller, Hive

from .peers import AGENT, EVIDENCE, populate

SIDES = ("statements", "full run")
LOOPS = ("next -> submit", "claim -> submit")


def _cycles(hive: Hive, loop: str, count: int, numbers: list[int]) -> tuple[float, float]:
    """``count`` cycles of ``loop``; the seconds spent taking and the seconds submitting."""
    me = Caller.agent(AGENT, "bench")
    took = gave = 0.0
    for _ in range(count):
        start = time.perf_counter()
        lease = hive.claim_next(me) if loop == LOOPS[0] else hive.claim(me, numbers.pop(0))
        middle = time.perf_counter()
        hive.submit(me, lease.number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
        took, gave = took + middle - start, gave + time.perf_counter() - middle
    return took, gave


def measure(folder: Path, loop: str, cycles: int, block: int, warm: int
            ) -> dict[str, tuple[float, float]]:
    """Each side's microseconds a cycle, taking and submitting."""
    hives: dict[str, Hive] = {}
    for side in SIDES:
        path = folder / f"{loop.split()[0]}-{side.replace(' ', '-')}.db"
        populate("hivelite", path, cycles + warm)
        hives[side] = Hive.open(path)
    hives["full run"].store.statements = frozenset()
    numbers = {side: list(range(1, cycles + warm + 1)) for side in SIDES}
    spent = {side: [0.0, 0.0] for side in SIDES}
    try:
        for side in SIDES:
            _cycles(hives[side], loop, warm, numbers[side])
        done = 0
        while done < cycles:
            step = min(block, cycles - done)
            for side in SIDES:
                took, gave = _cycles(hives[side], loop, step, numbers[side])
                spent[side][0] += took
                spent[side][1] += gave
            done += step
    finally:
        for hive in hives.values():
            hive.close()
    return {side: (took / cycles * 1e6, gave / cycles * 1e6)
            for side, (took, gave) in spent.items()}


def show(loop: str, figures: dict[str, tuple[float, float]], say: Callable[[str], None]
         ) -> None:
    say(f"{loop}:")
    for side, (took, gave) in figures.items():
        say(f"  {side:11s} {took + gave:7.1f} us a cycle ({loop.split()[0]} {took:6.1f},"
            f" submit {gave:6.1f})")
    plain, full = (sum(figures[side]) for side in SIDES)
    say(f"  full run / statements: {full / plain:.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.statements",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=3000, help="timed cycles per side")
    parser.add_argument("--block", type=int, default=50,
                        help="cycles a side runs before the other takes its turn")
    parser.add_argument("--warm", type=int, default=100, help="untimed cycles first")
    parser.add_argument("--loops", nargs="+", choices=LOOPS, default=list(LOOPS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hivelite-bench-") as tmp:
        for loop in args.loops:
            show(loop, measure(Path(tmp), loop, args.cycles, args.block, args.warm), print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
