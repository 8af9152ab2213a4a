"""``python -m bench.sizes``: the everyday verbs on stores of 1,000 to 1,000,000 tasks.

Each store is built with the bulk path (``Hive.handoff_many``, in batches of 50,000, one
transaction each), plus 100 tasks taken through claim -> submit so that ``list --state
completed`` has something to find. Then, on the same machine in the same run:

- in-process, best of ``--repeat``: ``next`` (claim_next + release), claim -> submit,
  ``show`` (``get``), ``history``, ``list --ready --limit 50``, ``list --state completed
  --limit 50``;
- in a child process of its own each, the peak RSS of walking every task through the
  paged listing and of ``hivelite export`` to /dev/null (with their wall time).

Every figure of a big store is printed as a ratio to the smallest store's, beside issue
18's targets (each verb at most 1.5x; RSS at most 80 MB for the listing and 150 MB for
export of the largest; the bulk build of 1,000,000 tasks within 3 minutes). Figures
only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hivelite import Caller, Hive, hookimpl

from .figures import save

BATCH = 50_000
DONE = 100
AGENT = Caller.agent("ana/coder", "laptop")
EVIDENCE = [{"kind": "test_output", "summary": "ok"}]
TARGET_RATIO = 1.5
TARGET_LIST_MB, TARGET_EXPORT_MB, TARGET_BUILD_S = 80, 150, 180


class NoConfirmation:
    """Threshold 0: a submit completes the task."""

    @hookimpl
    def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
        return 0


def requests(count: int, start: int) -> Iterator[dict[str, Any]]:
    for n in range(start, start + count):
        yield {"requester": "ana/planner", "assignee": "ana/coder", "project": "size",
               "packet": {"task": f"Task number {n}", "deliverable_type": "code",
                          "acceptance_criteria": ["done"]}}


def build(path: Path, size: int) -> float:
    """The store of ``size`` tasks; returns the seconds the bulk handoff took."""
    with Hive.open(path, owner="ana", plugins=[NoConfirmation()]) as hive:
        owner = hive.as_owner()
        began = time.perf_counter()
        for start in range(0, size, BATCH):
            hive.handoff_many(owner, requests(min(BATCH, size - start), start))
        took = time.perf_counter() - began
        for number in range(1, DONE + 1):
            lease = hive.claim(AGENT, number)
            hive.submit(AGENT, number, lease_id=lease.lease_id, token=lease.fencing_token,
                        summary="done", evidence=EVIDENCE)
    return took


def best(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return min(times)


def verbs(path: Path, repeat: int) -> dict[str, float]:
    """Seconds per call of each everyday verb (best of ``repeat``)."""
    with Hive.open(path, owner="ana", plugins=[NoConfirmation()]) as hive:
        middle = max(DONE + 1, hive.info().tasks.get("routed", 0) // 2)
        cycle = iter(range(middle, middle + 10 * repeat))

        def next_and_release() -> None:
            got = hive.claim_next(AGENT)
            hive.release(AGENT, got.number, lease_id=got.lease_id, token=got.fencing_token)

        def claim_submit() -> None:
            n = next(cycle)
            lease = hive.claim(AGENT, n)
            hive.submit(AGENT, n, lease_id=lease.lease_id, token=lease.fencing_token,
                        summary="done", evidence=EVIDENCE)

        return {
            "next": best(next_and_release, repeat),
            "claim -> submit": best(claim_submit, repeat),
            "show": best(lambda: hive.get(middle), repeat),
            "history": best(lambda: hive.history(middle), repeat),
            "list --ready --limit 50": best(lambda: hive.list(ready=True, limit=50), repeat),
            "list --state completed --limit 50": best(
                lambda: hive.list(state="completed", limit=50), repeat),
        }


PEAK = """
def peak():
    # VmHWM: this process image's own high-water mark (ru_maxrss would count the memory of
    # the parent it was forked from, which exec does not reset)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""

WALK = PEAK + """
import sys, time
from hivelite import Hive
began = time.perf_counter()
seen, cursor = 0, None
with Hive.open(sys.argv[1], owner="ana", create=False) as hive:
    while True:
        page = hive.list(limit=500, cursor=cursor)
        seen += len(page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
print(seen, time.perf_counter() - began, peak())
"""

EXPORT = PEAK + """
import sys, time
from hivelite.faces.cli.main import main
began = time.perf_counter()
sys.stdout = open("/dev/null", "w")
try:
    main(["--db", sys.argv[1], "export"])
except SystemExit:
    pass
sys.stdout = sys.__stdout__
print(0, time.perf_counter() - began, peak())
"""


def child(script: str, path: Path) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of ``script`` run on ``path`` in a process of its own."""
    env = {**os.environ, "HIVELITE_LOAD_PLUGINS": ""}
    ran = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                         text=True, env=env, check=True)
    _, seconds, kb = ran.stdout.split()
    return float(seconds), int(kb) / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sizes")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", dest="as_json", action="store_true")
    parser.add_argument("--figures", type=Path, default=None, metavar="FILE",
                        help="also write the figures to FILE as JSON (for bench.report)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HIVELITE_LOAD_PLUGINS", "")
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="hivelite-bench-sizes-") as folder:
        for size in args.sizes:
            path = Path(folder) / f"size-{size}.db"
            built = build(path, size)
            print(f"built {size:,} tasks in {built:.1f} s"
                  f" ({size / built:,.0f} tasks/s)", file=sys.stderr)
            found = {f"{k} (ms)": v * 1000 for k, v in verbs(path, args.repeat).items()}
            walk_s, walk_mb = child(WALK, path)
            export_s, export_mb = child(EXPORT, path)
            results[size] = {"build (s)": built, **found, "walk all (s)": walk_s,
                             "walk all RSS (MB)": walk_mb, "export (s)": export_s,
                             "export RSS (MB)": export_mb}
            path.unlink()
    save(args.figures, {str(size): row for size, row in results.items()})
    if args.as_json:
        print(json.dumps(results, indent=2))
        return
    small = min(results)
    names = list(results[small])
    print(f"{'':36}" + "".join(f"{size:>14,}" for size in results) + "   target")
    for name in names:
        row = f"{name:36}" + "".join(f"{results[s][name]:14.2f}" for s in results)
        if name.endswith("(ms)"):
            big = max(results)
            ratio = results[big][name] / results[small][name]
            verdict = "met" if ratio <= TARGET_RATIO else f"short ({ratio:.2f}x)"
            row += f"   <= {TARGET_RATIO}x of {small:,}: {ratio:.2f}x {verdict}"
        elif name == "walk all RSS (MB)":
            row += f"   <= {TARGET_LIST_MB} MB"
        elif name == "export RSS (MB)":
            row += f"   <= {TARGET_EXPORT_MB} MB"
        elif name == "build (s)" and max(results) >= 1_000_000:
            row += f"   <= {TARGET_BUILD_S} s for 1,000,000"
        print(row)


if __name__ == "__main__":
    main()
