"""``amend`` as its statement (issue 47, item 1), on both engines: the worker's amendment
of a result awaiting a decision, worked out before the lock, is one write in the plain
case (its journal row, the result, the task's time); the rules take a result changed only
by its worker's journaled amend. A refusal, a merge record or a result changed meanwhile
take the full run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive, State, hookimpl

from .both_ways import in_approval, refusals_both_ways, written_both_ways
from .conftest import CODER, OWNER, REVIEWER, OpenHive, own_task

pytestmark = pytest.mark.contract

NEW_EVIDENCE = [{"kind": "test_output", "summary": "4 passed"}]
SECOND = Caller.agent("ana/second", "tablet")


def scenario(hive: Hive) -> list[tuple[Any, ...]]:
    hive.set_policy(OWNER, "threshold", 2)
    first, second = in_approval(hive), in_approval(hive)
    hive.verify(REVIEWER, first)  # dismissed by the amendment
    answers = [hive.amend(CODER, first, summary="done, fixed"),
               hive.amend(CODER, second, evidence=NEW_EVIDENCE),
               hive.amend(CODER, second, summary="done, again")]
    hive.verify(REVIEWER, first)
    hive.verify(SECOND, first)
    said: list[tuple[Any, ...]] = [(a.number, a.state, a.seq is not None) for a in answers]
    for number in (first, second):
        view = hive.get(number)
        assert view.task.result is not None
        said.append((view.task.state, view.task.result.summary,
                     [e.summary for e in view.task.result.evidence]))
        said += [(e.from_state, e.to_state, e.actor, e.reason, e.detail)
                 for e in hive.history(number)]
    return said


def test_an_amendment_is_its_statement_and_leaves_what_the_full_run_leaves(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, "amend")
    assert ran == [0, 3]
    assert written[3][:2] == (State.completed, "done, fixed")


class Refuses:
    @hookimpl
    def hivelite_check_evidence(self, task: Any, result: Any, hive: Any) -> list[str]:
        return ["no logs"] if result.summary == "refuse me" else []


def wrong_cases(hive: Hive) -> dict[str, Any]:
    waiting, done = in_approval(hive), in_approval(hive)
    hive.sign_off(OWNER, done)
    routed = own_task(hive)
    return {
        "the owner amends": lambda: hive.amend(OWNER, waiting, summary="by the owner"),
        "another agent amends": lambda: hive.amend(REVIEWER, waiting, summary="not mine"),
        "nothing to amend": lambda: hive.amend(CODER, waiting),
        "evidence a plugin refuses": lambda: hive.amend(CODER, waiting, summary="refuse me"),
        "a result that does not validate": lambda: hive.amend(CODER, waiting, summary=""),
        "a completed result's summary": lambda: hive.amend(CODER, done, summary="later"),
        "a routed task": lambda: hive.amend(CODER, routed, summary="nothing there"),
        "a merge record of a result awaiting a decision": lambda: hive.amend(
            CODER, waiting, merge_commit="abcdef1"),
    }


def test_amend_refusals_read_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    def opened(**options: Any) -> Hive:
        return open_hive(plugins=[Refuses()], **options)

    said = refusals_both_ways(opened, tmp_path, wrong_cases)
    assert said["another agent amends"][1] == "not_submitter"
    assert said["evidence a plugin refuses"][1] == "evidence_refused"


@pytest.mark.parametrize("merger", ["worker", "owner"])
def test_a_merge_record_is_its_statement_and_leaves_what_the_full_run_leaves(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        merger: str) -> None:
    def scenario(hive: Hive) -> Any:
        number = in_approval(hive)
        hive.sign_off(OWNER, number)
        receipt = hive.amend(CODER if merger == "worker" else OWNER, number,
                             merge_commit="abcdef1")
        merge = hive.get(number).merge
        assert merge is not None
        return ((receipt.state, receipt.seq), (merge.commit, merge.by),
                [(e.seq, e.actor, e.reason) for e in hive.history(number)])

    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, "amend")
    assert ran == [0, 1]
    (state, seq), merge, history = written
    assert state is State.completed and history[-1][0] == seq
    assert merge == ("abcdef1", "ana/coder" if merger == "worker" else "ana")
    assert history[-1][2] == "merge_recorded"


def merge_cases(hive: Hive) -> dict[str, Any]:
    open_one = in_approval(hive)
    done = in_approval(hive)
    hive.verify(REVIEWER, done)
    recorded = in_approval(hive)
    hive.sign_off(OWNER, recorded)
    hive.amend(CODER, recorded, merge_commit="1234567")
    stranger = in_approval(hive)
    hive.sign_off(OWNER, stranger)
    routed, cancelled = own_task(hive), own_task(hive)
    hive.cancel(OWNER, cancelled)
    return {
        "a merge of a task with no result": lambda: hive.amend(OWNER, routed,
                                                               merge_commit="abcdef1"),
        "a merge of a task cancelled with no result": lambda: hive.amend(
            CODER, cancelled, merge_commit="abcdef1"),
        "a merge of a result awaiting a decision": lambda: hive.amend(
            CODER, open_one, merge_commit="abcdef1"),
        "a merge recorded by the reviewer who confirmed it": lambda: hive.amend(
            REVIEWER, done, merge_commit="abcdef1"),
        "a second merge record": lambda: hive.amend(CODER, recorded, merge_commit="abcdef1"),
        "a merge recorded by another agent": lambda: hive.amend(
            SECOND, stranger, merge_commit="abcdef1"),
        "a merge of no such task": lambda: hive.amend(CODER, 999, merge_commit="abcdef1"),
    }


def test_merge_refusals_read_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, merge_cases)
    assert {case: reason for case, (_, reason, _) in said.items()} == {
        "a merge of a task with no result": "not_amendable",
        "a merge of a task cancelled with no result": "not_amendable",
        "a merge of a result awaiting a decision": "not_amendable",
        "a merge recorded by the reviewer who confirmed it": "not_merger",
        "a second merge record": "merge_recorded",
        "a merge recorded by another agent": "not_submitter",
        "a merge of no such task": "no_such_task"}


def stopped(hive: Hive) -> dict[str, Any]:
    """A worker the owner stopped (refused in the statement's transaction, in the
    full run's words; a store of its own)."""
    number, done = in_approval(hive), in_approval(hive)
    hive.sign_off(OWNER, done)
    hive.stop(OWNER, agent="ana/coder")
    return {"a stopped worker amends": lambda: hive.amend(CODER, number, summary="still me"),
            "a stopped worker records a merge": lambda: hive.amend(CODER, done,
                                                                   merge_commit="abcdef1")}


def test_a_stopped_worker_is_refused_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, stopped)
    assert said["a stopped worker amends"][1] == "vetoed"
    assert said["a stopped worker records a merge"][1] == "vetoed"
