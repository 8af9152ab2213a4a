"""Worker processes a benchmark starts together: what each printed, and none left over."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


def reap(procs: Sequence[subprocess.Popen[str]]) -> None:
    """Kill any worker still running (a benchmark that failed must not leave one behind)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def outputs(procs: Sequence[subprocess.Popen[str]], what: str, timeout: float) -> list[str]:
    """What each worker printed on stdout, once every one has ended (any still running
    when this gives up is killed); ``RuntimeError`` naming ``what`` if one failed."""
    try:
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        reap(procs)
    if any(p.returncode for p in procs):
        raise RuntimeError(f"{what}: a worker failed")
    return outs
