"""Verbs written with their statements and without (issue 47): the same refusals, the same
journal. Shared by the tests of each group of statements, on either engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive, HiveliteError, ManualClock, State

from .conftest import CODER, START, OpenHive, own_task
from .test_statements import EVIDENCE, FullRuns, refusal

Refusal = tuple[type[HiveliteError], str, str]


def full_run_only(hive: Hive) -> Hive:
    """``hive`` with every verb taking the write path's full run."""
    hive.store.statements = frozenset()  # type: ignore[misc]
    return hive


def refusals_both_ways(open_hive: OpenHive, folder: Path,
                       cases: Callable[[Hive], dict[str, Callable[[], Any]]]
                       ) -> dict[str, Refusal]:
    """What each of ``cases`` (made on a fresh store) refuses with statements, checked to
    be what it refuses with the full run alone, each case writing nothing."""
    said: dict[bool, dict[str, Refusal]] = {}
    for statements in (True, False):
        hive = open_hive(path=folder / f"{statements}.db", clock=ManualClock(START))
        if not statements:
            full_run_only(hive)
        made = cases(hive)
        before = hive.last_seq()
        said[statements] = {case: refusal(call) for case, call in made.items()}
        assert hive.last_seq() == before
    assert said[True] == said[False]
    return said[True]


def written_both_ways(open_hive: OpenHive, folder: Path, scenario: Callable[[Hive], Any],
                      monkeypatch: pytest.MonkeyPatch, verb: str, **options: Any
                      ) -> tuple[Any, list[int]]:
    """What ``scenario`` (on a fresh store) answered and left with statements, checked to
    be what it left with the full run alone; and how many times ``verb`` took the full run,
    with statements and without."""
    written, ran = [], []
    for statements in (True, False):
        hive = open_hive(path=folder / f"{statements}.db", clock=ManualClock(START),
                         **options)
        if not statements:
            full_run_only(hive)
        runs = FullRuns(monkeypatch)
        written.append(scenario(hive))
        ran.append(runs.verbs.count(verb))
        monkeypatch.undo()
    assert written[0] == written[1]
    return written[0], ran


def in_approval(hive: Hive) -> int:
    """A task whose result (the coder's) awaits a decision."""
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    assert hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                       summary="done", evidence=EVIDENCE).state is State.approval
    return number
