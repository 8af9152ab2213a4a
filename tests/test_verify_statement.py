"""``verify`` as its statement (issue 47, item 1), on both engines: a verdict that counts
is one write (the confirmation, then the task completed, sent back, or
the event that says it was given); the rules refuse a counted verdict that is the
worker's, from its instance, a second one, or on a task not in approval, and the full run
says which. A verdict that does not count (the store's mode, or a plugin, says so) is
its statement too, kept uncounted with why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive, State, hookimpl

from .both_ways import in_approval, refusals_both_ways, written_both_ways
from .conftest import CODER, GUEST, OWNER, REVIEWER, OpenHive, own_task
from .test_statements import FullRuns

pytestmark = pytest.mark.contract

SECOND = Caller.agent("ana/second", "tablet")


def scenario(hive: Hive) -> list[tuple[Any, ...]]:
    """Verdicts of each outcome; what they answered and the tasks' journals."""
    completes, rejected = in_approval(hive), in_approval(hive)
    answers = [hive.verify(REVIEWER, completes), hive.verify(REVIEWER, rejected,
                                                             verdict="reject", reason="no")]
    hive.set_policy(OWNER, "threshold", 2)
    twice = in_approval(hive)
    answers += [hive.verify(REVIEWER, twice), hive.verify(SECOND, twice)]
    stranger = in_approval(hive)
    answers.append(hive.verify(GUEST, stranger))  # in a personal store: kept, not counted
    said: list[tuple[Any, ...]] = [(a.number, a.state, a.seq is not None) for a in answers]
    for number in (completes, rejected, twice, stranger):
        said += [(e.number, e.from_state, e.to_state, e.actor, e.reason, e.detail)
                 for e in hive.history(number)]
        said += [(c.reviewer, c.verdict, c.counted, c.why)
                 for c in hive.get(number).confirmations]
    return said


def test_a_counted_verdict_is_its_statement_and_leaves_what_the_full_run_leaves(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, "verify")
    assert ran == [0, 5]  # the stranger's too: kept uncounted, as the full run keeps it
    assert [row[1] for row in written[:5]] == [State.completed, State.routed,
                                                  State.approval, State.completed,
                                                  State.approval]


def wrong_cases(hive: Hive) -> dict[str, Any]:
    done, waiting, again = in_approval(hive), in_approval(hive), in_approval(hive)
    hive.set_policy(OWNER, "threshold", 2)
    twice = in_approval(hive)
    hive.verify(REVIEWER, twice)
    routed = own_task(hive)
    hive.sign_off(OWNER, done)
    return {
        "the worker's own": lambda: hive.verify(CODER, waiting),
        "from the worker's instance": lambda: hive.verify(
            Caller.agent("ana/reviewer", "laptop"), waiting),
        "a second verdict": lambda: hive.verify(REVIEWER, twice),
        "a routed task": lambda: hive.verify(REVIEWER, routed),
        "a completed task": lambda: hive.verify(REVIEWER, done),
        "no such task": lambda: hive.verify(REVIEWER, 999),
        "a reject without a reason": lambda: hive.verify(REVIEWER, again, verdict="reject"),
    }


def test_verify_refusals_read_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, wrong_cases)
    assert said["the worker's own"][1] == "self_verify"
    assert said["from the worker's instance"][1] == "reviewer_not_independent"
    assert said["a second verdict"][1] == "already_verified"


class CountsNot:
    @hookimpl
    def hivelite_count_confirmation(self, task: Any, confirmation: Any, hive: Any) -> bool:
        return False


def test_a_verdict_a_plugin_does_not_count_is_its_statement(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    hive = open_hive(plugins=[CountsNot()])
    number = in_approval(hive)
    runs = FullRuns(monkeypatch)
    assert hive.verify(REVIEWER, number).state is State.approval
    assert runs.verbs == []
    kept = hive.get(number).confirmations
    assert [(c.counted, c.why) for c in kept] == [(False, "the plugin CountsNot does not"
                                                   " count it")]


def stopped(hive: Hive) -> dict[str, Any]:
    """A reviewer the owner stopped (refused in the statement's transaction, in the
    full run's words; a store of its own)."""
    number = in_approval(hive)
    hive.stop(OWNER, agent="ana/second")
    return {"a stopped reviewer": lambda: hive.verify(SECOND, number)}


def test_a_stopped_reviewer_is_refused_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    assert refusals_both_ways(open_hive, tmp_path, stopped)["a stopped reviewer"][1] == "vetoed"
