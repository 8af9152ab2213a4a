"""``fields`` as its statement (issue 47, item 1), on both engines: a task's priority,
labels and attempt limit, changed against the version the caller read, are one write
(the fields, then the event naming what changed). Another version, or a caller who may
not change them, is refused by the store's rules, and the full run says why in the words
it always used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive

from .both_ways import refusals_both_ways, written_both_ways
from .conftest import CODER, OWNER, PLANNER, OpenHive, own_task

pytestmark = pytest.mark.contract


def scenario(hive: Hive) -> list[tuple[Any, ...]]:
    first, second = own_task(hive), own_task(hive)
    answers = [
        hive.set_fields(OWNER, first, base_version=1, priority="high", labels=["ui"]),
        hive.set_fields(PLANNER, first, base_version=2, add_labels=["bug"]),
        hive.set_fields(CODER, first, base_version=3, remove_labels=["ui"]),
        hive.set_fields(OWNER, second, base_version=1, max_attempts=5),
    ]
    said: list[tuple[Any, ...]] = [(a.number, a.state, a.seq is not None) for a in answers]
    for number in (first, second):
        view = hive.get(number)
        said.append((view.priority, view.labels, view.max_attempts, view.fields_version))
        said += [(e.actor, e.reason, e.detail) for e in hive.history(number)]
    return said


def test_a_change_of_fields_is_its_statement_and_leaves_what_the_full_run_leaves(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, "fields")
    assert ran == [0, 4]
    assert written[4] == ("high", ["bug"], 3, 4)


def wrong_cases(hive: Hive) -> dict[str, Any]:
    routed, done = own_task(hive), own_task(hive)
    hive.cancel(OWNER, done)
    crowded = own_task(hive, labels=[f"l{i}" for i in range(10)])
    stranger = Caller.agent("ana/other", "desktop")
    return {
        "another version": lambda: hive.set_fields(OWNER, routed, base_version=2,
                                                   priority="low"),
        "a closed task": lambda: hive.set_fields(OWNER, done, base_version=1, priority="low"),
        "an agent not a party": lambda: hive.set_fields(stranger, routed, base_version=1,
                                                        priority="low"),
        "an agent's attempt limit": lambda: hive.set_fields(CODER, routed, base_version=1,
                                                            max_attempts=9),
        "an eleventh label": lambda: hive.set_fields(OWNER, crowded, base_version=1,
                                                     add_labels=["more"]),
        "no such task": lambda: hive.set_fields(OWNER, 999, base_version=1, priority="low"),
    }


def test_fields_refusals_read_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, wrong_cases)
    assert said["another version"][1] == "stale_base"
    assert said["an agent not a party"][1] == "not_permitted"
    assert said["an eleventh label"][1] == "too_many_labels"


def stopped(hive: Hive) -> dict[str, Any]:
    """A party the owner stopped (refused in the statement's transaction, in the
    full run's words; a store of its own)."""
    number = own_task(hive)
    hive.stop(OWNER, agent="ana/planner")
    return {"a stopped requester": lambda: hive.set_fields(PLANNER, number, base_version=1,
                                                           priority="low")}


def test_a_stopped_party_is_refused_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    assert refusals_both_ways(open_hive, tmp_path, stopped)["a stopped requester"][1] == "vetoed"
