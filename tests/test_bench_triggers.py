"""``python -m bench --triggers`` (what each protocol trigger costs): the recorded cycles,
replayed on copies with triggers dropped, still complete every task in every variant
(the variants broke when migration 13 made a move name its journal row as its head, and
no test noticed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import ablate, lib, replay


def copy(template: Path, to: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{template}{suffix}")
        if source.exists():
            shutil.copy(source, f"{to}{suffix}")
    return to


@pytest.mark.parametrize(("label", "dropped"), ablate.VARIANTS,
                         ids=[label for label, _ in ablate.VARIANTS])
def test_every_variant_replays_every_cycle(tmp_path: Path, label: str,
                                           dropped: tuple[str, ...]) -> None:
    template = tmp_path / "template.db"
    numbers = lib.populate(template, 6)
    recording = replay.record(copy(template, tmp_path / "recorded.db"), numbers)
    path = copy(template, tmp_path / "variant.db")
    ablate.drop(path, dropped)
    runner = replay.Runner(path, recording, numbers, "NORMAL")
    runner.block(0, 3)
    runner.block(3, 6)
    runner.close()  # raises unless every task was completed
