"""Wall and CPU time of one timed loop.

Wall time is what the targets are about. On a shared machine the process's CPU
time (user + system) is steadier, as it leaves out the time other processes
had the core; with ``synchronous=FULL`` it leaves out the fsync waits, so it
only means something for NORMAL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float


def start() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def stop(started: tuple[float, float]) -> Timing:
    return Timing(time.perf_counter() - started[0], time.process_time() - started[1])
